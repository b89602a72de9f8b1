package mockllm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// render turns a script into one response for one request.
type render struct {
	api string
	req *Request
	s   *Script
	id  int64
}

func (r *render) text() []string {
	if len(r.s.Text) > 0 || r.s.Chunks <= 0 {
		return r.s.Text
	}
	out := make([]string, r.s.Chunks)
	for i := range out {
		out[i] = "tok" + strconv.Itoa(i) + " "
	}
	return out
}

func (r *render) frames() []frame {
	if r.api == APIAnthropic {
		return r.anthropicFrames()
	}
	return r.openAIFrames()
}

func (r *render) whole() []byte {
	if r.api == APIAnthropic {
		return r.anthropicWhole()
	}
	return r.openAIWhole()
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value marshalled here is built from strings and numbers.
		panic(fmt.Sprintf("mockllm: marshal: %v", err))
	}
	return b
}

// split cuts s into at most n pieces at rune boundaries. An empty s gives
// no pieces.
func split(s string, n int) []string {
	if n <= 0 {
		n = 3
	}
	if s == "" {
		return nil
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > 0 {
		end := min(size, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// --- OpenAI ---

type oaFunction struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

type oaToolDelta struct {
	Index    int        `json:"index"`
	ID       string     `json:"id,omitempty"`
	Type     string     `json:"type,omitempty"`
	Function oaFunction `json:"function"`
}

type oaDelta struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []oaToolDelta `json:"tool_calls,omitempty"`
}

type oaChoice struct {
	Index        int     `json:"index"`
	Delta        oaDelta `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type oaUsage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *oaCachedUsage `json:"prompt_tokens_details,omitempty"`
}

type oaCachedUsage struct {
	CachedTokens int `json:"cached_tokens"`
}

type oaChunk struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage,omitempty"`
}

func (r *render) openAIFinish() string {
	if r.s.FinishReason != "" {
		return r.s.FinishReason
	}
	if len(r.s.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// scriptUsage is the script's usage: as given, estimated (EstimateUsage),
// or nil.
func (r *render) scriptUsage() *Usage {
	if p := r.req.Prefix; p != nil {
		// The prompt cache's count of the input; the script's output.
		u := &Usage{Input: p.InputTokens, CacheRead: p.CachedTokens, CacheWrite: p.WriteTokens}
		if r.s.Usage != nil {
			u.Output = r.s.Usage.Output
		} else {
			u.Output = r.outputBytes()/4 + 1
		}
		return u
	}
	if r.s.Usage != nil || !r.s.EstimateUsage {
		return r.s.Usage
	}
	return &Usage{Input: len(r.req.Body)/4 + 1, Output: r.outputBytes()/4 + 1}
}

// outputBytes is the size of the script's answer: text and tool calls.
func (r *render) outputBytes() int {
	out := 0
	for _, t := range r.text() {
		out += len(t)
	}
	for _, c := range r.s.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return out
}

func (r *render) usage() oaUsage {
	u := r.scriptUsage()
	if u == nil {
		return oaUsage{}
	}
	ou := oaUsage{PromptTokens: u.Input, CompletionTokens: u.Output, TotalTokens: u.Input + u.Output}
	if u.CacheRead > 0 {
		ou.PromptTokensDetails = &oaCachedUsage{CachedTokens: u.CacheRead}
	}
	return ou
}

func (r *render) openAIFrames() []frame {
	created := time.Now().Unix()
	id := fmt.Sprintf("chatcmpl-mock-%d", r.id)
	chunk := func(d oaDelta, finish *string) []byte {
		return mustJSON(oaChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: r.req.Model,
			Choices: []oaChoice{{Delta: d, FinishReason: finish}}})
	}
	frames := []frame{{data: chunk(oaDelta{Role: "assistant", Content: new(string)}, nil)}}
	for _, t := range r.text() {
		frames = append(frames, frame{data: chunk(oaDelta{Content: &t}, nil), content: true})
	}

	// Each call is a header delta (id, type, name) and its argument pieces.
	perCall := make([][]oaToolDelta, len(r.s.ToolCalls))
	for i, tc := range r.s.ToolCalls {
		empty := ""
		perCall[i] = append(perCall[i], oaToolDelta{Index: i, ID: tc.ID, Type: "function", Function: oaFunction{Name: tc.Name, Arguments: &empty}})
		for _, p := range split(tc.Arguments, r.s.ArgPieces) {
			d := oaToolDelta{Index: i, Function: oaFunction{Arguments: &p}}
			if r.s.Style&StyleRepeatType != 0 {
				d.Type = "function"
			}
			perCall[i] = append(perCall[i], d)
		}
	}
	var deltas []oaToolDelta
	if r.s.Style&StyleInterleaved != 0 {
		for k := 0; ; k++ {
			added := false
			for _, c := range perCall {
				if k < len(c) {
					deltas = append(deltas, c[k])
					added = true
				}
			}
			if !added {
				break
			}
		}
	} else {
		for _, c := range perCall {
			deltas = append(deltas, c...)
		}
	}
	if r.s.Style&StyleTrailingEmpty != 0 && len(r.s.ToolCalls) > 0 {
		empty := ""
		deltas = append(deltas, oaToolDelta{Index: len(r.s.ToolCalls) - 1, Function: oaFunction{Arguments: &empty}})
	}
	for _, d := range deltas {
		frames = append(frames, frame{data: chunk(oaDelta{ToolCalls: []oaToolDelta{d}}, nil), content: true})
	}

	finish := r.openAIFinish()
	frames = append(frames, frame{data: chunk(oaDelta{}, &finish)})
	if r.scriptUsage() != nil && r.req.IncludeUsage {
		u := r.usage()
		frames = append(frames, frame{data: mustJSON(oaChunk{ID: id, Object: "chat.completion.chunk", Created: created,
			Model: r.req.Model, Choices: []oaChoice{}, Usage: &u})})
	}
	return append(frames, frame{data: []byte("[DONE]")})
}

func (r *render) openAIWhole() []byte {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id,omitempty"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	var content *string
	if text := r.text(); len(text) > 0 {
		var all string
		for _, t := range text {
			all += t
		}
		content = &all
	}
	var calls []call
	for _, tc := range r.s.ToolCalls {
		calls = append(calls, call{ID: tc.ID, Type: "function", Function: fn{Name: tc.Name, Arguments: tc.Arguments}})
	}
	resp := map[string]any{
		"id": fmt.Sprintf("chatcmpl-mock-%d", r.id), "object": "chat.completion", "created": time.Now().Unix(),
		"model": r.req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "tool_calls": calls},
			"finish_reason": r.openAIFinish(),
		}},
	}
	if r.scriptUsage() != nil {
		resp["usage"] = r.usage()
	}
	return mustJSON(resp)
}

// --- Anthropic ---

func (r *render) anthropicStop() string {
	if r.s.FinishReason != "" {
		return r.s.FinishReason
	}
	if len(r.s.ToolCalls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// anthropicUsage is the usage in Anthropic's convention: input_tokens
// without the cached input, which has fields of its own.
func (r *render) anthropicUsage() (in, out int, cache map[string]int) {
	u := r.scriptUsage()
	if u == nil {
		return 0, 0, nil
	}
	if u.CacheRead > 0 || u.CacheWrite > 0 {
		cache = map[string]int{"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite}
	}
	return u.Input - u.CacheRead - u.CacheWrite, u.Output, cache
}

// anthropicUsageJSON is a usage object with the input counts and out.
func anthropicUsageJSON(in, out int, cache map[string]int) map[string]int {
	m := map[string]int{"input_tokens": in, "output_tokens": out}
	for k, v := range cache {
		m[k] = v
	}
	return m
}

func (r *render) anthropicFrames() []frame {
	in, out, cache := r.anthropicUsage()
	msgID := fmt.Sprintf("msg_mock_%d", r.id)
	frames := []frame{{event: "message_start", data: mustJSON(map[string]any{
		"type": "message_start",
		"message": map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": r.req.Model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": anthropicUsageJSON(in, min(out, 1), cache)},
	})}}
	block := 0
	if text := r.text(); len(text) > 0 {
		frames = append(frames,
			frame{event: "content_block_start", data: mustJSON(map[string]any{"type": "content_block_start", "index": block,
				"content_block": map[string]string{"type": "text", "text": ""}})},
			frame{event: "ping", data: []byte(`{"type":"ping"}`)})
		for _, t := range text {
			frames = append(frames, frame{event: "content_block_delta", content: true, data: mustJSON(map[string]any{
				"type": "content_block_delta", "index": block, "delta": map[string]string{"type": "text_delta", "text": t}})})
		}
		frames = append(frames, frame{event: "content_block_stop", data: mustJSON(map[string]any{"type": "content_block_stop", "index": block})})
		block++
	}
	for _, tc := range r.s.ToolCalls {
		cb := map[string]any{"type": "tool_use", "name": tc.Name, "input": map[string]any{}}
		if tc.ID != "" {
			cb["id"] = tc.ID
		}
		frames = append(frames, frame{event: "content_block_start", content: true, data: mustJSON(map[string]any{
			"type": "content_block_start", "index": block, "content_block": cb})})
		for _, p := range split(tc.Arguments, r.s.ArgPieces) {
			frames = append(frames, frame{event: "content_block_delta", content: true, data: mustJSON(map[string]any{
				"type": "content_block_delta", "index": block, "delta": map[string]string{"type": "input_json_delta", "partial_json": p}})})
		}
		frames = append(frames, frame{event: "content_block_stop", data: mustJSON(map[string]any{"type": "content_block_stop", "index": block})})
		block++
	}
	frames = append(frames,
		frame{event: "message_delta", data: mustJSON(map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": r.anthropicStop(), "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": out}})},
		frame{event: "message_stop", data: []byte(`{"type":"message_stop"}`)})
	return frames
}

func (r *render) anthropicWhole() []byte {
	in, out, cache := r.anthropicUsage()
	var content []any
	if text := r.text(); len(text) > 0 {
		var all string
		for _, t := range text {
			all += t
		}
		content = append(content, map[string]string{"type": "text", "text": all})
	}
	for _, tc := range r.s.ToolCalls {
		var input any = map[string]any{}
		if json.Valid([]byte(tc.Arguments)) {
			input = json.RawMessage(tc.Arguments)
		}
		block := map[string]any{"type": "tool_use", "name": tc.Name, "input": input}
		if tc.ID != "" {
			block["id"] = tc.ID
		}
		content = append(content, block)
	}
	if content == nil {
		content = []any{}
	}
	return mustJSON(map[string]any{
		"id": fmt.Sprintf("msg_mock_%d", r.id), "type": "message", "role": "assistant", "model": r.req.Model,
		"content": content, "stop_reason": r.anthropicStop(), "stop_sequence": nil,
		"usage": anthropicUsageJSON(in, out, cache),
	})
}
