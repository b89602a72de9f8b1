package guardrail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Judge answers a model check: whether the answer of model to prompt, a
// yes/no question about text, is yes.
type Judge func(ctx context.Context, model, prompt, text string) (bool, error)

// Hit is one match of a guardrail: which guardrail, where, what it did.
// It never holds the text it matched.
type Hit struct {
	Guardrail string
	Stage     Stage
	Action    Action
	// Kind says what matched: a pii or secrets kind, or the check
	// (regex, deny, max_length, model).
	Kind string
	// At is the match's offset in the text checked, in bytes.
	At int
	// Unchecked: the model of a model check did not answer. The check
	// fails closed: it counts as a match, but for a log guardrail.
	Unchecked bool

	message string // the guardrail's message for a block
}

// Describe says what happened, for people and logs; it names the
// guardrail and the kind, never the text.
func (h Hit) Describe() string {
	what := "matched"
	switch h.Action {
	case Block:
		what = "blocked"
	case Redact:
		what = "redacted"
	case Approve:
		what = "asked a person to approve"
	}
	where := map[Stage]string{Input: "the message", Output: "the answer", ToolArguments: "a tool call's arguments", ToolResult: "a tool's result"}[h.Stage]
	s := fmt.Sprintf("The guardrail %q %s %s in %s", h.Guardrail, what, article(h.Kind), where)
	if h.Action == Approve {
		s = fmt.Sprintf("The guardrail %q found %s in a tool call's arguments and holds the call for a person's approval", h.Guardrail, article(h.Kind))
	}
	if h.Unchecked {
		s += " (its model did not answer, so the guardrail acted as if it matched)"
	}
	return s + "."
}

func article(kind string) string {
	switch kind {
	case CheckRegex, CheckDeny:
		return "a match"
	case CheckMaxLength:
		return "text over its length limit"
	case CheckModel:
		return "what its model was asked to find"
	}
	if strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an " + kind
	}
	return "a " + kind
}

// Notice is what a block tells the user in place of what it blocked: the
// guardrail's message, or a sentence that names it.
func (h Hit) Notice() string {
	if h.message != "" {
		return h.message
	}
	switch h.Stage {
	case Input:
		return fmt.Sprintf("Your message was not sent to the model: the guardrail %q blocked it.", h.Guardrail)
	case Output:
		return fmt.Sprintf("The rest of this answer was withheld by the guardrail %q.", h.Guardrail)
	case ToolArguments:
		return fmt.Sprintf("the guardrail %q blocked this call's arguments", h.Guardrail)
	}
	return fmt.Sprintf("The result of this call was withheld by the guardrail %q.", h.Guardrail)
}

// Set is the guardrails in force at one moment: the template's and those
// of the active step. A nil *Set has none.
type Set struct {
	list   []*Guardrail
	stages uint8
}

// NewSet returns the set of the guardrails of lists, in order; nil when
// there are none.
func NewSet(lists ...[]*Guardrail) *Set {
	s := &Set{}
	for _, l := range lists {
		for _, g := range l {
			s.list = append(s.list, g)
			s.stages |= g.stages
		}
	}
	if len(s.list) == 0 {
		return nil
	}
	return s
}

// On reports whether any guardrail of s watches stage.
func (s *Set) On(stage Stage) bool { return s != nil && s.stages&stageBit(stage) != 0 }

// Guardrails returns the guardrails of s.
func (s *Set) Guardrails() []*Guardrail {
	if s == nil {
		return nil
	}
	return s.list
}

func (s *Set) at(stage Stage, tool string) []*Guardrail {
	if !s.On(stage) {
		return nil
	}
	var out []*Guardrail
	for _, g := range s.list {
		if g.appliesTo(stage, tool) {
			out = append(out, g)
		}
	}
	return out
}

// Result is what a check of a whole text found.
type Result struct {
	// Text is the text with every span a redact or block guardrail matched
	// replaced by a marker naming its kind, and cut where a max_length
	// guardrail that redacts says.
	Text string
	// Hits are every match, in the order of the text.
	Hits []Hit
	// Blocked is the first block, Approve the first approve, if any.
	Blocked, Approve *Hit
}

// Changed reports whether r's text differs from the text checked.
func (r Result) Changed(text string) bool { return r.Text != text }

// span is a decided match of a guardrail in a text.
type span struct {
	start, end int
	g          *Guardrail
	kind       string
	tail       bool // a max_length cut: the text from start on
	unchecked  bool
}

