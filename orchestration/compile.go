package orchestration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
)

// Condition types.
const (
	CondToolUsed          = "tool_used"
	CondSequenceMatch     = "sequence_match"
	CondMessageContains   = "message_contains"
	CondMessageStartsWith = "message_starts_with"
	CondMessageRegex      = "message_regex"
	CondNotRecentlyUsed   = "not_recently_used"
)

// ConditionTypes lists the condition types in the order the documentation
// gives them.
var ConditionTypes = []string{
	CondToolUsed, CondSequenceMatch, CondMessageContains,
	CondMessageStartsWith, CondMessageRegex, CondNotRecentlyUsed,
}

// MaxRegexLength bounds message_regex values, so that a template cannot make
// every user message expensive to evaluate.
const MaxRegexLength = 1024

// DefaultHistoryLimit is how many tool uses a session remembers.
const DefaultHistoryLimit = 100

// Config says what an Engine runs on besides the Spec.
type Config struct {
	// Tools are the agent's tools: the template's nodes without the llm.*
	// entries, in template order.
	Tools []string
	// Unavailable names agent tools that the runtime cannot run. They are
	// never offered; a step whose sequence needs one falls back to the step's
	// other tools with a warning.
	Unavailable []string
	// HistoryLimit is how many tool uses a session keeps (default 100).
	HistoryLimit int
	// RequireApproval lists tool patterns whose calls wait for a person's
	// approval in every step (the template's options.requireApproval); a
	// step's own requireApproval adds to it. Its diagnostics are located at
	// "options.requireApproval".
	RequireApproval []string
	// ClientTools lists the names or patterns of the client tools the
	// template orchestrates (options.clientTools): tools a request's client
	// brings and runs itself. A step's sequence may name them like the
	// agent's own tools; a request that brings them gets them offered by
	// the step's rules (OfferWith). Its diagnostics are located at
	// "options.clientTools".
	ClientTools []string
}

// New checks spec against cfg and compiles it. It reports every problem in
// one pass; the Engine is nil when any of them is an error. Paths in the
// diagnostics start at "orchestration".
func New(spec *Spec, cfg Config) (*Engine, Diagnostics) {
	d := &diagnoser{}
	e := compile(spec, cfg, d)
	if d.list.HasErrors() {
		return nil, d.list
	}
	return e, d.list
}

// MustNew is New for specs known to be valid (tests, embedded templates). It
// panics on errors.
func MustNew(spec *Spec, cfg Config) *Engine {
	e, ds := New(spec, cfg)
	if err := ds.Err(); err != nil {
		panic(err)
	}
	return e
}

