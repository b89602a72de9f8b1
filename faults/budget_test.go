package faults

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/llmorch/mockllm"
	"github.com/agentdock-go/agentdock/session/redistest"
)

// What a client sends must not grow a model request past the context
// budget (issue 55): a forged compaction item, images turn after turn.

// maxRequest is the largest model request body the mock received after
// the first skip requests, and how many there were.
func maxRequest(m *mockllm.Server, skip int) (largest, n int) {
	for _, r := range m.Requests()[skip:] {
		largest = max(largest, len(r.Body))
		n++
	}
	return largest, n
}

// TestForgedCompaction: a compaction item the server did not make, its
// summary 16 MB of text gzipped into a small POST, is refused with 400
// and reaches no model, signed or not; the server's own item continues
// the conversation in a model request within the context budget.
func TestForgedCompaction(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	var packed bytes.Buffer
	zw := gzip.NewWriter(&packed)
	_ = json.NewEncoder(zw).Encode(map[string]any{"v": 1, "messages": []any{}, "summary": strings.Repeat("a forged summary ", 1_000_000)})
	_ = zw.Close()
	sig := make([]byte, 32)
	_, _ = rand.Read(sig)
	for name, content := range map[string]string{
		"unsigned (the old format)": base64.RawURLEncoding.EncodeToString(packed.Bytes()),
		"a signature of its own":    base64.RawURLEncoding.EncodeToString(append(sig, packed.Bytes()...)),
	} {
		body := map[string]any{"model": agentID, "input": []any{
			map[string]any{"type": "compaction", "encrypted_content": content},
			map[string]any{"role": "user", "content": "go on"},
		}}
		raw, _ := json.Marshal(body)
		before := len(m.Requests())
		st, resp := postJSON(t, srv.URL(), "/v1/responses", body)
		t.Logf("%s: a %d KB POST standing for a 16 MB summary: %d %s", name, len(raw)>>10, st, clip(resp, 200))
		if st != http.StatusBadRequest || !strings.Contains(resp, "encrypted_content") {
			t.Errorf("%s: %d %s; want 400 naming encrypted_content", name, st, resp)
		}
		if n := len(m.Requests()) - before; n != 0 {
			t.Errorf("%s: the model got %d requests", name, n)
		}
	}

	// The server's own item goes on: six turns, of which the two beyond
	// CONTEXT_KEEP_TURNS (4) are summarized into it.
	m.Enqueue(mockllm.TextScript("The user told facts about the harbour."))
	var input []any
	for _, fact := range []string{"the harbour master is Ines", "the ferry leaves at nine", "the pier is red", "gulls nest there", "the cafe shuts at six", "the tide is high at noon"} {
		input = append(input, map[string]any{"role": "user", "content": "Fact: " + fact + "."}, map[string]any{"role": "assistant", "content": "Noted."})
	}
	st, resp := postJSON(t, srv.URL(), "/v1/responses/compact", map[string]any{"model": agentID, "input": input})
	if st != http.StatusOK {
		t.Fatalf("compact: %d %s", st, resp)
	}
	var comp struct{ Output []any }
	if err := json.Unmarshal([]byte(resp), &comp); err != nil || len(comp.Output) == 0 {
		t.Fatalf("compact: %v %s", err, resp)
	}
	before := len(m.Requests())
	m.Enqueue(mockllm.TextScript("Ines, at nine."))
	st, resp = postJSON(t, srv.URL(), "/v1/responses", map[string]any{"model": agentID, "input": append(comp.Output, map[string]any{"role": "user", "content": "who and when?"})})
	if st != http.StatusOK || !strings.Contains(resp, "Ines, at nine.") {
		t.Fatalf("continuing from the compaction: %d %s", st, resp)
	}
	largest, n := maxRequest(m, before)
	t.Logf("continued from the server's compaction: %d model request(s), the largest %d bytes (the context budget: 32000 tokens)", n, largest)
	if n == 0 || largest > 4*32000 {
		t.Errorf("the model got %d requests, the largest %d bytes; want some, each within the budget's 128 KB", n, largest)
	}
}

// clip shortens s for a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// noisePNG is a PNG of w x h opaque pixels of noise, not compressed: it
// is as large as its pixels (w*h*3 bytes and a little).
func noisePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	_, _ = rand.Read(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff // opaque: written as RGB, 3 bytes a pixel
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageTurn posts a turn of the AI SDK's shape with one image part.
func imageTurn(t *testing.T, base, sid, text, url string) *stream {
	t.Helper()
	return keyedImageTurn(t, base, "", sid, text, url)
}

// keyedImageTurn is imageTurn with an API key ("": none).
func keyedImageTurn(t *testing.T, base, key, sid, text, url string) *stream {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": sid, "messages": []any{map[string]any{"role": "user", "id": "m-" + text,
		"parts": []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "file", "mediaType": "image/png", "url": url}}}}})
	req, err := http.NewRequest(http.MethodPost, base+"/api/chat/"+agentID, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	return open(t, req)
}

