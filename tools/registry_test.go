package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
)

// fakeTool is a configurable tool for registry tests.
type fakeTool struct {
	name    string
	params  string
	aliases map[string]string
	call    func(ctx context.Context, args json.RawMessage) (Result, error)
}

func (f *fakeTool) Spec() chat.ToolSpec {
	return chat.ToolSpec{Name: f.name, Description: "a test tool", Parameters: json.RawMessage(f.params)}
}

func (f *fakeTool) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	return f.call(ctx, args)
}

type aliasedTool struct{ fakeTool }

func (a *aliasedTool) Aliases() map[string]string { return a.aliases }

const objParams = `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`

func echo(_ context.Context, args json.RawMessage) (Result, error) {
	return Result{Content: string(args)}, nil
}

func mustRegistry(t testing.TB, cfg Config, ts ...Tool) *Registry {
	t.Helper()
	r, err := NewRegistryWithConfig(cfg, ts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func call(name, args string) chat.ToolCall {
	return chat.ToolCall{ID: "call_1", Name: name, Arguments: json.RawMessage(args)}
}

func TestNewRegistryRejects(t *testing.T) {
	ok := &fakeTool{name: "ok", params: objParams, call: echo}
	tests := []struct {
		name  string
		cfg   Config
		tools []Tool
		want  string
	}{
		{"nil tool", Config{}, []Tool{nil}, "tool is nil"},
		{"bad name", Config{}, []Tool{&fakeTool{name: "has space", params: objParams}}, `invalid tool name "has space"`},
		{"empty name", Config{}, []Tool{&fakeTool{name: "", params: objParams}}, `invalid tool name ""`},
		{"duplicate", Config{}, []Tool{ok, &fakeTool{name: "ok", params: objParams}}, `duplicate tool name "ok"`},
		{"schema not JSON", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":`}}, "not valid JSON"},
		{"schema empty", Config{}, []Tool{&fakeTool{name: "t", params: ``}}, "parameters schema is empty"},
		{"schema not object type", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"string"}`}}, `must have "type": "object"`},
		{"schema array", Config{}, []Tool{&fakeTool{name: "t", params: `[]`}}, "must be a JSON object"},
		{"schema does not compile", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"object","properties":{"a":{"type":"nosuch"}}}`}}, "does not compile"},
		{"schema bad minLength", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"object","properties":{"a":{"minLength":-1}}}`}}, "does not compile"},
		{"remote ref refused", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`}}, "does not compile"},
		{"file ref refused", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`}}, "does not compile"},
		{"schema bound out of range", Config{}, []Tool{&fakeTool{name: "t", params: `{"type":"object","properties":{"a":{"type":"number","multipleOf":1e-11111111}}}`}}, "parameters schema: the number 1e-11111111 is out of range"},
		{"alias to undeclared", Config{}, []Tool{&aliasedTool{fakeTool{name: "t", params: objParams, aliases: map[string]string{"x": "nope"}}}}, `points at "nope"`},
		{"alias shadows property", Config{}, []Tool{&aliasedTool{fakeTool{name: "t", params: objParams, aliases: map[string]string{"n": "text"}}}}, `alias "n" shadows`},
		{"negative timeout", Config{Timeout: -time.Second}, nil, "timeout must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRegistryWithConfig(tt.cfg, tt.tools...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestRegistryLookupNamesSpecs(t *testing.T) {
	r := mustRegistry(t, Config{},
		&fakeTool{name: "zeta", params: objParams, call: echo},
		&fakeTool{name: "alpha", params: objParams, call: echo},
		&fakeTool{name: "mid", params: objParams, call: echo},
	)
	if got := r.Names(); !reflect.DeepEqual(got, []string{"alpha", "mid", "zeta"}) {
		t.Fatalf("names %v", got)
	}
	specs := r.Specs([]string{"zeta", "missing", "alpha", "zeta"})
	if len(specs) != 2 || specs[0].Name != "zeta" || specs[1].Name != "alpha" {
		t.Fatalf("specs %+v", specs)
	}
	// Specs are copies: a caller editing one must not change the registry.
	specs[0].Parameters[0] = 'X'
	if again := r.Specs([]string{"zeta"}); again[0].Parameters[0] != '{' {
		t.Fatal("Specs returned the registry's own parameters slice")
	}
	if _, ok := r.Lookup("mid"); !ok {
		t.Fatal("Lookup(mid) not found")
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Fatal("Lookup(nope) found")
	}
}

func TestExecuteArgumentErrors(t *testing.T) {
	r := mustRegistry(t, Config{}, &fakeTool{name: "echo", params: objParams, call: echo})
	tests := []struct {
		name, args, want string
	}{
		{"array", `[1,2]`, `invalid arguments for "echo": arguments must be a JSON object, got an array`},
		{"string", `"text"`, "arguments must be a JSON object, got a string"},
		{"null", `null`, "arguments must be a JSON object, got null"},
		{"number", `42`, "arguments must be a JSON object, got a number"},
		{"broken JSON", `{"text":`, "arguments are not valid JSON"},
		{"trailing data", `{"text":"a"} {"x":1}`, "unexpected data after the object"},
		{"empty means {}", ``, `missing required field "text"`},
		{"missing field", `{"n":1}`, `invalid arguments for "echo": missing required field "text"`},
		{"wrong type", `{"text":5}`, `field "text" must be string, got number`},
		{"not an integer", `{"text":"a","n":1.5}`, `field "n" must be integer, got number`},
		{"unknown field", `{"text":"a","colour":"red"}`, `unknown field "colour" (accepted fields: n, text)`},
		{"several problems", `{"colour":"red"}`, `missing required field "text"; unknown field "colour"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := r.Execute(context.Background(), call("echo", tt.args))
			if !res.IsError || res.Type != ErrorType {
				t.Fatalf("result %+v is not an error result", res)
			}
			if !strings.Contains(res.Content, tt.want) {
				t.Fatalf("content %q, want it to contain %q", res.Content, tt.want)
			}
			if res.CallID != "call_1" || res.Name != "echo" {
				t.Fatalf("result not bound to its call: %+v", res)
			}
		})
	}
}

