package offline

import (
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// topic is what the model takes from the latest user message.
type topic struct {
	message string
	// phrase is the topic phrase: the message without its instruction
	// ("Critique the argument that ..."), as written, except that a
	// sentence-initial common word loses its capital.
	phrase string
	// terms are the phrase's noun-like runs (see termRuns), at most four.
	terms []string
	// concepts are the stems of the message's content words and of their
	// synonyms; they score modes, tools and enum values.
	concepts map[string]bool
}

const maxPhraseRunes = 120

func newTopic(message string) *topic {
	tp := &topic{message: message, phrase: topicPhrase(message)}
	seen := map[string]bool{}
	for _, term := range termRuns(tp.phrase) {
		if len(tp.terms) == 4 {
			break
		}
		// A term needs one word of three letters or more: "b c" is noise.
		long := slices.ContainsFunc(strings.Fields(term), func(w string) bool { return utf8.RuneCountInString(w) >= 3 })
		if l := strings.ToLower(term); long && !seen[l] {
			seen[l] = true
			tp.terms = append(tp.terms, term)
		}
	}
	tp.concepts = concepts(message)
	return tp
}

// path is the first path the message names ("notes/todo.md", "./src",
// "/srv/data/report.txt": a word with a slash, or a file name with an
// extension), or "." when it names none: the directory a file system tool
// works in.
func (tp *topic) path() string {
	for _, w := range strings.Fields(tp.message) {
		w = strings.Trim(w, "\"'`()[]{}<>,;:!?")
		w = strings.TrimRight(w, ".")
		if w == "" || strings.Contains(w, "://") {
			continue
		}
		if strings.Contains(w, "/") || pathExt.MatchString(w) {
			return w
		}
	}
	return "."
}

// pathExt matches a file name with a short extension ("notes.md").
var pathExt = regexp.MustCompile(`^[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,4}$`)

// termRuns splits a phrase into its noun-like runs: runs of content words
// between stop words, relation verbs ("improves", "replace") and adverbs,
// at most four words each. "remote work improves productivity" gives
// "remote work" and "productivity". Terms keep the case they were written in
// ("France", "NASA").
func termRuns(phrase string) []string {
	var out, run []string
	flush := func() {
		if len(run) > 0 {
			out = append(out, strings.Join(run, " "))
			run = run[:0]
		}
	}
	for _, w := range strings.FieldsFunc(phrase, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\''
	}) {
		l := strings.ToLower(strings.Trim(w, "-'"))
		if l == "" || stopwords[l] || relationVerbs[l] || (strings.HasSuffix(l, "ly") && len(l) > 4) {
			flush()
			continue
		}
		if len(run) == 4 {
			flush()
		}
		run = append(run, strings.Trim(w, "-'"))
	}
	flush()
	return out
}

// relationVerbs are verbs that link the parts of a claim; they separate
// terms.
var relationVerbs = map[string]bool{}

func init() {
	for _, v := range strings.Fields(`improve reduce replace increase decrease solve cause affect help make lead
		boost hurt harm change create prevent drive beat outperform become need require raise lower cut save
		destroy kill threaten support undermine enable matter win lose cost`) {
		relationVerbs[v] = true
		relationVerbs[v+"s"] = true
		relationVerbs[v+"d"] = true
		relationVerbs[v+"ed"] = true
	}
	for _, v := range []string{"causes", "reduces", "replaces", "increases", "decreases", "solves", "makes", "leads", "led", "made", "won", "lost", "cuts", "drove", "became"} {
		relationVerbs[v] = true
	}
}

// Title is the phrase with its first letter in upper case, for headings.
func (tp *topic) Title() string {
	r, n := utf8.DecodeRuneInString(tp.phrase)
	return string(unicode.ToUpper(r)) + tp.phrase[n:]
}

// termList joins the topic's terms for prose: "a, b and c".
func (tp *topic) termList() string {
	if len(tp.terms) == 0 {
		return tp.phrase
	}
	return joinAnd(tp.terms)
}

// lastTerm is the term the phrase ends on, usually its object
// ("productivity" in "remote work improves productivity").
func (tp *topic) lastTerm() string {
	if len(tp.terms) == 0 {
		return tp.phrase
	}
	return tp.terms[len(tp.terms)-1]
}

