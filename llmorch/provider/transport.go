package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/llmorch"
)

// callState is what one attempt, its transport and the stream parser
// share. langchaingo calls the transport synchronously, from the call
// that runs the attempt, so no locking is needed.
type callState struct {
	// Request corrections, set by convert.
	dropTemperature bool
	mergeRoles      bool
	errorResults    map[string]bool
	// note: the last Anthropic user message ends with the call's note
	// (llmorch.Request.Note). cache: the request's tools are the stable
	// set, so Anthropic's cache breakpoints are marked (markBreakpoints).
	note, cache bool
	// parts are the content parts langchaingo cannot build, by the
	// marker that stands for each (attach.go); format is the answer's
	// format, sent as OpenAI's response_format; anthropicChoice is
	// Anthropic's tool_choice of a call that must call a tool.
	parts           map[string]json.RawMessage
	format          *llmorch.Format
	anthropicChoice json.RawMessage
	// oneCall: the call asks for at most one tool call
	// (llmorch.Request.OneCallPerAnswer), sent as OpenAI's
	// parallel_tool_calls: false (Anthropic's is in anthropicChoice).
	oneCall bool

	// The request langchaingo built, taken by the transport and sent by
	// send, and the transport that took it.
	req *http.Request
	tr  *transport

	// Response, set by send.
	status     int
	retryAfter time.Duration
	errType    string
	// contextLength: the error response says the request is longer than
	// the model's context.
	contextLength bool
	sendErr       error
	body          io.ReadCloser
	contentType   string
}

type stateKey struct{}

func withState(ctx context.Context, st *callState) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

// transport sits between langchaingo and the network: it corrects the
// request and takes it, for the call to send (callState.send), which
// records failures for classification and keeps the response body for the
// package's own parser (see the package documentation). A request made
// without a callState (none of this package's) goes straight through.
type transport struct {
	base    http.RoundTripper
	wire    string
	keyless bool
}

// emptyErrorBody is the body of the stand-in answer langchaingo reads.
var emptyErrorBody = []byte("{}")

// standInStatus is the status langchaingo sees for a request the
// transport took: not 200, so that it reads emptyErrorBody as an error's
// and returns at once (an error Stream ignores: it sends the request and
// reads the answer itself, callState.send). Handed a 200 and an
// empty stream instead, langchaingo parses it with a goroutine, a channel
// and a 4 KiB scanner per model call (its own stream parsing, which this
// package does not use).
const standInStatus = http.StatusNoContent

// standInStatusLine is standInStatus's Status, as net/http writes it.
var standInStatusLine = strconv.Itoa(standInStatus) + " " + http.StatusText(standInStatus)

// maxErrorBody bounds how much of an error response is read to classify it.
const maxErrorBody = 64 << 10

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	st, _ := req.Context().Value(stateKey{}).(*callState)
	req, err := t.patch(req, st)
	if err != nil {
		if st != nil {
			st.sendErr = err
		}
		return nil, err
	}
	if st == nil {
		return t.base.RoundTrip(req)
	}
	// Taken, not sent: the call that asked for it (attempt) sends it once
	// langchaingo has returned (send), under the call's own context.
	st.req, st.tr = req, t
	return &http.Response{
		Status: standInStatusLine, StatusCode: standInStatus,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(emptyErrorBody)),
		ContentLength: int64(len(emptyErrorBody)),
		Request:       req,
	}, nil
}

// send makes the round trip of the request the transport took, under ctx
// (the context the call was made with: an http.Client deadline that
// langchaingo's client put on the request ended with its stand-in
// answer), and keeps a stream's body for the parser, or classifies a
// failure.
func (st *callState) send(ctx context.Context) {
	req := st.req
	st.req = nil
	if req.Context() != ctx {
		req = req.WithContext(ctx)
	}
	resp, err := st.tr.base.RoundTrip(req)
	if err != nil {
		st.sendErr = err
		return
	}
	st.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		st.retryAfter = retryAfter(resp.Header, time.Now())
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
		st.errType = errorType(data)
		st.contextLength = contextExceeded(st.errType, data)
		return
	}
	st.body = resp.Body
	st.contentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
}

