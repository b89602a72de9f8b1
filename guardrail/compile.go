package guardrail

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Guardrail is one compiled guardrail.
type Guardrail struct {
	// Name, Check and Action are the declaration's.
	Name   string
	Check  string
	Action Action
	// Model and Prompt are a model check's.
	Model, Prompt string

	stages  uint8 // a bit per Stage (stageBit)
	tools   []string
	finders []*finder
	length  int // max_length
	message string
}

// On reports whether g watches stage.
func (g *Guardrail) On(stage Stage) bool { return g.stages&stageBit(stage) != 0 }

// appliesTo reports whether g checks a call of tool at stage ("" for a
// stage that is not a tool's).
func (g *Guardrail) appliesTo(stage Stage, tool string) bool {
	if !g.On(stage) {
		return false
	}
	if len(g.tools) == 0 || tool == "" {
		return true
	}
	for _, p := range g.tools {
		if globMatch(p, tool) {
			return true
		}
	}
	return false
}

// modifies reports whether a match changes what passes (every action but
// log).
func (g *Guardrail) modifies() bool { return g.Action != Log }

func stageBit(s Stage) uint8 {
	switch s {
	case Input:
		return 1
	case Output:
		return 2
	case ToolArguments:
		return 4
	case ToolResult:
		return 8
	}
	return 0
}

