package offline

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// Kinds of long text, each with the sections it is written in when the tool's
// description does not name its own.
const (
	kindGeneric    = "generic"
	kindCritique   = "critique"
	kindThink      = "think"
	kindReflect    = "reflect"
	kindDebate     = "debate"
	kindBrainstorm = "brainstorm"
	kindCompare    = "compare"
)

var kindHeadings = map[string][]string{
	kindCritique:   {"Understanding", "Strengths", "Issues", "Suggestions", "Overall assessment"},
	kindThink:      {"Problem", "Facts and assumptions", "Reasoning", "Uncertainties", "Conclusion"},
	kindReflect:    {"Context", "What worked", "What fell short", "Lessons", "Next time"},
	kindDebate:     {"The question", "Position", "Common ground", "Judgement"},
	kindBrainstorm: {"Reframing", "Idea groups", "Most promising", "Next steps"},
	kindCompare:    {"Options", "Criteria", "Side by side", "Trade-offs", "Recommendation"},
	kindGeneric:    {"Context", "Analysis", "Conclusion"},
}

// textKind classifies a long-text field by its name, then by its tool's name.
func textKind(tool, field string) string {
	byField := []struct {
		patterns []string
		kind     string
	}{
		{[]string{"reasoning", "thought", "thinking"}, kindThink},
		{[]string{"reflection", "lesson"}, kindReflect},
		{[]string{"perspective", "viewpoint", "debate", "position", "argument"}, kindDebate},
		{[]string{"idea", "suggestion", "solution"}, kindBrainstorm},
		{[]string{"comparison"}, kindCompare},
		{[]string{"critique", "evaluation", "assessment", "review"}, kindCritique},
	}
	for _, f := range byField {
		if nameHas(field, f.patterns) {
			return f.kind
		}
	}
	byTool := []struct {
		patterns []string
		kind     string
	}{
		{[]string{"critiq", "evaluat", "review", "assess"}, kindCritique},
		{[]string{"compar"}, kindCompare},
		{[]string{"debate"}, kindDebate},
		{[]string{"brainstorm", "ideat"}, kindBrainstorm},
		{[]string{"reflect"}, kindReflect},
		{[]string{"think", "reason"}, kindThink},
	}
	tool = strings.ToLower(tool)
	for _, f := range byTool {
		if nameHas(tool, f.patterns) {
			return f.kind
		}
	}
	return kindGeneric
}

var boldSpan = regexp.MustCompile(`\*\*([^*\n]{2,40})\*\*`)