func (sp span) hit(stage Stage) Hit {
	return Hit{Guardrail: sp.g.Name, Stage: stage, Action: sp.g.Action, Kind: sp.kind, At: sp.start, Unchecked: sp.unchecked, message: sp.g.message}
}

// marker is what replaces a redacted span.
func marker(sp span) string {
	if sp.tail {
		return "[cut:" + sp.g.Name + "]"
	}
	kind := sp.kind
	switch sp.g.Check {
	case CheckRegex, CheckDeny, CheckModel:
		kind = sp.g.Name
	}
	return "[redacted:" + kind + "]"
}

// Check checks text, a whole text of stage (not Output's stream: see
// Stream), for a call of tool at the tool stages. A model check asks judge
// about the text once.
func (s *Set) Check(ctx context.Context, stage Stage, tool, text string, judge Judge) Result {
	gs := s.at(stage, tool)
	if len(gs) == 0 {
		return Result{Text: text}
	}
	b := []byte(text)
	var spans []span
	for _, g := range gs {
		spans = append(spans, find(ctx, g, b, judge)...)
	}
	return resolve(b, stage, spans)
}

// find returns the matches of g in the whole text b.
func find(ctx context.Context, g *Guardrail, b []byte, judge Judge) []span {
	var out []span
	switch g.Check {
	case CheckMaxLength:
		if utf8.RuneCount(b) > g.length {
			cut := 0
			for range g.length {
				_, size := utf8.DecodeRune(b[cut:])
				cut += size
			}
			out = append(out, span{start: cut, end: len(b), g: g, kind: CheckMaxLength, tail: true})
		}
	case CheckModel:
		if len(bytes.TrimSpace(b)) == 0 {
			return nil
		}
		if yes, unchecked := ask(ctx, judge, g, string(b)); yes {
			out = append(out, span{start: 0, end: len(b), g: g, kind: CheckModel, unchecked: unchecked})
		}
	default:
		for _, f := range g.finders {
			f.advance(b, 0, true, func(s, e int) { out = append(out, span{start: s, end: e, g: g, kind: f.kind}) })
		}
	}
	return out
}

// ask runs a model check; a judge that fails, or none, counts as yes
// (unchecked), but for a log guardrail, which lets the text pass.
func ask(ctx context.Context, judge Judge, g *Guardrail, text string) (yes, unchecked bool) {
	if judge == nil {
		return g.modifies(), true
	}
	yes, err := judge(ctx, g.Model, g.Prompt, text)
	if err != nil {
		return g.modifies(), true
	}
	return yes, false
}

// resolve applies spans to b: redact and block spans are replaced by
// markers (overlapping ones by one marker, the first one's), and a redact
// cut ends the text at the earliest cut.
func resolve(b []byte, stage Stage, spans []span) Result {
	sortSpans(spans)
	var r Result
	cut := -1
	var seen reported
	for _, sp := range spans {
		if seen.first(sp) {
			r.Hits = append(r.Hits, sp.hit(stage))
		}
		if sp.tail && sp.g.Action == Redact && (cut < 0 || sp.start < cut) {
			cut = sp.start
		}
	}
	r.setFirsts()
	end := len(b)
	if cut >= 0 {
		end = cut
	}
	var out []byte
	cur := 0
	for _, sp := range spans {
		if sp.tail || sp.g.Action != Redact && sp.g.Action != Block || sp.start >= end {
			continue
		}
		if sp.start < cur {
			// Inside the marker of an earlier span, which covers it.
			cur = max(cur, sp.end)
			continue
		}
		out = append(out, b[cur:sp.start]...)
		out = append(out, marker(sp)...)
		cur = sp.end
	}
	if cur < end {
		out = append(out, b[cur:end]...)
	}
	if cut >= 0 {
		for _, sp := range spans {
			if sp.tail && sp.start == cut && sp.g.Action == Redact {
				out = append(out, " "+marker(sp)...)
				break
			}
		}
	}
	r.Text = string(out)
	return r
}

// setFirsts points Blocked and Approve at the first hit of each.
func (r *Result) setFirsts() {
	r.Blocked, r.Approve = nil, nil
	for i := range r.Hits {
		switch {
		case r.Hits[i].Action == Block && r.Blocked == nil:
			r.Blocked = &r.Hits[i]
		case r.Hits[i].Action == Approve && r.Approve == nil:
			r.Approve = &r.Hits[i]
		}
	}
}

