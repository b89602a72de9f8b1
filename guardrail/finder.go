package guardrail

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"sort"
	"unicode"
	"unicode/utf8"
)

// A finder finds the matches of one kind in a text that may still grow:
// the candidates of a regular expression, each confirmed (and possibly
// shortened) by a validator.
//
// Its matches in a text are defined as Go's FindAll defines them, with the
// validator in the loop: from position p, take the leftmost candidate at
// or after p; if the validator accepts it, it is a match and the search
// goes on at its end, else the search goes on one rune after its start.
//
// A stream learns the text chunk by chunk. A candidate is decided, and
// the same as in the whole text, once no text still to come can change it:
// the text after it, as far as its longest possible match reaches and one
// rune more, has arrived, or a rune that no match can contain has (see
// settled). The stream holds back only the text from the first position
// that is not decided, so that a match is never half shown.
type finder struct {
	kind string
	re   *regexp.Regexp
	// ctxRe is re after one rune of context, for a pattern whose
	// assertions (\b, \B, ^) read the rune before a match: Go's regexp
	// cannot start a search in the middle of a text and see what precedes.
	ctxRe *regexp.Regexp
	// max is the longest match in bytes; 0: unbounded (a whole text only).
	// A longer candidate is rejected: a pattern may say [a-z]+ and leave
	// the bound to max, which keeps its program small (Go's regexp runs a
	// bounded repeat as that many copies of its pattern).
	max int
	// token: a match is a whole run of runes of in; one that starts
	// after such a rune is rejected, and the search skips the rest of a
	// run, which no match can start in.
	token bool
	// in holds every rune a match can contain; nil: any rune.
	in *charset
	// starts, when set, are the literals one of which every match begins
	// with (fold: ignoring case): a match can only start where one of
	// them does.
	starts *startSet
	// need, when set, is in every match: a text without it has none; and
	// when needWithin is set, need ends within that many bytes of a
	// match's start.
	need       []byte
	needWithin int
	// valid confirms a candidate; nil accepts every candidate.
	valid validator
}

// A validator confirms the candidate b[s:e] of a finder, and may shorten
// it: it returns the match's end and its verdict. final says that b is the
// whole text; otherwise a validator that needs to read past the end of b
// answers wait. It may read one rune before s.
type validator func(b []byte, s, e int, final bool) (end int, v verdict)

type verdict uint8

const (
	accept verdict = iota
	reject
	wait
)

// lookahead is what a decided candidate needs after its longest possible
// match: one rune, for \b, $ and validators that read the next rune.
const lookahead = utf8.UTFMax

// maxWindow bounds the longest possible match of a pattern on output: the
// stream holds back up to that much text.
const maxWindow = 8 << 10

// regexInfo is what the analysis of a pattern found.
type regexInfo struct {
	max       int  // longest match in bytes
	unbounded bool // a match can be of any length
	min       int  // shortest match in bytes
	in        *charset
	context   bool // an assertion reads the rune before a match
}

// analyze walks a parsed pattern.
func analyze(re *syntax.Regexp) regexInfo {
	var c charsetBuilder
	info := walk(re, &c)
	if !c.any {
		info.in = c.build()
	}
	return info
}

func walk(re *syntax.Regexp, c *charsetBuilder) regexInfo {
	switch re.Op {
	case syntax.OpNoMatch:
		return regexInfo{min: 1 << 30}
	case syntax.OpEmptyMatch:
		return regexInfo{}
	case syntax.OpLiteral:
		var info regexInfo
		for _, r := range re.Rune {
			n := utf8.RuneLen(r)
			c.add(r, r)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					n = max(n, utf8.RuneLen(f))
					c.add(f, f)
				}
			}
			info.max += n
			info.min++
		}
		return info
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return regexInfo{min: 1 << 30}
		}
		hi := rune(0)
		for i := 0; i+1 < len(re.Rune); i += 2 {
			c.add(re.Rune[i], re.Rune[i+1])
			hi = max(hi, re.Rune[i+1])
		}
		n := utf8.RuneLen(hi)
		if n < 0 {
			n = utf8.UTFMax
		}
		return regexInfo{max: n, min: 1}
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		c.any = true
		return regexInfo{max: utf8.UTFMax, min: 1}
	case syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return regexInfo{context: true}
	case syntax.OpEndLine, syntax.OpEndText:
		return regexInfo{}
	case syntax.OpCapture:
		return walk(re.Sub[0], c)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		sub := walk(re.Sub[0], c)
		lo, hi := 0, 1
		switch re.Op {
		case syntax.OpStar:
			hi = -1
		case syntax.OpPlus:
			lo, hi = 1, -1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		out := regexInfo{min: sub.min * lo, context: sub.context, unbounded: sub.unbounded}
		if hi < 0 {
			out.unbounded = out.unbounded || sub.max > 0
		} else {
			out.max = sub.max * hi
		}
		return out
	case syntax.OpConcat:
		var out regexInfo
		for _, s := range re.Sub {
			i := walk(s, c)
			out.max += i.max
			out.min += i.min
			out.unbounded = out.unbounded || i.unbounded
			out.context = out.context || i.context
		}
		return out
	case syntax.OpAlternate:
		out := regexInfo{min: 1 << 30}
		for _, s := range re.Sub {
			i := walk(s, c)
			out.max = max(out.max, i.max)
			out.min = min(out.min, i.min)
			out.unbounded = out.unbounded || i.unbounded
			out.context = out.context || i.context
		}
		return out
	}
	c.any = true
	return regexInfo{unbounded: true}
}

