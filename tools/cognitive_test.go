package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestCognitiveTools(t *testing.T) {
	r, err := Builtin(BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, heading, title, body string
		// agentDock is the call as AgentDock's templates and prompts make it.
		agentDock string
	}{
		{"think", "Thinking", "topic", "reasoning", `{"adTopic":"Rust or Go","reasoning":"**Problem** ..."}`},
		{"reflect", "Reflection", "topic", "reflection", `{"adTopic":"Rust or Go","reflection":"**Problem** ..."}`},
		{"compare", "Comparison", "topic", "comparison", `{"adTopic":"Rust or Go","comparison":"**Problem** ..."}`},
		{"critique", "Critique", "subject", "analysis", `{"subject":"Rust or Go","analysis":"**Problem** ..."}`},
		{"debate", "Debate", "topic", "perspectives", `{"topic":"Rust or Go","perspectives":"**Problem** ..."}`},
		{"brainstorm", "Brainstorm", "challenge", "ideas", `{"challenge":"Rust or Go","ideas":"**Problem** ..."}`},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			wantContent := "## " + tt.heading + ": Rust or Go\n\n**Problem** ..."
			wantType := tt.tool + "_result"

			args, _ := json.Marshal(map[string]string{tt.title: "  Rust or Go ", tt.body: "\n**Problem** ...\n"})
			res := r.Execute(ctx, call(tt.tool, string(args)))
			if res.IsError || res.Content != wantContent || res.Type != wantType {
				t.Fatalf("valid call: %+v", res)
			}

			res = r.Execute(ctx, call(tt.tool, tt.agentDock))
			if res.IsError || res.Content != wantContent || res.Type != wantType {
				t.Fatalf("AgentDock call %s: %+v", tt.agentDock, res)
			}

			for _, missing := range []string{tt.title, tt.body} {
				only := map[string]string{tt.title: "x", tt.body: "y"}
				delete(only, missing)
				args, _ := json.Marshal(only)
				res := r.Execute(ctx, call(tt.tool, string(args)))
				want := `invalid arguments for "` + tt.tool + `": missing required field "` + missing + `"`
				if !res.IsError || res.Type != ErrorType || res.Content != want {
					t.Errorf("missing %s: %+v, want %q", missing, res, want)
				}
			}

			args, _ = json.Marshal(map[string]string{tt.title: "x", tt.body: " \n\t "})
			res = r.Execute(ctx, call(tt.tool, string(args)))
			if !res.IsError || !strings.Contains(res.Content, `field "`+tt.body+`" must not be blank`) {
				t.Errorf("blank body: %+v", res)
			}
		})
	}
}

func TestCognitiveHeadingStaysOnOneLine(t *testing.T) {
	r, _ := Builtin(BuiltinConfig{})
	res := r.Execute(context.Background(), call("critique", `{"subject":"line one\n# injected heading","analysis":"ok"}`))
	if res.IsError || !strings.HasPrefix(res.Content, "## Critique: line one # injected heading\n\nok") {
		t.Fatalf("%+v", res)
	}
}

func TestReflectConfidence(t *testing.T) {
	r, _ := Builtin(BuiltinConfig{})
	ctx := context.Background()
	res := r.Execute(ctx, call("reflect", `{"topic":"launch","reflection":"went well","confidence":0.75}`))
	if res.IsError || res.Content != "## Reflection: launch\n\nwent well\n\n*Confidence: 75%*" {
		t.Fatalf("%+v", res)
	}
	res = r.Execute(ctx, call("reflect", `{"topic":"launch","reflection":"went well","confidence":1.5}`))
	if !res.IsError || !strings.Contains(res.Content, `field "confidence" must be at most 1`) {
		t.Fatalf("%+v", res)
	}
}

func TestCognitiveTooLong(t *testing.T) {
	r, _ := Builtin(BuiltinConfig{})
	args, _ := json.Marshal(map[string]string{"topic": strings.Repeat("t", maxTitleLen+1), "reasoning": "r"})
	res := r.Execute(context.Background(), call("think", string(args)))
	if !res.IsError || !strings.Contains(res.Content, `field "topic" is too long: 501 characters, maximum 500`) {
		t.Fatalf("%+v", res)
	}
}

func TestCognitiveSpecs(t *testing.T) {
	sections := map[string][]string{
		"think":      {"Problem", "Facts and assumptions", "Reasoning", "Uncertainties", "Conclusion"},
		"reflect":    {"Context", "What happened", "What worked", "What fell short", "Lessons", "Next time"},
		"critique":   {"Understanding", "Strengths", "Issues", "Suggestions", "Overall assessment"},
		"debate":     {"The question", "Position", "Common ground", "Judgement"},
		"brainstorm": {"Reframing", "idea groups", "Most promising", "Next steps"},
		"compare":    {"Options", "Criteria", "Side by side", "Trade-offs", "Recommendation"},
	}
	for _, tool := range CognitiveTools() {
		spec := tool.Spec()
		for _, s := range sections[spec.Name] {
			if !strings.Contains(spec.Description, "**"+s) {
				t.Errorf("%s: description does not ask for section %q", spec.Name, s)
			}
		}
		var schema struct {
			Required             []string                  `json:"required"`
			Properties           map[string]map[string]any `json:"properties"`
			AdditionalProperties bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if len(schema.Required) != 2 || schema.AdditionalProperties {
			t.Errorf("%s: schema %s", spec.Name, spec.Parameters)
		}
		for _, req := range schema.Required {
			if d, _ := schema.Properties[req]["description"].(string); d == "" {
				t.Errorf("%s: field %s has no description", spec.Name, req)
			}
		}
		// The model is told our names, never the aliases.
		if strings.Contains(string(spec.Parameters), agentDockTopic) || strings.Contains(spec.Description, agentDockTopic) {
			t.Errorf("%s: spec mentions %s", spec.Name, agentDockTopic)
		}
	}
}

func TestBuiltinNames(t *testing.T) {
	r, err := Builtin(BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"brainstorm", "compare", "critique", "debate", "reflect", "search", "think"}
	if got := BuiltinNames(); !slices.Equal(got, want) {
		t.Fatalf("BuiltinNames %v", got)
	}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Fatalf("registry names %v", got)
	}
	BuiltinNames()[0] = "mutated"
	if BuiltinNames()[0] != "brainstorm" {
		t.Fatal("BuiltinNames shares its slice")
	}
}
