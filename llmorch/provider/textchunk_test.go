package provider

import (
	"encoding/json"
	"slices"
	"testing"
)

// unmarshalTexts is what the parser takes from a chunk through
// json.Unmarshal: the text deltas of the choices with index 0, and whether
// the chunk carries anything else it uses (tool calls, usage, an error, a
// message).
func unmarshalTexts(data []byte) (texts []string, other bool, err error) {
	var c oaChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, false, err
	}
	other = c.Usage != nil || (len(c.Error) > 0 && string(c.Error) != "null")
	for _, ch := range c.Choices {
		other = other || ch.Message != nil || len(ch.Delta.ToolCalls) > 0
		if ch.Index == 0 && ch.Delta.Content != "" {
			texts = append(texts, ch.Delta.Content)
		}
	}
	return texts, other, nil
}

// checkTextChunk fails when readTextChunk accepts data and reads it
// differently from json.Unmarshal.
func checkTextChunk(t *testing.T, data []byte) (accepted bool) {
	t.Helper()
	tc, ok := readTextChunk(data)
	if !ok {
		return false
	}
	if !json.Valid(data) {
		t.Fatalf("fast path accepted invalid JSON %q", data)
	}
	want, other, err := unmarshalTexts(data)
	if err != nil {
		t.Fatalf("fast path accepted %q, json.Unmarshal fails: %v", data, err)
	}
	if other {
		t.Fatalf("fast path accepted %q, which carries more than text", data)
	}
	if got := tc.texts[:tc.n]; !slices.Equal(got, want) {
		t.Fatalf("%q: fast path read %q, json.Unmarshal %q", data, got, want)
	}
	return true
}

func TestTextChunk(t *testing.T) {
	for _, tc := range []struct {
		chunk  string
		accept bool
	}{
		{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`, true},
		{` { "choices" : [ { "index" : 0 , "delta" : { "role" : "assistant" , "content" : "a\"b" } } ] } `, true},
		{`{"choices":[{"index":0,"delta":{"content":"caf\u00e9 ☕"},"logprobs":{"x":[1,{"y":"}"}]}}],"usage":null}`, true},
		{`{"choices":[{"index":0,"delta":{"content":"\ud83d\ude00 \ud800"}}]}`, true},
		{`{"choices":[{"index":1,"delta":{"content":"other"}},{"delta":{"content":"first"},"finish_reason":"stop"}]}`, true},
		{`{"choices":[{"index":0,"delta":{"content":null}}],"error":null}`, true},
		{`{"choices":[],"system_fingerprint":"fp"}`, true},
		{`{"choices":null}`, true},
		{`{}`, true},
		{`{"choices":[{"index":-0,"delta":{}}]}`, true},
		// json.Unmarshal decides these.
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"n","arguments":""}}]}}]}`, false},
		{`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, false},
		{`{"error":{"message":"overloaded"}}`, false},
		{`{"choices":[{"index":0,"message":{"content":"whole"}}]}`, false},
		{`{"Choices":[{"index":0,"delta":{"content":"folded"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"Content":"folded"}}]}`, false},
		{`{"choices":[{"index":0,"DELTA":{"content":"folded"}}]}`, false},
		{`{"\u0063hoices":[{"index":0,"delta":{"content":"escaped key"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"one","content":"two"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[{"index":0,"delta":{"content":"b"}}]}`, false},
		{`{"choices":[{"index":1.0,"delta":{"content":"x"}}]}`, false},
		{`{"choices":[{"index":1e0,"delta":{"content":"x"}}]}`, false},
		{`{"choices":[{"index":"0","delta":{"content":"x"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":7}}]}`, false},
		{`{"choices":[{"index":0,"finish_reason":7}]}`, false},
		{`{"choices":[null]}`, false},
		{`{"choices":{}}`, false},
		{`{"choices":[{"delta":{"content":"1"}},{"delta":{"content":"2"}},{"delta":{"content":"3"}},{"delta":{"content":"4"}},{"delta":{"content":"5"}}]}`, false},
		{`[1]`, false},
		{`null`, false},
		// Malformed: declined, and json.Unmarshal refuses them.
		{`{"choices":[{"index":01,"delta":{"content":"x"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x"}}]} x`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x\q"}}]}`, false},
		{"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\ty\"}}]}", false},
		{`{"choices":[{"index":0,"delta":{"content":"x"}},]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x"},"n":-}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x"},"n":nul}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x"},"n":[1 2]}]}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"x"}}]`, false},
	} {
		if got := checkTextChunk(t, []byte(tc.chunk)); got != tc.accept {
			t.Errorf("%s: fast path accepted %v, want %v", tc.chunk, got, tc.accept)
		}
	}
}

// FuzzTextChunk checks the fast path against json.Unmarshal on any input.
func FuzzTextChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"caf\u00e9\n"}}],"usage":null}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}`,
		`{"choices":[{"index":2,"delta":{"role":"assistant","content":""},"logprobs":null}]}`,
		`{"choices":[{"delta":{"content":"a"}},{"Index":0,"delta":{"content":"b"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkTextChunk(t, data) })
}

// BenchmarkTextChunk compares the fast path with json.Unmarshal on a
// typical text chunk.
func BenchmarkTextChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732400000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if tc, ok := readTextChunk(data); !ok || tc.n != 1 {
				b.Fatal("declined")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c oaChunk
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
