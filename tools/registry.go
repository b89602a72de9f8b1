package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentdock-go/agentdock/chat"
)

// DefaultTimeout bounds one tool call when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// ErrorType is the ToolResult.Type of every failed or refused call.
const ErrorType = "error"

// Config tunes a Registry. The zero value is usable.
type Config struct {
	// Timeout bounds each call; zero means DefaultTimeout. A tool that
	// ignores its context is abandoned when the timeout passes: the model gets
	// an error result and the tool's goroutine is left to finish on its own.
	Timeout time.Duration
	// Logger gets one record per call with the tool name, call ID, outcome
	// and duration. Arguments, results and tool error texts are never
	// logged, because they carry chat content. Nil means slog.Default().
	Logger *slog.Logger
}

// Registry holds the tools an agent runtime knows and executes calls to them.
// It is immutable after construction and safe for concurrent use.
type Registry struct {
	entries map[string]*entry
	names   []string
	timeout time.Duration
	log     *slog.Logger
}

// entry is a registered tool with what registration derived from it once:
// its spec, the compiled schema and the alias table.
type entry struct {
	tool    Tool
	spec    chat.ToolSpec
	schema  *jsonschema.Schema
	aliases map[string]string
	// fields are the schema's top-level property names, sorted, for error
	// messages that tell the model what it may send.
	fields []string
}

// validName is the tool name rule that the major providers share
// (OpenAI and Anthropic both reject anything else).
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// NewRegistry registers ts with the default Config.
func NewRegistry(ts ...Tool) (*Registry, error) {
	return NewRegistryWithConfig(Config{}, ts...)
}

// NewRegistryWithConfig registers ts. Every tool needs a unique valid name and
// a parameters schema that compiles and describes an object; aliases must
// point at declared properties and must not shadow one.
func NewRegistryWithConfig(cfg Config, ts ...Tool) (*Registry, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("tools: timeout must not be negative, got %s", cfg.Timeout)
	}
	r := &Registry{
		entries: make(map[string]*entry, len(ts)),
		timeout: cfg.Timeout,
		log:     cfg.Logger,
	}
	if r.timeout == 0 {
		r.timeout = DefaultTimeout
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	for i, t := range ts {
		e, err := newEntry(t)
		if err != nil {
			return nil, fmt.Errorf("tools: tool %d: %w", i, err)
		}
		if _, dup := r.entries[e.spec.Name]; dup {
			return nil, fmt.Errorf("tools: tool %d: duplicate tool name %q", i, e.spec.Name)
		}
		r.entries[e.spec.Name] = e
		r.names = append(r.names, e.spec.Name)
	}
	sort.Strings(r.names)
	return r, nil
}

func newEntry(t Tool) (*entry, error) {
	if t == nil {
		return nil, errors.New("tool is nil")
	}
	spec := t.Spec()
	if !validName.MatchString(spec.Name) {
		return nil, fmt.Errorf("invalid tool name %q: want 1 to 64 letters, digits, '_' or '-'", spec.Name)
	}
	if strings.TrimSpace(spec.Description) == "" {
		return nil, fmt.Errorf("tool %q: description is empty", spec.Name)
	}
	spec.Parameters = slices.Clone(spec.Parameters)
	schema, props, err := compileSchema(spec.Parameters)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", spec.Name, err)
	}
	e := &entry{tool: t, spec: spec, schema: schema, fields: props}
	if a, ok := t.(Aliaser); ok {
		e.aliases = make(map[string]string)
		for alias, canonical := range a.Aliases() {
			switch {
			case alias == "" || alias == canonical:
				return nil, fmt.Errorf("tool %q: invalid alias %q for %q", spec.Name, alias, canonical)
			case slices.Contains(props, alias):
				return nil, fmt.Errorf("tool %q: alias %q shadows a declared property", spec.Name, alias)
			case !slices.Contains(props, canonical):
				return nil, fmt.Errorf("tool %q: alias %q points at %q, which the schema does not declare", spec.Name, alias, canonical)
			}
			e.aliases[alias] = canonical
		}
	}
	return e, nil
}