// newFinder compiles pattern into a finder of kind. It panics on a bad
// pattern: built-in patterns are constants, and a template's are checked
// by Compile first.
func newFinder(kind, pattern string, valid validator) *finder {
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic("guardrail: pattern " + pattern + ": " + err.Error())
	}
	info := analyze(parsed)
	f := &finder{kind: kind, re: regexp.MustCompile(pattern), in: info.in, valid: valid}
	if !info.unbounded {
		f.max = info.max
	}
	if info.context {
		f.ctxRe = regexp.MustCompile(`^(?s:.)(?s:.*?)(` + pattern + `)`)
	}
	if prefix, _ := f.re.LiteralPrefix(); prefix != "" {
		f.starts = newStartSet([]string{prefix}, false)
	}
	return f
}

// search returns the leftmost candidate of b[from:], reading the rune
// before from for context.
func (f *finder) search(b []byte, from int) (s, e int, ok bool) {
	if f.need != nil && !bytes.Contains(b[from:], f.need) {
		return 0, 0, false
	}
	if f.ctxRe == nil || from == 0 {
		loc := f.re.FindIndex(b[from:])
		if loc == nil {
			return 0, 0, false
		}
		return from + loc[0], from + loc[1], true
	}
	_, n := utf8.DecodeLastRune(b[:from])
	back := from - n
	loc := f.ctxRe.FindSubmatchIndex(b[back:])
	if loc == nil {
		return 0, 0, false
	}
	return back + loc[2], back + loc[3], true
}

// settled returns the position of b (the text so far, its end not final)
// before which the finder's matches are decided: no match that the rest of
// the text could change starts before it. A match lies within its
// longest length, and contains only runes of f.in, and begins with one of
// f.starts; whichever bound is furthest holds.
func (f *finder) settled(b []byte, from int) int {
	n := len(b)
	limit := 0
	if f.max > 0 {
		limit = runeStart(b, n-f.max-lookahead)
	}
	if f.in != nil {
		// The start of the trailing run of runes a match may contain: a
		// match that starts before it ends before the rune that breaks
		// the run, which has arrived, and so has the one after its end.
		t := n
		for t > limit {
			r, size := utf8.DecodeLastRune(b[:t])
			if !f.in.has(r) {
				break
			}
			t -= size
		}
		limit = max(limit, t)
	}
	limit = max(limit, from)
	if f.needWithin > 0 && !bytes.Contains(b[limit:], f.need) {
		// A match still to come has its need in the text to come.
		limit = max(limit, runeStart(b, n-f.needWithin))
	}
	if f.starts != nil && limit < n {
		limit = f.starts.first(b, limit)
	}
	return limit
}

// advance finds the finder's decided matches in b from pos, calling found
// for each, and returns where its search goes on. final says that b is
// the whole text.
func (f *finder) advance(b []byte, pos int, final bool, found func(s, e int)) int {
	limit := len(b)
	if !final {
		limit = f.settled(b, pos)
	}
	for pos < len(b) {
		if f.token {
			pos = f.runEnd(b, pos)
		}
		if f.starts != nil {
			// A match begins with one of the literals: none starts before
			// the first place one does.
			pos = f.starts.first(b, pos)
		}
		if pos >= len(b) {
			break
		}
		s, e, ok := f.search(b, pos)
		if !ok || s >= limit {
			// Undecided: no match starts before it or before limit.
			return max(pos, limit)
		}
		end, v := e, accept
		switch {
		case f.token && f.inRun(b, s), f.max > 0 && e-s > f.max:
			// A longer text than the longest match stays longer.
			v = reject
		case f.valid != nil:
			end, v = f.valid(b, s, e, final)
		}
		switch v {
		case wait:
			return s
		case accept:
			if end > s {
				found(s, end)
				pos = end
				continue
			}
		}
		if f.token {
			pos = f.runEnd(b, s+1)
			continue
		}
		_, size := utf8.DecodeRune(b[s:])
		pos = s + size
	}
	return max(pos, limit)
}

// inRun reports whether the rune before s belongs to a token's run.
func (f *finder) inRun(b []byte, s int) bool {
	r, ok := prevRune(b, s)
	return ok && f.in.has(r)
}

