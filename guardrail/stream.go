package guardrail

import (
	"bytes"
	"context"
	"sort"
	"unicode/utf8"
)

// Stream applies the output guardrails of a set to a text that arrives in
// chunks (a model's answer), so that no span a guardrail redacts or blocks
// ever leaves it: Write takes the next chunk and returns what may be shown
// now; Flush, at the text's end, the rest.
//
// It holds back only what could still become a match: for each regex,
// pii, secrets and deny guardrail, the text from the first position where
// a match could still start and is not yet decided (at most the longest
// possible match of the check, often just the current word; see finder);
// for a model guardrail, the sentence under way (up to MaxUnit bytes),
// which its model judges once it is complete. Everything before is
// released at once.
//
// Whatever the chunks, the text released, end to end, and the hits are
// those of the whole text written in one chunk and flushed.
//
// A Stream is used by one goroutine.
type Stream struct {
	ctx   context.Context
	judge Judge
	scans []scan
	// buf holds the text from base on; out is how far it was released.
	buf       []byte
	base, out int
	// pending are decided matches not yet released: modifying ones merge
	// into groups replaced by one marker; a log guardrail's only report.
	pending []span
	// max_length: the runes counted before counted, the guardrails, and
	// the first cut found.
	lengths []*Guardrail
	runes   int
	counted int
	tail    *span
	// model guardrails judge whole units (sentences), from unit on; scan
	// is where the search for the unit's end goes on.
	models   []*Guardrail
	unit     int
	unitScan int
	done     bool
	seen     reported
}

type scan struct {
	g   *Guardrail
	f   *finder
	pos int // absolute: where the finder's search goes on
}

// MaxUnit bounds the unit a model guardrail judges on output: a sentence,
// or this many bytes of one that does not end.
const MaxUnit = 1 << 10

// Release is what a Stream lets through after a chunk.
type Release struct {
	// Text may be shown now: the text, redacted.
	Text string
	// Hits are the matches within the text released (or at the block),
	// in the order of the text.
	Hits []Hit
	// Blocked, when set, ends the stream: the text stops at the match.
	Blocked *Hit
}

// Stream returns a Stream of s's output guardrails, or nil when s has
// none. A model guardrail asks judge under ctx.
func (s *Set) Stream(ctx context.Context, judge Judge) *Stream {
	gs := s.at(Output, "")
	if len(gs) == 0 {
		return nil
	}
	st := &Stream{ctx: ctx, judge: judge}
	for _, g := range gs {
		switch g.Check {
		case CheckMaxLength:
			st.lengths = append(st.lengths, g)
		case CheckModel:
			st.models = append(st.models, g)
		default:
			for _, f := range g.finders {
				st.scans = append(st.scans, scan{g: g, f: f})
			}
		}
	}
	return st
}

// Write takes the next chunk of the text.
func (st *Stream) Write(chunk string) Release {
	if st.done {
		return Release{}
	}
	st.buf = append(st.buf, chunk...)
	return st.step(false)
}

// Flush ends the text: what was held back is released, as the guardrails
// leave it.
func (st *Stream) Flush() Release {
	if st.done {
		return Release{}
	}
	r := st.step(true)
	st.done = true
	return r
}

// Held is how many bytes of the text the stream holds back now.
func (st *Stream) Held() int { return st.base + len(st.buf) - st.out }

func (st *Stream) step(final bool) Release {
	n := len(st.buf)
	if !final {
		n = completeLen(st.buf)
	}
	b := st.buf[:n]
	end := st.base + n
	// release: how far every guardrail is decided.
	release := end
	for i := range st.scans {
		sc := &st.scans[i]
		p := sc.f.advance(b, sc.pos-st.base, final, func(s, e int) {
			st.pending = append(st.pending, span{start: st.base + s, end: st.base + e, g: sc.g, kind: sc.f.kind})
		})
		sc.pos = st.base + p
		release = min(release, sc.pos)
	}
	st.countLength(b)
	if len(st.models) > 0 {
		st.judgeUnits(b, final)
		release = min(release, st.unit)
	}
	if final {
		release = end
	}
	return st.release(release)
}

// countLength counts the runes of b and notes where each max_length
// guardrail's limit is passed: the first cut of one that modifies, a hit
// of one that logs.
func (st *Stream) countLength(b []byte) {
	if len(st.lengths) == 0 {
		return
	}
	for st.counted < st.base+len(b) {
		for _, g := range st.lengths {
			if st.runes != g.length {
				continue
			}
			sp := span{start: st.counted, end: st.counted, g: g, kind: CheckMaxLength, tail: true}
			switch {
			case !g.modifies():
				st.pending = append(st.pending, sp)
			case st.tail == nil:
				st.tail = &sp
			}
		}
		_, size := utf8.DecodeRune(b[st.counted-st.base:])
		st.counted += size
		st.runes++
	}
}

