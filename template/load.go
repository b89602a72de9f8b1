package template

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/guardrail"
	"github.com/agentdock-go/agentdock/internal/jsonpos"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// Config says what the runtime offers the templates it loads.
type Config struct {
	// Provided names the tools the runtime can run. A node naming another
	// tool is a warning, and that tool is never offered. Nil skips the check.
	Provided []string
	// Strict makes a node naming a tool that is not provided an error: a
	// runtime that lists every tool it has (agent.Load) knows such a node
	// for a misspelling, which must stop the start rather than leave the
	// tool silently unoffered.
	Strict bool
	// HistoryLimit is how many tool uses a session keeps when the template
	// does not say (options.historyLimit); default 100.
	HistoryLimit int
	// MCPServers names the server-wide MCP servers (MCP_SERVERS_FILE). A
	// node "<server>__<tool>" naming one of them, or one of the template's
	// own mcpServers, counts as provided: whether the server lists the tool
	// is known only once it runs (see tools/mcp).
	MCPServers []string
}

// Loaded is a template ready to run: the template, its compiled
// orchestration and the warnings it loaded with. An agent.Agent runs it.
type Loaded struct {
	// File is where the template came from ("" when parsed from memory).
	File     string
	Template *Template
	Engine   *orchestration.Engine
	Warnings orchestration.Diagnostics
}

// ID returns the agent's ID.
func (a *Loaded) ID() string { return a.Template.AgentID }

// MaxFileSize bounds a template file, so that a stray large file in a
// templates directory cannot exhaust memory.
const MaxFileSize = 4 << 20

var agentIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Parse decodes one template. file names it in diagnostics. A syntax error is
// reported with its line and column.
func Parse(file string, data []byte) (*Template, orchestration.Diagnostics) {
	var t Template
	if err := json.Unmarshal(data, &t); err != nil {
		msg := jsonpos.DescribeWith(data, err, -1, func(p jsonpos.Path) string { return fieldPath(data, p) })
		return nil, orchestration.Diagnostics{{Severity: orchestration.SeverityError, File: file, Message: msg}}
	}
	return &t, nil
}

// fieldPath renders the path of a wrongly typed value the way validation
// names fields, with the step's name: `orchestration.steps[2]
// "EvaluationMode": conditions[0].window` rather than a bare index that
// leaves the reader counting steps.
func fieldPath(data []byte, p jsonpos.Path) string {
	if len(p) < 3 || p[0].Key != "orchestration" || p[1].Key != "steps" || p[2].Index < 0 {
		return p.String()
	}
	head := p[:3].String()
	var doc struct {
		Orchestration struct {
			Steps []struct {
				Name json.RawMessage `json:"name"`
			} `json:"steps"`
		} `json:"orchestration"`
	}
	// The document is well-formed (this is a type error), but the step's
	// name may be the wrongly typed value itself: then the index is all
	// there is.
	if json.Unmarshal(data, &doc) == nil && p[2].Index < len(doc.Orchestration.Steps) {
		var name string
		if json.Unmarshal(doc.Orchestration.Steps[p[2].Index].Name, &name) == nil && name != "" {
			head += " " + strconv.Quote(name)
		}
	}
	if len(p) == 3 {
		return head
	}
	return head + ": " + p[3:].String()
}

