package tools

import (
	"context"
	"slices"
	"sort"

	"github.com/agentdock-go/agentdock/chat"
)

// Join returns a Toolbox of the tools of every box, a name going to the
// first box that has it. It keeps what the boxes tell the turn beside
// their tools: which tools may run twice (Idempotency) and which cannot
// run now (the Unavailable method of llmorch.Availability). A single box
// is returned as it is.
func Join(boxes ...Toolbox) Toolbox {
	if len(boxes) == 1 {
		return boxes[0]
	}
	return joined(slices.Clone(boxes))
}

type joined []Toolbox

// owner is the box that has the named tool.
func (j joined) owner(name string) (Toolbox, bool) {
	for _, b := range j {
		if slices.Contains(b.Names(), name) {
			return b, true
		}
	}
	return nil, false
}

func (j joined) Names() []string {
	var out []string
	for _, b := range j {
		for _, n := range b.Names() {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (j joined) Specs(names []string) []chat.ToolSpec {
	out := make([]chat.ToolSpec, 0, len(names))
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			continue
		}
		if b, ok := j.owner(n); ok {
			out = append(out, b.Specs([]string{n})...)
		}
	}
	return out
}

func (j joined) Execute(ctx context.Context, call chat.ToolCall) chat.ToolResult {
	if b, ok := j.owner(call.Name); ok {
		return b.Execute(ctx, call)
	}
	// The first box answers an unknown tool as it answers any.
	return j[0].Execute(ctx, call)
}

func (j joined) Idempotent(name string) bool {
	b, ok := j.owner(name)
	if !ok {
		return false
	}
	i, ok := b.(Idempotency)
	return ok && i.Idempotent(name)
}

// Unavailable is llmorch.Availability's method, asked of the box that has
// the tool.
func (j joined) Unavailable(name string) (string, bool) {
	b, ok := j.owner(name)
	if !ok {
		return "", false
	}
	a, ok := b.(interface {
		Unavailable(name string) (string, bool)
	})
	if !ok {
		return "", false
	}
	return a.Unavailable(name)
}
