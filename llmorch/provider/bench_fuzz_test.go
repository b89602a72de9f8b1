package provider

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// BenchmarkStream measures one call's overhead (request building, HTTP over
// loopback, stream parsing, validation) against the in-process mock with an
// instant model.
func BenchmarkStream(b *testing.B) {
	scripts := map[string]mockllm.Script{
		"text": {Text: []string{"Hello", " there,", " how", " can", " I", " help?"}, Usage: &mockllm.Usage{Input: 20, Output: 6}},
		"3-tool-calls": {ToolCalls: []mockllm.ToolCall{
			{ID: "c1", Name: "think", Arguments: `{"topic":"benchmarks","reasoning":"measure the overhead"}`},
			{ID: "c2", Name: "search", Arguments: `{"query":"go benchmark allocations"}`},
			{ID: "c3", Name: "critique", Arguments: `{"subject":"the plan","analysis":"fine"}`},
		}, Usage: &mockllm.Usage{Input: 20, Output: 30}},
	}
	for _, wire := range []string{OpenAI, Anthropic} {
		for _, name := range []string{"text", "3-tool-calls"} {
			b.Run(wire+"/"+name, func(b *testing.B) {
				srv := mockllm.New(mockllm.WithDefault(scripts[name]), mockllm.WithMaxRecorded(-1))
				defer srv.Close()
				m, _ := testModel(b, srv, wire)
				req := userReq("benchmark me")
				b.ReportAllocs()
				for b.Loop() {
					n := 0
					for _, err := range m.Stream(b.Context(), req) {
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
					if n < 4 {
						b.Fatalf("%d events", n)
					}
				}
			})
		}
	}
}

// fuzzStream feeds an arbitrary body to the stream parser and checks the
// contract: no panic, valid calls only (an ID, a name, an object of
// arguments), at most one usage, and it last.
func fuzzStream(t *testing.T, wire string, body []byte) {
	m, err := newModel(Config{Provider: wire, Model: "m", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []chat.Event
	p := &parser{m: m, yield: func(ev chat.Event, err error) bool {
		evs = append(evs, ev)
		return true
	}}
	p.stream(bytes.NewReader(body))
	usages := 0
	for i, ev := range evs {
		switch ev.Kind {
		case chat.KindToolCall:
			if ev.ToolCall.ID == "" || ev.ToolCall.Name == "" || !isJSONObject(ev.ToolCall.Arguments) {
				t.Fatalf("invalid call yielded: %+v", ev.ToolCall)
			}
		case chat.KindError:
			if ev.Error.Code != CodeInvalidToolCall || ev.ToolCall == nil || ev.ToolCall.ID == "" {
				t.Fatalf("bad error event: %+v", ev)
			}
		case chat.KindUsage:
			usages++
			if i != len(evs)-1 {
				t.Fatal("usage is not last")
			}
		case chat.KindTextDelta:
			if ev.Text == "" {
				t.Fatal("empty text delta")
			}
		default:
			t.Fatalf("unexpected kind %s", ev.Kind)
		}
	}
	if usages > 1 || (p.err != nil && usages > 0) {
		t.Fatalf("usages %d with err %v", usages, p.err)
	}
}

func FuzzOpenAIStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"think\",\"arguments\":\"\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"search\",\"arguments\":\"{\\\"q\\\"\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"type\":\"function\",\"function\":{\"arguments\":\"{}\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"type\":\"server_error\"}}\n\n"))
	f.Add([]byte(": keepalive\r\ndata:{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"x\",\"arguments\":\"[\"}}]},\"finish_reason\":\"stop\"}]}\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzStream(t, OpenAI, body) })
}

func FuzzAnthropicStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"think\",\"input\":{}}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n"))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) { fuzzStream(t, Anthropic, body) })
}

// loadStreamBody is the body the load harness's mock model sends for a
// paced turn (loadtest: 64 text chunks and the usage), fetched once from
// mockllm; loadtest/cmd/relay benchmarks the relay's reading of the same
// bytes (BenchmarkRelayModel), so that the two figures compare.
func loadStreamBody(b *testing.B) []byte {
	b.Helper()
	srv := mockllm.New(mockllm.WithDefault(mockllm.Script{Chunks: 64, Usage: &mockllm.Usage{Input: 40, Output: 64}}), mockllm.WithMaxRecorded(-1))
	defer srv.Close()
	res, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("mock: %d %v", res.StatusCode, err)
	}
	return body
}

// BenchmarkParseStream is the runtime's reading of a model stream alone
// (line splitting, one chunk decoded per line, events yielded), on the
// load harness's 64-chunk turn: compare with BenchmarkRelayModel in
// loadtest/cmd/relay, the plain relay's reading of the same bytes.
func BenchmarkParseStream(b *testing.B) {
	body := loadStreamBody(b)
	m, err := newModel(Config{Provider: OpenAI, Model: "m", APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		deltas := 0
		p := &parser{m: m, yield: func(ev chat.Event, err error) bool {
			if ev.Kind == chat.KindTextDelta {
				deltas++
			}
			return true
		}}
		p.stream(bytes.NewReader(body))
		if p.err != nil || deltas != 64 {
			b.Fatalf("%d deltas, %v", deltas, p.err)
		}
	}
}
