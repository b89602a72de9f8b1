package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/internal/netguard"
	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
)

// A background run (docs/api.md, "Background runs") calls its webhook when
// it ends: one POST of a JSON event, signed as Standard Webhooks
// (standardwebhooks.com) sign theirs: the headers webhook-id (the event's
// ID, the same on every retry), webhook-timestamp (Unix seconds) and
// webhook-signature ("v1," and the base64 HMAC-SHA256 of
// "<id>.<timestamp>.<body>"), keyed with the secret of the run's owner:
// its key's own (the keys file's webhook-secret), else WEBHOOK_SECRET.
// The event names its owner (the key's fingerprint), so that a receiver
// that serves several keys tells their events apart by the signature
// each verifies with, and checks the owner it expects. A receiver that
// fails (a network error, 408, 429 or 5xx) is called again after 1 s,
// 2 s, 4 s ... up to WebhookAttempts calls in all. Targets are limited to
// the owner's hosts (its key's webhook-hosts, else Config.WebhookHosts),
// with their ports: the server posts nowhere else, and follows no
// redirect.

// webhookEvent is what a webhook receives.
type webhookEvent struct {
	// Type is "turn.completed" for a chat turn, "response.completed" for
	// a /v1/responses background response.
	Type string `json:"type"`
	// Owner is the fingerprint of the run's API key ("" without keys).
	Owner     string    `json:"owner"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// turnOutcome is a background chat turn's data in its webhook event.
type turnOutcome struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	AgentID   string `json:"agentId"`
	// Status is completed, or failed (an error ended it: Error says
	// which), or cancelled (stopped), or incomplete (a limit stopped it).
	Status       string      `json:"status"`
	FinishReason string      `json:"finishReason"`
	Text         string      `json:"text"`
	Error        *chat.Error `json:"error,omitempty"`
}

// webhooksOf are owner's webhook settings: its own (Config.Webhooks),
// else the server's; a key's own hosts keep the server's URL out unless
// they allow it.
func (s *Server) webhooksOf(owner string) OwnerWebhooks {
	w := OwnerWebhooks{Secret: s.webhookKey, Hosts: s.cfg.WebhookHosts, URL: s.cfg.WebhookURL}
	if s.cfg.Webhooks == nil {
		return w
	}
	own := s.cfg.Webhooks(owner)
	if len(own.Secret) > 0 {
		w.Secret = own.Secret
	}
	if len(own.Hosts) > 0 {
		w.Hosts = own.Hosts
	}
	if own.URL != "" {
		w.URL = own.URL
	}
	return w
}

// webhookURL is the webhook of owner's background runs that name none
// ("": none).
func (s *Server) webhookURL(owner string) string {
	w := s.webhooksOf(owner)
	if w.URL == "" || s.checkWebhook(owner, w.URL) != nil {
		return ""
	}
	return w.URL
}

// checkWebhook allows http(s) URLs on owner's allowed hosts and ports
// only.
func (s *Server) checkWebhook(owner, raw string) error {
	w := s.webhooksOf(owner)
	u, err := url.Parse(raw)
	switch {
	case len(w.Hosts) == 0 || len(w.Secret) == 0:
		return errors.New("the server calls no webhooks for this key: it needs WEBHOOK_HOSTS and WEBHOOK_SECRET, or the key's webhook-hosts and webhook-secret in API_KEYS_FILE")
	case err != nil || u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", clipped(raw))
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("the scheme must be http or https, not %q", u.Scheme)
	case u.User != nil:
		return errors.New("the URL must not carry credentials")
	case !netguard.HostAllowed(u, w.Hosts):
		return fmt.Errorf("the host and port %q are not ones the server posts to for this key (WEBHOOK_HOSTS, or the key's webhook-hosts; a bare host allows its default port only)", u.Host)
	}
	return nil
}

// SignWebhook returns the webhook-signature header of a webhook call:
// "v1," and the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed
// with key (see docs/api.md, "Webhooks").
func SignWebhook(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// webhookClient posts webhooks: it follows no redirect (a redirect could
// lead off the allowed hosts).
var webhookClient = &http.Client{
	Timeout:       15 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// callWebhook posts owner's ev to target in the background, signed with
// owner's secret, again after each failure with a doubling wait, up to
// Config.WebhookAttempts calls, from this replica or another (outbox.go).
func (s *Server) callWebhook(owner, target string, ev webhookEvent) {
	ev.Owner = owner
	s.queueWebhook(outbox.Delivery{ID: "msg_" + session.NewID(), Target: target, Owner: owner, Body: mustJSON(ev)})
}

func (s *Server) postWebhook(ctx context.Context, key []byte, target, id string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, webhookClient.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentdock-webhook")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", SignWebhook(key, id, ts, body))
	res, err := webhookClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return ""
}

// runInBackground calls webhook (when set) with the outcome of the
// background chat turn t once it ends: the call is queued now, naming the
// turn, so that another replica makes it if this one goes away first
// (outbox.go).
func (s *Server) runInBackground(t *turns.Turn, webhook string) {
	if webhook == "" {
		return
	}
	s.queueWebhook(outbox.Delivery{ID: "msg_" + session.NewID(), Target: webhook, Owner: t.Owner(),
		Run: &outbox.Run{Session: t.SessionID(), Turn: t.ID(), Agent: t.Agent()}})
}

// backgroundAccepted is the 202 answer to a background chat request.
type backgroundAccepted struct {
	SessionID string `json:"sessionId"`
	TurnID    string `json:"turnId"`
	Status    string `json:"status"`
	// StatusURL, StreamURL and CancelURL are where the run's status, its
	// stream (resumable) and its cancellation are.
	StatusURL string `json:"statusUrl"`
	StreamURL string `json:"streamUrl"`
	CancelURL string `json:"cancelUrl"`
}

// acceptBackground answers a background chat request once its turn
// started.
func acceptBackground(sessionID, turnID string) backgroundAccepted {
	base := "/api/sessions/" + sessionID
	return backgroundAccepted{SessionID: sessionID, TurnID: turnID, Status: "running",
		StatusURL: base + "/turns/" + turnID, StreamURL: base + "/stream", CancelURL: base + "/stop"}
}

// turnStatus is GET /api/sessions/:id/turns/:turnId.
type turnStatus struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionId"`
	// Status is running, or finished (the stream and the session's
	// history have the answer).
	Status      string `json:"status"`
	LastEventID string `json:"lastEventId"`
}