// properTerm is the last term written with a capital ("Paris" in "What is
// the weather in Paris?"), else lastTerm.
func (tp *topic) properTerm() string {
	for i := len(tp.terms) - 1; i >= 0; i-- {
		if r, _ := utf8.DecodeRuneInString(tp.terms[i]); unicode.IsUpper(r) {
			return tp.terms[i]
		}
	}
	return tp.lastTerm()
}

// term returns the i-th term, cycling, or the phrase when there are none.
func (tp *topic) term(i int) string {
	if len(tp.terms) == 0 {
		return tp.phrase
	}
	return tp.terms[i%len(tp.terms)]
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// Lead-ins stripped from the front of a message, in this order, each group at
// most once, to leave the topic phrase. Longer entries come first where one
// is a prefix of another.
var (
	politeLeadIns = []string{
		"i would like you to", "i'd like you to", "i want you to", "could you please", "can you please",
		"would you please", "please", "could you", "can you", "would you", "help me", "let's", "lets",
	}
	instructionVerbs = []string{
		"think about", "reflect on", "tell me about", "search for", "look up", "look into", "write about",
		"give me", "critique", "criticise", "criticize", "evaluate", "assess", "review", "analyze", "analyse",
		"compare", "contrast", "research", "investigate", "brainstorm", "debate", "discuss", "explain",
		"describe", "summarize", "summarise", "explore", "examine", "consider", "find",
		"what is", "what are", "what was", "what were", "who is", "who was", "who were", "where is", "where are",
	}
	framings = []string{
		"the argument that", "the claim that", "the idea that", "the statement that", "the notion that",
		"the view that", "the assertion that", "the question of", "whether or not", "whether",
		"ideas for", "ideas about", "ideas on", "about", "on",
	}
	articles = []string{"the", "a", "an"}
)

// topicPhrase strips the instruction from message and returns what it is
// about, at most maxPhraseRunes long and cut at a word boundary.
func topicPhrase(message string) string {
	s := strings.Join(strings.Fields(message), " ")
	s = strings.TrimRight(s, "?!.:; ")
	whole := s
	for _, list := range [][]string{politeLeadIns, instructionVerbs, framings, articles} {
		s = stripLeadIn(s, list)
	}
	if s == "" {
		s = whole
	}
	if s == "" {
		return "your question"
	}
	stripped := s != whole
	if utf8.RuneCountInString(s) > maxPhraseRunes {
		s = cutRunes(s, maxPhraseRunes)
	}
	// A message that starts with its topic starts with a capital only
	// because it starts a sentence when its first word is a common word
	// ("How can cities ..."); otherwise the capital may be a name and stays.
	if !stripped {
		r, n := utf8.DecodeRuneInString(s)
		if ws := words(s); len(ws) > 0 && unicode.IsUpper(r) && stopwords[ws[0]] {
			s = string(unicode.ToLower(r)) + s[n:]
		}
	}
	return s
}

func stripLeadIn(s string, list []string) string {
	for _, p := range list {
		// EqualFold on the byte prefix, not ToLower on s: lower-casing can
		// change byte lengths (the Kelvin sign becomes "k").
		if len(s) < len(p) || !strings.EqualFold(s[:len(p)], p) {
			continue
		}
		if len(s) == len(p) {
			return ""
		}
		if s[len(p)] == ' ' {
			return strings.TrimSpace(s[len(p):])
		}
	}
	return s
}

// cutRunes shortens s to at most n runes, at the last space if there is one in
// the second half.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := s[:byteOffset(s, n)]
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:-")
}

func byteOffset(s string, runes int) int {
	i := 0
	for off := range s {
		if i == runes {
			return off
		}
		i++
	}
	return len(s)
}

// words returns the lower-case runs of letters and digits in s.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// splitIdentifier splits "EvaluationMode", "web_search" or "ad-topic" into
// lower-case words, dropping words every mode or tool name shares.
func splitIdentifier(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prev := rune(0)
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && prev != 0 && unicode.IsLower(prev):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
		prev = r
	}
	flush()
	return out
}

// stem cuts a word to its first six letters, which is enough to join
// "compare", "comparison" and "comparative" without a real stemmer.
func stem(w string) string {
	if utf8.RuneCountInString(w) <= 6 {
		return w
	}
	return w[:byteOffset(w, 6)]
}