// compileSchema compiles a parameters schema and returns its top-level
// property names. Remote and file references are refused: a schema must be
// self-contained, and registration must not read the network or disk.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, []string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, errors.New("parameters schema is empty")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("parameters schema is not valid JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, errors.New("parameters schema must be a JSON object")
	}
	if obj["type"] != "object" {
		return nil, nil, errors.New(`parameters schema must have "type": "object", because tool arguments are a JSON object`)
	}
	// A bound like "multipleOf": 1e-11111111 panics the validator as such
	// a number in the arguments would (checkNumbers).
	if err := checkNumbers(obj); err != nil {
		return nil, nil, fmt.Errorf("parameters schema: %w", err)
	}
	s, props, err := compileDoc(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("parameters schema%w", err)
	}
	return s, props, nil
}

// compileDoc compiles a decoded schema document with no loader for
// remote or file references, and returns it with its top-level property
// names, sorted. Its errors begin with ": " or " does not compile: ", to
// follow the name of what was compiled.
func compileDoc(doc any) (*jsonschema.Schema, []string, error) {
	var props []string
	if obj, ok := doc.(map[string]any); ok {
		if p, ok := obj["properties"].(map[string]any); ok {
			for name := range p {
				props = append(props, name)
			}
			sort.Strings(props)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "mem://schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, fmt.Errorf(": %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, nil, fmt.Errorf(" does not compile: %w", err)
	}
	return s, props, nil
}

// Lookup returns the tool registered under name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	e, ok := r.entries[name]
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// Names returns the registered tool names, sorted.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Idempotent implements Idempotency: the named tool declares it
// (Idempotent).
func (r *Registry) Idempotent(name string) bool {
	e, ok := r.entries[name]
	if !ok {
		return false
	}
	i, ok := e.tool.(Idempotent)
	return ok && i.Idempotent()
}

// Specs returns the specs of the named tools in the order given, skipping
// names that are not registered (the orchestration decides what is offered;
// the registry only knows what exists) and repeats (providers reject a tool
// list that names a tool twice).
func (r *Registry) Specs(names []string) []chat.ToolSpec {
	out := make([]chat.ToolSpec, 0, len(names))
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			continue
		}
		if e, ok := r.entries[n]; ok {
			s := e.spec
			s.Parameters = slices.Clone(s.Parameters)
			out = append(out, s)
		}
	}
	return out
}

// outcome classifies a call for the log record.
type outcome string

const (
	outcomeOK        outcome = "ok"
	outcomeUnknown   outcome = "unknown_tool"
	outcomeInvalid   outcome = "invalid_arguments"
	outcomeFailed    outcome = "tool_error"
	outcomeTimeout   outcome = "timeout"
	outcomeCancelled outcome = "cancelled"
	outcomePanic     outcome = "panic"
)

// Execute runs one call and always returns a result for the model: unknown
// tools, arguments that are not an object or fail the schema, tool errors,
// timeouts and panics all become error results (IsError, Type "error") whose
// content says what went wrong. Alias fields are renamed to their canonical
// names before validation, and the tool receives the canonical arguments.
// The content is cut to the call's ResultLimit (LimitResult), so that a
// large result is never stored, streamed or sent to a model whole, and an
// error's has the host's paths hidden (HidePaths).
func (r *Registry) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	start := time.Now()
	res, oc := r.execute(ctx, call)
	res.CallID, res.Name = call.ID, call.Name
	limit := ResultLimit(ctx)
	res.Content = LimitResult(res.Content, limit)
	if res.IsError {
		// An error may quote the tool's own, which may name files of the
		// host (hiding a short path can add a byte: cut again).
		res.Content = LimitResult(HidePaths(res.Content), limit)
	}
	// The orchestration records tools that ran, failed or not; a call that
	// never reached its tool must not count.
	res.NotRun = oc == outcomeUnknown || oc == outcomeInvalid
	level := slog.LevelDebug
	switch oc {
	case outcomeOK:
	case outcomePanic:
		level = slog.LevelError
	default:
		level = slog.LevelWarn
	}
	r.log.LogAttrs(ctx, level, "tool call",
		slog.String("tool", clip(call.Name, 64)),
		slog.String("call_id", clip(call.ID, 128)),
		slog.String("outcome", string(oc)),
		slog.Duration("duration", time.Since(start)),
	)
	return res
}

