package guardrail

import (
	"bytes"
	"net/netip"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The kinds of personal data a pii check finds.
const (
	PIIEmail      = "email"
	PIIPhone      = "phone"
	PIICreditCard = "credit_card"
	PIIIBAN       = "iban"
	PIIIPAddress  = "ip_address"
	PIIUSSSN      = "us_ssn"
)

// PIIKinds lists every kind a pii check knows, in the order its finders
// run.
var PIIKinds = []string{PIIEmail, PIIPhone, PIICreditCard, PIIIBAN, PIIIPAddress, PIIUSSSN}

// piiFinders are the finders of each kind, compiled once.
var piiFinders = sync.OnceValue(func() map[string][]*finder {
	// An address is a whole token: a local part of at most 64
	// characters, then the domain's labels, every one, up to 255.
	email := newFinder(PIIEmail, `[\p{L}\p{N}._%+\-]{1,64}@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)+`, validEmail)
	email.max, email.token = 64*utf8.UTFMax+1+255*utf8.UTFMax, true
	// The @ comes within 64 characters of an address's start.
	email.need, email.needWithin = []byte("@"), 64*4+1
	intl := newFinder(PIIPhone, `\+[1-9][0-9 .\-()]{6,24}[0-9]`, validPhone(8, 15))
	intl.need = []byte("+")
	national := newFinder(PIIPhone, `\(?[0-9]{2,4}\)?[ .\-][0-9]{3,4}[ .\-][0-9]{3,4}`, validPhone(9, 11))
	card := newFinder(PIICreditCard, `[2-6](?:[ \-]?[0-9]){12,18}`, validCard)
	iban := newFinder(PIIIBAN, `[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){10,30}`, validIBAN)
	ipv4 := newFinder(PIIIPAddress, `[0-9]{1,3}(?:\.[0-9]{1,3}){3}`, validIPv4)
	ipv4.need = []byte(".")
	ipv6 := newFinder(PIIIPAddress, `[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}`, validIPv6)
	ipv6.need = []byte(":")
	ssn := newFinder(PIIUSSSN, `[0-9]{3}-[0-9]{2}-[0-9]{4}`, validSSN)
	ssn.need = []byte("-")
	return map[string][]*finder{
		PIIEmail:      {email},
		PIIPhone:      {intl, national},
		PIICreditCard: {card},
		PIIIBAN:       {iban},
		PIIIPAddress:  {ipv4, ipv6},
		PIIUSSSN:      {ssn},
	}
})

// isWordRune: a letter, a digit or a mark; a match of a kind that is a
// whole token must not touch one.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// touchesNumber: a rune that makes a number part of a longer token: an
// ASCII letter or any digit. A letter of another script does not (Japanese
// writes a number between two letters).
func touchesNumber(r rune) bool {
	return r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || unicode.IsDigit(r)
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

func isAlnum(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || isDigit(r) }

// boundaries checks that the runes around b[s:e] are not of the token
// (touches): the candidate is a whole token. It waits for the next rune.
func boundaries(b []byte, s, e int, final bool, touches func(rune) bool) verdict {
	if r, ok := prevRune(b, s); ok && touches(r) {
		return reject
	}
	r, ok, w := nextRune(b, e, final)
	switch {
	case w:
		return wait
	case ok && touches(r):
		return reject
	}
	return accept
}

// validEmail accepts an address whose local part does not begin with a
// dot and whose domain has labels of 1 to 63 characters, none beginning
// or ending with a dash, the last of two or more letters.
func validEmail(b []byte, s, e int, final bool) (int, verdict) {
	if b[s] == '.' {
		return e, reject
	}
	at := bytes.IndexByte(b[s:e], '@')
	labels := bytes.Split(b[s+at+1:e], []byte("."))
	for i, l := range labels {
		if len(l) == 0 || utf8.RuneCount(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return e, reject
		}
		if i == len(labels)-1 {
			if utf8.RuneCount(l) < 2 {
				return e, reject
			}
			for _, r := range string(l) {
				if !unicode.IsLetter(r) {
					return e, reject
				}
			}
		}
	}
	r, ok, w := nextRune(b, e, final)
	switch {
	case w:
		return e, wait
	case ok && r == '.':
		// A label may follow the dot, in text still to come.
		if _, _, w := nextRune(b, e+1, final); w {
			return e, wait
		}
	case ok && (r == '@' || r == '_' || r == '%' || r == '+'):
		return e, reject
	}
	return e, accept
}

// validPhone accepts a phone number of lo to hi digits: single spaces,
// dots or dashes between digit groups, at most one pair of parentheses
// around digits; a longer run of groups is cut at the last group that
// fits.
func validPhone(lo, hi int) validator {
	isSep := func(c byte) bool { return c == ' ' || c == '.' || c == '-' }
	return func(b []byte, s, e int, final bool) (int, verdict) {
		if r, ok := prevRune(b, s); ok && (touchesNumber(r) || r == '+' || r == '.' || r == '-' || r == '(') {
			return e, reject
		}
		digits, best := 0, -1
		open, closed := false, false
	scan:
		for i := s; i < e; i++ {
			c := b[i]
			switch {
			case isDigit(rune(c)):
				digits++
				if digits > hi {
					break scan
				}
				if (i+1 == e || !isDigit(rune(b[i+1]))) && digits >= lo && open == closed {
					best = i + 1
				}
			case c == '+':
				if i != s {
					return e, reject
				}
			case c == '(':
				if open || i+1 >= e || !isDigit(rune(b[i+1])) {
					return e, reject
				}
				open = true
			case c == ')':
				if !open || closed || !isDigit(rune(b[i-1])) {
					return e, reject
				}
				closed = true
			default:
				if i > s && isSep(b[i-1]) {
					return e, reject
				}
			}
		}
		if best < 0 {
			return e, reject
		}
		if best == e {
			r, ok, w := nextRune(b, e, final)
			switch {
			case w:
				return e, wait
			case ok && touchesNumber(r):
				return e, reject
			case ok && (r == '-' || r == '.'):
				r2, ok2, w2 := nextRune(b, e+1, final)
				if w2 {
					return e, wait
				}
				if ok2 && isDigit(r2) {
					return e, reject
				}
			}
		}
		return best, accept
	}
}

// validCard accepts 13 to 19 digits, separated by single spaces or dashes,
// that pass the Luhn check: the longest run of them from s that does, cut
// where a digit group ends.
func validCard(b []byte, s, e int, final bool) (int, verdict) {
	if r, ok := prevRune(b, s); ok && touchesNumber(r) {
		return e, reject
	}
	var digits [19]byte
	var ends [19]int
	n := 0
	for i := s; i < e && n < len(digits); i++ {
		if isDigit(rune(b[i])) {
			digits[n], ends[n] = b[i]-'0', i+1
			n++
		}
	}
	for k := n; k >= 13; k-- {
		end := ends[k-1]
		if end < e && isDigit(rune(b[end])) {
			continue // not the end of a digit group
		}
		if end == e {
			r, ok, w := nextRune(b, e, final)
			if w {
				return e, wait
			}
			if ok && touchesNumber(r) {
				continue
			}
		}
		if luhn(digits[:k]) {
			return end, accept
		}
	}
	return e, reject
}

// luhn reports whether digits pass the Luhn check.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i])
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// ibanLengths are the lengths of the IBANs of the countries that issue
// them (the SWIFT IBAN registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
	"JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25,
	"MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18,
	"NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33,
	"SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// validIBAN accepts an IBAN of its country's length (written with single
// spaces or none) whose check digits pass ISO 7064 mod 97-10.
func validIBAN(b []byte, s, e int, final bool) (int, verdict) {
	if r, ok := prevRune(b, s); ok && touchesNumber(r) {
		return e, reject
	}
	length, ok := ibanLengths[string(b[s:s+2])]
	if !ok {
		return e, reject
	}
	var chars []byte
	end := s
	for i := s; i < e && len(chars) < length; i++ {
		if b[i] != ' ' {
			chars = append(chars, b[i])
			end = i + 1
		}
	}
	if len(chars) < length {
		return e, reject
	}
	r, ok, w := nextRune(b, end, final)
	switch {
	case w:
		return e, wait
	case ok && touchesNumber(r):
		return e, reject
	}
	// Move the first four characters to the end; letters count 10 to 35.
	rem := 0
	for _, c := range append(chars[4:], chars[:4]...) {
		switch {
		case isDigit(rune(c)):
			rem = (rem*10 + int(c-'0')) % 97
		default:
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	if rem != 1 {
		return e, reject
	}
	return end, accept
}

func validIPv4(b []byte, s, e int, final bool) (int, verdict) {
	if r, ok := prevRune(b, s); ok && (touchesNumber(r) || r == '.') {
		return e, reject
	}
	if r, ok, w := nextRune(b, e, final); w {
		return e, wait
	} else if ok && touchesNumber(r) {
		return e, reject
	} else if ok && r == '.' {
		// "1.2.3.4.5" is no address; "at 1.2.3.4." is.
		r2, ok2, w2 := nextRune(b, e+1, final)
		if w2 {
			return e, wait
		}
		if ok2 && isDigit(r2) {
			return e, reject
		}
	}
	octet, digits := 0, 0
	for i := s; i <= e; i++ {
		if i == e || b[i] == '.' {
			if digits == 0 || octet > 255 || digits > 1 && b[i-digits] == '0' {
				return e, reject
			}
			octet, digits = 0, 0
			continue
		}
		octet = octet*10 + int(b[i]-'0')
		digits++
	}
	return e, accept
}

func validIPv6(b []byte, s, e int, final bool) (int, verdict) {
	token := func(r rune) bool { return isWordRune(r) || r == ':' || r == '.' }
	if v := boundaries(b, s, e, final, token); v != accept {
		return e, v
	}
	hex := 0
	for _, c := range b[s:e] {
		if c != ':' {
			hex++
		}
	}
	if hex < 3 {
		return e, reject
	}
	a, err := netip.ParseAddr(string(b[s:e]))
	if err != nil || !a.Is6() {
		return e, reject
	}
	return e, accept
}

func validSSN(b []byte, s, e int, final bool) (int, verdict) {
	if v := boundaries(b, s, e, final, func(r rune) bool { return touchesNumber(r) || r == '-' }); v != accept {
		return e, v
	}
	area := string(b[s : s+3])
	if area == "000" || area == "666" || area[0] == '9' || string(b[s+4:s+6]) == "00" || string(b[s+7:s+11]) == "0000" {
		return e, reject
	}
	return e, accept
}