func TestExecuteNestedFieldNames(t *testing.T) {
	params := `{"type":"object","properties":{"filter":{"type":"object","properties":{"from":{"type":"string","minLength":1}},"required":["from"]}},"required":["filter"]}`
	r := mustRegistry(t, Config{}, &fakeTool{name: "nested", params: params, call: echo})
	for args, want := range map[string]string{
		`{"filter":{}}`:          `missing required field "filter.from"`,
		`{"filter":{"from":""}}`: `field "filter.from" must not be empty`,
	} {
		res := r.Execute(context.Background(), call("nested", args))
		if !res.IsError || !strings.Contains(res.Content, want) {
			t.Errorf("%s: %+v, want %q", args, res, want)
		}
	}
}

func TestExecuteUnknownTool(t *testing.T) {
	r := mustRegistry(t, Config{}, &fakeTool{name: "echo", params: objParams, call: echo})
	res := r.Execute(context.Background(), call("nope", `{}`))
	if !res.IsError || res.Type != ErrorType || res.Content != `unknown tool "nope"` || res.Name != "nope" {
		t.Fatalf("result %+v", res)
	}
}

func TestExecuteSuccessPassesCanonicalArguments(t *testing.T) {
	var got json.RawMessage
	tool := &aliasedTool{fakeTool{
		name: "echo", params: objParams, aliases: map[string]string{"body": "text"},
		call: func(_ context.Context, args json.RawMessage) (Result, error) {
			got = args
			return Result{Content: "done"}, nil
		},
	}}
	r := mustRegistry(t, Config{}, tool)
	res := r.Execute(context.Background(), call("echo", `{"body":"hi","n":12345678901234567890}`))
	if res.IsError || res.Content != "done" || res.Type != "echo_result" {
		t.Fatalf("result %+v", res)
	}
	// Renamed to the canonical field, and the big integer kept exactly.
	if string(got) != `{"n":12345678901234567890,"text":"hi"}` {
		t.Fatalf("tool got %s", got)
	}
	// Both names with the same value is fine; with different values it is refused.
	if res := r.Execute(context.Background(), call("echo", `{"body":"hi","text":"hi"}`)); res.IsError {
		t.Fatalf("same value under both names refused: %+v", res)
	}
	res = r.Execute(context.Background(), call("echo", `{"body":"hi","text":"ho"}`))
	if !res.IsError || !strings.Contains(res.Content, `fields "body" and "text" mean the same thing`) {
		t.Fatalf("conflict not refused: %+v", res)
	}
}

func TestExecuteToolError(t *testing.T) {
	r := mustRegistry(t, Config{}, &fakeTool{name: "fails", params: objParams,
		call: func(context.Context, json.RawMessage) (Result, error) {
			return Result{}, errors.New("upstream said no")
		}})
	res := r.Execute(context.Background(), call("fails", `{"text":"a"}`))
	if !res.IsError || res.Type != ErrorType || res.Content != `tool "fails" failed: upstream said no` {
		t.Fatalf("result %+v", res)
	}
}

func TestExecuteTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tools := []Tool{
		&fakeTool{name: "honest", params: objParams, call: func(ctx context.Context, _ json.RawMessage) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}},
		// A tool that ignores its context must not hold the call either.
		&fakeTool{name: "stubborn", params: objParams, call: func(context.Context, json.RawMessage) (Result, error) {
			<-release
			return Result{Content: "late"}, nil
		}},
	}
	r := mustRegistry(t, Config{Timeout: 20 * time.Millisecond}, tools...)
	for _, name := range []string{"honest", "stubborn"} {
		res := r.Execute(context.Background(), call(name, `{"text":"a"}`))
		want := `tool "` + name + `" timed out after 20ms`
		if !res.IsError || res.Type != ErrorType || res.Content != want {
			t.Errorf("%s: result %+v, want %q", name, res, want)
		}
	}
}

func TestExecuteCallerCancels(t *testing.T) {
	r := mustRegistry(t, Config{}, &fakeTool{name: "wait", params: objParams, call: func(ctx context.Context, _ json.RawMessage) (Result, error) {
		<-ctx.Done()
		return Result{}, ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := r.Execute(ctx, call("wait", `{"text":"a"}`))
	if !res.IsError || !strings.Contains(res.Content, `tool "wait" was cancelled`) {
		t.Fatalf("result %+v", res)
	}
}

func TestExecuteRecoversPanics(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tools := []Tool{
		&fakeTool{name: "panics", params: objParams, call: func(_ context.Context, args json.RawMessage) (Result, error) {
			panic("boom with " + string(args))
		}},
		&fakeTool{name: "nilmap", params: objParams, call: func(context.Context, json.RawMessage) (Result, error) {
			var m map[string]int
			m["x"] = 1
			return Result{}, nil
		}},
		&fakeTool{name: "panicnil", params: objParams, call: func(context.Context, json.RawMessage) (Result, error) {
			panic(nil)
		}},
	}
	r := mustRegistry(t, Config{Logger: logger}, tools...)
	for _, name := range []string{"panics", "nilmap", "panicnil"} {
		res := r.Execute(context.Background(), call(name, `{"text":"private words"}`))
		want := `tool "` + name + `" failed with an internal error`
		if !res.IsError || res.Type != ErrorType || res.Content != want {
			t.Errorf("%s: result %+v, want %q", name, res, want)
		}
	}
	if !strings.Contains(logs.String(), "assignment to entry in nil map") {
		t.Errorf("runtime panic message missing from the log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "private words") {
		t.Errorf("arguments leaked into the log through the panic value:\n%s", logs.String())
	}
}

func TestLogsCarryNoArguments(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := mustRegistry(t, Config{Logger: logger},
		&fakeTool{name: "echo", params: objParams, call: echo},
		&fakeTool{name: "fails", params: objParams, call: func(_ context.Context, a json.RawMessage) (Result, error) {
			return Result{}, errors.New("bad input " + string(a))
		}},
	)
	const secret = "the patient's diagnosis"
	calls := []chat.ToolCall{
		call("echo", `{"text":"`+secret+`"}`),
		call("echo", `{"text":"`+secret+`","extra":1}`),
		call("fails", `{"text":"`+secret+`"}`),
	}
	for _, c := range calls {
		r.Execute(context.Background(), c)
	}
	out := logs.String()
	if strings.Contains(out, "diagnosis") {
		t.Fatalf("arguments in logs:\n%s", out)
	}
	for _, want := range []string{`"outcome":"ok"`, `"outcome":"invalid_arguments"`, `"outcome":"tool_error"`, `"tool":"echo"`, `"call_id":"call_1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func TestExecuteConcurrent(t *testing.T) {
	r, err := Builtin(BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			args := `{"topic":"t","reasoning":"r"}`
			if i%2 == 1 {
				args = `{"topic":"t"}`
			}
			res := r.Execute(context.Background(), call("think", args))
			if res.IsError != (i%2 == 1) {
				t.Errorf("call %d: %+v", i, res)
			}
		})
	}
	wg.Wait()
}

// FuzzExecuteArguments feeds arbitrary argument bytes to every builtin tool:
// Execute must never panic, and must always answer with content, an error
// result being typed "error".
func FuzzExecuteArguments(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"topic":"a","reasoning":"b"}`, `{"adTopic":"a","reasoning":"b"}`,
		`{"adTopic":"a","topic":"b","reasoning":"c"}`, `{"subject":1}`, `{"query":"go","limit":11}`,
		`{"topic":"a","reflection":"b","confidence":1e400}`, `{"a":{"b":[1,2,{"c":null}]}}`, "{\"topic\":\"\\ud800\"}",
	} {
		f.Add(s)
	}
	r, err := Builtin(BuiltinConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	names := r.Names()
	f.Fuzz(func(t *testing.T, args string) {
		for _, n := range names {
			res := r.Execute(context.Background(), chat.ToolCall{ID: "c", Name: n, Arguments: json.RawMessage(args)})
			if res.Content == "" {
				t.Fatalf("%s(%q): empty content", n, args)
			}
			if res.IsError != (res.Type == ErrorType) {
				t.Fatalf("%s(%q): IsError %v with type %q", n, args, res.IsError, res.Type)
			}
		}
	})
}

func BenchmarkExecuteThink(b *testing.B) {
	r, err := Builtin(BuiltinConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	c := call("think", `{"adTopic":"benchmarks","reasoning":"`+strings.Repeat("step by step. ", 200)+`"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Execute(ctx, c); res.IsError {
			b.Fatal(res.Content)
		}
	}
}

func BenchmarkExecuteInvalid(b *testing.B) {
	r, err := Builtin(BuiltinConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	c := call("critique", `{"analysis":"x","extra":true}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Execute(ctx, c); !res.IsError {
			b.Fatal("accepted")
		}
	}
}

// TestExecuteRefusesHugeNumbers: a number the schema validator cannot
// expand (math/big refuses exponents past a million) once panicked it; such
// numbers, and any too long or with an exponent past ±1000, are refused as
// invalid arguments, wherever they are.
func TestExecuteRefusesHugeNumbers(t *testing.T) {
	r, err := Builtin(BuiltinConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	long := "0." + strings.Repeat("0", 1000) + "1"
	for _, tc := range []struct {
		args string
		want string // in the error result
	}{
		{`{"topic":"a","reflection":"b","confidence":140e011111111}`, "out of range: exponents beyond ±1000"},
		{`{"topic":"a","reflection":"b","confidence":1e-1001}`, "out of range: exponents beyond ±1000"},
		{`{"topic":"a","reflection":"b","confidence":1E+99999999999999999999}`, "out of range"},
		{`{"topic":"a","reflection":"b","extra":[1,{"x":[2e5000]}],"confidence":0.5}`, "out of range"},
		{`{"topic":"a","reflection":"b","confidence":` + long + `}`, "a number of 1003 characters is out of range"},
		// Within the bounds the schema decides.
		{`{"topic":"a","reflection":"b","confidence":1e400}`, `field "confidence" must be at most 1`},
		{`{"topic":"a","reflection":"b","confidence":5e-1000}`, ""},
	} {
		res := r.Execute(context.Background(), chat.ToolCall{ID: "c", Name: "reflect", Arguments: json.RawMessage(tc.args)})
		switch {
		case tc.want == "" && res.IsError:
			t.Errorf("%.60s: %s, want a result", tc.args, res.Content)
		case tc.want != "" && (!res.IsError || !strings.Contains(res.Content, tc.want)):
			t.Errorf("%.60s: %s, want an error with %q", tc.args, res.Content, tc.want)
		}
	}
}

// TestValidatePanicIsAnError: a validator panic (jsonschema on a number
// math/big cannot expand, given here without decodeObject's checks) is an
// error for the model, not a crash.
func TestValidatePanicIsAnError(t *testing.T) {
	s, _, err := compileSchema(json.RawMessage(`{"type":"object","properties":{"x":{"type":"number","maximum":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"x": json.Number("1e11111111")}
	if err := validate(s, args); err == nil || !strings.Contains(err.Error(), "could not be validated") {
		t.Fatalf("validate = %v, want the validator's panic as an error", err)
	}
}

// TestIdempotent: a registry reports the tools that declare that running a
// call twice is harmless (the cognitive tools and search do; New's tools
// with DeclareIdempotent), and no other, unknown names included.
func TestIdempotent(t *testing.T) {
	type in struct {
		X string `json:"x"`
	}
	echo := func(_ context.Context, v in) (string, error) { return v.X, nil }
	builtin, err := BuiltinTools(BuiltinConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(append(builtin,
		MustNew("lookup", "Looks a thing up.", echo, DeclareIdempotent()),
		MustNew("send_mail", "Sends an email.", echo))...)
	if err != nil {
		t.Fatal(err)
	}
	var _ Idempotency = reg
	for name, want := range map[string]bool{
		ThinkName: true, CritiqueName: true, SearchName: true,
		"lookup": true, "send_mail": false, "nonexistent": false,
	} {
		if got := reg.Idempotent(name); got != want {
			t.Errorf("Idempotent(%q) = %v, want %v", name, got, want)
		}
	}
}