// patch returns req corrected: no auth header for keyless servers, no
// temperature when none was asked for, Anthropic messages merged by role.
func (t *transport) patch(req *http.Request, st *callState) (*http.Request, error) {
	needBody := st != nil && (st.dropTemperature || ((st.mergeRoles || st.cache) && t.wire == Anthropic) ||
		len(st.parts) > 0 || (st.format != nil || st.oneCall) && t.wire == OpenAI || st.anthropicChoice != nil)
	if !t.keyless && !needBody {
		return req, nil
	}
	out := req.Clone(req.Context())
	if t.keyless {
		out.Header.Del("Authorization")
		out.Header.Del("X-Api-Key")
		out.Header.Del("Api-Key")
	}
	if !needBody || req.Body == nil {
		return out, nil
	}
	data, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	data, err = t.patchBody(data, st)
	if err != nil {
		return nil, err
	}
	out.Body = io.NopCloser(bytes.NewReader(data))
	out.ContentLength = int64(len(data))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	return out, nil
}

func (t *transport) patchBody(data []byte, st *callState) ([]byte, error) {
	var body map[string]json.RawMessage
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("correcting the request body: %w", err)
	}
	if st.dropTemperature {
		delete(body, "temperature")
	}
	if len(st.parts) > 0 {
		msgs, err := swapMarkers(body["messages"], st.parts)
		if err != nil {
			return nil, fmt.Errorf("putting the attachments in: %w", err)
		}
		body["messages"] = msgs
	}
	if st.format != nil && t.wire == OpenAI {
		body["response_format"] = responseFormat(st.format)
	}
	if _, tools := body["tools"]; st.oneCall && tools && t.wire == OpenAI {
		// OpenAI refuses parallel_tool_calls on a request without tools.
		body["parallel_tool_calls"] = json.RawMessage("false")
	}
	if st.anthropicChoice != nil && t.wire == Anthropic {
		body["tool_choice"] = st.anthropicChoice
	}
	if (st.mergeRoles || st.cache) && t.wire == Anthropic {
		merged, err := mergeAnthropicMessages(body["messages"], st.errorResults, st.cache, st.note)
		if err != nil {
			return nil, fmt.Errorf("correcting the request messages: %w", err)
		}
		body["messages"] = merged
	}
	if st.cache && t.wire == Anthropic {
		if err := markBreakpoints(body); err != nil {
			return nil, fmt.Errorf("marking the cache breakpoints: %w", err)
		}
	}
	return json.Marshal(body)
}

// responseFormat is OpenAI's response_format for f.
func responseFormat(f *llmorch.Format) json.RawMessage {
	if f.Type == llmorch.FormatJSONObject {
		return json.RawMessage(`{"type":"json_object"}`)
	}
	js := map[string]any{"name": f.Name, "schema": f.Schema, "strict": f.Strict}
	if f.Description != "" {
		js["description"] = f.Description
	}
	b, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
	return b
}

// ephemeral is Anthropic's cache_control of a breakpoint.
var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

// withCacheControl returns the JSON object b with cache_control set.
func withCacheControl(b json.RawMessage) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	obj["cache_control"] = ephemeral
	return json.Marshal(obj)
}

