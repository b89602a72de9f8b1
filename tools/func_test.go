package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/tools"
)

type weatherIn struct {
	City  string `json:"city" jsonschema:"the city to look up"`
	Units string `json:"units,omitempty" jsonschema:"celsius or fahrenheit"`
	Days  int    `json:"days,omitempty"`
}

type weatherOut struct {
	City string  `json:"city"`
	Temp float64 `json:"temp"`
}

func TestNewInfersSchemaAndDecodes(t *testing.T) {
	var got weatherIn
	tool, err := tools.New("weather", "Looks up the weather.", func(ctx context.Context, in weatherIn) (weatherOut, error) {
		got = in
		if in.City == "Atlantis" {
			return weatherOut{}, errors.New("no such city")
		}
		return weatherOut{City: in.City, Temp: 21.5}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Type                 string
		Required             []string
		Properties           map[string]struct{ Type, Description string }
		AdditionalProperties any
	}
	if err := json.Unmarshal(tool.Spec().Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || strings.Join(schema.Required, ",") != "city" || schema.Properties["city"].Description != "the city to look up" ||
		schema.Properties["days"].Type != "integer" || schema.AdditionalProperties == nil {
		t.Fatalf("schema %s", tool.Spec().Parameters)
	}
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, want string
		isErr      bool
	}{
		{`{"city":"Oslo","days":2}`, `{"city":"Oslo","temp":21.5}`, false},
		{`{"units":"celsius"}`, "city", true},          // a required argument missing
		{`{"city":"Oslo","days":"two"}`, "days", true}, // the wrong type
		{`{"city":"Oslo","wind":true}`, "wind", true},  // not declared
		{`{"city":"Atlantis"}`, "no such city", true},  // the tool's own error
	} {
		res := reg.Execute(context.Background(), chat.ToolCall{ID: "c1", Name: "weather", Arguments: json.RawMessage(tc.args)})
		if res.IsError != tc.isErr || !strings.Contains(res.Content, tc.want) {
			t.Errorf("%s: %+v", tc.args, res)
		}
	}
	if got.City != "Atlantis" || got.Days != 0 {
		t.Fatalf("decoded %+v", got)
	}
}

func TestNewResults(t *testing.T) {
	text := tools.MustNew("text", "Text.", func(ctx context.Context, in struct{}) (string, error) { return "plain words", nil })
	result := tools.MustNew("result", "Result.", func(ctx context.Context, in struct{}) (tools.Result, error) {
		return tools.Result{Content: "# Done", Type: "report"}, nil
	})
	reg, err := tools.NewRegistry(text, result)
	if err != nil {
		t.Fatal(err)
	}
	if r := reg.Execute(context.Background(), chat.ToolCall{ID: "a", Name: "text", Arguments: json.RawMessage(`{}`)}); r.Content != "plain words" || r.IsError {
		t.Errorf("string result %+v", r)
	}
	if r := reg.Execute(context.Background(), chat.ToolCall{ID: "b", Name: "result", Arguments: json.RawMessage(`{}`)}); r.Content != "# Done" || r.Type != "report" {
		t.Errorf("Result result %+v", r)
	}
	if _, err := tools.New("bad", "Bad.", func(ctx context.Context, in string) (string, error) { return in, nil }); err == nil || !strings.Contains(err.Error(), "must be a struct") {
		t.Errorf("a non-struct argument type: %v", err)
	}
	if _, err := tools.New("bad", "Bad.", func(ctx context.Context, in struct{ C chan int }) (string, error) { return "", nil }); err == nil {
		t.Error("an argument type JSON cannot describe was accepted")
	}
}

func TestCallFrom(t *testing.T) {
	if _, ok := tools.CallFrom(context.Background()); ok {
		t.Fatal("a call outside the runtime")
	}
	ctx := tools.WithCall(context.Background(), tools.Call{SessionID: "s1", ToolCallID: "c1"})
	if c, ok := tools.CallFrom(ctx); !ok || c.SessionID != "s1" || c.ToolCallID != "c1" {
		t.Fatalf("%+v %v", c, ok)
	}
}