func compile(spec *Spec, cfg Config, d *diagnoser) *Engine {
	if spec == nil {
		spec = &Spec{}
	}
	e := &Engine{
		historyLimit: cfg.HistoryLimit,
		defaultStep:  -1,
		byName:       make(map[string]int, len(spec.Steps)),
	}
	if e.historyLimit <= 0 {
		e.historyLimit = DefaultHistoryLimit
	}
	switch spec.StepScope {
	case "", ScopeSession:
	case ScopeTurn:
		e.turnScope = true
	default:
		d.errorf("orchestration.stepScope", "unknown step scope %q (known: %s, %s)", spec.StepScope, ScopeSession, ScopeTurn)
	}

	unknownKeys(d, "orchestration", "", spec.Extra, Keys(Spec{}))

	agentTools := make(map[string]bool, len(cfg.Tools))
	for _, t := range cfg.Tools {
		agentTools[t] = true
	}
	unavailable := make(map[string]bool, len(cfg.Unavailable))
	for _, t := range cfg.Unavailable {
		unavailable[t] = true
	}
	for _, t := range cfg.Tools {
		if !unavailable[t] && !slices.Contains(e.tools, t) {
			e.tools = append(e.tools, t)
		}
	}
	e.approval = approvalPatterns(cfg.RequireApproval, cfg.Tools, "options", d)
	e.client = clientPatterns(cfg.ClientTools, cfg.Tools, d)

	for i := range spec.Steps {
		s := &spec.Steps[i]
		path := fmt.Sprintf("orchestration.steps[%d] %q", i, s.Name)
		st := step{name: s.Name, description: s.Description, isDefault: s.IsDefault}
		keyPath, inStep := fmt.Sprintf("orchestration.steps[%d]", i), fmt.Sprintf("step %q", s.Name)
		unknownKeys(d, keyPath, inStep, s.Extra, Keys(Step{}))
		if s.AvailableTools != nil {
			unknownKeys(d, keyPath+".availableTools", inStep, s.AvailableTools.Extra, Keys(ToolFilter{}))
		}
		for k, c := range s.Conditions {
			unknownKeys(d, fmt.Sprintf("%s.conditions[%d]", keyPath, k), inStep, c.Extra, Keys(Condition{}))
		}

		if strings.TrimSpace(s.Name) == "" {
			d.errorf(fmt.Sprintf("orchestration.steps[%d]", i), "name: a step needs a name")
		} else if j, dup := e.byName[s.Name]; dup {
			d.errorf(path, "name: duplicate step name (also orchestration.steps[%d])", j)
		} else {
			e.byName[s.Name] = i
		}
		if s.IsDefault {
			if e.defaultStep >= 0 {
				d.errorf(path, "isDefault: more than one default step (orchestration.steps[%d] %q is default too)", e.defaultStep, spec.Steps[e.defaultStep].Name)
			} else {
				e.defaultStep = i
			}
		}

		// The step's tools: allowed (all when empty) minus denied.
		var allowed, denied []string
		if s.AvailableTools != nil {
			allowed, denied = s.AvailableTools.Allowed, s.AvailableTools.Denied
		}
		st.allowed, st.denied = allowed, denied
		for _, t := range cfg.Tools {
			if (len(allowed) == 0 || matchAny(allowed, t)) && !matchAny(denied, t) && !unavailable[t] && !slices.Contains(st.tools, t) {
				st.tools = append(st.tools, t)
			}
		}
		for k, p := range allowed {
			if !slices.ContainsFunc(cfg.Tools, func(t string) bool { return matchPattern(p, t) }) && !e.mayMatchClient(p) {
				d.warnf(path, "availableTools.allowed[%d]: %q matches none of the agent's tools (%s)", k, p, listOrNone(cfg.Tools))
			}
		}

		// The sequence: every tool must be the agent's and allowed in this step.
		for k, g := range s.Sequence {
			gpath := fmt.Sprintf("%s: sequence[%d]", path, k)
			if len(g) == 0 {
				d.errorf(gpath, "an empty group of tools")
				continue
			}
			var offer, client []string
			bad := false
			for _, t := range g {
				switch {
				case !agentTools[t] && !matchAny(e.client, t):
					d.errorf(gpath, "tool %q is not one of the agent's tools (%s), nor a client tool the template declares (options.clientTools)", t, listOrNone(cfg.Tools))
					bad = true
				case len(allowed) > 0 && !matchAny(allowed, t):
					d.errorf(gpath, "tool %q is not in this step's availableTools.allowed", t)
					bad = true
				case matchAny(denied, t):
					d.errorf(gpath, "tool %q is excluded by this step's availableTools.denied", t)
					bad = true
				case !agentTools[t]:
					client = append(client, t)
				case slices.Contains(st.tools, t):
					offer = append(offer, t)
				}
			}
			st.sequence = append(st.sequence, slices.Clone(g))
			st.client = append(st.client, client)
			blocked := ""
			if len(offer) == 0 && len(client) == 0 && !bad {
				// Every tool of the group is the agent's and allowed here,
				// but the runtime provides none: no call can pass this
				// position. Rather than offer tools that never advance the
				// sequence as if it went on, the step says it stops here.
				blocked = fmt.Sprintf("the sequence cannot pass position %d (%s): no tool of it is provided by this runtime, so the step offers its tools instead", k+1, g)
				d.warnf(gpath, "no tool of position %d (%s) is provided by this runtime, so the sequence cannot pass it: once there, the step offers its tools (%s) and says the sequence stops", k+1, g, listOrNone(st.tools))
			}
			if len(offer) == 0 {
				offer = st.tools
			}
			st.offers = append(st.offers, offer)
			st.blocked = append(st.blocked, blocked)
		}

		st.approval = approvalPatterns(s.RequireApproval, cfg.Tools, path+":", d)

		// Conditions.
		if s.IsDefault && len(s.Conditions) > 0 {
			d.warnf(path, "conditions: the default step's conditions are ignored")
		}
		if !s.IsDefault && len(s.Conditions) == 0 {
			d.warnf(path, "conditions: a step without conditions that is not the default can never activate")
		}
		for k, c := range s.Conditions {
			cpath := fmt.Sprintf("%s: conditions[%d]", path, k)
			cond, ok := compileCondition(c, cpath, d)
			if !ok {
				continue
			}
			if cond.kind == condSequenceMatch && len(s.Sequence) == 0 {
				d.warnf(cpath+".type", "sequence_match on a step without a sequence never passes")
			}
			if cond.isMessage() {
				cond.msgIdx = e.msgConds
				e.msgConds++
			}
			st.conds = append(st.conds, cond)
		}
		e.steps = append(e.steps, st)
	}
	e.warnShadowed(spec, d)
	return e
}