// validate is s.Validate, with a panic of the validator (a bug of
// jsonschema's on some input, like the numbers checkNumbers refuses) made an
// error: a model's arguments must not take the server down.
func validate(s *jsonschema.Schema, args map[string]any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the arguments could not be validated (%v)", p)
		}
	}()
	return s.Validate(args)
}

func (r *Registry) execute(ctx context.Context, call chat.ToolCall) (chat.ToolResult, outcome) {
	e, ok := r.entries[call.Name]
	if !ok {
		return errorResult(fmt.Sprintf("unknown tool %q", clip(call.Name, 64))), outcomeUnknown
	}
	args, err := decodeObject(call.Arguments)
	if err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %q: %v", e.spec.Name, err)), outcomeInvalid
	}
	if err := renameAliases(args, e.aliases); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %q: %v", e.spec.Name, err)), outcomeInvalid
	}
	if err := validate(e.schema, args); err != nil {
		return errorResult(fmt.Sprintf("invalid arguments for %q: %s", e.spec.Name, describeValidation(err, e.fields))), outcomeInvalid
	}
	canonical, err := json.Marshal(args)
	if err != nil {
		// Cannot happen for values decoded from JSON; kept as a result, not a panic.
		return errorResult(fmt.Sprintf("invalid arguments for %q: %v", e.spec.Name, err)), outcomeInvalid
	}
	res, oc, msg := r.run(ctx, e, canonical)
	if oc != outcomeOK {
		return errorResult(msg), oc
	}
	typ := res.Type
	if typ == "" {
		typ = e.spec.Name + "_result"
	}
	return chat.ToolResult{Content: res.Content, Type: typ}, outcomeOK
}

// run calls the tool under the registry's timeout, in its own goroutine so
// that a tool ignoring its context cannot hold the turn, and with a recover so
// that a panicking tool cannot take the process down.
func (r *Registry) run(parent context.Context, e *entry, args json.RawMessage) (Result, outcome, string) {
	ctx, cancel := context.WithTimeout(parent, r.timeout)
	defer cancel()
	type out struct {
		res      Result
		err      error
		panicked bool
	}
	done := make(chan out, 1)
	name := e.spec.Name
	go func() {
		defer func() {
			if p := recover(); p != nil {
				attrs := []slog.Attr{slog.String("tool", name), slog.String("stack", string(debug.Stack()))}
				// A runtime error (nil dereference, index out of range) says
				// nothing about the chat; any other panic value might.
				if re, ok := p.(runtime.Error); ok {
					attrs = append(attrs, slog.String("panic", re.Error()))
				} else {
					attrs = append(attrs, slog.String("panic_type", fmt.Sprintf("%T", p)))
				}
				r.log.LogAttrs(context.WithoutCancel(ctx), slog.LevelError, "tool panicked", attrs...)
				done <- out{panicked: true}
			}
		}()
		res, err := e.tool.Call(ctx, args)
		done <- out{res: res, err: err}
	}()

	timedOut := func() (Result, outcome, string) {
		if parent.Err() != nil {
			return Result{}, outcomeCancelled, fmt.Sprintf("tool %q was cancelled: %v", name, context.Cause(parent))
		}
		return Result{}, outcomeTimeout, fmt.Sprintf("tool %q timed out after %s", name, r.timeout)
	}
	select {
	case o := <-done:
		switch {
		case o.panicked:
			return Result{}, outcomePanic, fmt.Sprintf("tool %q failed with an internal error", name)
		case o.err != nil:
			if ctx.Err() != nil && errors.Is(o.err, ctx.Err()) {
				return timedOut()
			}
			return Result{}, outcomeFailed, fmt.Sprintf("tool %q failed: %v", name, o.err)
		}
		return o.res, outcomeOK, ""
	case <-ctx.Done():
		return timedOut()
	}
}

func errorResult(msg string) chat.ToolResult {
	return chat.ToolResult{Content: msg, Type: ErrorType, IsError: true}
}

// clip bounds model-supplied identifiers echoed in messages and logs.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