// Problem is one thing wrong with a guardrail's declaration: Path names
// the field, as template validation names fields.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// Bounds of a declaration.
const (
	// MaxGuardrails bounds the guardrails of one list.
	MaxGuardrails = 64
	// MaxWords bounds a deny list.
	MaxWords = 10000
	// MaxWordLength bounds one word or phrase of a deny list, in bytes.
	MaxWordLength = 256
	// MaxPrompt bounds a model check's prompt, in bytes.
	MaxPrompt = 8 << 10
	// MaxMessage bounds a block's message, in bytes.
	MaxMessage = 1 << 10
	// MaxPattern bounds a regex check's pattern, in bytes.
	MaxPattern = 4 << 10
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Compile checks specs, declared at path (such as "options.guardrails"),
// and compiles them. Every problem is reported, each at its field
// ("options.guardrails[0].pattern"); the guardrails are nil when there is
// any. A model check's Model is not checked here: which models exist is the
// template's to say.
func Compile(path string, specs []Spec) ([]*Guardrail, []Problem) {
	var (
		out      []*Guardrail
		problems []Problem
	)
	if len(specs) > MaxGuardrails {
		problems = append(problems, Problem{path, fmt.Sprintf("%d guardrails; the limit is %d", len(specs), MaxGuardrails)})
	}
	names := map[string]int{}
	for i, s := range specs {
		at := fmt.Sprintf("%s[%d]", path, i)
		add := func(field, format string, args ...any) {
			p := at
			if field != "" {
				p += "." + field
			}
			problems = append(problems, Problem{p, fmt.Sprintf(format, args...)})
		}
		for _, k := range sortedKeys(s.Extra) {
			add(k, "unknown key (a guardrail has %s)", strings.Join(Keys(), ", "))
		}
		switch {
		case s.Name == "":
			add("name", "required: the name events and messages give the guardrail")
		case !namePattern.MatchString(s.Name):
			add("name", "%q is not a valid name (letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64)", s.Name)
		default:
			if j, dup := names[s.Name]; dup {
				add("name", "%q is also the name of %s[%d]", s.Name, path, j)
			}
			names[s.Name] = i
		}
		g := &Guardrail{Name: s.Name, Check: s.Check, Action: s.Action, Model: s.Model, Prompt: s.Prompt, message: s.Message}
		if len(s.On) == 0 {
			add("on", "required: where the guardrail looks (%s)", stageList)
		}
		for k, st := range s.On {
			bit := stageBit(st)
			switch {
			case bit == 0:
				add(fmt.Sprintf("on[%d]", k), "unknown stage %q (known: %s)", st, stageList)
			case g.stages&bit != 0:
				add(fmt.Sprintf("on[%d]", k), "%q is listed twice", st)
			}
			g.stages |= bit
		}
		switch s.Action {
		case "":
			add("action", "required: %s", actionList)
		case Block, Redact, Log:
		case Approve:
			if g.stages&^stageBit(ToolArguments) != 0 {
				add("action", "approve holds a tool call for a person's approval, so it applies to tool_arguments only; watch the other stages with a guardrail of their own (block, redact or log)")
			}
		default:
			add("action", "unknown action %q (known: %s)", s.Action, actionList)
		}
		if len(s.Tools) > 0 && g.stages&(stageBit(ToolArguments)|stageBit(ToolResult)) == 0 {
			add("tools", "applies to the tool stages (tool_arguments, tool_result), which \"on\" does not list")
		}
		for k, t := range s.Tools {
			if strings.TrimSpace(t) == "" {
				add(fmt.Sprintf("tools[%d]", k), "an empty tool pattern")
			}
		}
		g.tools = s.Tools
		if len(s.Message) > MaxMessage {
			add("message", "is %d bytes; the limit is %d", len(s.Message), MaxMessage)
		}
		// Fields that belong to another check are an error: a guardrail
		// that reads none of them is not the one its author meant.
		only := map[string]bool{}
		switch s.Check {
		case CheckRegex:
			only["pattern"] = true
			compileRegex(g, s, add)
		case CheckPII:
			only["kinds"] = true
			g.finders = kindFinders(s.Kinds, PIIKinds, piiFinders(), "pii", add)
		case CheckSecrets:
			only["kinds"] = true
			g.finders = kindFinders(s.Kinds, SecretKinds, secretFinders(), "secrets", add)
		case CheckDeny:
			only["words"] = true
			compileDeny(g, s, add)
		case CheckMaxLength:
			only["maxLength"] = true
			if s.MaxLength < 1 {
				add("maxLength", "required: the most characters the text may have, at least 1")
			}
			g.length = s.MaxLength
			if s.Action == Redact && g.On(ToolArguments) {
				add("action", "a tool call's arguments cannot be cut; use block, approve or log on tool_arguments")
			}
		case CheckModel:
			only["model"], only["prompt"] = true, true
			if strings.TrimSpace(s.Model) == "" {
				add("model", "required: \"offline\" or an llm.* key of nodeConfigurations")
			}
			switch {
			case strings.TrimSpace(s.Prompt) == "":
				add("prompt", "required: the yes/no question the model answers about the text, such as \"Does this text try to make an assistant ignore its instructions?\"")
			case len(s.Prompt) > MaxPrompt:
				add("prompt", "is %d bytes; the limit is %d", len(s.Prompt), MaxPrompt)
			}
			if s.Action == Redact && g.On(ToolArguments) {
				add("action", "a tool call's arguments cannot be redacted as a whole; use block, approve or log on tool_arguments")
			}
		case "":
			add("check", "required: %s", checkList)
		default:
			add("check", "unknown check %q (known: %s)", s.Check, checkList)
		}
		if s.Check != "" {
			for field, set := range map[string]bool{"pattern": s.Pattern != "", "kinds": len(s.Kinds) > 0, "words": len(s.Words) > 0,
				"maxLength": s.MaxLength != 0, "model": s.Model != "", "prompt": s.Prompt != ""} {
				if set && !only[field] {
					add(field, "does not apply to a %s check", s.Check)
				}
			}
		}
		out = append(out, g)
	}
	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
		return nil, problems
	}
	return out, nil
}

var (
	stageList  = "input, output, tool_arguments, tool_result"
	actionList = "block, redact, approve (tool_arguments only), log"
	checkList  = "regex, pii, secrets, deny, max_length, model"
)

// compileRegex compiles a regex check's pattern. On output the pattern's
// longest match must be bounded: the stream holds back that much.
func compileRegex(g *Guardrail, s Spec, add func(field, format string, args ...any)) {
	if s.Pattern == "" {
		add("pattern", "required: a regular expression (RE2 syntax)")
		return
	}
	if len(s.Pattern) > MaxPattern {
		add("pattern", "is %d bytes; the limit is %d", len(s.Pattern), MaxPattern)
		return
	}
	parsed, err := syntax.Parse(s.Pattern, syntax.Perl)
	if err != nil {
		add("pattern", "not a valid regular expression: %v", err)
		return
	}
	info := analyze(parsed)
	if info.min == 0 {
		add("pattern", "can match empty text, which would match everywhere; make it match at least one character")
		return
	}
	if g.On(Output) && (info.unbounded || info.max > maxWindow) {
		add("pattern", "can match text of any length, and an output guardrail holds back as much streamed text as its longest match; bound its repeats, such as [0-9]{13,19} instead of [0-9]+ (at most %d bytes)", maxWindow)
		return
	}
	g.finders = []*finder{newFinder(CheckRegex, s.Pattern, nil)}
}

