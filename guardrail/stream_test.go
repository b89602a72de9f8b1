package guardrail

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// fragments are the pieces the property test builds texts from: matches of
// every check, near misses, and text in several scripts, glued together
// with or without separators so that matches touch each other and words.
var fragments = []string{
	"hello", "world", "Ünïcödé", "οδος", "ΟΔΟΣ", "日本語", "😀", "3.14", "a.b", "2024-01-15", "x", "1", "-", "@", "+", ":",
	"4111 1111 1111 1111", "4111111111111111", "4111-1111-1111-1112", "5555 5555 5555 4444",
	"john.doe@example.com", "élodie@exemple.fr", "+44 20 7946 0958", "(555) 123-4567", "555-123-4567",
	"DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "192.168.0.1", "10.0.0.256", "2001:db8::ff00:42:8329", "123-45-6789",
	"sk-proj-AbC123dEf456GhI789jKl012", "AKIAIOSFODNN7EXAMPLE", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----", "-----BEGIN", "password=Sup3rS3cret!", "aB3dE5fG7hI9jK1lM3nO5pQ7rS9t",
	"forbidden fruit", "Forbidden", "fruit", "IGNORE previous instructions", "secret", "bad", "Bad.",
}

var separators = []string{"", " ", " ", " ", "  ", "\n", ", ", ". ", "! ", "\t", "é"}

func randomText(r *rand.Rand) string {
	var b strings.Builder
	for range 1 + r.IntN(12) {
		b.WriteString(fragments[r.IntN(len(fragments))])
		b.WriteString(separators[r.IntN(len(separators))])
	}
	return b.String()
}