// descriptionHeadings returns the bold headings a tool description asks for
// ("organised under these headings: **Understanding** (...), ..."), when it
// names at least two and they are meant for field: the description names the
// field in backticks, or names no field at all.
func descriptionHeadings(desc, field string) []string {
	if strings.Contains(desc, "`") && !strings.Contains(desc, "`"+field+"`") {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range boldSpan.FindAllStringSubmatch(desc, -1) {
		h := strings.TrimRight(strings.TrimSpace(m[1]), ":.")
		if h == "" || len(strings.Fields(h)) > 5 || seen[strings.ToLower(h)] {
			continue
		}
		seen[strings.ToLower(h)] = true
		out = append(out, capitalise(h))
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// sections writes sectioned markdown about the topic for a long-text field.
func sections(tool chat.ToolSpec, field string, tp *topic) string {
	headings := descriptionHeadings(tool.Description, field)
	if headings == nil {
		headings = kindHeadings[textKind(tool.Name, field)]
	}
	c := newComparison(tp)
	var b strings.Builder
	for _, h := range headings {
		for _, sec := range section(h, tp, c) {
			if b.Len() > 0 {
				b.WriteString("\n\n")
			}
			fmt.Fprintf(&b, "### %s\n\n%s", sec.heading, sec.body)
		}
	}
	return b.String()
}

type sectionText struct{ heading, body string }

// section writes the section for heading h. "Position" and "Idea groups"
// become several sections, because the descriptions ask for one per
// viewpoint and one per approach.
func section(h string, tp *topic, c comparison) []sectionText {
	T, terms, last, first := tp.phrase, tp.termList(), tp.lastTerm(), tp.term(0)
	key := strings.ToLower(h)
	one := func(body string) []sectionText { return []sectionText{{h, body}} }
	has := func(ps ...string) bool { return nameHas(key, ps) }
	switch {
	case has("understand"):
		return one(fmt.Sprintf("Under review: **%s**. Read charitably, it says something definite about %s that can be "+
			"checked against evidence and experience; the points below test it on those terms.", T, terms))
	case has("strength"):
		return one(fmt.Sprintf("1. **It is concrete.** It names a relationship involving %s that can be observed and measured.\n"+
			"2. **It has plausible mechanisms.** There are credible reasons to expect that %s, and real cases that fit.\n"+
			"3. **It is useful.** If it holds, it tells people what to change and what to expect.", first, T))
	case has("issue", "weakness", "flaw"):
		return one(fmt.Sprintf("1. **Correlation or cause.** Cases that fit \"%s\" may differ in other ways (who chose it, "+
			"incentives, timing), which could explain the outcome instead.\n"+
			"2. **Measurement.** The verdict depends on how one defines and measures %s; different measures can point in different directions.\n"+
			"3. **Scope.** The effect may hold for some people, tasks or settings and not for others.\n"+
			"4. **Time horizon.** Early results can hide costs or benefits that appear later.", T, last))
	case has("suggest", "improvement"):
		return one(fmt.Sprintf("1. State the conditions under which \"%s\" is expected to hold (answers the scope issue).\n"+
			"2. Compare like with like, ideally the same group before and after a change (answers the cause issue).\n"+
			"3. Use more than one measure of %s and report all of them (answers the measurement issue).\n"+
			"4. Follow the outcome over a longer period (answers the time-horizon issue).", T, last))
	case has("overall", "verdict", "assessment"):
		return one(fmt.Sprintf("As stated, \"%s\" is plausible but conditional. It is best defended as \"under these conditions, "+
			"for these groups\" rather than as a universal rule, and the first thing to settle is how to measure %s.", T, last))
	case has("problem"):
		return one(fmt.Sprintf("The question is **%s**. A good answer has to say precisely what is being asked, which factors "+
			"decide it, and how sure anyone can be.", T))
	case has("fact", "assumption", "consideration"):
		return one(fmt.Sprintf("- **Known:** the question involves %s; each can be described and, at least roughly, measured.\n"+
			"- **Assumed:** the situation is typical, and past patterns about %s still apply.\n"+
			"- **Matters most:** the assumption about %s, because the conclusion changes if it is wrong.", terms, first, last))
	case has("reasoning"):
		return one(fmt.Sprintf("1. Start from what is least disputed about %s.\n"+
			"2. Identify the main drivers (%s) and how they affect one another.\n"+
			"3. Look for the strongest counter-example and check whether it breaks the argument.\n"+
			"4. Keep the conclusions that survive that check, and note the ones that do not.", T, terms))
	case has("uncertain", "risk", "caveat"):
		return one(fmt.Sprintf("- Evidence on %s may be incomplete or come from unrepresentative cases.\n"+
			"- Conditions can change faster than the data that describes them.\n"+
			"- New facts about %s would change the answer; they are the first thing to check.", last, first))
	case has("conclusion", "summary"):
		return one(fmt.Sprintf("On %s, the answer rests on a few well-supported drivers; the rest is uncertain and should be "+
			"presented as such, together with the conditions under which it holds.", T))
	case has("context", "background"):
		return one(fmt.Sprintf("This concerns **%s**: what is claimed or attempted, with what aim, and what is known about %s.", T, terms))
	case has("what happened", "outcome"):
		return one(fmt.Sprintf("The reasoning so far reached a conditional view of %s: supported in some settings, contested in others.", T))
	case has("what worked", "went well"):
		return one(fmt.Sprintf("- The question was broken into parts (%s) that could be examined one at a time.\n"+
			"- Supporting and opposing points were both considered.", terms))
	case has("fell short", "gap", "went wrong", "bias"):
		return one(fmt.Sprintf("- Evidence was summarised rather than checked against sources.\n"+
			"- The view of those most affected by %s was not represented.\n"+
			"- Assumptions about %s were stated but not tested.", T, last))
	case has("lesson", "learn"):
		return one(fmt.Sprintf("- A conclusion about %s is only as strong as the measure behind it.\n"+
			"- Conditions matter more than averages.\n"+
			"- Opposing views are most useful when argued at their strongest.", T))
	case has("next time", "improve"):
		return one(fmt.Sprintf("- Settle definitions and measures of %s first.\n"+
			"- Look for data that could prove the view wrong.\n"+
			"- Say whom the conclusion applies to.", last))
	case has("question"):
		return one(fmt.Sprintf("Disputed: **%s**. Reasonable people disagree because the evidence is mixed and because they "+
			"weigh the outcomes differently.", T))
	case has("position", "perspective", "viewpoint"):
		return []sectionText{
			{h + ": in favour", fmt.Sprintf("- **Best arguments:** \"%s\" is backed by clear benefits, by cases where it has held, and by the cost of ignoring it.\n"+
				"- **Strongest objection:** the benefits may not carry over to other settings.\n"+
				"- **Evidence:** examples and studies that support it, often from early adopters.", T)},
			{h + ": against", fmt.Sprintf("- **Best arguments:** benefits are uneven, effects on %s are overstated, and alternatives are overlooked.\n"+
				"- **Strongest objection:** it can understate real gains where conditions are right.\n"+
				"- **Evidence:** counter-examples and studies with mixed results.", last)},
		}
	case has("common ground", "agree"):
		return one(fmt.Sprintf("Both sides accept that the factors involved (%s) matter and that outcomes depend on conditions; they differ on how "+
			"often those conditions are met.", terms))
	case has("judgement", "judgment"):
		return one(fmt.Sprintf("Neither position wins outright. The case holds best where conditions favour it; with moderate "+
			"confidence, the balanced view is to accept \"%s\" conditionally and keep measuring %s.", T, last))
	case has("reframing", "reframe"):
		return one(fmt.Sprintf("- How might we make progress on %s with what already exists?\n"+
			"- What would make %s easier rather than harder?\n"+
			"- What would this look like if it had to work at ten times the scale?", T, last))
	case has("idea group", "ideas"):
		return []sectionText{
			{"Quick wins", fmt.Sprintf("- Run a small pilot on %s in one place and measure the result.\n"+
				"- Remove one obstacle that people already complain about.\n"+
				"- Share what works as a short checklist.", T)},
			{"Process changes", fmt.Sprintf("- Make the better choice the default.\n"+
				"- Review %s regularly, with a named owner.\n"+
				"- Involve the people most affected in designing the change.", last)},
			{"Bolder bets", fmt.Sprintf("- Borrow an approach from another field that solved a similar problem.\n"+
				"- Use data to spot problems with %s early.\n"+
				"- Partner with others who share the problem and share the cost.", first)},
		}
	case has("promising", "shortlist"):
		return one(fmt.Sprintf("The pilot and the default change: both are cheap, quick to test and give evidence on %s within weeks.", T))
	case has("next step", "action"):
		return one(fmt.Sprintf("1. Pick one place or team for the pilot.\n"+
			"2. Define how %s will be measured before starting.\n"+
			"3. Review after a fixed period and decide whether to scale up.", last))
	case has("option", "item", "alternative"):
		return one(fmt.Sprintf("**%s** and **%s**, compared %s.", c.a, c.b, c.purpose))
	case has("criteria", "criterion", "dimension"):
		return one("1. Cost, upfront and running\n2. Effectiveness for the stated purpose\n3. Risks and dependencies\n4. Long-term impact")
	case has("side by side", "comparison", "table"):
		return one(fmt.Sprintf("| Criterion | %[1]s | %[2]s |\n|---|---|---|\n"+
			"| Cost | upfront and running costs of %[1]s | upfront and running costs of %[2]s |\n"+
			"| Effectiveness | how well %[1]s meets the purpose | how well %[2]s meets the purpose |\n"+
			"| Risks | what can go wrong with %[1]s | what can go wrong with %[2]s |\n"+
			"| Long-term impact | where %[1]s leads in ten years | where %[2]s leads in ten years |\n\n"+
			"The deciding differences are usually cost and effectiveness under local conditions.", cell(c.a), cell(c.b)))
	case has("trade-off", "tradeoff", "trade off"):
		return one(fmt.Sprintf("- **%s** tends to win where its strengths match the main constraint.\n"+
			"- **%s** tends to win where flexibility or lower risk matters more.\n"+
			"- A mix of both is often the practical answer.", c.a, c.b))
	case has("recommend"):
		return one(fmt.Sprintf("Compared %s, choose the option that scores best on the criterion that matters most; if the "+
			"criteria weigh the same, start with the one that is cheaper to reverse.", c.purpose))
	case has("analysis"):
		return one(fmt.Sprintf("Seen through %s, %s has identifiable main factors; their effects depend on conditions, and the "+
			"evidence is stronger for some parts than for others.", terms, T))
	}
	return one(fmt.Sprintf("For %s, this part covers %s: the points that bear on %s, and how much weight each deserves.",
		T, strings.ToLower(h), terms))
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", "/") }

// comparison is what a message asks to compare: two items and the purpose.
type comparison struct{ a, b, purpose string }

// newComparison splits "solar and wind energy for residential power" into
// "solar energy", "wind energy" and "for residential power". A one-word
// first item borrows the second item's last word, as in the example.
func newComparison(tp *topic) comparison {
	phrase := tp.phrase
	lower := strings.ToLower(phrase)
	for _, p := range []string{"difference between ", "differences between ", "between "} {
		if strings.HasPrefix(lower, p) && len(lower) == len(phrase) {
			phrase, lower = phrase[len(p):], lower[len(p):]
		}
	}
	for _, sep := range []string{" versus ", " vs. ", " vs ", " and ", " or ", " with "} {
		i := strings.Index(lower, sep)
		if i <= 0 || len(lower) != len(phrase) {
			continue
		}
		a, rest := strings.TrimSpace(phrase[:i]), strings.TrimSpace(phrase[i+len(sep):])
		b, purpose := rest, ""
		lrest := strings.ToLower(rest)
		for _, prep := range []string{" for ", " in ", " on ", " when ", " to ", " at "} {
			if j := strings.Index(lrest, prep); j > 0 && (purpose == "" || j < len(b)) {
				b, purpose = strings.TrimSpace(rest[:j]), strings.TrimSpace(rest[j:])
			}
		}
		if a == "" || b == "" {
			continue
		}
		if bw := strings.Fields(b); len(strings.Fields(a)) == 1 && len(bw) >= 2 {
			a += " " + bw[len(bw)-1]
		}
		if purpose == "" {
			purpose = "for the purpose at hand"
		}
		return comparison{a: a, b: b, purpose: purpose}
	}
	return comparison{a: phrase, b: "the main alternative", purpose: "in the context of " + phrase}
}

// listEntry writes entry index of a list-named field.
func listEntry(field string, tp *topic, index int) string {
	var list []string
	switch {
	case nameHas(field, itemNames):
		c := newComparison(tp)
		list = []string{c.a, c.b, "a combination of " + c.a + " and " + c.b}
	case nameHas(field, criteriaNames):
		list = []string{"cost", "effectiveness", "risks", "long-term impact", "ease of adoption", "fairness"}
	case nameHas(field, perspectiveNames):
		list = []string{
			"In favour: " + tp.phrase,
			"Against: the case for " + tp.phrase + " is overstated",
			"Pragmatic: it depends on the conditions",
		}
	case nameHas(field, ideaNames):
		list = []string{
			"Pilot a small change on " + tp.phrase + " and measure it",
			"Make the better choice the default",
			"Involve the people most affected",
			"Borrow an approach from another field",
			"Review " + tp.lastTerm() + " regularly",
		}
	case nameHas(field, keywordNames):
		list = append(list, tp.terms...)
		list = append(list, tp.phrase)
	default:
		for _, part := range []string{"context", "main factors", "evidence", "open questions", "conclusion"} {
			list = append(list, tp.phrase+": "+part)
		}
	}
	if index < len(list) {
		return list[index]
	}
	return fmt.Sprintf("%s (%d)", list[index%len(list)], index/len(list)+1)
}

func capitalise(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// toolRoles says in a few words what each usual tool contributed, for the
// conclusion of a final answer.
var toolRoles = []struct{ pattern, role string }{
	{"search", "gathered what sources say"},
	{"think", "reasoned it through step by step"},
	{"reflect", "checked the reasoning for gaps"},
	{"compar", "set the options side by side"},
	{"critiq", "weighed its strengths and issues"},
	{"brainstorm", "generated options"},
	{"debate", "argued the main positions"},
}

func toolRole(name string) string {
	lower := strings.ToLower(name)
	for _, r := range toolRoles {
		if strings.Contains(lower, r.pattern) {
			return r.role
		}
	}
	return "added its result"
}

// maxQuoteLines and maxQuoteRunes bound how much of each tool result the
// final answer quotes.
const (
	maxQuoteLines = 3
	maxQuoteRunes = 300
)

// finalAnswer writes the answer of a call that calls no tool.
func finalAnswer(req llmorch.Request, t turn, tp *topic, mode *llmorch.Mode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", tp.Title())
	if len(t.results) == 0 {
		plainAnswer(&b, req, t, tp)
		return b.String()
	}
	b.WriteString("*This answer comes from the offline demo model: no model provider is configured, so instead of " +
		"writing its own analysis it brings together the tool results of this turn.*\n\n")
	if mode != nil {
		fmt.Fprintf(&b, "**Mode:** %s (%s)\n\n", mode.Name, sequenceText(mode.Sequence))
	}
	var roles []string
	failed, declined := 0, 0
	for i, r := range t.results {
		name := r.name
		if name == "" {
			name = "tool"
		}
		doc := parseResult(r.content)
		title := doc.title
		if title == "" {
			title = capitalise(name)
		}
		fmt.Fprintf(&b, "### %d. %s\n\n", i+1, title)
		if r.denied {
			// The person's choice, not a failure.
			declined++
			fmt.Fprintf(&b, "You chose not to run this %s call, so it did not run.", name)
			if _, reason, ok := strings.Cut(r.content, "The user's reason: "); ok && strings.TrimSpace(reason) != "" {
				fmt.Fprintf(&b, " Your reason: %s", cutRunes(strings.TrimSpace(reason), maxQuoteRunes))
			}
			b.WriteString("\n\n")
			continue
		}
		if r.isError {
			failed++
			first := "no details"
			if lines := doc.lines(); len(lines) > 0 {
				first = lines[0]
			}
			fmt.Fprintf(&b, "The %s tool reported an error: %s\n\n", name, first)
			continue
		}
		roles = append(roles, fmt.Sprintf("the %s step %s", name, toolRole(name)))
		lines := doc.lines()
		if len(lines) == 0 {
			b.WriteString("The tool returned no content.\n\n")
			continue
		}
		writeQuote(&b, lines[:min(len(lines), maxQuoteLines)])
		if len(doc.sections) >= 2 {
			hs := make([]string, len(doc.sections))
			for j, sec := range doc.sections {
				hs[j] = sec.heading
			}
			fmt.Fprintf(&b, "*Sections: %s.*\n\n", strings.Join(hs, ", "))
			// The last section is where the tools put their verdict
			// (overall assessment, judgement, recommendation).
			if last := doc.sections[len(doc.sections)-1]; len(last.lines) > 0 {
				fmt.Fprintf(&b, "**%s:** %s\n\n", last.heading, last.lines[0])
			}
		}
	}
	b.WriteString("### Conclusion\n\n")
	if len(roles) > 0 {
		fmt.Fprintf(&b, "On **%s**, %s. ", tp.phrase, joinAnd(roles))
	}
	ran := len(t.results) - failed - declined
	switch {
	case ran == 0 && failed == 0:
		calls, it := "the "+t.results[0].name+" call", "it"
		if declined > 1 {
			calls, it = "these calls", "them"
		}
		fmt.Fprintf(&b, "As you chose, %s did not run, so this answer has no results to build on: ask again and approve %s "+
			"to get results, or say what to do instead.", calls, it)
	case ran == 0 && declined == 0:
		b.WriteString("Every tool call of this turn failed, so there is nothing to build on yet; the errors above say why.")
	case ran == 0:
		fmt.Fprintf(&b, "Of this turn's %d tool calls, %d failed and you chose not to run %d, so there is nothing to build on yet; the notes above say why.",
			len(t.results), failed, declined)
	case failed > 0 || declined > 0:
		var out []string
		if failed > 0 {
			out = append(out, fmt.Sprintf("%d failed", failed))
		}
		if declined > 0 {
			out = append(out, fmt.Sprintf("%d did not run as you chose", declined))
		}
		fmt.Fprintf(&b, "Of %d tool calls, %s; they are left out. Taken together, the remaining results give a "+
			"first, structured view; a configured model provider would weigh them against each other in a real synthesis.",
			len(t.results), strings.Join(out, " and "))
	default:
		b.WriteString("Taken together, these results give a structured view of the question; a configured model " +
			"provider would weigh them against each other in a real synthesis.")
	}
	return b.String()
}

func plainAnswer(b *strings.Builder, req llmorch.Request, t turn, tp *topic) {
	b.WriteString("This is the offline demo model: no model provider is configured, so no language model has read your message.")
	if !t.hasUser {
		b.WriteString(" There is no user message to answer yet.")
	} else {
		fmt.Fprintf(b, " You asked about **%s**.", tp.phrase)
		if len(tp.terms) > 1 {
			fmt.Fprintf(b, " The key terms are *%s*.", strings.Join(tp.terms, "*, *"))
		}
	}
	if len(req.Tools) > 0 && len(t.calls) == 0 && t.hasUser {
		names := make([]string, len(req.Tools))
		for i, tool := range req.Tools {
			names[i] = "`" + tool.Name + "`"
		}
		fmt.Fprintf(b, " None of the tools offered now (%s) fits the message closely enough to call, so none was used.",
			strings.Join(names, ", "))
	}
	var modes []llmorch.Mode
	for _, m := range req.Modes {
		if !m.Default && len(m.Sequence) > 0 {
			modes = append(modes, m)
		}
	}
	if len(modes) > 0 {
		b.WriteString("\n\nThis agent works in modes. The offline model picks one from the words of your request, so ask " +
			"for a kind of work it names:\n")
		for _, m := range modes {
			fmt.Fprintf(b, "\n- **%s**", m.Name)
			if m.Description != "" {
				fmt.Fprintf(b, ": %s", m.Description)
			}
			fmt.Fprintf(b, " (%s)", sequenceText(m.Sequence))
		}
	}
	b.WriteString("\n\nConfigure a model provider to get a written answer.")
}

// sequenceText renders a sequence as "search → think or reflect → compare".
func sequenceText(seq [][]string) string {
	parts := make([]string, len(seq))
	for i, g := range seq {
		parts[i] = strings.Join(g, " or ")
	}
	return strings.Join(parts, " → ")
}

// resultDoc is a tool result split into its title (a heading on its first
// line), the lines before the first section, and its sections.
type resultDoc struct {
	title    string
	lead     []string
	sections []resultSection
}

type resultSection struct {
	heading string
	lines   []string
}

// parseResult reads the markdown of a tool result. Lines are trimmed, cut to
// maxQuoteRunes and stripped of heading marks.
func parseResult(content string) resultDoc {
	var d resultDoc
	first := true
	for line := range strings.Lines(content) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			h := strings.TrimSpace(strings.ReplaceAll(strings.TrimLeft(line, "#"), "*", ""))
			if h == "" {
				continue
			}
			h = cutRunes(h, maxQuoteRunes)
			if first {
				d.title = h
			} else {
				d.sections = append(d.sections, resultSection{heading: h})
			}
			first = false
			continue
		}
		first = false
		line = cutRunes(line, maxQuoteRunes)
		if n := len(d.sections); n > 0 {
			d.sections[n-1].lines = append(d.sections[n-1].lines, line)
		} else {
			d.lead = append(d.lead, line)
		}
	}
	return d
}

// lines returns the content lines in order, without headings.
func (d resultDoc) lines() []string {
	out := slices.Clone(d.lead)
	for _, s := range d.sections {
		out = append(out, s.lines...)
	}
	return out
}

var listItem = regexp.MustCompile(`^([-*+]|\d+[.)])\s`)

// writeQuote writes lines as a block quote: list items stay one list,
// other lines become separate paragraphs.
func writeQuote(b *strings.Builder, lines []string) {
	for i, l := range lines {
		if i > 0 && !(listItem.MatchString(l) && listItem.MatchString(lines[i-1])) {
			b.WriteString(">\n")
		}
		fmt.Fprintf(b, "> %s\n", l)
	}
	b.WriteString("\n")
}