// stemSet stems the content words of ws.
func stemSet(ws []string) map[string]bool {
	out := make(map[string]bool, len(ws))
	for _, w := range ws {
		if !stopwords[w] && !modeNoise[w] {
			out[stem(w)] = true
		}
	}
	return out
}

// concepts returns the stems of the message's content words and of their
// synonyms. A year ("2030") or "how many/much" asks for facts, so it counts
// as research.
func concepts(message string) map[string]bool {
	out := map[string]bool{}
	ws := words(message)
	for i, w := range ws {
		for _, syn := range synonyms[w] {
			out[stem(syn)] = true
		}
		if isYear(w) || (w == "how" && i+1 < len(ws) && (ws[i+1] == "many" || ws[i+1] == "much")) {
			for _, syn := range synonyms["research"] {
				out[stem(syn)] = true
			}
		}
		if !stopwords[w] && !modeNoise[w] {
			out[stem(w)] = true
		}
	}
	return out
}

func isYear(w string) bool {
	return len(w) == 4 && (strings.HasPrefix(w, "19") || strings.HasPrefix(w, "20")) &&
		strings.IndexFunc(w, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

// The synonym table maps a message word to the words that modes and tools of
// that kind are usually named and described with.
var (
	evaluation      = []string{"critique", "critical", "evaluation", "evaluate", "assessment", "review"}
	comparisonWords = []string{"compare", "comparison", "comparative", "contrast"}
	ideation        = []string{"brainstorm", "ideation", "ideas", "creative"}
	debate          = []string{"debate", "perspectives", "argue"}
	research        = []string{"research", "search", "facts"}
	solving         = []string{"problem", "solving", "think", "reasoning"}
	reasoning       = []string{"think", "reasoning"}
	reflection      = []string{"reflect", "reflection"}

	synonyms = map[string][]string{
		"critique": evaluation, "criticise": evaluation, "criticize": evaluation, "critic": evaluation,
		"evaluate": evaluation, "evaluation": evaluation, "assess": evaluation, "assessment": evaluation,
		"review": evaluation, "judge": evaluation, "flaws": evaluation, "weaknesses": evaluation,
		"strengths": evaluation, "critical": evaluation,

		"compare": comparisonWords, "comparison": comparisonWords, "versus": comparisonWords, "vs": comparisonWords,
		"contrast": comparisonWords, "difference": comparisonWords, "differences": comparisonWords, "better": comparisonWords,
		"tradeoffs": comparisonWords, "alternatives": comparisonWords,

		"brainstorm": ideation, "ideas": ideation, "idea": ideation, "innovative": ideation,
		"creative": ideation, "invent": ideation, "imagine": ideation, "ways": ideation,

		"debate": debate, "whether": debate, "argue": debate, "controversial": debate,
		"pros": debate, "cons": debate, "perspectives": debate, "viewpoints": debate,

		"research": research, "history": research, "historical": research, "latest": research,
		"news": research, "statistics": research, "data": research,
		"trends": research, "forecast": research, "predict": research, "search": research,
		"find": research, "sources": research, "evidence": research,

		"solve": solving, "solving": solving, "problem": solving, "problems": solving,
		"fix": solving, "plan": solving, "strategy": solving, "approach": solving,

		"think": reasoning, "reason": reasoning, "reasoning": reasoning, "explain": reasoning,
		"why": reasoning,

		"reflect": reflection, "reflection": reflection, "lessons": reflection, "retrospective": reflection,
	}

	// modeNoise are words nearly every mode or tool text contains; matching
	// them says nothing about fit.
	modeNoise = map[string]bool{
		"mode": true, "modes": true, "step": true, "steps": true, "sequence": true, "flow": true,
		"based": true, "structured": true, "default": true, "cognitive": true, "tool": true,
		"tools": true, "use": true, "using": true, "agent": true,
	}

	stopwords = map[string]bool{}
)

func init() {
	for _, w := range strings.Fields(`a an the and or but if then else of to in on at by for with from into
		onto over under about as is are was were be been being am do does did doing have has had having
		i me my we our you your he she it its they them their this that these those there here what which
		who whom whose when where how can could should would will shall may might must not no nor so than
		too very just also only all any both each few more most other some such own same again further
		once please let lets up down out off get got make made want like tell give show`) {
		stopwords[w] = true
	}
}
