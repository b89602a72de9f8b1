package faults

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/server"
	"github.com/agentdock-go/agentdock/session"
)

// TestWebhookTenants: two keys, each with its own webhook secret from the
// keys file, and a third on the server's WEBHOOK_SECRET, post background
// runs to one receiver. Each event names its key's fingerprint (owner)
// and verifies with that key's secret only, so the receiver tells one
// key's events from another's; before, every event was signed with the
// one secret and named no owner. A key with hosts of its own posts
// nowhere else, and a bare host allows its default port only.
func TestWebhookTenants(t *testing.T) {
	type call struct {
		owner, typ, turn string
		verifies         []string // the secrets its signature verifies with
	}
	secrets := map[string]string{"alpha": "alpha-own-webhook-secret", "beta": "beta-own-webhook-secret", "server": "the-server-webhook-secret"}
	var (
		mu    sync.Mutex
		calls []call
	)
	got := make(chan struct{}, 8)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		var ev struct {
			Type, Owner string
			Data        struct{ TurnID string }
		}
		_ = json.Unmarshal(body, &ev)
		c := call{owner: ev.Owner, typ: ev.Type, turn: ev.Data.TurnID}
		for name, secret := range secrets {
			if hmac.Equal([]byte(server.SignWebhook([]byte(secret), r.Header.Get("webhook-id"), ts, body)), []byte(r.Header.Get("webhook-signature"))) {
				c.verifies = append(c.verifies, name)
			}
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		got <- struct{}{}
	}))
	t.Cleanup(rcv.Close)
	host := strings.TrimPrefix(rcv.URL, "http://")
	// delta's own receiver.
	deltas := make(chan string, 4)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		deltas <- strconv.FormatBool(hmac.Equal([]byte(server.SignWebhook([]byte("delta"), r.Header.Get("webhook-id"), ts, body)), []byte(r.Header.Get("webhook-signature"))))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(own.Close)
	keys := filepath.Join(t.TempDir(), "keys")
	lines := "key-alpha webhook-secret=" + secrets["alpha"] + "\n" +
		"key-beta webhook-secret=" + secrets["beta"] + "\n" +
		"key-gamma\n" +
		// delta's own hosts: its receiver's, and the bare address.
		"key-delta webhook-secret=delta webhook-hosts=" + strings.TrimPrefix(own.URL, "http://") + ",127.0.0.1\n"
	if err := os.WriteFile(keys, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	const keySecret = "webhook tenants test"
	fingerprint := func(key string) string {
		m := hmac.New(sha256.New, []byte(keySecret))
		m.Write([]byte(key))
		return hex.EncodeToString(m.Sum(nil)[:16])
	}
	m := newModel(t)
	srv := startServer(t, append(modelEnv(m), "API_KEYS_FILE="+keys, "API_KEY_SECRET="+keySecret,
		"WEBHOOK_HOSTS="+host, "WEBHOOK_SECRET="+secrets["server"])...)
	background := func(key, webhook string) (int, string) {
		body := `{"sessionId":"` + session.NewID() + `","message":"in the background","background":true,"webhook":"` + webhook + `"}`
		st, resp, _ := keyedRequest(t, http.MethodPost, srv.URL()+"/api/chat/"+agentID, key, body)
		return st, resp
	}
	turns := map[string]string{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		st, resp := background("key-"+name, rcv.URL+"/hook")
		var acc struct{ TurnID string }
		_ = json.Unmarshal([]byte(resp), &acc)
		if st != http.StatusAccepted || acc.TurnID == "" {
			t.Fatalf("%s's background run: %d %s", name, st, resp)
		}
		turns[acc.TurnID] = name
	}
	for range 3 {
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			t.Fatalf("the receiver got %d calls; server log:\n%s", len(calls), logTail(srv.Log(), 30))
		}
	}
	mu.Lock()
	for _, c := range calls {
		name := turns[c.turn]
		want := name
		if name == "gamma" {
			want = "server" // no secret of its own
		}
		t.Logf("%s's %s: owner %s, verifies with %v", name, c.typ, c.owner, c.verifies)
		if c.owner != fingerprint("key-"+name) {
			t.Errorf("%s's event names owner %q, want its fingerprint %s", name, c.owner, fingerprint("key-"+name))
		}
		if len(c.verifies) != 1 || c.verifies[0] != want {
			t.Errorf("%s's event verifies with %v, want %s's secret only", name, c.verifies, want)
		}
	}
	mu.Unlock()

	// delta may post only to its own hosts: not the receiver's port,
	// which the server's hosts allow, nor the receiver by its bare
	// address, which allows port 80 only.
	for _, url := range []string{rcv.URL + "/hook", "http://127.0.0.1:8080/hook"} {
		st, resp := background("key-delta", url)
		t.Logf("delta to %s: %d %s", url, st, clip(resp, 200))
		if st != http.StatusBadRequest || !strings.Contains(resp, "invalid_webhook") {
			t.Errorf("delta's webhook to %s: %d %s; want 400 invalid_webhook", url, st, resp)
		}
	}
	if st, resp := background("key-delta", own.URL+"/hook"); st != http.StatusAccepted {
		t.Errorf("delta's webhook on its own host and port: %d %s", st, resp)
	}
	select {
	case valid := <-deltas:
		if valid != "true" {
			t.Error("delta's event does not verify with delta's secret")
		}
	case <-time.After(30 * time.Second):
		t.Error("delta's receiver got no call")
	}
}
