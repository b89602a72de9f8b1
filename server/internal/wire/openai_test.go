package wire

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
)

func TestChatCompletionParams(t *testing.T) {
	tests := []struct {
		body      string
		wantParam string // "" accepted
		wantCode  string
	}{
		{`{"model":"a","messages":[],"temperature":0.3,"max_tokens":5,"seed":1,"metadata":{"a":"b"},"store":true}`, "", ""},
		{`{"model":"a","tools":[],"tool_choice":"auto","n":1,"stop":null,"logprobs":false,"top_logprobs":0,"response_format":{"type":"text"},"modalities":["text"],"audio":null}`, "", ""},
		{`{"model":"a","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","response_format":{"type":"json_object"}}`, "", ""},
		{`{"model":"a","tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":true}`, "", ""},
		{`{"model":"a","functions":[{"name":"f"}]}`, "functions", "unsupported_parameter"},
		{`{"model":"a","function_call":"none"}`, "function_call", "unsupported_parameter"},
		{`{"model":"a","parallel_tool_calls":false}`, "parallel_tool_calls", "unsupported_parameter"},
		{`{"model":"a","n":3}`, "n", "unsupported_parameter"},
		{`{"model":"a","stop":["x"]}`, "stop", "unsupported_parameter"},
		{`{"model":"a","logit_bias":{"50256":-100}}`, "logit_bias", "unsupported_parameter"},
		{`{"model":"a","logprobs":true}`, "logprobs", "unsupported_parameter"},
		{`{"model":"a","top_logprobs":2}`, "top_logprobs", "unsupported_parameter"},
		{`{"model":"a","modalities":["text","audio"]}`, "modalities", "unsupported_parameter"},
		{`{"model":"a","audio":{"voice":"alloy","format":"mp3"}}`, "audio", "unsupported_parameter"},
		{`{"model":"a","web_search_options":{}}`, "web_search_options", "unsupported_parameter"},
		{`{"model":"a","frequency_penalty":1,"repetition_penalty":1.1}`, "repetition_penalty", "unknown_parameter"},
	}
	for _, tt := range tests {
		_, err := ParseChatCompletion([]byte(tt.body))
		var pe *ParamError
		switch {
		case tt.wantParam == "" && err != nil:
			t.Errorf("%s: %v", tt.body, err)
		case tt.wantParam == "":
		case !errors.As(err, &pe) || pe.Param != tt.wantParam || pe.Code != tt.wantCode || pe.Message == "":
			t.Errorf("%s: %v, want %s naming %s", tt.body, err, tt.wantCode, tt.wantParam)
		}
	}
	// A body that is not JSON is the decoder's to report, with its place.
	var je *JSONError
	if _, err := ParseChatCompletion([]byte(`{"model": 5}`)); !errors.As(err, &je) || je.Line != 1 {
		t.Errorf("a type error: %v", err)
	}
}