// reported remembers, for each guardrail and kind, where its last
// reported match ended: a match that overlaps it (two patterns of one kind
// found the same phone number) is the same hit.
type reported map[string]int

// first reports whether sp is not part of a match already reported, and
// notes it.
func (r *reported) first(sp span) bool {
	if *r == nil {
		*r = reported{}
	}
	key := sp.g.Name + "\x00" + sp.kind
	end, ok := (*r)[key]
	(*r)[key] = max(end, sp.end)
	return !ok || sp.start >= end || sp.tail
}

// sortSpans orders spans by start, then longest first; spans of one place
// keep the order of their guardrails.
func sortSpans(spans []span) {
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].start != spans[j].start {
			return spans[i].start < spans[j].start
		}
		return spans[i].end > spans[j].end
	})
}

// CheckArguments checks a tool call's arguments (a JSON object) for a
// call of tool: every string and number in them, as a text of its own, and
// the arguments' JSON whole for max_length and model checks. The
// arguments come back with the redacted values replaced by their markers
// (a number becomes a string), in the same order, or unchanged when
// nothing was redacted; arguments that are not JSON are checked as text.
func (s *Set) CheckArguments(ctx context.Context, tool string, args json.RawMessage, judge Judge) (json.RawMessage, Result) {
	gs := s.at(ToolArguments, tool)
	if len(gs) == 0 {
		return args, Result{Text: string(args)}
	}
	var values, whole []*Guardrail
	for _, g := range gs {
		if g.Check == CheckMaxLength || g.Check == CheckModel {
			whole = append(whole, g)
		} else {
			values = append(values, g)
		}
	}
	var spans []span
	for _, g := range whole {
		spans = append(spans, find(ctx, g, args, judge)...)
	}
	r := resolve(args, ToolArguments, spans)
	r.Text = string(args)
	if len(values) == 0 {
		return args, r
	}
	vs := &Set{list: values, stages: stageBit(ToolArguments)}
	out, hits, changed, ok := walkJSON(args, func(v string) Result { return vs.Check(ctx, ToolArguments, "", v, judge) })
	if !ok {
		// Not JSON: the text as it is.
		tr := vs.Check(ctx, ToolArguments, "", string(args), judge)
		hits, out, changed = tr.Hits, json.RawMessage(tr.Text), tr.Changed(string(args))
	}
	r.Hits = append(r.Hits, hits...)
	r.setFirsts()
	if !changed {
		return args, r
	}
	r.Text = string(out)
	return out, r
}

// walkJSON checks every string and number value of a JSON document with
// check, and rewrites the document with the texts check returned, in the
// same order. A hit's At is its value's offset in the document. ok is false
// when the document is not JSON.
func walkJSON(doc []byte, check func(string) Result) (out json.RawMessage, hits []Hit, changed, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var buf bytes.Buffer
	// The open containers: an object's next string is a key or a value.
	type frame struct {
		object, wantKey bool
		n               int
	}
	var stack []frame
	// prefix writes what goes before the next token and says whether it
	// is an object's key.
	prefix := func() bool {
		if len(stack) == 0 {
			return false
		}
		f := &stack[len(stack)-1]
		switch {
		case !f.object:
			if f.n > 0 {
				buf.WriteByte(',')
			}
			f.n++
			return false
		case f.wantKey:
			if f.n > 0 {
				buf.WriteByte(',')
			}
			f.wantKey = false
			return true
		}
		buf.WriteByte(':')
		f.n++
		f.wantKey = true
		return false
	}
	value := func(text string, off int, asIs []byte) {
		r := check(text)
		for _, h := range r.Hits {
			h.At += off
			hits = append(hits, h)
		}
		if !r.Changed(text) {
			buf.Write(asIs)
			return
		}
		changed = true
		enc, _ := json.Marshal(r.Text)
		buf.Write(enc)
	}
	for {
		off := int(dec.InputOffset())
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, false, false
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				prefix()
				stack = append(stack, frame{object: t == '{', wantKey: true})
			} else {
				stack = stack[:len(stack)-1]
			}
			buf.WriteByte(byte(t))
		case string:
			enc, _ := json.Marshal(t)
			if prefix() {
				buf.Write(enc)
				continue
			}
			value(t, off, enc)
		case json.Number:
			prefix()
			value(t.String(), off, []byte(t.String()))
		default:
			prefix()
			enc, _ := json.Marshal(t)
			buf.Write(enc)
		}
	}
	return buf.Bytes(), hits, changed, true
}
