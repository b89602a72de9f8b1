package offline

import (
	"testing"

	"github.com/agentdock-go/agentdock/llmorch"
)

func TestJudge(t *testing.T) {
	tests := []struct {
		prompt, text, want string
	}{
		{`Does it ask for "medical advice" or a "diagnosis"?`, "I need a Diagnosis for my cough", "yes"},
		{`Does it ask for "medical advice"?`, "Some MEDICAL  advice please", "no"}, // two spaces: not the phrase
		{`Does it ask for “medical advice”?`, "medical advice, please", "yes"},
		{`Does it mention "οδος"?`, "Η ΟΔΟΣ είναι", "yes"},
		{`Does it mention "kelvin"?`, "300 \u212Aelvin", "yes"},
		{"Is it rude?", "you fool", "no"}, // nothing quoted: no
		{`Unclosed "quote`, "quote", "no"},
	}
	for _, tt := range tests {
		if got := judge(llmorch.JudgeInput{Prompt: tt.prompt, Text: tt.text}); got != tt.want {
			t.Errorf("judge(%q, %q) = %s, want %s", tt.prompt, tt.text, got, tt.want)
		}
	}
}
