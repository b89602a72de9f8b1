package wire

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentdock-go/agentdock/chat"
)

// Compaction is what a compaction item of the Responses API stands for:
// the messages a compaction left out of a conversation, which the
// orchestration replays (so that a conversation continued from a
// compaction starts in the step a session holding it would be in) and
// the model no longer sees, and what the model reads instead.
//
// Its encrypted_content is not encrypted: it is the Compaction as JSON,
// gzipped and base64-encoded (URL alphabet), opaque to clients as the
// spec has it. A client could forge it, as it can forge any conversation
// it sends without a session: the orchestration replays its messages by
// the same rules either way.
type Compaction struct {
	V        int            `json:"v"`
	Messages []chat.Message `json:"messages"`
	Summary  string         `json:"summary,omitempty"`
}

// MaxCompactionBytes bounds a compaction's messages once unpacked, so
// that a small item cannot unpack into much more.
const MaxCompactionBytes = 16 << 20

// EncodeCompaction packs c into an item's encrypted_content.
func EncodeCompaction(c Compaction) (string, error) {
	c.V = 1
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(c); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(buf.Bytes()), nil
}

// DecodeCompaction unpacks an item's encrypted_content.
func DecodeCompaction(s string) (Compaction, error) {
	var c Compaction
	if s == "" {
		return c, errors.New("a compaction item needs its encrypted_content")
	}
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, errors.New("encrypted_content is not a compaction this server made (not base64)")
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return c, errors.New("encrypted_content is not a compaction this server made")
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxCompactionBytes+1))
	if err != nil {
		return c, errors.New("encrypted_content is not a compaction this server made (corrupt)")
	}
	if len(raw) > MaxCompactionBytes {
		return c, fmt.Errorf("the compaction unpacks to more than %d bytes", MaxCompactionBytes)
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.V != 1 {
		return c, errors.New("encrypted_content is not a compaction this server made (unknown content)")
	}
	return c, nil
}
