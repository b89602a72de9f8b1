// Package openai serves the agents over OpenAI's APIs, as a door of the
// server (door.Door): GET /v1/models, POST /v1/chat/completions (the
// agents as models), and the Responses API (POST /v1/responses, its
// WebSocket mode on GET /v1/responses, GET /v1/responses/{id},
// POST /v1/responses/{id}/cancel and POST /v1/responses/compact). Only
// OpenAI's objects go out; the agent's tool activity, orchestration and
// usage ride in an extension field "agentdock", which OpenAI clients
// ignore. docs/api.md is the reference.
//
// A request is translated into one turns.Input and the turn's chat.Events
// into OpenAI's objects; the runtime (package turns) runs the turn with the
// same rules as every other door.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/server/door"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/turns"
)

// Config configures the door.
type Config struct {
	// Responses keeps the objects of POST /v1/responses for GET
	// /v1/responses/{id} and previous_response_id. Required.
	Responses responses.Store
	// Compactor makes the compactions of POST /v1/responses/compact.
	// Required.
	Compactor agent.Compactor
	// Webhook, when set, is told of a background response's end: the
	// event's type ("response.completed"), its owner and its data.
	Webhook func(owner, event string, data json.RawMessage)
	// CompactionKey signs the compaction items of POST
	// /v1/responses/compact, and a conversation's item is read only when
	// it bears its signature (wire.CompactionKey). Required.
	CompactionKey wire.CompactionKey
	// Heartbeat is the interval of SSE comments on idle streams.
	// Required.
	Heartbeat time.Duration
	// MaxMessageBytes bounds one message of the WebSocket mode (the
	// server's body limit). Required.
	MaxMessageBytes int64
	// Started is when the agents were loaded: the models' "created".
	Started time.Time
	// Telemetry counts open streams; nil counts nothing.
	Telemetry *telemetry.Telemetry
	Logger    *slog.Logger
}

// Door serves OpenAI's APIs; New makes it.
type Door struct {
	cfg Config
	rt  *turns.Runtime
	log *slog.Logger
	// recorders counts the recorders still storing a response and the
	// webhook calls of background responses; Close waits for them.
	recorders sync.WaitGroup
	// closing is closed by Close: WebSocket connections end.
	closing   chan struct{}
	closeOnce sync.Once
}

// New validates cfg and makes the door.
func New(cfg Config) (*Door, error) {
	switch {
	case cfg.Responses == nil:
		return nil, fmt.Errorf("openai: Config.Responses is required")
	case cfg.Compactor == nil:
		return nil, fmt.Errorf("openai: Config.Compactor is required")
	case len(cfg.CompactionKey) == 0:
		return nil, fmt.Errorf("openai: Config.CompactionKey is required")
	case cfg.Heartbeat <= 0, cfg.MaxMessageBytes <= 0:
		return nil, fmt.Errorf("openai: Config.Heartbeat and Config.MaxMessageBytes must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	return &Door{cfg: cfg, log: cfg.Logger, closing: make(chan struct{})}, nil
}

// Routes implements door.Door.
func (d *Door) Routes(rt *turns.Runtime) []door.Route {
	d.rt = rt
	h := func(f func(http.ResponseWriter, *http.Request)) http.Handler { return http.HandlerFunc(f) }
	return []door.Route{
		{Method: http.MethodGet, Path: "/v1/models", Handler: h(d.listModels)},
		{Method: http.MethodPost, Path: "/v1/chat/completions", Handler: h(d.chatCompletions)},
		{Method: http.MethodPost, Path: "/v1/responses", Handler: h(d.createResponse)},
		{Method: http.MethodGet, Path: "/v1/responses", Handler: h(d.responsesSocket)},
		{Method: http.MethodPost, Path: "/v1/responses/compact", Handler: h(d.compactResponse)},
		{Method: http.MethodGet, Path: "/v1/responses/:id", Handler: h(d.getResponse)},
		{Method: http.MethodPost, Path: "/v1/responses/:id/cancel", Handler: h(d.cancelResponse)},
	}
}

// Close ends the WebSocket connections and waits for the responses still
// being stored and their webhooks, or for ctx (door.Closer).
func (d *Door) Close(ctx context.Context) error {
	d.closeOnce.Do(func() { close(d.closing) })
	if err := turns.WaitGroup(ctx, &d.recorders); err != nil {
		return fmt.Errorf("openai: responses still being stored: %w", err)
	}
	return nil
}

// writeRaw answers JSON the door already encoded.
func writeRaw(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// mustJSON marshals values whose types cannot fail to marshal (no
// channels, no funcs; RawMessage inputs are validated before).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("openai: marshalling an object: " + err.Error())
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// startErrorAt names the request field a 400 of a turn's start points at
// (the agent reports it without knowing the request's shape): message for
// what is wrong with the new message (its length, its text, its
// attachments), list for the conversation's tool results and
// instructions. Other errors are returned as they are.
func startErrorAt(e *turns.Problem, message, list string) *turns.Problem {
	if e.Param != "" || e.Status != http.StatusBadRequest {
		return e
	}
	at := *e
	switch e.Code {
	case "invalid_message", "unsupported_attachment":
		at.Param = message
	case "invalid_tool_results", "instructions_refused":
		at.Param = list
	default:
		return e
	}
	return &at
}

// inputParam is the field of the Responses input item i's content: the
// whole input when it is one string.
func inputParam(body *wire.ResponsesRequest, i int) string {
	if len(body.Input) > 0 && body.Input[0] == '"' {
		return "input"
	}
	return fmt.Sprintf("input[%d].content", i)
}