// unknownKeys reports every key of extra, the fields of an object of the
// orchestration at path that this runtime does not read, as an error,
// with the nearest known key: inside the orchestration a key read as
// nothing changes what the model may do unnoticed (a step whose
// "availableTool" is ignored offers every tool). where names the step.
func unknownKeys(d *diagnoser, path, where string, extra map[string]json.RawMessage, known []string) {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		msg := UnknownKey(k, known)
		if where != "" {
			msg += " (" + where + ")"
		}
		d.errorf(path+"."+k, "%s", msg)
	}
}

// clientPatterns checks options.clientTools: an empty pattern is an error,
// and so is one that matches one of the agent's own tools (a client tool
// of that name is refused in every request, so the template would
// orchestrate a tool no client can bring).
func clientPatterns(patterns, tools []string, d *diagnoser) []string {
	var out []string
	for k, p := range patterns {
		path := fmt.Sprintf("options.clientTools[%d]", k)
		if strings.TrimSpace(p) == "" {
			d.errorf(path, "an empty tool pattern")
			continue
		}
		if i := slices.IndexFunc(tools, func(t string) bool { return matchPattern(p, t) }); i >= 0 {
			d.errorf(path, "%q matches the agent's own tool %q: a client tool must not have the name of one of the agent's tools", p, tools[i])
			continue
		}
		out = append(out, p)
	}
	return out
}

// mayMatchClient reports whether the pattern p may match a client tool
// the template declares: it names one, matches one of the declared names,
// or is matched by a declared pattern.
func (e *Engine) mayMatchClient(p string) bool {
	for _, c := range e.client {
		if c == p || matchPattern(p, c) || matchPattern(c, p) {
			return true
		}
	}
	return false
}

// approvalPatterns checks requireApproval patterns: an empty one is an
// error, one that matches none of the agent's tools a warning (a typo would
// otherwise let the tool run unasked).
func approvalPatterns(patterns, tools []string, where string, d *diagnoser) []string {
	var out []string
	for k, p := range patterns {
		path := fmt.Sprintf("%s.requireApproval[%d]", where, k)
		if strings.HasSuffix(where, ":") {
			path = fmt.Sprintf("%s requireApproval[%d]", where, k)
		}
		switch {
		case strings.TrimSpace(p) == "":
			d.errorf(path, "an empty tool pattern")
			continue
		case !slices.ContainsFunc(tools, func(t string) bool { return matchPattern(p, t) }):
			d.warnf(path, "%q matches none of the agent's tools (%s), so it asks approval for nothing", p, listOrNone(tools))
		}
		out = append(out, p)
	}
	return out
}