// Compile validates t and compiles its orchestration. The engine is nil when
// any diagnostic is an error; every problem is reported, not only the first.
func Compile(file string, t *Template, cfg Config) (*orchestration.Engine, orchestration.Diagnostics) {
	var ds orchestration.Diagnostics
	add := func(sev orchestration.Severity, p, format string, args ...any) {
		ds = append(ds, orchestration.Diagnostic{Severity: sev, File: file, Path: p, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case t.AgentID == "":
		add(orchestration.SeverityError, "agentId", "required: the ID the agent is served under")
	case !agentIDPattern.MatchString(t.AgentID):
		add(orchestration.SeverityError, "agentId", "%q is not a valid ID (letters, digits, '.', '_' and '-', starting with a letter or digit, at most 128)", t.AgentID)
	}
	if strings.TrimSpace(t.Name) == "" {
		add(orchestration.SeverityError, "name", "required: the agent's display name")
	}
	llms := 0
	provided := map[string]bool{}
	for _, p := range cfg.Provided {
		provided[p] = true
	}
	var unavailable []string
	for i, n := range t.Nodes {
		if _, agentTool := t.Agents[n]; agentTool {
			continue // provided by its agents entry (checkAgents)
		}
		if strings.HasPrefix(n, "llm.") {
			llms++
			if llms == 2 {
				add(orchestration.SeverityWarning, fmt.Sprintf("nodes[%d]", i), "%q: more than one llm.* node; the first one is used", n)
			}
			continue
		}
		if cfg.Provided != nil && !provided[n] && mcpNode(t, cfg, n) {
			if strings.Contains(n, "*") {
				add(orchestration.SeverityWarning, fmt.Sprintf("nodes[%d]", i), "%q: nodes name MCP tools one by one, so that a tool a server adds later is not offered unnoticed; list them (agentdock mcp list prints them) and use patterns in a step's availableTools", n)
				unavailable = append(unavailable, n)
			}
			continue
		}
		if cfg.Provided != nil && !provided[n] && !slices.Contains(unavailable, n) {
			unavailable = append(unavailable, n)
			if cfg.Strict {
				list := strings.Join(cfg.Provided, ", ")
				if list == "" {
					list = "none"
				}
				add(orchestration.SeverityError, fmt.Sprintf("nodes[%d]", i), "tool %q is not provided (provided: %s); check its spelling", n, list)
				continue
			}
			add(orchestration.SeverityWarning, fmt.Sprintf("nodes[%d]", i), "tool %q is not provided by this runtime; it will not be offered to the model", n)
		}
	}
	for _, p := range mcpconfig.Check(t.MCPServers, "mcpServers") {
		add(orchestration.SeverityError, p.Path, "%s", p.Message)
	}
	for _, name := range t.MCPServers.Names() {
		switch {
		case slices.Contains(cfg.MCPServers, name):
			add(orchestration.SeverityError, "mcpServers."+name, "a server-wide MCP server (MCP_SERVERS_FILE) has this name; rename this one")
		case !slices.ContainsFunc(t.Nodes, func(n string) bool { return strings.HasPrefix(n, name+mcpconfig.Separator) }):
			add(orchestration.SeverityWarning, "mcpServers."+name, "no node names a tool of this server (add \"%s\" to nodes); the agent cannot use it", mcpconfig.ToolName(name, "<tool>"))
		}
	}
	checkAgents(t, cfg, add)
	switch t.ChatSettings.HistoryPolicy {
	case "", HistoryAll, HistoryLastN, HistoryNone:
	default:
		add(orchestration.SeverityError, "chatSettings.historyPolicy", "unknown history policy %q (known: all, lastN, none)", t.ChatSettings.HistoryPolicy)
	}
	if t.ChatSettings.HistoryLength < 0 {
		add(orchestration.SeverityError, "chatSettings.historyLength", "must not be negative, got %d", t.ChatSettings.HistoryLength)
	}
	budget := func(field string, v, limit int) {
		if v < 0 || v > limit {
			add(orchestration.SeverityError, "options."+field, "must be between 1 and %d, got %d", limit, v)
		}
	}
	budget("maxSteps", t.Options.MaxSteps, MaxMaxSteps)
	budget("maxToolCalls", t.Options.MaxToolCalls, MaxMaxToolCalls)
	budget("maxOutputBytes", t.Options.MaxOutputBytes, MaxMaxOutputBytes)
	if n := t.Options.MaxToolResultBytes; n != 0 && (n < MinMaxToolResultBytes || n > MaxMaxToolResultBytes) {
		add(orchestration.SeverityError, "options.maxToolResultBytes", "must be between %d and %d bytes, got %d", MinMaxToolResultBytes, MaxMaxToolResultBytes, n)
	}
	if tt := t.Options.TurnTimeout; tt != "" {
		d, err := time.ParseDuration(tt)
		if err != nil || d < MinTurnTimeout || d > MaxTurnTimeout {
			add(orchestration.SeverityError, "options.turnTimeout", "want a duration between %s and %s such as \"5m\" or \"90s\", got %q", MinTurnTimeout, MaxTurnTimeout, tt)
		}
	}
	switch t.Options.ToolFiltering {
	case "", ToolFilteringStable, ToolFilteringFilter:
	default:
		add(orchestration.SeverityError, "options.toolFiltering", "unknown tool filtering %q (known: %s, which keeps the provider's prompt cache, and %s, which sends only the offered tools)",
			t.Options.ToolFiltering, ToolFilteringStable, ToolFilteringFilter)
	}
	switch t.Options.ClientInstructions {
	case "", ClientInstructionsAllow, ClientInstructionsRefuse:
	default:
		add(orchestration.SeverityError, "options.clientInstructions", "unknown value %q (known: %s, which gives a client's system messages to the model after the template's instructions, and %s, which answers them with a 400)",
			t.Options.ClientInstructions, ClientInstructionsAllow, ClientInstructionsRefuse)
	}
	if b := t.Options.Busy; b != "" && !ValidBusy(b) {
		add(orchestration.SeverityError, "options.busy", "unknown busy policy %q (known: %s, which refuses a message sent while a turn runs, %s, which answers it after, and %s, which stops the running turn and answers it at once)",
			b, BusyReject, BusyEnqueue, BusyInterrupt)
	}
	historyLimit := cfg.HistoryLimit
	if n := t.Options.HistoryLimit; n != nil {
		if *n < 1 || *n > MaxHistoryLimit {
			add(orchestration.SeverityError, "options.historyLimit", "must be a whole number from 1 to %d (how many tool uses a session remembers; default %d), got %d",
				MaxHistoryLimit, orchestration.DefaultHistoryLimit, *n)
		} else {
			historyLimit = *n
		}
	}
	checkContext(t, add)
	checkGuardrails(t, add)
	for name, nc := range t.NodeConfigurations {
		if nc.MaxTokens < 0 {
			add(orchestration.SeverityError, "nodeConfigurations."+name+".maxTokens", "must not be negative, got %d", nc.MaxTokens)
		}
		if nc.Temperature != nil && (*nc.Temperature < 0 || *nc.Temperature > 2) {
			add(orchestration.SeverityWarning, "nodeConfigurations."+name+".temperature", "%g is outside the usual range 0..2", *nc.Temperature)
		}
	}
	checkModels(t, add)

	for _, u := range unknownKeys(t) {
		if feature := featureKey(u); feature != "" {
			add(orchestration.SeverityError, u.path, "unknown key; did you mean %q? Read as nothing, it would leave the agent without %s", feature, featureKeys[u.path[:len(u.path)-len(u.key)]+feature])
			continue
		}
		add(orchestration.SeverityWarning, u.path, "%s", orchestration.UnknownKey(u.key, u.known))
	}

	engine, ods := orchestration.New(t.Orchestration, orchestration.Config{
		Tools:           t.Tools(),
		Unavailable:     unavailable,
		HistoryLimit:    historyLimit,
		RequireApproval: t.Options.RequireApproval,
		ClientTools:     t.Options.ClientTools,
	})
	for _, d := range ods {
		d.File = file
		ds = append(ds, d)
	}
	if ds.HasErrors() {
		return nil, ds
	}
	return engine, ds
}

// checkContext checks options.context: its bounds, and that its
// summarizer names a model the template configures.
func checkContext(t *Template, add func(orchestration.Severity, string, string, ...any)) {
	c := t.Options.Context
	if c == nil || c.Off {
		return
	}
	if n := c.MaxInputTokens; n != 0 && (n < MinContextTokens || n > MaxContextTokens) {
		add(orchestration.SeverityError, "options.context.maxInputTokens", "must be from %d to %d input tokens, got %d", MinContextTokens, MaxContextTokens, n)
	}
	if n := c.KeepTurns; n < 0 || n > MaxKeepTurns {
		add(orchestration.SeverityError, "options.context.keepTurns", "must be from 1 to %d turns, got %d", MaxKeepTurns, n)
	}
	if t.ChatSettings.HistoryPolicy == HistoryNone {
		add(orchestration.SeverityWarning, "options.context", "chatSettings.historyPolicy is none: the model sees no history, so there is nothing to summarize")
	}
	s := c.Summarizer
	if s == nil {
		return
	}
	if len(s.Prompt) > MaxSummarizerPrompt {
		add(orchestration.SeverityError, "options.context.summarizer.prompt", "is %d bytes; the limit is %d", len(s.Prompt), MaxSummarizerPrompt)
	}
	if m := s.Model; m != "" && m != SummarizerOffline {
		if _, ok := t.NodeConfigurations[m]; !ok || !strings.HasPrefix(m, "llm.") {
			add(orchestration.SeverityError, "options.context.summarizer.model", "%q names no model: want %q or an llm.* key of nodeConfigurations, such as \"llm.openai\" with its own \"model\"", m, SummarizerOffline)
		}
	}
}

// checkGuardrails checks options.guardrails and every step's guardrails
// (package guardrail reports each problem at its field), that a step's
// guardrail does not take the name of one of the template's, which is in
// force with it, and that a model check names a model the template
// configures.
func checkGuardrails(t *Template, add func(orchestration.Severity, string, string, ...any)) {
	check := func(path string, specs []guardrail.Spec) {
		_, problems := guardrail.Compile(path, specs)
		for _, p := range problems {
			add(orchestration.SeverityError, p.Path, "%s", p.Message)
		}
		for i, g := range specs {
			if g.Check != guardrail.CheckModel || g.Model == "" || g.Model == GuardrailOffline {
				continue
			}
			if _, ok := t.NodeConfigurations[g.Model]; !ok || !strings.HasPrefix(g.Model, "llm.") {
				add(orchestration.SeverityError, fmt.Sprintf("%s[%d].model", path, i), "%q names no model: want %q or an llm.* key of nodeConfigurations, such as \"llm.openai\" with its own \"model\"", g.Model, GuardrailOffline)
			}
		}
	}
	check("options.guardrails", t.Options.Guardrails)
	for i, st := range t.Steps() {
		path := fmt.Sprintf("orchestration.steps[%d] %q: guardrails", i, st.Name)
		check(path, st.Guardrails)
		for k, g := range st.Guardrails {
			if slices.ContainsFunc(t.Options.Guardrails, func(o guardrail.Spec) bool { return o.Name == g.Name && g.Name != "" }) {
				add(orchestration.SeverityError, fmt.Sprintf("%s[%d].name", path, k), "%q is also the name of a guardrail of options.guardrails, which is in force in this step too; rename one", g.Name)
			}
		}
	}
}

// checkModels checks the models the template routes to: each step's
// model and each model's fallbacks must name an llm.* key of
// nodeConfigurations.
func checkModels(t *Template, add func(orchestration.Severity, string, string, ...any)) {
	isModel := func(key string) bool {
		_, ok := t.NodeConfigurations[key]
		return ok && strings.HasPrefix(key, "llm.")
	}
	known := func() string {
		var keys []string
		for k := range t.NodeConfigurations {
			if strings.HasPrefix(k, "llm.") {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return "none: add one, such as \"llm.cheap\": {\"model\": \"gpt-4o-mini\"}"
		}
		sort.Strings(keys)
		return strings.Join(keys, ", ")
	}
	for i, s := range t.Steps() {
		if s.Model != "" && !isModel(s.Model) {
			add(orchestration.SeverityError, fmt.Sprintf("orchestration.steps[%d] %q: model", i, s.Name),
				"%q names no model: want an llm.* key of nodeConfigurations (known: %s)", s.Model, known())
		}
	}
	names := make([]string, 0, len(t.NodeConfigurations))
	for name := range t.NodeConfigurations {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		nc := t.NodeConfigurations[name]
		path := "nodeConfigurations." + name
		if nc.ContextWindow < 0 {
			add(orchestration.SeverityError, path+".contextWindow", "must not be negative, got %d", nc.ContextWindow)
		}
		if len(nc.Fallbacks) > 0 && !strings.HasPrefix(name, "llm.") {
			add(orchestration.SeverityError, path+".fallbacks", "only a model (an llm.* node) has fallbacks")
			continue
		}
		for i, f := range nc.Fallbacks {
			p := fmt.Sprintf("%s.fallbacks[%d]", path, i)
			switch {
			case f == name:
				add(orchestration.SeverityError, p, "%q is the model itself", f)
			case !isModel(f):
				add(orchestration.SeverityError, p, "%q names no model: want an llm.* key of nodeConfigurations (known: %s)", f, known())
			case slices.Contains(nc.Fallbacks[:i], f):
				add(orchestration.SeverityError, p, "%q is listed twice", f)
			}
		}
	}
}

// GuardrailOffline names the offline model as a model check's model: it
// answers yes when the text holds one of the phrases the check's prompt
// puts in double quotes (see package llmorch/offline).
const GuardrailOffline = "offline"

// AgentDock's own keys that this runtime reads nothing from: a template
// that carries them is as AgentDock writes it, so they are known, not
// reported. Found in AgentDock's templates and its AgentConfig type.
var (
	agentDockKeys        = []string{"maxConcurrency", "isEnabled", "notes"}
	agentDockChatKeys    = []string{"placeholderText"}
	agentDockOptionKeys  = []string{"tokenOptimization"}
	agentDockLLMNodeKeys = []string{"apiKey", "safetySettings", "useSearchGrounding"}
)

// featureKeys are the keys whose whole content a misspelling would drop
// unnoticed, by their path, each with what the agent would lose: a
// template whose "orchestraton" loaded would run with no steps, one whose
// "requireAproval" with no approvals. A misspelling of one is an error;
// other unknown keys outside the orchestration are warnings.
var featureKeys = map[string]string{
	"orchestration":           "its orchestration (no steps, no sequences: every tool offered at every call)",
	"options":                 "its options (budgets, approvals, client tools, step scope...)",
	"nodes":                   "its tools and model",
	"mcpServers":              "its MCP servers",
	"options.requireApproval": "approvals (every call would run unasked)",
}

// featureKey returns the feature key u is a misspelling of (its nearest
// known key, when that is a feature key), or "".
func featureKey(u unknownKey) string {
	near := orchestration.Nearest(u.key, u.known)
	if _, ok := featureKeys[u.path[:len(u.path)-len(u.key)]+near]; near == "" || !ok {
		return ""
	}
	return near
}

type unknownKey struct {
	path, key string
	known     []string
}

// unknownKeys lists the keys of t, outside its orchestration (which
// orchestration.New checks, as errors), that neither this runtime nor
// AgentDock knows, in a stable order: a misspelt key is read as nothing,
// so it must not pass unnoticed. A non-llm node's configuration belongs to
// its tool and is not checked.
func unknownKeys(t *Template) []unknownKey {
	var out []unknownKey
	check := func(prefix string, extra map[string]json.RawMessage, known []string) {
		keys := make([]string, 0, len(extra))
		for k := range extra {
			if !slices.Contains(known, k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, unknownKey{path: prefix + k, key: k, known: known})
		}
	}
	check("", t.Extra, append(orchestration.Keys(Template{}), agentDockKeys...))
	check("chatSettings.", t.ChatSettings.Extra, append(orchestration.Keys(ChatSettings{}), agentDockChatKeys...))
	check("options.", t.Options.Extra, append(orchestration.Keys(Options{}), agentDockOptionKeys...))
	if c := t.Options.Context; c != nil {
		check("options.context.", c.Extra, orchestration.Keys(Context{}))
		if c.Summarizer != nil {
			check("options.context.summarizer.", c.Summarizer.Extra, orchestration.Keys(Summarizer{}))
		}
	}
	nodes := make([]string, 0, len(t.NodeConfigurations))
	for name := range t.NodeConfigurations {
		if strings.HasPrefix(name, "llm.") {
			nodes = append(nodes, name)
		}
	}
	sort.Strings(nodes)
	for _, name := range nodes {
		check("nodeConfigurations."+name+".", t.NodeConfigurations[name].Extra, append(orchestration.Keys(NodeConfig{}), agentDockLLMNodeKeys...))
	}
	return out
}

// mcpNode reports whether node names a tool of an MCP server the template
// may use: one of its own mcpServers or a server-wide one.
func mcpNode(t *Template, cfg Config, node string) bool {
	server, _, ok := mcpconfig.SplitToolName(node)
	if !ok {
		return false
	}
	_, own := t.MCPServers[server]
	return own || slices.Contains(cfg.MCPServers, server)
}

// Load parses and compiles the template in data.
func Load(file string, data []byte, cfg Config) (*Loaded, orchestration.Diagnostics) {
	t, ds := Parse(file, data)
	if t == nil {
		return nil, ds
	}
	engine, ds := Compile(file, t, cfg)
	if engine == nil {
		return nil, ds
	}
	return &Loaded{File: file, Template: t, Engine: engine, Warnings: ds}, ds
}

// Result is the outcome of loading one file: a loaded template, or the
// diagnostics that stopped it (Loaded nil), or both (warnings).
type Result struct {
	File        string
	Loaded      *Loaded
	Diagnostics orchestration.Diagnostics
}

// LoadFS loads root from fsys: root is a template file, or a directory whose
// template.json and */template.json files are loaded in name order. An agent
// ID that an earlier file already uses is an error. The error return is for
// root itself being unreadable; problems of single templates are in their
// Result.
func LoadFS(fsys fs.FS, root string, cfg Config) ([]Result, error) {
	return loadFS(fsys, root, root, cfg)
}

// LoadPath loads a file or directory of the operating system; diagnostics
// name files as the path was given.
func LoadPath(p string, cfg Config) ([]Result, error) {
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return loadFS(os.DirFS(filepath.Dir(p)), filepath.Base(p), p, cfg)
	}
	return loadFS(os.DirFS(p), ".", p, cfg)
}

func loadFS(fsys fs.FS, root, display string, cfg Config) ([]Result, error) {
	info, err := fs.Stat(fsys, root)
	if err != nil {
		return nil, err
	}
	var files []string
	if info.IsDir() {
		if _, err := fs.Stat(fsys, path.Join(root, "template.json")); err == nil {
			files = append(files, path.Join(root, "template.json"))
		}
		matches, err := fs.Glob(fsys, path.Join(root, "*", "template.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(matches)
		files = append(files, matches...)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no template.json and no */template.json in this directory", display)
		}
	} else {
		files = []string{root}
	}
	shown := func(f string) string {
		if !info.IsDir() {
			return display
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(f, root), "/")
		return filepath.Join(display, filepath.FromSlash(rel))
	}
	var results []Result
	seen := map[string]string{}
	for _, f := range files {
		name := shown(f)
		data, err := readLimited(fsys, f)
		if err != nil {
			results = append(results, Result{File: name, Diagnostics: orchestration.Diagnostics{{Severity: orchestration.SeverityError, File: name, Message: err.Error()}}})
			continue
		}
		agent, ds := Load(name, data, cfg)
		if agent != nil {
			if other, dup := seen[agent.ID()]; dup {
				ds = append(ds, orchestration.Diagnostic{Severity: orchestration.SeverityError, File: name, Path: "agentId",
					Message: fmt.Sprintf("%q is already used by %s", agent.ID(), other)})
				agent = nil
			} else {
				seen[agent.ID()] = name
			}
		}
		results = append(results, Result{File: name, Loaded: agent, Diagnostics: ds})
	}
	return results, nil
}

func readLimited(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	if n > MaxFileSize {
		return nil, fmt.Errorf("file is larger than %d bytes", MaxFileSize)
	}
	return buf.Bytes(), nil
}