func TestChatConversation(t *testing.T) {
	body := `{"model":"a","messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"first"},{"type":"text","text":"line"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"think","arguments":"{\"q\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"thought"},
		{"role":"assistant","content":[{"type":"text","text":"answer"}]},
		{"role":"developer","content":"x"},
		{"role":"user","content":"second"}]}`
	r, err := ParseChatCompletion([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	msgs, index, pe := r.Conversation()
	if pe != nil {
		t.Fatal(pe)
	}
	want := []chat.Message{
		{Role: chat.RoleUser, Content: "first\nline"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "c1", Name: "think", Arguments: json.RawMessage(`{"q":1}`)}}},
		{Role: chat.RoleTool, ToolCallID: "c1", Content: "thought"},
		{Role: chat.RoleAssistant, Content: "answer"},
		{Role: chat.RoleUser, Content: "second"},
	}
	if len(msgs) != len(want) {
		t.Fatalf("got %+v", msgs)
	}
	for i := range want {
		g, w := msgs[i], want[i]
		if g.Role != w.Role || g.Content != w.Content || g.ToolCallID != w.ToolCallID || len(g.ToolCalls) != len(w.ToolCalls) ||
			(len(w.ToolCalls) > 0 && (g.ToolCalls[0].Name != w.ToolCalls[0].Name || string(g.ToolCalls[0].Arguments) != string(w.ToolCalls[0].Arguments))) {
			t.Errorf("message %d: %+v, want %+v", i, g, w)
		}
	}
	if got := index; len(got) != 5 || got[0] != 1 || got[4] != 6 {
		t.Errorf("index %v", got)
	}
	if msg, ok, results, pe := r.Turn(); pe != nil || !ok || msg.Content != "second" || results != nil {
		t.Errorf("Turn %+v %v %v %v", msg, ok, results, pe)
	}
	if text, at, pe := r.Instructions(); pe != nil || text != "be brief\n\nx" || at != 0 {
		t.Errorf("Instructions %q %d %v", text, at, pe)
	}

	for _, tt := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].image_url"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://169.254.169.254/latest/meta-data/"}}]}]}`, "messages[0].content[0].image_url"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,not base64!"}}]}]}`, "messages[0].content[0].image_url"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]}]}`, "messages[0].content[0].image_url"},
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,@@@@"}}]}]}`, "messages[0].content[0]"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0]"},
		{`{"messages":[{"role":"user"}]}`, "messages[0].content"},
		{`{"messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{"messages":[{"role":"assistant","content":"x","function_call":{"name":"f","arguments":"{}"}}]}`, "messages[0].function_call"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0]"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{}}]}]}`, "messages[0].tool_calls[0].type"},
	} {
		r, err := ParseChatCompletion([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if _, _, pe := r.Conversation(); pe == nil || pe.Param != tt.param {
			t.Errorf("%s: %v, want an error naming %s", tt.body, pe, tt.param)
		}
	}
}

func TestResponsesInput(t *testing.T) {
	body := `{"model":"a","input":[
		{"role":"developer","content":"be brief"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"first"}]},
		{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"let me think","annotations":[]}]},
		{"type":"function_call","call_id":"c1","name":"think","arguments":"{}","id":"fc_1","status":"completed"},
		{"type":"function_call","call_id":"c2","name":"reflect","arguments":""},
		{"type":"function_call_output","call_id":"c1","output":"thought"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"reflected"}]},
		{"role":"user","content":"second"}],
		"conversation":{"id":"conv_abcdefgh"},"metadata":{"k":"v"},"store":false}`
	r, err := ParseResponses([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in, pe := r.Conversation(nil)
	if pe != nil {
		t.Fatal(pe)
	}
	msgs, index := in.Messages, in.Index
	if in.Instructions != "be brief" {
		t.Fatalf("instructions %q", in.Instructions)
	}
	if len(msgs) != 5 || msgs[1].Content != "let me think" || len(msgs[1].ToolCalls) != 2 || msgs[1].ToolCalls[1].Name != "reflect" ||
		string(msgs[1].ToolCalls[1].Arguments) != "{}" || msgs[3].ToolName != "reflect" || msgs[3].Content != "reflected" || msgs[4].Content != "second" {
		t.Fatalf("conversation %+v", msgs)
	}
	if index[0] != 1 || index[1] != 2 || index[2] != 5 || index[4] != 7 {
		t.Fatalf("index %v", index)
	}
	if id, pe := r.ConversationID(); pe != nil || id != "conv_abcdefgh" {
		t.Fatalf("conversation %q %v", id, pe)
	}
	if r.Stored() {
		t.Fatal("store false reads as stored")
	}
	if m, pe := r.MetadataMap(); pe != nil || m["k"] != "v" {
		t.Fatalf("metadata %v %v", m, pe)
	}
	s, _ := ParseResponses([]byte(`{"model":"a","input":"hi","conversation":"conv_x"}`))
	if in, pe := s.Conversation(nil); pe != nil || len(in.Messages) != 1 || in.Messages[0].Role != chat.RoleUser || !s.Stored() {
		t.Fatalf("string input: %+v %v", in, pe)
	}
	for _, tt := range []struct{ body, param string }{
		{`{"input":[{"type":"reasoning","summary":[]}]}`, "input[0].type"},
		{`{"input":[{"type":"item_reference","id":"x"}]}`, "input[0].type"},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].image_url"},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].file_id"},
		{`{"input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "input[0].content[0]"},
		{`{"input":[{"role":"user","content":"x"},{"type":"compaction","encrypted_content":"x"}]}`, "input[1]"},
		{`{"input":[{"type":"compaction","encrypted_content":"not ours"}]}`, "input[0].encrypted_content"},
		{`{"input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
		{`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"nope"}]}`, "input[0]"},
		{`{"input":[{"role":"system","content":"only a system message"}]}`, "input"},
		{`{"input":5}`, "input"},
		{`{}`, "input"},
	} {
		r, err := ParseResponses([]byte(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if _, pe := r.Conversation(nil); pe == nil || pe.Param != tt.param {
			t.Errorf("%s: %v, want an error naming %s", tt.body, pe, tt.param)
		}
	}
	for _, tt := range []struct{ body, param string }{
		{`{"parallel_tool_calls":false}`, "parallel_tool_calls"},
		{`{"include":["message.output_text.logprobs"]}`, "include"},
		{`{"include":["something.new"]}`, "include"},
		{`{"prompt":{"id":"pmpt_1"}}`, "prompt"},
		{`{"top_logprobs":3}`, "top_logprobs"},
		{`{"moderation":{"model":"omni-moderation-latest"}}`, "moderation"},
		{`{"messages":[]}`, "messages"},
	} {
		_, err := ParseResponses([]byte(tt.body))
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tt.param {
			t.Errorf("%s: %v, want an error naming %s", tt.body, err, tt.param)
		}
	}
	for _, ok := range []string{
		`{"include":["reasoning.encrypted_content"],"text":{"format":{"type":"text"},"verbosity":"low"},"tools":[],"tool_choice":"auto","background":false}`,
		`{"tools":[{"type":"function","name":"f"}],"tool_choice":"required","background":true,"text":{"format":{"type":"json_schema","name":"x","schema":{}}}}`,
		`{"instructions":"x","max_output_tokens":9,"temperature":1,"reasoning":{"effort":"low"},"truncation":"auto","user":"u","service_tier":"auto"}`,
	} {
		if _, err := ParseResponses([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	big := `{"metadata":{`
	for i := range 17 {
		if i > 0 {
			big += ","
		}
		big += `"k` + string(rune('a'+i)) + `":"v"`
	}
	big += `}}`
	r, _ = ParseResponses([]byte(big))
	if _, pe := r.MetadataMap(); pe == nil || pe.Param != "metadata" {
		t.Errorf("17 metadata keys: %v", pe)
	}
}

// FuzzOpenAIBodies: the OpenAI request parsers never panic, refuse with
// the parameter named, and give a conversation whose messages have the
// roles the agent takes.
func FuzzOpenAIBodies(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"a","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`,
		`{"model":"a","tools":[{}],"n":2}`,
		`{"model":"a","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"},{"role":"user","content":"y"}]}`,
		`{"input":"hi","conversation":{"id":"x"},"metadata":{"a":"b"}}`, `{`, `[]`, `{"input":[1]}`,
		`{"model":"a","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"f"}}]}},"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/y.png"},{"type":"input_file","file_data":"data:application/pdf;base64,AA==","filename":"a.pdf"}]}],"tools":[{"type":"function","name":"g"}],"tool_choice":{"type":"function","name":"g"},"text":{"format":{"type":"json_object"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(msgs []chat.Message, index []int, pe *ParamError) {
			if pe != nil {
				if pe.Param == "" || pe.Message == "" || pe.Code == "" {
					t.Fatalf("error %+v", pe)
				}
				return
			}
			if len(index) != len(msgs) {
				t.Fatalf("%d messages, %d indexes", len(msgs), len(index))
			}
			for _, m := range msgs {
				if m.Role != chat.RoleUser && m.Role != chat.RoleAssistant && m.Role != chat.RoleTool {
					t.Fatalf("role %q", m.Role)
				}
				for _, c := range m.ToolCalls {
					if !json.Valid(c.Arguments) || c.ID == "" || c.Name == "" {
						t.Fatalf("tool call %+v", c)
					}
				}
			}
		}
		if r, err := ParseChatCompletion(data); err == nil {
			check(r.Conversation())
			_, _, _, _ = r.Turn()
			_, _, _ = r.Instructions()
			_, _ = r.Tools()
			_, _ = r.Choice()
			_, _ = r.Format()
		} else if err.Error() == "" {
			t.Fatal("empty error")
		}
		if r, err := ParseResponses(data); err == nil {
			in, pe := r.Conversation(nil)
			check(in.Messages, in.Index, pe)
			_, _ = r.ConversationID()
			_, _ = r.MetadataMap()
			_, _ = r.Tools()
			_, _ = r.Choice()
			_, _ = r.Format()
		} else if err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