func compileCondition(c Condition, path string, d *diagnoser) (condition, bool) {
	cond := condition{value: c.Value}
	ok := true
	needValue := func() {
		if c.Value == "" {
			d.errorf(path+".value", "%s needs a value", c.Type)
			ok = false
		}
	}
	switch c.Type {
	case CondToolUsed:
		cond.kind = condToolUsed
		needValue()
	case CondSequenceMatch:
		cond.kind = condSequenceMatch
	case CondMessageContains:
		cond.kind = condMessageContains
		needValue()
		cond.value = foldString(c.Value)
	case CondMessageStartsWith:
		cond.kind = condMessageStartsWith
		needValue()
		cond.value = foldString(c.Value)
	case CondMessageRegex:
		cond.kind = condMessageRegex
		needValue()
		if len(c.Value) > MaxRegexLength {
			d.errorf(path+".value", "regex is %d characters long; the limit is %d", len(c.Value), MaxRegexLength)
			ok = false
		} else if c.Value != "" {
			re, err := regexp.Compile("(?i)" + c.Value)
			if err != nil {
				d.errorf(path+".value", "invalid regex %q: %s", c.Value, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
				ok = false
			}
			cond.re = re
		}
	case CondNotRecentlyUsed:
		cond.kind = condNotRecentlyUsed
		needValue()
		switch {
		case c.Window == nil:
			d.errorf(path+".window", "not_recently_used needs a window (how many recent tool uses to look at, >= 1)")
			ok = false
		case *c.Window < 1:
			d.errorf(path+".window", "window must be at least 1, got %d", *c.Window)
			ok = false
		default:
			cond.window = *c.Window
		}
	case "":
		d.errorf(path+".type", "missing condition type (known: %s)", strings.Join(ConditionTypes, ", "))
		return cond, false
	default:
		d.errorf(path+".type", "unknown condition %q (known: %s)", c.Type, strings.Join(ConditionTypes, ", "))
		return cond, false
	}
	return cond, ok
}

// warnShadowed warns about steps that can never win: an earlier step with
// conditions is tried first, and when its conditions are a subset of this
// step's (identical ones included), it passes whenever this step would.
func (e *Engine) warnShadowed(spec *Spec, d *diagnoser) {
	keys := make([][]string, len(spec.Steps))
	for i, s := range spec.Steps {
		if s.IsDefault || len(s.Conditions) == 0 {
			continue
		}
		seq := make([]string, len(s.Sequence))
		for k, g := range s.Sequence {
			gs := slices.Clone(g)
			sort.Strings(gs)
			seq[k] = strings.Join(gs, "|")
		}
		for _, c := range s.Conditions {
			key := c.Type + "\x00" + c.Value
			switch c.Type {
			case CondMessageContains, CondMessageStartsWith:
				key = c.Type + "\x00" + foldString(c.Value)
			case CondMessageRegex:
				key = c.Type + "\x00" + regexKey(c.Value)
			case CondNotRecentlyUsed:
				if c.Window != nil {
					key += fmt.Sprintf("\x00%d", *c.Window)
				}
			case CondSequenceMatch:
				key += "\x00" + strings.Join(seq, ",")
			}
			if !slices.Contains(keys[i], key) {
				keys[i] = append(keys[i], key)
			}
		}
	}
	for i := range spec.Steps {
		if keys[i] == nil {
			continue
		}
		for j := 0; j < i; j++ {
			if keys[j] == nil || !subset(keys[j], keys[i]) {
				continue
			}
			path := fmt.Sprintf("orchestration.steps[%d] %q", i, spec.Steps[i].Name)
			what := "identical conditions"
			if len(keys[j]) < len(keys[i]) {
				what = "a subset of these conditions"
			}
			d.warnf(path, "conditions: this step can never win: the earlier step orchestration.steps[%d] %q has %s and is chosen first", j, spec.Steps[j].Name, what)
			break
		}
	}
}

// regexKey is the form of a message_regex value under which two regexes
// that match the same messages by construction compare equal: the parsed
// expression, case-folded as the engine runs it ((?i)) and simplified, so
// that "abc" and "ABC" are one condition while ^\d+$ and ^\D+$ stay two (a
// plain lower-casing of the source confused the escapes \d and \D, \w and
// \W, \s and \S, \b and \B). An invalid regex, already reported as an
// error, keys by its source.
func regexKey(value string) string {
	re, err := syntax.Parse(value, syntax.Perl|syntax.FoldCase)
	if err != nil {
		return "\x00" + value
	}
	return re.Simplify().String()
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
