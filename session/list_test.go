package session

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// TestListPage: pages walk the summaries newest first (key order on a
// tie) without a gap or a repeat, limits are clamped, and a bad cursor is
// refused.
func TestListPage(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var all []Summary
	for i := range 7 {
		all = append(all, Summary{Key: fmt.Sprintf("session%d", i), UpdatedAt: base.Add(time.Duration(i/2) * time.Second)})
	}
	want := "session6 session4 session5 session2 session3 session0 session1"
	for _, limit := range []int{1, 2, 3, 7, 500} {
		var got []string
		cursor := ""
		for range 10 {
			p, err := ListPage(append([]Summary(nil), all...), cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.Sessions {
				got = append(got, s.Key)
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("limit %d: %v, want %s", limit, got, want)
		}
	}
	if p, _ := ListPage(all, "", 0); len(p.Sessions) != 1 {
		t.Errorf("limit 0 gave %d sessions, want 1", len(p.Sessions))
	}
	for _, c := range []string{"!!", encodeCursor(base, "bad key!"), "MTIz"} {
		if _, err := ListPage(all, c, 2); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
}

func TestTitleOf(t *testing.T) {
	long := strings.Repeat("word ", 100)
	tests := []struct {
		title string
		msgs  []chat.Message
		want  string
	}{
		{"", []chat.Message{{Role: chat.RoleUser, Content: "  Plan the\n offsite  "}}, "Plan the offsite"},
		{"Renamed", []chat.Message{{Role: chat.RoleUser, Content: "first"}}, "Renamed"},
		{"", []chat.Message{{Role: chat.RoleAssistant, Content: "hi"}, {Role: chat.RoleUser, Content: "second"}}, "second"},
		{"", nil, ""},
		{long, nil, strings.Repeat("word ", 40)[:MaxTitle-1] + "…"},
	}
	for _, tt := range tests {
		if got := TitleOf(tt.title, tt.msgs); got != tt.want {
			t.Errorf("TitleOf(%q) = %q, want %q", tt.title, got, tt.want)
		}
	}
}

func TestOwnsKey(t *testing.T) {
	alice := Key("alice", "s1")
	if !OwnsKey("alice", alice) || OwnsKey("bob", alice) || OwnsKey("", alice) || !OwnsKey("", "s1") || OwnsKey("alice", "s1") {
		t.Error("OwnsKey mixes owners")
	}
	if IDOfKey(alice) != "s1" || IDOfKey("s1") != "s1" {
		t.Error("IDOfKey")
	}
}

// FuzzCursor: any string is a cursor or ErrBadCursor, and a cursor this
// package made decodes to what it encoded.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor(time.Unix(0, 42), "abcdefgh"))
	f.Add("")
	f.Add("MTIz")
	f.Fuzz(func(t *testing.T, c string) {
		at, key, err := decodeCursor(c)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("decodeCursor(%q): %v", c, err)
			}
			return
		}
		at2, key2, err := decodeCursor(encodeCursor(at, key))
		if err != nil || !at2.Equal(at) || key2 != key {
			t.Fatalf("round trip of %q: %v %q %v", c, at2, key2, err)
		}
	})
}
