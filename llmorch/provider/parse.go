package provider

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"

	"github.com/agentdock-go/agentdock/chat"
)

// parser turns one response body into events.
type parser struct {
	m     *model
	yield func(chat.Event, error) bool

	emitted bool
	stopped bool
	err     *callError

	calls   []*callAcc
	byIndex map[int]*callAcc
	usage   chat.Usage

	// budget is the request's MaxOutputBytes (0: none); spent counts the
	// text and argument bytes received against it.
	budget, spent int
}

// spend counts n bytes of output; over the budget it ends the stream with
// llmorch.ErrOutputLimit, so that nothing more is read or buffered.
func (p *parser) spend(n int) bool {
	p.spent += n
	if p.budget > 0 && p.spent > p.budget {
		if p.err == nil {
			p.err = p.m.outputLimit()
		}
		return false
	}
	return true
}

// callAcc accumulates one tool call's deltas.
type callAcc struct {
	id, name string
	args     []byte
	// startInput is an Anthropic block's initial input, used when no
	// input_json_delta follows.
	startInput json.RawMessage
	deltas     bool
}

// emit yields ev and records that output started.
func (p *parser) emit(ev chat.Event) bool {
	p.emitted = true
	if !p.yield(ev, nil) {
		p.stopped = true
		return false
	}
	return true
}

func (p *parser) stream(body io.Reader) {
	lr := newLineReader(body)
	defer lr.release()
	complete := false
	for !complete && !p.stopped && p.err == nil {
		line, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, errLineTooLong) {
				p.err = p.m.fail(CodeProviderError, false, "the provider sent a stream line over %d MiB", maxLine>>20)
			} else {
				p.err = p.m.sendFailure(err, "mid-stream")
			}
			return
		}
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments, event names, ids, blank lines
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 {
			continue
		}
		if p.m.cfg.Provider == Anthropic {
			complete = p.anthropicEvent(data)
		} else {
			complete = p.openAIChunk(data)
		}
	}
	if p.stopped || p.err != nil {
		return
	}
	if !complete {
		p.err = p.m.fail(CodeUnavailable, true, "the stream ended before the response was complete")
		return
	}
	p.finish()
}

// finish yields the validated tool calls and the usage.
func (p *parser) finish() {
	seen := make(map[string]bool, len(p.calls))
	for _, c := range p.calls {
		args := c.args
		if !c.deltas && len(c.startInput) > 0 {
			args = c.startInput
		}
		ev, ok := p.validate(c.id, c.name, args, seen)
		if ok && !p.emit(ev) {
			return
		}
	}
	u := p.usage
	if u.Total == 0 {
		u.Total = u.Prompt + u.Completion
	}
	if !u.IsZero() {
		p.emit(chat.Event{Kind: chat.KindUsage, Usage: &u})
	}
}

// validate turns an accumulated call into a tool-call event, or an
// invalid_tool_call error event. ok is false for an artefact: no name and
// no arguments.
func (p *parser) validate(id, name string, args []byte, seen map[string]bool) (chat.Event, bool) {
	args = bytes.TrimSpace(args)
	if name == "" && len(args) == 0 {
		return chat.Event{}, false
	}
	if id == "" || seen[id] {
		id = newCallID()
	}
	seen[id] = true
	call := &chat.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(`{}`)}
	var problem string
	switch {
	case name == "":
		problem = "the tool call has no tool name"
	// A name the request did not offer is a call all the same: the
	// orchestration refuses it, with the step, the sequence position and
	// the tools the model may use, which only it knows.
	case len(args) == 0:
	case !isJSONObject(args):
		problem = "the arguments of tool " + quote(name) + " are not a valid JSON object; send the arguments as one JSON object"
	default:
		call.Arguments = json.RawMessage(bytes.Clone(args))
	}
	if problem != "" {
		return chat.Event{Kind: chat.KindError, ToolCall: call,
			Error: &chat.Error{Code: CodeInvalidToolCall, Message: problem}}, true
	}
	return chat.Event{Kind: chat.KindToolCall, ToolCall: call}, true
}

// quote quotes a model-chosen name for a message, bounded in length.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "call_" + hex.EncodeToString(b[:])
}