// judgeUnits has the model guardrails judge every unit of b that is
// complete (see unitEnd). A unit they match is a span from its first
// character that is not white space to its last.
func (st *Stream) judgeUnits(b []byte, final bool) {
	for {
		start := st.unit - st.base
		end, resume := unitEnd(b, start, st.unitScan-st.base, final)
		if end < 0 {
			st.unitScan = st.base + resume
			return
		}
		text := b[start:end]
		if trimmed := bytes.TrimSpace(text); len(trimmed) > 0 {
			lead := len(text) - len(bytes.TrimLeftFunc(text, isSpace))
			tail := len(text) - len(bytes.TrimRightFunc(text, isSpace))
			for _, g := range st.models {
				if yes, unchecked := ask(st.ctx, st.judge, g, string(trimmed)); yes {
					st.pending = append(st.pending, span{start: st.unit + lead, end: st.base + end - tail, g: g, kind: CheckModel, unchecked: unchecked})
				}
			}
		}
		st.unit = st.base + end
		st.unitScan = st.unit
	}
}

// unitEnd returns the end of the unit of b that starts at start, the
// search for it going on from from: a sentence, to a ., !, ? or … that
// white space follows, or to a line's end, or MaxUnit bytes of one that
// does not end. It is -1 when the unit is not complete yet, with the
// position the search goes on from.
func unitEnd(b []byte, start, from int, final bool) (end, resume int) {
	i := max(from, start)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		next := i + size
		switch {
		case r == '\n':
			return next, 0
		case r == '.' || r == '!' || r == '?' || r == '…' || r == '。' || r == '！' || r == '？':
			if next >= len(b) {
				if final {
					return next, 0
				}
				return -1, i // the rune after it decides
			}
			if after, _ := utf8.DecodeRune(b[next:]); isSpace(after) {
				return next, 0
			}
		}
		if next-start >= MaxUnit {
			return next, 0
		}
		i = next
	}
	if final && start < len(b) {
		return len(b), 0
	}
	return -1, i
}

// release lets the text through up to release (absolute), with the
// decided groups before it replaced by their markers, and stops at a
// block or a cut.
func (st *Stream) release(release int) Release {
	sortSpans(st.pending)
	var (
		r    Release
		text []byte
	)
	cur := st.out
	from := func(p int) []byte { return st.buf[p-st.base:] }
	// reports says whether a span only reports (a log guardrail's).
	reports := func(sp span) bool { return !sp.g.modifies() || sp.tail }
	i := 0
	stop := -1 // where the text ends for good: a block or a cut
	for i < len(st.pending) && stop < 0 {
		sp := st.pending[i]
		if sp.start >= release || st.tail != nil && st.tail.start <= sp.start {
			break
		}
		if reports(sp) {
			if st.seen.first(sp) {
				r.Hits = append(r.Hits, sp.hit(Output))
			}
			i++
			continue
		}
		// The group: the spans that overlap, transitively.
		end, j := sp.end, i+1
		for ; j < len(st.pending) && st.pending[j].start < end; j++ {
			if !reports(st.pending[j]) {
				end = max(end, st.pending[j].end)
			}
		}
		if end > release {
			release = sp.start // held whole until it is decided
			break
		}
		text = append(text, from(cur)[:sp.start-cur]...)
		blocked := -1
		for _, g := range st.pending[i:j] {
			if !st.seen.first(g) {
				continue
			}
			if !reports(g) && g.g.Action == Block && blocked < 0 {
				blocked = len(r.Hits)
			}
			r.Hits = append(r.Hits, g.hit(Output))
		}
		if blocked >= 0 {
			h := r.Hits[blocked]
			r.Blocked, stop = &h, sp.start
			break
		}
		text = append(text, marker(sp)...)
		cur, i = end, j
	}
	if stop < 0 && st.tail != nil && st.tail.start <= release {
		t := *st.tail
		if cur < t.start {
			text = append(text, from(cur)[:t.start-cur]...)
		}
		for ; i < len(st.pending) && st.pending[i].start < t.start; i++ {
			if reports(st.pending[i]) && st.seen.first(st.pending[i]) {
				r.Hits = append(r.Hits, st.pending[i].hit(Output))
			}
		}
		h := t.hit(Output)
		r.Hits = append(r.Hits, h)
		if t.g.Action == Block {
			r.Blocked = &h
		} else {
			text = append(text, " "+marker(t)...)
		}
		stop = t.start
	}
	sort.SliceStable(r.Hits, func(a, b int) bool { return r.Hits[a].At < r.Hits[b].At })
	if stop >= 0 {
		st.done, st.pending, st.out = true, nil, stop
		r.Text = string(text)
		return r
	}
	if release > cur {
		text = append(text, from(cur)[:release-cur]...)
		cur = release
	}
	st.pending = st.pending[i:]
	st.out = cur
	st.trim()
	r.Text = string(text)
	return r
}

// trim drops the text no guardrail reads any more, keeping one rune
// before the earliest position still read, for context.
func (st *Stream) trim() {
	keep := st.out
	for _, sc := range st.scans {
		keep = min(keep, sc.pos)
	}
	if len(st.models) > 0 {
		keep = min(keep, st.unit)
	}
	for _, sp := range st.pending {
		keep = min(keep, sp.start)
	}
	keep = runeStart(st.buf, keep-st.base-1) + st.base
	if keep <= st.base {
		return
	}
	k := keep - st.base
	st.buf = append(st.buf[:0], st.buf[k:]...)
	st.base = keep
}