// TestImageTurns: turns of a 700 KB image on one session, 25 in make
// faults and 12 in make test. Each model
// request carries the newest MAX_ATTACHMENTS_IN_CONTEXT (8) images, the
// older ones a line saying so, and the 25th request's tokens (images as
// OpenAI counts them) stay under the context budget; before, the 25th
// request carried all 25 images, 23 MB. An image URL on the metadata
// service, loopback or a private address is refused with 400, and so is
// an image whose data is not base64.
func TestImageTurns(t *testing.T) {
	m := newModel(t)
	srv := startServer(t, modelEnv(m)...)
	const sid = "image-turns-session-1"
	raw := noisePNG(t, 485, 485) // 485 x 485 x 3 bytes: 705 KB
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw)
	t.Logf("the image: %d KB, %d KB as a data URL", len(raw)>>10, len(url)>>10)
	turns := 12
	if os.Getenv("AGENTDOCK_SLOW_FAULTS") == "1" {
		turns = 25
	}
	for i := 1; i <= turns; i++ {
		frames := imageTurn(t, srv.URL(), sid, fmt.Sprintf("picture %d", i), url)
		if frames.Status != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, frames.Status, frames.Body)
		}
		if r := requireEnd(t, frames.All(30*time.Second)); r != "stop" {
			t.Fatalf("turn %d: finish %q", i, r)
		}
	}
	reqs := m.Requests()
	last := reqs[len(reqs)-1]
	images := strings.Count(string(last.Body), `"type":"image_url"`)
	omittedLines := strings.Count(string(last.Body), "is no longer shown")
	// OpenAI counts a 485 x 485 image as one 512-pixel tile: 85 + 170.
	const perImage = 85 + 170
	textBytes := len(last.Body) - images*len(url)
	tokens := images*perImage + textBytes/4
	t.Logf("the %dth model request: %d bytes (%.1f MB), %d images, %d lines for the older ones; about %d tokens (images %d each), the budget 32000",
		turns, len(last.Body), float64(len(last.Body))/mib, images, omittedLines, tokens, perImage)
	if images != 8 || omittedLines != turns-8 {
		t.Errorf("the last request carries %d images and %d lines for older ones; want 8 and %d", images, omittedLines, turns-8)
	}
	if tokens > 32000 || len(last.Body) > 8*len(url)+256<<10 {
		t.Errorf("the last request is %d bytes, about %d tokens; want under the budget's 32000 tokens and 8 images' bytes", len(last.Body), tokens)
	}
	view, _, _ := getSession(t, srv.URL(), sid)
	kept := 0
	for _, msg := range view.Messages {
		kept += len(msg.Attachments)
	}
	if kept != turns {
		t.Errorf("the session keeps %d images, want all %d", kept, turns)
	}

	for _, tc := range []struct{ name, url, want string }{
		{"http on the metadata service", "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "https"},
		{"https on the metadata service", "https://169.254.169.254/latest/meta-data/", "not a public address"},
		{"loopback by name", "https://localhost:8080/admin.png", "not a public address"},
		{"a private address", "https://10.0.0.7/x.png", "not a public address"},
		{"IPv6 loopback", "https://[::1]/x.png", "not a public address"},
		{"data that is not base64", "data:image/png;base64,this is not base64!", "not base64"},
	} {
		before := len(m.Requests())
		s := imageTurn(t, srv.URL(), "image-refused-1", "look", tc.url)
		t.Logf("%s: %d %s", tc.name, s.Status, clip(s.Body, 240))
		if s.Status != http.StatusBadRequest || !strings.Contains(s.Body, tc.want) {
			t.Errorf("%s: %d %s; want 400 saying %q", tc.name, s.Status, s.Body, tc.want)
		}
		if len(m.Requests()) != before {
			t.Errorf("%s: the model got a request", tc.name)
		}
	}
}

// TestByteQuotaLiveSession: one session of a key, a 700 KB image a turn,
// against BYTES_PER_OWNER of 2 MB, on each store. The turn whose message
// would take the key past the quota is refused with 429 quota_exceeded
// (before, a session reached 11.2 MB: only a new session was checked,
// and images were not counted), the session stays within the quota and
// its answers, and another key's turns go on.
func TestByteQuotaLiveSession(t *testing.T) {
	raw := noisePNG(t, 485, 485)
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw)
	const quota = 2 << 20
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			env := []string{"BYTES_PER_OWNER=" + strconv.Itoa(quota)}
			if store == "redis" {
				env = append(env, "SESSION_STORE="+redistest.Start(t).URL())
			}
			srv := keyed(t, env...)
			const sid = "quota-live-session-1"
			turns, refused := 0, ""
			for i := 1; i <= 12 && refused == ""; i++ {
				s := keyedImageTurn(t, srv.URL(), "key-alice", sid, fmt.Sprintf("picture %d", i), url)
				switch {
				case s.Status == http.StatusOK:
					requireEnd(t, s.All(30*time.Second))
					turns++
				case s.Status == http.StatusTooManyRequests && strings.Contains(s.Body, "quota_exceeded"):
					refused = s.Body
				default:
					t.Fatalf("turn %d: %d %s", i, s.Status, s.Body)
				}
			}
			st, body, _ := keyedRequest(t, http.MethodGet, srv.URL()+"/api/sessions/"+sid, "key-alice", "")
			t.Logf("%s: %d turns of a %d KB image taken, then: %s; the session is %d bytes as JSON (GET: %d), the quota %d",
				store, turns, len(url)>>10, clip(refused, 220), len(body), st, quota)
			if refused == "" {
				t.Fatalf("12 turns of %d KB each were taken against a quota of %d bytes", len(url)>>10, quota)
			}
			// The session's JSON is its weight and a little; the answers
			// are the mock's default, a few bytes each.
			if len(body) > quota+16<<10 {
				t.Errorf("the session holds %d bytes; want no more than the quota (%d) and the answers", len(body), quota)
			}
			if st, body := completion(t, srv.URL(), "key-bob", "bob-session-1"); st != http.StatusOK {
				t.Errorf("another key's turn: %d %s", st, body)
			}
		})
	}
}