// runEnd returns p, or, when p is inside a run of runes of f.in (the rune
// before it is one), the end of that run: no token starts inside a run.
func (f *finder) runEnd(b []byte, p int) int {
	for p < len(b) && f.inRun(b, p) {
		r, size := utf8.DecodeRune(b[p:])
		if !f.in.has(r) {
			break
		}
		p += size
	}
	return p
}

// runeStart returns i, moved back to the start of the rune it falls in; 0
// for a negative i.
func runeStart(b []byte, i int) int {
	if i <= 0 {
		return 0
	}
	if i >= len(b) {
		return len(b)
	}
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return i
}

// charset is a set of runes.
type charset struct {
	ascii  [2]uint64
	ranges []rune // pairs lo, hi of runes >= utf8.RuneSelf, sorted, disjoint
}

func (c *charset) has(r rune) bool {
	if r < utf8.RuneSelf {
		return c.ascii[r>>6]&(1<<(r&63)) != 0
	}
	i := sort.Search(len(c.ranges)/2, func(i int) bool { return c.ranges[2*i+1] >= r })
	return i < len(c.ranges)/2 && c.ranges[2*i] <= r
}

type charsetBuilder struct {
	any    bool
	ranges []rune
}

func (c *charsetBuilder) add(lo, hi rune) { c.ranges = append(c.ranges, lo, hi) }

func (c *charsetBuilder) build() *charset {
	out := &charset{}
	type rng struct{ lo, hi rune }
	var rs []rng
	for i := 0; i+1 < len(c.ranges); i += 2 {
		lo, hi := c.ranges[i], c.ranges[i+1]
		for ; lo <= hi && lo < utf8.RuneSelf; lo++ {
			out.ascii[lo>>6] |= 1 << (lo & 63)
		}
		if lo <= hi {
			rs = append(rs, rng{lo, hi})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	for _, r := range rs {
		if k := len(out.ranges); k > 0 && r.lo <= out.ranges[k-1]+1 {
			out.ranges[k-1] = max(out.ranges[k-1], r.hi)
			continue
		}
		out.ranges = append(out.ranges, r.lo, r.hi)
	}
	return out
}

// startSet is a set of literals that begin every match of a finder.
type startSet struct {
	lits []string
	fold bool
	// byFirst lists, by a text's byte, the literals that may begin there.
	byFirst [256][]int
}

func newStartSet(lits []string, fold bool) *startSet {
	s := &startSet{fold: fold}
	for _, l := range lits {
		if l == "" {
			continue
		}
		i := len(s.lits)
		s.lits = append(s.lits, l)
		r, _ := utf8.DecodeRuneInString(l)
		bytesOf := func(r rune) {
			var buf [utf8.UTFMax]byte
			utf8.EncodeRune(buf[:], r)
			if !containsInt(s.byFirst[buf[0]], i) {
				s.byFirst[buf[0]] = append(s.byFirst[buf[0]], i)
			}
		}
		bytesOf(r)
		if fold {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				bytesOf(f)
			}
		}
	}
	return s
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// first returns the first position from from where one of the literals
// begins in b, or where what remains of b could still become one; len(b)
// when there is none.
func (s *startSet) first(b []byte, from int) int {
	for p := from; p < len(b); p++ {
		for _, i := range s.byFirst[b[p]] {
			if s.prefixAt(b[p:], s.lits[i]) {
				return p
			}
		}
	}
	return len(b)
}

// prefixAt reports whether text begins with lit, or is a beginning of it.
func (s *startSet) prefixAt(text []byte, lit string) bool {
	if !s.fold {
		if len(text) >= len(lit) {
			return string(text[:len(lit)]) == lit
		}
		return string(text) == lit[:len(text)]
	}
	for len(lit) > 0 {
		if len(text) == 0 || !utf8.FullRune(text) {
			return true
		}
		a, na := utf8.DecodeRune(text)
		b, nb := utf8.DecodeRuneInString(lit)
		if !foldEqual(a, b) {
			return false
		}
		text, lit = text[na:], lit[nb:]
	}
	return true
}

// foldEqual reports whether a and b fold together (Unicode simple folding).
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}

// prevRune returns the rune before s in b.
func prevRune(b []byte, s int) (rune, bool) {
	if s <= 0 {
		return 0, false
	}
	r, _ := utf8.DecodeLastRune(b[:s])
	return r, true
}

// nextRune returns the rune at e in b; wait is set when b ends there and
// is not the whole text.
func nextRune(b []byte, e int, final bool) (r rune, ok, wait bool) {
	if e >= len(b) {
		return 0, false, !final
	}
	r, _ = utf8.DecodeRune(b[e:])
	return r, true, false
}

// completeLen is the length of b without an incomplete rune at its end
// (a chunk may end in the middle of one).
func completeLen(b []byte) int {
	n := len(b)
	for k := 1; k <= utf8.UTFMax && k <= n; k++ {
		if utf8.RuneStart(b[n-k]) {
			if !utf8.FullRune(b[n-k:]) {
				return n - k
			}
			return n
		}
	}
	return n
}
