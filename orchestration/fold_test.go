package orchestration

import (
	"regexp"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldRuneMatchesSimpleFold checks foldRune against the definition for
// every rune: two runes get the same representative exactly when
// unicode.SimpleFold puts them in one orbit. It holds when every rune maps
// into its own orbit and every member of an orbit maps to the same rune.
func TestFoldRuneMatchesSimpleFold(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		rep := foldRune(r)
		inOrbit := rep == r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if foldRune(f) != rep {
				t.Fatalf("%U and %U fold together but get %U and %U", r, f, rep, foldRune(f))
			}
			inOrbit = inOrbit || f == rep
		}
		if !inOrbit {
			t.Fatalf("%U maps to %U, outside its folding orbit", r, rep)
		}
		if r < foldTableSize*2 && r != utf8.RuneError && foldString(string(r)) != string(rep) {
			t.Fatalf("foldString(%q) = %q, want %q", string(r), foldString(string(r)), string(rep))
		}
	}
}

// TestMessageConditionsFoldAlike is the contract's folding rule: the three
// message conditions agree, under Unicode simple case folding. Every value
// starts its message, so that message_starts_with is tested too.
func TestMessageConditionsFoldAlike(t *testing.T) {
	tests := []struct {
		message, value string
		want           bool
	}{
		{"ΟΔΟΣ", "οδος", true}, // final sigma ς folds with Σ and σ
		{"οδός Ερμού", "ΟΔΌΣ", true},
		{"İSTANBUL", "istanbul", false}, // U+0130 has no simple folding to i
		{"istanbul", "İSTANBUL", false},
		{"ıstanbul", "ISTANBUL", false}, // nor does dotless ı (U+0131) fold to I
		{"İstanbul", "İSTANBUL", true},
		{"Straße", "STRASSE", false}, // ß → SS is full folding, not simple
		{"STRAẞE", "straße", true},   // ẞ (U+1E9E) and ß fold together
		{"100 K", "100 k", true},     // the Kelvin sign folds with K and k
		{"ſtop", "STOP", true},       // long s folds with s
		{"Été", "ÉTÉ", true},
		{"ascii text", "ASCII", true},
		{"no", "yes", false},
	}
	for _, tt := range tests {
		for _, typ := range []string{CondMessageContains, CondMessageStartsWith, CondMessageRegex} {
			value := tt.value
			if typ == CondMessageRegex {
				value = regexp.QuoteMeta(value) // the literal, matched with (?i)
			}
			message := tt.message
			if typ == CondMessageStartsWith {
				// The value starts the message, after spaces that are trimmed.
				message = "  " + message
			} else {
				message = "« " + message + " »"
			}
			e := MustNew(&Spec{Steps: []Step{
				{Name: "Hit", Conditions: []Condition{{Type: typ, Value: value}}},
				{Name: "Miss", IsDefault: true},
			}}, Config{Tools: []string{"a"}})
			s, _ := e.Apply(State{}, UserMessage(message))
			if got := s.ActiveStep == "Hit"; got != tt.want {
				t.Errorf("%s %q on %q: passes = %v, want %v", typ, value, message, got, tt.want)
			}
		}
	}
}

func TestFoldStringKeepsFoldedText(t *testing.T) {
	s := "already folded text"
	if got := foldString(s); got != s {
		t.Fatalf("foldString(%q) = %q", s, got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = foldString(s) }); n != 0 {
		t.Errorf("folding lower-case ASCII allocates %v times, want 0", n)
	}
}