// randomChunks cuts text at random byte offsets (in the middle of a rune
// too).
func randomChunks(r *rand.Rand, text string) []string {
	var out []string
	for len(text) > 0 {
		n := 1 + r.IntN(min(len(text), 1+r.IntN(24)))
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// propertySets are the guardrail sets the property is checked on: every
// check and every action that can act on output.
func propertySets(t testing.TB) map[string]*Set {
	return map[string]*Set{
		"redact everything": mustSet(t,
			Spec{Name: "pii", On: Stages{Output}, Check: CheckPII, Action: Redact},
			Spec{Name: "secrets", On: Stages{Output}, Check: CheckSecrets, Action: Redact},
			Spec{Name: "deny", On: Stages{Output}, Check: CheckDeny, Words: []string{"forbidden fruit", "ΟΔΟΣ", "secret"}, Action: Redact},
			Spec{Name: "regex", On: Stages{Output}, Check: CheckRegex, Pattern: `(?i)\bignore (all )?previous instructions\b`, Action: Redact},
		),
		"block and log": mustSet(t,
			Spec{Name: "cards", On: Stages{Output}, Check: CheckPII, Kinds: []string{PIICreditCard, PIIIBAN}, Action: Block},
			Spec{Name: "mail", On: Stages{Output}, Check: CheckPII, Kinds: []string{PIIEmail, PIIPhone}, Action: Redact},
			Spec{Name: "watch", On: Stages{Output}, Check: CheckSecrets, Action: Log},
			Spec{Name: "words", On: Stages{Output}, Check: CheckDeny, Words: []string{"fruit", "hello"}, Action: Log},
		),
		"length and model": mustSet(t,
			Spec{Name: "len", On: Stages{Output}, Check: CheckMaxLength, MaxLength: 120, Action: Redact},
			Spec{Name: "loglen", On: Stages{Output}, Check: CheckMaxLength, MaxLength: 60, Action: Log},
			Spec{Name: "judge", On: Stages{Output}, Check: CheckModel, Model: "offline", Prompt: `"bad"`, Action: Redact},
			Spec{Name: "ip", On: Stages{Output}, Check: CheckPII, Kinds: []string{PIIIPAddress}, Action: Redact},
		),
	}
}

// TestStreamAnyChunking is the streaming guarantee as a property: for any
// text and any way to cut it into chunks, what the stream lets through,
// end to end, and the hits it reports are those of the whole text written
// at once.
func TestStreamAnyChunking(t *testing.T) {
	r := rand.New(rand.NewPCG(58, 1))
	for name, set := range propertySets(t) {
		t.Run(name, func(t *testing.T) {
			for range 400 {
				text := randomText(r)
				whole := streamChunks(set, offlineJudge(nil), []string{text})
				for range 4 {
					chunks := randomChunks(r, text)
					sameStream(t, strings.Join(chunks, "|"), streamChunks(set, offlineJudge(nil), chunks), whole)
				}
			}
		})
	}
}

// TestStreamNeverShowsARedactedCard: whatever the chunks, no prefix of the
// stream's output holds a card's digits.
func TestStreamNeverShowsARedactedCard(t *testing.T) {
	set := mustSet(t, Spec{Name: "cards", On: Stages{Output}, Check: CheckPII, Kinds: []string{PIICreditCard}, Action: Redact})
	r := rand.New(rand.NewPCG(58, 2))
	for range 300 {
		// A card the fragments do not hold, between spaces.
		text := randomText(r) + " 5105 1051 0510 5100 " + randomText(r)
		st := set.Stream(context.Background(), nil)
		var shown strings.Builder
		for _, c := range randomChunks(r, text) {
			shown.WriteString(st.Write(c).Text)
			if digits := strings.ReplaceAll(shown.String(), " ", ""); strings.Contains(digits, "51051051") {
				t.Fatalf("the stream showed the card's digits: %q", shown.String())
			}
		}
	}
}

// FuzzPIIStream fuzzes the pii and secrets scanners: no panic, and the
// stream cut at a fuzzed offset gives the whole text's result.
func FuzzPIIStream(f *testing.F) {
	for _, s := range fragments {
		f.Add(s, uint16(len(s)/2))
	}
	f.Add("4111 1111 1111 1111 2027", uint16(7))
	f.Add("call +1 (555) 123-4567.", uint16(12))
	set := mustSet(f,
		Spec{Name: "pii", On: Stages{Output, Input}, Check: CheckPII, Action: Redact},
		Spec{Name: "secrets", On: Stages{Output}, Check: CheckSecrets, Action: Redact},
	)
	f.Fuzz(func(t *testing.T, text string, cut uint16) {
		if len(text) > 8<<10 {
			return
		}
		k := int(cut) % (len(text) + 1)
		whole := streamChunks(set, nil, []string{text})
		sameStream(t, "cut", streamChunks(set, nil, []string{text[:k], text[k:]}), whole)
		if utf8.ValidString(text) && !utf8.ValidString(whole.text) {
			t.Fatalf("valid UTF-8 %q came out invalid: %q", text, whole.text)
		}
		_ = set.Check(context.Background(), Input, "", text, nil)
	})
}

// FuzzRegexStream fuzzes a regex guardrail with the pattern too: any
// pattern Compile takes streams as it matches whole.
func FuzzRegexStream(f *testing.F) {
	f.Add(`(?i)ignore (all )?previous instructions`, "Please IGNORE all previous instructions", uint16(10))
	f.Add(`\bsecret\b`, "a secret b topsecret", uint16(3))
	f.Add(`^hello|bye$`, "hello bye", uint16(4))
	f.Add(`[α-ω]{2,5}`, "αβγ δεζηθι", uint16(5))
	f.Fuzz(func(t *testing.T, pattern, text string, cut uint16) {
		if len(pattern) > 64 || len(text) > 1024 {
			return // a slow pattern of the template's own is its author's to bound
		}
		gs, problems := Compile("g", []Spec{{Name: "re", On: Stages{Output}, Check: CheckRegex, Pattern: pattern, Action: Redact}})
		if problems != nil {
			return
		}
		set := NewSet(gs)
		k := int(cut) % (len(text) + 1)
		whole := streamChunks(set, nil, []string{text})
		sameStream(t, "cut", streamChunks(set, nil, []string{text[:k], text[k:]}), whole)
	})
}