// call returns the accumulator for a delta. index and id are what the
// delta carries (index < 0: none). Deltas are matched by index; a delta
// with a new id at a known index starts a new call (servers that number
// every call 0); without an index, by id, else the latest call.
func (p *parser) call(index int, id string) *callAcc {
	var c *callAcc
	if index >= 0 {
		c = p.byIndex[index]
	} else if id != "" {
		for _, x := range p.calls {
			if x.id == id {
				c = x
				break
			}
		}
	} else if n := len(p.calls); n > 0 {
		c = p.calls[n-1]
	}
	if c != nil && id != "" && c.id != "" && c.id != id {
		c = nil
	}
	if c == nil {
		c = &callAcc{}
		p.calls = append(p.calls, c)
		if index >= 0 {
			if p.byIndex == nil {
				p.byIndex = make(map[int]*callAcc, 4)
			}
			p.byIndex[index] = c
		}
	}
	if c.id == "" {
		c.id = id
	}
	return c
}

// --- OpenAI ---

type oaChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Message *oaMessage `json:"message"`
		// FinishReason is a string or null.
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oaUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// oaUsage is OpenAI's usage: cached tokens are counted inside the prompt
// tokens. DeepSeek reports its cache hits in a field of its own.
type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"`
}

func (u *oaUsage) usage() chat.Usage {
	out := chat.Usage{Prompt: u.PromptTokens, Completion: u.CompletionTokens, Total: u.TotalTokens, CacheRead: u.PromptCacheHitTokens}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens > 0 {
		out.CacheRead = d.CachedTokens
	}
	return out
}

type oaMessage struct {
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// openAIChunk handles one data payload; it returns true at the end.
func (p *parser) openAIChunk(data []byte) bool {
	if string(data) == "[DONE]" {
		return true
	}
	if tc, ok := readTextChunk(data); ok {
		for _, text := range tc.texts[:tc.n] {
			if !p.emit(chat.Event{Kind: chat.KindTextDelta, Text: text}) || !p.spend(len(text)) {
				return false
			}
		}
		return false
	}
	var c oaChunk
	if err := json.Unmarshal(data, &c); err != nil {
		p.err = p.m.fail(CodeProviderError, false, "the provider sent a malformed stream chunk")
		return false
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		p.err = p.inBandError(c.Error)
		return false
	}
	if c.Usage != nil {
		p.usage = c.Usage.usage()
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is ever asked for
		}
		if ch.Delta.Content != "" {
			if !p.emit(chat.Event{Kind: chat.KindTextDelta, Text: ch.Delta.Content}) || !p.spend(len(ch.Delta.Content)) {
				return false
			}
		}
		for _, d := range ch.Delta.ToolCalls {
			index := -1
			if d.Index != nil && *d.Index >= 0 {
				index = *d.Index
			}
			acc := p.call(index, d.ID)
			if acc.name == "" {
				acc.name = d.Function.Name
			}
			acc.args = append(acc.args, d.Function.Arguments...)
			acc.deltas = true
			if !p.spend(len(d.Function.Arguments)) {
				return false
			}
		}
	}
	// finish_reason does not end the stream: the usage chunk and, from some
	// servers, trailing deltas follow it.
	return false
}

// inBandError classifies an error sent inside a stream.
func (p *parser) inBandError(raw json.RawMessage) *callError {
	kind := errorType(append(append([]byte(`{"error":`), raw...), '}'))
	switch kind {
	case "rate_limit_exceeded", "rate_limit_error", "requests":
		return p.m.fail(CodeRateLimited, true, "rate limited by the provider mid-stream (%s)", kind)
	case "overloaded_error", "api_error", "server_error", "":
		if kind == "" {
			kind = "no type"
		}
		return p.m.fail(CodeUnavailable, true, "the provider failed mid-stream (%s)", kind)
	default:
		return p.m.fail(CodeProviderError, false, "the provider reported an error mid-stream (%s)", kind)
	}
}

// --- Anthropic ---

type anUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type anBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Text  string          `json:"text"`
	Input json.RawMessage `json:"input"`
}

type anEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		Usage *anUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *anBlock `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
	Usage *anUsage        `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// anthropicUsage: Anthropic counts the input read from and written to its
