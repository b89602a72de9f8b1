package chat

import "testing"

func TestUsageAdd(t *testing.T) {
	tests := []struct{ a, b, want Usage }{
		{Usage{}, Usage{}, Usage{}},
		{Usage{Prompt: 10, Completion: 5, Total: 15}, Usage{Prompt: 1, Completion: 1, Total: 2}, Usage{Prompt: 11, Completion: 6, Total: 17}},
		// A provider that reports no total: it is taken as prompt+completion.
		{Usage{Prompt: 10, Completion: 5}, Usage{Prompt: 1, Completion: 2}, Usage{Prompt: 11, Completion: 7, Total: 18}},
		{Usage{Prompt: 10, Completion: 5, Total: 20}, Usage{Prompt: 1, Completion: 2}, Usage{Prompt: 11, Completion: 7, Total: 23}},
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
