package offline

import (
	"strings"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/llmorch"
)

// judge answers a guardrail's model check: "yes" when the text holds one
// of the phrases the prompt quotes, ignoring case; "no" otherwise.
func judge(in llmorch.JudgeInput) string {
	for _, p := range quoted(in.Prompt) {
		if containsFold(in.Text, p) {
			return "yes"
		}
	}
	return "no"
}

// quoted returns the phrases s puts in double quotes, straight or curly.
func quoted(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, "\"“")
		if i < 0 {
			return out
		}
		s = s[i:]
		closing := "\""
		if strings.HasPrefix(s, "“") {
			closing = "”"
		}
		s = s[len(string([]rune(s)[:1])):]
		j := strings.Index(s, closing)
		if j < 0 {
			return out
		}
		if p := strings.TrimSpace(s[:j]); p != "" {
			out = append(out, p)
		}
		s = s[j+len(closing):]
	}
}

// containsFold reports whether s contains sub under Unicode simple case
// folding (strings.EqualFold's relation). A folded match may differ from
// sub in bytes (the Kelvin sign is three, k one), so runes are compared.
func containsFold(s, sub string) bool {
	for i := range s {
		if hasPrefixFold(s[i:], sub) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	for _, pr := range prefix {
		r, size := utf8.DecodeRuneInString(s)
		if size == 0 || !strings.EqualFold(string(r), string(pr)) {
			return false
		}
		s = s[size:]
	}
	return true
}