// cache outside input_tokens, so the prompt is the sum of the three input
// counts, and the two cache counts are kept as the parts of it they are.
// A later event's values replace earlier ones (message_delta repeats what
// message_start said, or says nothing of the input).
func (p *parser) anthropicUsage(u *anUsage) {
	if u == nil {
		return
	}
	if u.CacheCreationInputTokens != nil {
		p.usage.CacheWrite = *u.CacheCreationInputTokens
	}
	if u.CacheReadInputTokens != nil {
		p.usage.CacheRead = *u.CacheReadInputTokens
	}
	if u.InputTokens != nil {
		p.usage.Prompt = *u.InputTokens + p.usage.CacheWrite + p.usage.CacheRead
	}
	if u.OutputTokens != nil {
		p.usage.Completion = *u.OutputTokens
	}
}

func (p *parser) anthropicEvent(data []byte) bool {
	var e anEvent
	if err := json.Unmarshal(data, &e); err != nil {
		p.err = p.m.fail(CodeProviderError, false, "the provider sent a malformed stream event")
		return false
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			p.anthropicUsage(e.Message.Usage)
		}
	case "content_block_start":
		if b := e.ContentBlock; b != nil {
			switch b.Type {
			case "text":
				if b.Text != "" {
					p.emit(chat.Event{Kind: chat.KindTextDelta, Text: b.Text})
					p.spend(len(b.Text))
				}
			case "tool_use":
				c := &callAcc{id: b.ID, name: b.Name}
				if in := bytes.TrimSpace(b.Input); len(in) > 0 && string(in) != "{}" {
					c.startInput = in
				}
				p.calls = append(p.calls, c)
				if p.byIndex == nil {
					p.byIndex = make(map[int]*callAcc, 4)
				}
				p.byIndex[e.Index] = c
			}
		}
	case "content_block_delta":
		if d := e.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				if d.Text != "" {
					p.emit(chat.Event{Kind: chat.KindTextDelta, Text: d.Text})
					p.spend(len(d.Text))
				}
			case "input_json_delta":
				if c := p.byIndex[e.Index]; c != nil {
					c.args = append(c.args, d.PartialJSON...)
					c.deltas = true
					p.spend(len(d.PartialJSON))
				}
			}
		}
	case "message_delta":
		p.anthropicUsage(e.Usage)
	case "message_stop":
		return true
	case "error":
		p.err = p.inBandError(e.Error)
	}
	// ping, content_block_stop, thinking blocks and future events carry
	// nothing this package yields.
	return false
}

// --- whole (non-streamed) responses ---

// whole handles a server that answered a stream request with one JSON
// response.
func (p *parser) whole(body io.Reader) {
	data, err := io.ReadAll(io.LimitReader(body, maxLine))
	if err != nil {
		p.err = p.m.sendFailure(err, "while reading the response")
		return
	}
	if p.m.cfg.Provider == Anthropic {
		var r struct {
			Content []anBlock `json:"content"`
			Usage   *anUsage  `json:"usage"`
		}
		if json.Unmarshal(data, &r) != nil {
			p.err = p.m.fail(CodeProviderError, false, "the provider sent a malformed response")
			return
		}
		for _, b := range r.Content {
			switch b.Type {
			case "text":
				if b.Text != "" && (!p.emit(chat.Event{Kind: chat.KindTextDelta, Text: b.Text}) || !p.spend(len(b.Text))) {
					return
				}
			case "tool_use":
				p.calls = append(p.calls, &callAcc{id: b.ID, name: b.Name, startInput: b.Input})
				if !p.spend(len(b.Input)) {
					return
				}
			}
		}
		p.anthropicUsage(r.Usage)
		p.finish()
		return
	}
	var r oaChunk
	if json.Unmarshal(data, &r) != nil {
		p.err = p.m.fail(CodeProviderError, false, "the provider sent a malformed response")
		return
	}
	if len(r.Error) > 0 && string(r.Error) != "null" {
		p.err = p.inBandError(r.Error)
		return
	}
	if r.Usage != nil {
		p.usage = r.Usage.usage()
	}
	if len(r.Choices) > 0 && r.Choices[0].Message != nil {
		msg := r.Choices[0].Message
		if msg.Content != nil && *msg.Content != "" && (!p.emit(chat.Event{Kind: chat.KindTextDelta, Text: *msg.Content}) || !p.spend(len(*msg.Content))) {
			return
		}
		for _, tc := range msg.ToolCalls {
			p.calls = append(p.calls, &callAcc{id: tc.ID, name: tc.Function.Name, args: []byte(tc.Function.Arguments), deltas: true})
			if !p.spend(len(tc.Function.Arguments)) {
				return
			}
		}
	}
	p.finish()
}
