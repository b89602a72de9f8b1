package agent

import (
	"context"
	"errors"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// A Compactor shortens a conversation for the turns that go on from it
// (the Responses API's POST /v1/responses/compact): it says which
// messages the model still sees and what it reads of the others. The
// orchestration replays the dropped messages anyway (Input.Compacted), so
// that a compaction never moves a conversation's step or sequence.
type Compactor interface {
	Compact(ctx context.Context, n *Agent, msgs []chat.Message) (Compaction, error)
}

// Compaction is a Compactor's result.
type Compaction struct {
	// Dropped are the messages the model no longer sees, oldest first;
	// Kept the ones it still sees. Together they are the conversation, in
	// its order.
	Dropped, Kept []chat.Message
	// Summary is what the model reads in place of Dropped ("": nothing).
	Summary string
	// Usage is what compacting cost (a summarizing model's tokens).
	Usage chat.Usage
}

// KeepTurns is the Compactor that keeps the newest N whole turns (a user
// message and its answer; at least one) and drops the older ones without
// a summary: it calls no model, and a turn is never cut, so no call is
// kept without its result.
type KeepTurns int

// DefaultKeepTurns is the turns a server's compaction keeps unless
// configured.
const DefaultKeepTurns = 2

// Compact implements Compactor.
func (k KeepTurns) Compact(_ context.Context, _ *Agent, msgs []chat.Message) (Compaction, error) {
	keep := max(int(k), 1)
	cut := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != chat.RoleUser {
			continue
		}
		if keep--; keep == 0 {
			cut = i
			break
		}
	}
	return Compaction{Dropped: msgs[:cut:cut], Kept: msgs[cut:]}, nil
}

// Summarizing is the Compactor that summarizes with the agent's own
// context machinery (options.context: its summarizer, its kept turns), the
// one its turns use: the turns beyond the kept ones become one summary,
// whatever the conversation's size. An agent whose context budget is off
// ("context": "off") is compacted by Fallback instead.
type Summarizing struct {
	Fallback Compactor
}

// Compact implements Compactor.
func (c Summarizing) Compact(ctx context.Context, n *Agent, msgs []chat.Message) (Compaction, error) {
	if !n.compacts() {
		return c.Fallback.Compact(ctx, n, msgs)
	}
	last := 0
	for _, m := range msgs {
		if m.Role == chat.RoleUser {
			last++
		}
	}
	res, err := n.service.Summarize(ctx, nil, msgs, last)
	switch {
	case errors.Is(err, llmorch.ErrTooLong):
		return Compaction{Kept: msgs}, nil // no turn beyond the kept ones
	case err != nil:
		return Compaction{}, err
	}
	cut := len(msgs) - len(res.Messages)
	return Compaction{Dropped: msgs[:cut:cut], Kept: res.Messages, Summary: res.Summary.Content, Usage: res.Summary.Summary.Usage}, nil
}