// markBreakpoints puts Anthropic's cache breakpoints on the last tool and
// on the system prompt (made a text block for it); the third, on the last
// message before the note, is mergeAnthropicMessages'. Anthropic caches a
// request's prefix (tools, system, messages) only up to a breakpoint, and
// a later request reads what an earlier one wrote when its prefix is the
// same, so with the stable tool set each call reads the conversation so
// far and writes only what it added.
func markBreakpoints(body map[string]json.RawMessage) error {
	if raw, ok := body["tools"]; ok {
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			return err
		}
		if n := len(tools); n > 0 {
			last, err := withCacheControl(tools[n-1])
			if err != nil {
				return err
			}
			tools[n-1] = last
			b, err := json.Marshal(tools)
			if err != nil {
				return err
			}
			body["tools"] = b
		}
	}
	if raw, ok := body["system"]; ok {
		var text string
		if err := json.Unmarshal(raw, &text); err != nil || text == "" {
			return err // a system prompt already in blocks is left alone
		}
		b, err := json.Marshal([]map[string]any{{"type": "text", "text": text, "cache_control": ephemeral}})
		if err != nil {
			return err
		}
		body["system"] = b
	}
	return nil
}

// mergeAnthropicMessages joins consecutive messages of one role into one
// message with all their content blocks, and sets is_error on the
// tool_result blocks answering the calls in errorResults. With breakpoint
// it marks the last block of the conversation as a cache breakpoint: the
// last block, or with note the one before it (the note changes from call
// to call and is never part of a later request).
func mergeAnthropicMessages(raw json.RawMessage, errorResults map[string]bool, breakpoint, note bool) (json.RawMessage, error) {
	var in []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	type message struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	out := make([]message, 0, len(in))
	for _, m := range in {
		var blocks []json.RawMessage
		var s string
		if err := json.Unmarshal(m.Content, &s); err == nil {
			b, err := json.Marshal(map[string]string{"type": "text", "text": s})
			if err != nil {
				return nil, err
			}
			blocks = []json.RawMessage{b}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, err
		}
		if len(errorResults) > 0 {
			for i, b := range blocks {
				var head struct {
					Type      string `json:"type"`
					ToolUseID string `json:"tool_use_id"`
				}
				if json.Unmarshal(b, &head) != nil || head.Type != "tool_result" || !errorResults[head.ToolUseID] {
					continue
				}
				var full map[string]any
				if err := json.Unmarshal(b, &full); err != nil {
					return nil, err
				}
				full["is_error"] = true
				nb, err := json.Marshal(full)
				if err != nil {
					return nil, err
				}
				blocks[i] = nb
			}
		}
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, message{Role: m.Role, Content: blocks})
	}
	if breakpoint {
		skip := 0
		if note {
			skip = 1
		}
	mark:
		for i := len(out) - 1; i >= 0; i-- {
			for j := len(out[i].Content) - 1; j >= 0; j-- {
				if skip > 0 {
					skip--
					continue
				}
				b, err := withCacheControl(out[i].Content[j])
				if err != nil {
					return nil, err
				}
				out[i].Content[j] = b
				break mark
			}
		}
	}
	return json.Marshal(out)
}

// retryAfter reads how long the server asked to wait: OpenAI's
// retry-after-ms (precise), else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > 1e6 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// errorType extracts a short identifier from an error body (OpenAI's
// error.code or error.type, Anthropic's error.type). Messages are never
// taken: they may echo the request or name the key.
func errorType(data []byte) string {
	var body struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil {
		return ""
	}
	if code, ok := body.Error.Code.(string); ok && isIdentifier(code) {
		return code
	}
	if isIdentifier(body.Error.Type) {
		return body.Error.Type
	}
	return ""
}

// contextExceeded reports whether an error response says the request is
// longer than the model's context: OpenAI's code context_length_exceeded,
// or the message OpenAI-compatible servers and Anthropic write ("maximum
// context length", "prompt is too long"). Only whether it says so is
// kept, never the message.
func contextExceeded(errType string, data []byte) bool {
	if errType == "context_length_exceeded" {
		return true
	}
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil {
		return false
	}
	msg := strings.ToLower(body.Error.Message)
	return strings.Contains(msg, "maximum context length") || strings.Contains(msg, "prompt is too long") ||
		strings.Contains(msg, "context length") && strings.Contains(msg, "exceed")
}

// isIdentifier reports whether s looks like an error code (letters,
// digits, _ . -; at most 64 bytes) and so is safe to show.
func isIdentifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}
