package orchestration

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Case-insensitive message conditions compare text under Unicode simple case
// folding, the relation RE2's (?i) and strings.EqualFold use, so that
// message_contains, message_starts_with and message_regex agree: "ΟΔΟΣ"
// contains "οδος" (Σ, σ and ς fold together), and "İSTANBUL" does not contain
// "istanbul" (U+0130 has no simple folding to "i"; lower-casing would map it
// to "i" and disagree with the regex).
//
// Simple folding is a rune-to-rune relation, so mapping every rune to one
// representative of its folding orbit turns "contains, ignoring case" into a
// plain substring test on two folded strings: the pattern is folded once at
// compile time and the message once per evaluation.

// foldRune returns the representative of r's simple case-folding orbit.
// Lower-casing lands every rune on a member of its own orbit, and on the
// same member for the whole orbit, except for the runes below: variant
// forms that are their own lower case (ς, ϑ, ſ, ...; they go where their
// orbit's capital lower-cases to) and U+0130 İ and U+0131 ı, which fold only
// to themselves but case-map to "i". One table lookup per rune, as
// strings.ToLower; TestFoldRuneMatchesSimpleFold checks the whole mapping
// against unicode.SimpleFold for every rune, so a Unicode update that adds
// a variant form fails there rather than silently here.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch r {
	case 0x130, 0x131: // İ, ı
		return r
	case 0xb5: // µ
		return 0x3bc
	case 0x17f: // ſ
		return 's'
	case 0x345, 0x1fbe: // combining ypogegrammeni, prosgegrammeni
		return 0x3b9
	case 0x3c2: // ς
		return 0x3c3
	case 0x3d0: // ϐ
		return 0x3b2
	case 0x3d1: // ϑ
		return 0x3b8
	case 0x3d5: // ϕ
		return 0x3c6
	case 0x3d6: // ϖ
		return 0x3c0
	case 0x3f0: // ϰ
		return 0x3ba
	case 0x3f1: // ϱ
		return 0x3c1
	case 0x3f5: // ϵ
		return 0x3b5
	case 0x1c80: // Cyrillic small letter rounded ve
		return 0x432
	case 0x1c81: // long-legged de
		return 0x434
	case 0x1c82: // narrow o
		return 0x43e
	case 0x1c83: // wide es
		return 0x441
	case 0x1c84, 0x1c85: // tall te, three-legged te
		return 0x442
	case 0x1c86: // tall hard sign
		return 0x44a
	case 0x1c87: // tall yat
		return 0x463
	case 0x1c88: // unblended uk
		return 0xa64b
	case 0x1e9b: // ẛ
		return 0x1e61
	}
	return unicode.ToLower(r)
}

// foldString maps every rune of s to its orbit's representative. It returns
// s itself, without allocating, when nothing changes (lower-case ASCII, the
// common message), and lower-cases other ASCII text in one pass and one
// allocation, as strings.ToLower does.
func foldString(s string) string {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldUnicode(s)
		}
		if 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return foldUnicode(s)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// foldTableSize covers Latin-1, Latin Extended, IPA, Greek and Cyrillic,
// where the non-ASCII letters of most messages are: their representatives
// come from a table instead of the case tables' binary search, which makes
// folding such text about as cheap as ASCII.
const foldTableSize = 0x530

var foldTable = sync.OnceValue(func() *[foldTableSize]rune {
	var t [foldTableSize]rune
	for r := range t {
		t[r] = foldRune(rune(r))
	}
	return &t
})

func foldUnicode(s string) string {
	table := foldTable()
	fold := func(r rune) rune {
		if r < foldTableSize {
			return table[r]
		}
		return foldRune(r)
	}
	// Allocate only once a rune changes.
	for i, r := range s {
		f := fold(r)
		if f == r && r != utf8.RuneError {
			continue
		}
		var b strings.Builder
		b.Grow(len(s) + utf8.UTFMax)
		b.WriteString(s[:i])
		for _, r := range s[i:] {
			b.WriteRune(fold(r))
		}
		return b.String()
	}
	return s
}
