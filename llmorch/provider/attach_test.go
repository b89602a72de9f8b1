package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/llmorch/mockllm"
)

// TestAttachmentsOnTheWire: a user message's image and file reach each
// wire as its own content parts (OpenAI's image_url and file, Anthropic's
// image and document blocks), with the text after them; the call's note
// still joins the text. A format goes to OpenAI as response_format, and a
// required call as tool_choice on both.
func TestAttachmentsOnTheWire(t *testing.T) {
	const png = "data:image/png;base64,iVBORw0KGgo="
	const pdf = "data:application/pdf;base64,JVBERi0x"
	f, err := llmorch.NewFormat(llmorch.FormatJSONSchema, "answer", "", json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	req := llmorch.Request{
		System: "sys",
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "what are these?", Attachments: []chat.Attachment{
			{Kind: chat.AttachImage, URL: png, MediaType: "image/png", Detail: "high"},
			{Kind: chat.AttachFile, URL: pdf, MediaType: "application/pdf", Filename: "a.pdf"},
		}}},
		Note:    "## Now",
		Tools:   []chat.ToolSpec{{Name: "look", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Require: true,
		Format:  f,
	}
	for wire, want := range map[string][]string{
		OpenAI: {`{"type":"image_url","image_url":{"detail":"high","url":"` + png + `"}}`, `{"file":{"file_data":"` + pdf + `","filename":"a.pdf"},"type":"file"}`,
			`"text":"what are these?\n\n## Now"`, `"response_format":{"json_schema":{"name":"answer","schema":{"type":"object"`, `"type":"json_schema"}`, `"strict":true`,
			`"tool_choice":{"type":"function","function":{"name":"look"}}`},
		Anthropic: {`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`,
			`{"source":{"data":"JVBERi0x","media_type":"application/pdf","type":"base64"},"type":"document"}`, `"tool_choice":{"name":"look","type":"tool"}`},
	} {
		t.Run(wire, func(t *testing.T) {
			srv := mockllm.New()
			defer srv.Close()
			m, err := New(Config{Provider: wire, Model: "m", BaseURL: srv.URL() + "/v1"})
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range m.Stream(context.Background(), req) {
				if err != nil {
					t.Fatal(err)
				}
			}
			body := string(srv.Requests()[0].Body)
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("the request lacks %s:\n%s", w, body)
				}
			}
			if strings.Contains(body, markerPrefix) || strings.Contains(body, `\u0000agentdock`) {
				t.Errorf("a marker reached the wire:\n%s", body)
			}
		})
	}
}
