package chat

import (
	"encoding/json"
	"testing"
)

func TestUsageAdd(t *testing.T) {
	tests := []struct{ a, b, want Usage }{
		{Usage{}, Usage{}, Usage{}},
		{Usage{Prompt: 10, Completion: 5, Total: 15}, Usage{Prompt: 1, Completion: 1, Total: 2}, Usage{Prompt: 11, Completion: 6, Total: 17}},
		// A provider that reports no total: it is taken as prompt+completion.
		{Usage{Prompt: 10, Completion: 5}, Usage{Prompt: 1, Completion: 2}, Usage{Prompt: 11, Completion: 7, Total: 18}},
		{Usage{Prompt: 10, Completion: 5, Total: 20}, Usage{Prompt: 1, Completion: 2}, Usage{Prompt: 11, Completion: 7, Total: 23}},
		// Cached input is part of the prompt; both cache counts add up.
		{Usage{Prompt: 100, Completion: 5, CacheRead: 80}, Usage{Prompt: 120, Completion: 5, CacheRead: 96, CacheWrite: 24}, Usage{Prompt: 220, Completion: 10, Total: 230, CacheRead: 176, CacheWrite: 24}},
	}
	for _, tt := range tests {
		if got := tt.a.Add(tt.b); got != tt.want {
			t.Errorf("%+v.Add(%+v) = %+v, want %+v", tt.a, tt.b, got, tt.want)
		}
	}
	if !(Usage{}).IsZero() || (Usage{Total: 1}).IsZero() {
		t.Error("IsZero")
	}
}

// TestUsageStoredBefore: a session's usage stored before cache counts
// existed loads with them zero, and a usage without them stores as before.
func TestUsageStoredBefore(t *testing.T) {
	var u Usage
	if err := json.Unmarshal([]byte(`{"prompt":10,"completion":5,"total":15}`), &u); err != nil {
		t.Fatal(err)
	}
	if want := (Usage{Prompt: 10, Completion: 5, Total: 15}); u != want {
		t.Fatalf("old usage = %+v, want %+v", u, want)
	}
	b, _ := json.Marshal(u)
	if string(b) != `{"prompt":10,"completion":5,"total":15}` {
		t.Fatalf("usage without cache counts marshals as %s", b)
	}
	b, _ = json.Marshal(Usage{Prompt: 10, CacheRead: 8, CacheWrite: 2})
	if string(b) != `{"prompt":10,"completion":0,"total":0,"cacheRead":8,"cacheWrite":2}` {
		t.Fatalf("usage with cache counts marshals as %s", b)
	}
}

func TestNotRunContent(t *testing.T) {
	for content, want := range map[string]bool{
		"Refused: tool \"x\" is not available":       true,
		"Not run: the user declined this call of x.": true,
		"refused: lower case is a tool's own text":   false,
		"## Brainstorm: ideas":                       false,
		"":                                           false,
		" Not run: not at the start":                 false,
	} {
		if got := NotRunContent(content); got != want {
			t.Errorf("NotRunContent(%q) = %v, want %v", content, got, want)
		}
	}
}

// TestAnswerText: a restart drops the text of the steps it shows again
// (those from Restart.Step on), and the text that follows takes its
// place; text before the turn is kept.
func TestAnswerText(t *testing.T) {
	for _, tc := range []struct {
		name string
		evs  []Event
		want string
	}{
		{"no restart", []Event{{Kind: KindStepStart}, {Kind: KindTextDelta, Text: "a"}, {Kind: KindStepStart}, {Kind: KindTextDelta, Text: "b"}}, "before ab"},
		{"the model call under way", []Event{
			{Kind: KindStepStart}, {Kind: KindTextDelta, Text: "a"}, {Kind: KindStepStart}, {Kind: KindTextDelta, Text: "b-partial"},
			{Kind: KindRestart, Restart: &Restart{Step: 2}}, {Kind: KindStepStart}, {Kind: KindTextDelta, Text: "b-whole"},
		}, "before ab-whole"},
		{"a step the stream never began", []Event{
			{Kind: KindStepStart}, {Kind: KindTextDelta, Text: "a"},
			{Kind: KindRestart, Restart: &Restart{Step: 2}}, {Kind: KindStepStart}, {Kind: KindTextDelta, Text: "b"},
		}, "before ab"},
		{"the first step", []Event{
			{Kind: KindStepStart}, {Kind: KindTextDelta, Text: "partial"},
			{Kind: KindRestart, Restart: &Restart{Step: 1}}, {Kind: KindStepStart}, {Kind: KindTextDelta, Text: "whole"},
		}, "before whole"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a AnswerText
			a.WriteString("before ")
			for _, ev := range tc.evs {
				a.Add(ev)
			}
			if a.String() != tc.want || a.Len() != len(tc.want) {
				t.Fatalf("text %q, want %q", a.String(), tc.want)
			}
		})
	}
}