// getTurn serves GET /api/sessions/:id/turns/:turnId: a turn's status
// while this replica or the shared turn log keeps it (a background run's
// status).
func (s *Server) getTurn(c *gin.Context) {
	sess, ok := s.loadSession(c)
	if !ok {
		return
	}
	id, turnID := c.Param("id"), c.Param("turnId")
	out := turnStatus{ID: turnID, SessionID: id}
	t, err := s.rt.Turn(c.Request.Context(), sess.Owner, id, turnID)
	var (
		pos  streamPosition
		done bool
	)
	if err == nil {
		_, done, _, err = t.Last(c.Request.Context())
	}
	if err == nil {
		pos, err = s.position(c.Request.Context(), t)
	}
	switch {
	case errors.Is(err, turns.ErrTurnNotFound):
		abortWith(c, newParamError(http.StatusNotFound, "turn_not_found", "turnId", "no turn %q of this session is kept (a finished turn's events are kept for STREAM_RETENTION); its answer is in GET /api/sessions/%s", turnID, id))
		return
	case err != nil:
		abortWith(c, storeError(err))
		return
	}
	out.Status, out.LastEventID = turnStatusOf(done), wire.RestartedEventID(turnID, pos.frames, len(pos.restarts))
	c.JSON(http.StatusOK, out)
}

func turnStatusOf(done bool) string {
	if done {
		return "finished"
	}
	return "running"
}

// clipped shortens what a client sent for an error message to at most
// 200 bytes, at a character boundary.
func clipped(s string) string {
	if len(s) <= 200 {
		return s
	}
	n := 197
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// openAIWebhook is the OpenAI door's webhook of background responses: the
// owner's (webhookURL), when it has one.
func (s *Server) openAIWebhook() func(owner, event string, data json.RawMessage) {
	return func(owner, event string, data json.RawMessage) {
		if url := s.webhookURL(owner); url != "" {
			s.callWebhook(owner, url, webhookEvent{Type: event, Timestamp: time.Now().UTC(), Data: data})
		}
	}
}
