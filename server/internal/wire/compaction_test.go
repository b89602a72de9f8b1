package wire

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func TestCompactionRoundTrip(t *testing.T) {
	in := Compaction{Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "think", Arguments: json.RawMessage(`{}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", Content: "Refused: no", NotRun: true}}, Summary: "s"}
	key := CompactionKey("test key")
	enc, err := EncodeCompaction(in, key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeCompaction(enc, key)
	if err != nil || len(out.Messages) != 3 || !out.Messages[2].NotRun || out.Summary != "s" || out.Messages[1].ToolCalls[0].Name != "think" {
		t.Fatalf("%+v %v", out, err)
	}
	// Another key's item, and one whose content was changed under its
	// signature, are refused before they are unpacked.
	other, _ := EncodeCompaction(in, CompactionKey("another key"))
	raw, _ := base64.RawURLEncoding.DecodeString(enc)
	raw[len(raw)-1] ^= 1
	changed := base64.RawURLEncoding.EncodeToString(raw)
	for _, bad := range []string{"", "!!!", "AAAA", enc[:len(enc)/2], other, changed} {
		if _, err := DecodeCompaction(bad, key); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	if _, err := DecodeCompaction(enc, nil); err == nil {
		t.Error("decoded without a key")
	}
}

// FuzzDecodeCompaction: an item's encrypted_content, whatever a client
// sends, decodes or is refused, never panics, and a decoded one has
// messages of the roles a conversation has.
func FuzzDecodeCompaction(f *testing.F) {
	key := CompactionKey("fuzz key")
	enc, _ := EncodeCompaction(Compaction{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}}, key)
	for _, s := range []string{enc, "", "H4sIAAAAAAAA", "not base64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCompaction(s, key)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if c.V != 1 {
			t.Fatalf("version %d", c.V)
		}
	})
}