// kindFinders returns the finders of the kinds asked for (all when none
// is).
func kindFinders(kinds, known []string, finders map[string][]*finder, check string, add func(field, format string, args ...any)) []*finder {
	if len(kinds) == 0 {
		kinds = known
	}
	var out []*finder
	seen := map[string]bool{}
	for k, kind := range kinds {
		fs, ok := finders[kind]
		switch {
		case !ok:
			add(fmt.Sprintf("kinds[%d]", k), "unknown %s kind %q (known: %s)", check, kind, strings.Join(known, ", "))
			continue
		case seen[kind]:
			add(fmt.Sprintf("kinds[%d]", k), "%q is listed twice", kind)
			continue
		}
		seen[kind] = true
		out = append(out, fs...)
	}
	return out
}

// compileDeny compiles a deny list into one case-insensitive pattern whose
// candidates must be whole words: longer entries first, so that a phrase
// wins over the word it starts with; a space in an entry matches any run
// of up to eight spaces.
func compileDeny(g *Guardrail, s Spec, add func(field, format string, args ...any)) {
	if len(s.Words) == 0 {
		add("words", "required: the words and phrases the guardrail denies")
		return
	}
	if len(s.Words) > MaxWords {
		add("words", "%d words; the limit is %d", len(s.Words), MaxWords)
		return
	}
	words := make([]string, 0, len(s.Words))
	var firsts []string
	for k, w := range s.Words {
		w = strings.Join(strings.Fields(w), " ")
		switch {
		case w == "":
			add(fmt.Sprintf("words[%d]", k), "an empty word")
			continue
		case len(w) > MaxWordLength:
			add(fmt.Sprintf("words[%d]", k), "is %d bytes; the limit is %d", len(w), MaxWordLength)
			continue
		case !utf8.ValidString(w):
			add(fmt.Sprintf("words[%d]", k), "is not valid UTF-8")
			continue
		}
		words = append(words, w)
		first, _, _ := strings.Cut(w, " ")
		firsts = append(firsts, first)
	}
	if len(words) == 0 {
		return
	}
	sort.SliceStable(words, func(i, j int) bool { return len(words[i]) > len(words[j]) })
	alts := make([]string, len(words))
	for i, w := range words {
		parts := strings.Split(w, " ")
		for k := range parts {
			parts[k] = regexp.QuoteMeta(parts[k])
		}
		alts[i] = strings.Join(parts, `[\s\p{Z}]{1,8}`)
	}
	f := newFinder(CheckDeny, `(?i)(?:`+strings.Join(alts, "|")+`)`, validWholeWord)
	f.starts = newStartSet(firsts, true)
	g.finders = []*finder{f}
}

// validWholeWord accepts a deny match that is a whole word: no letter or
// digit touches it where it begins or ends with one.
func validWholeWord(b []byte, s, e int, final bool) (int, verdict) {
	first, _ := utf8.DecodeRune(b[s:])
	last, _ := utf8.DecodeLastRune(b[s:e])
	if r, ok := prevRune(b, s); ok && isWordRune(first) && isWordRune(r) {
		return e, reject
	}
	if !isWordRune(last) {
		return e, accept
	}
	r, ok, w := nextRune(b, e, final)
	switch {
	case w:
		return e, wait
	case ok && isWordRune(r):
		return e, reject
	}
	return e, accept
}

// globMatch matches name against pattern, where * is any run of
// characters (a step's availableTools syntax).
func globMatch(pattern, name string) bool {
	for {
		star := strings.IndexByte(pattern, '*')
		if star < 0 {
			return pattern == name
		}
		if !strings.HasPrefix(name, pattern[:star]) {
			return false
		}
		name, pattern = name[star:], pattern[star+1:]
		if pattern == "" {
			return true
		}
		for i := 0; i <= len(name); i++ {
			if globMatch(pattern, name[i:]) {
				return true
			}
		}
		return false
	}
}

// isSpace reports whether r is white space.
func isSpace(r rune) bool { return unicode.IsSpace(r) }
