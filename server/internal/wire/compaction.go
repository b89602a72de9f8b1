package wire

import (
	"bytes"
	"compress/gzip"
	"crypto/hmac"
	"crypto/sha256"
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
// Its encrypted_content is not encrypted, but it is signed: the base64
// (URL alphabet) of an HMAC-SHA256 under the server's CompactionKey and
// the Compaction as gzipped JSON after it, opaque to clients as the spec
// has it. The server takes back only the items it made: a forged one,
// which could carry a summary of any size to the model past every
// budget, is refused before it is unpacked.
type Compaction struct {
	V        int            `json:"v"`
	Messages []chat.Message `json:"messages"`
	Summary  string         `json:"summary,omitempty"`
}

// CompactionKey signs compaction items (HMAC-SHA256); replicas that take
// each other's items share it.
type CompactionKey []byte

// MaxCompactionBytes bounds a compaction's messages once unpacked, so
// that a small item cannot unpack into much more.
const MaxCompactionBytes = 16 << 20

// macOf is the signature of packed, a compaction's gzipped JSON.
func (k CompactionKey) macOf(packed []byte) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("agentdock compaction v1\x00"))
	m.Write(packed)
	return m.Sum(nil)
}

// EncodeCompaction packs and signs c into an item's encrypted_content.
func EncodeCompaction(c Compaction, key CompactionKey) (string, error) {
	if len(key) == 0 {
		return "", errors.New("wire: EncodeCompaction: no key")
	}
	c.V = 1
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(c); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(append(key.macOf(buf.Bytes()), buf.Bytes()...)), nil
}

// errForeignCompaction is the error of an item the server did not sign.
var errForeignCompaction = errors.New("encrypted_content is not a compaction this server made: send the compaction item as POST /v1/responses/compact (on a server with the same COMPACTION_SECRET) returned it")

// DecodeCompaction checks the signature of an item's encrypted_content
// and unpacks it.
func DecodeCompaction(s string, key CompactionKey) (Compaction, error) {
	var c Compaction
	if s == "" {
		return c, errors.New("a compaction item needs its encrypted_content")
	}
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(data) < sha256.Size || len(key) == 0 {
		return c, errForeignCompaction
	}
	mac, packed := data[:sha256.Size], data[sha256.Size:]
	if !hmac.Equal(mac, key.macOf(packed)) {
		return c, errForeignCompaction
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return c, errForeignCompaction
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxCompactionBytes+1))
	if err != nil {
		return c, errors.New("encrypted_content is corrupt")
	}
	if len(raw) > MaxCompactionBytes {
		return c, fmt.Errorf("the compaction unpacks to more than %d bytes", MaxCompactionBytes)
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.V != 1 {
		return c, errors.New("encrypted_content holds an unknown compaction")
	}
	return c, nil
}
