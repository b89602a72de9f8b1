package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentdock-go/agentdock/chat"
)

// New returns a tool that runs fn. Its arguments' JSON Schema is inferred
// from In by github.com/google/jsonschema-go (the library the MCP Go SDK
// uses): In must be a struct; its fields' json tags name the arguments,
// fields tagged omitempty or omitzero are optional and the others
// required, and a `jsonschema:"..."` tag describes a field to the model.
// The registry validates each call's arguments against that schema before
// fn sees them decoded into In.
//
// What fn returns becomes the result the model reads: a string as is, a
// Result as is, anything else as JSON. An error becomes an error result,
// which does not end the turn. CallFrom(ctx) tells fn which session, agent,
// owner and call it runs for.
//
// Options declare more about the tool: DeclareIdempotent.
func New[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) (Tool, error) {
	if fn == nil {
		return nil, fmt.Errorf("tools: New(%q): fn is nil", name)
	}
	if t := reflect.TypeFor[In](); t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("tools: New(%q): the argument type %s must be a struct: a tool's arguments are a JSON object", name, t)
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tools: New(%q): inferring the arguments' schema from %s: %w", name, reflect.TypeFor[In](), err)
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("tools: New(%q): %w", name, err)
	}
	t := &funcTool[In, Out]{spec: chat.ToolSpec{Name: name, Description: description, Parameters: params}, fn: fn}
	for _, o := range opts {
		o(&t.options)
	}
	return t, nil
}

// Option declares something about a tool New makes.
type Option func(*options)

type options struct {
	idempotent bool
}

// DeclareIdempotent declares that running one of the tool's calls twice is
// harmless (see Idempotency): a call that was under way when the server
// running its turn died runs again on the server that takes the turn over,
// instead of being reported interrupted.
func DeclareIdempotent() Option { return func(o *options) { o.idempotent = true } }

// MustNew is New for tools defined at package level: it panics on an
// error, which only a programming mistake (a bad In type) causes.
func MustNew[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) Tool {
	t, err := New(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

type funcTool[In, Out any] struct {
	spec chat.ToolSpec
	fn   func(context.Context, In) (Out, error)
	options
}

func (t *funcTool[In, Out]) Spec() chat.ToolSpec { return t.spec }

// Idempotent implements Idempotent (DeclareIdempotent).
func (t *funcTool[In, Out]) Idempotent() bool { return t.idempotent }

func (t *funcTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (Result, error) {
	var in In
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return Result{}, fmt.Errorf("decoding the arguments: %w", err)
		}
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return Result{}, err
	}
	switch v := any(out).(type) {
	case Result:
		return v, nil
	case *Result:
		if v != nil {
			return *v, nil
		}
		return Result{}, nil
	case string:
		return Result{Content: v}, nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return Result{}, fmt.Errorf("encoding the result: %w", err)
	}
	return Result{Content: string(data), Type: "json"}, nil
}
