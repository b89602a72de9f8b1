package agent

import (
	"context"

	"github.com/agentdock-go/agentdock/chat"
)

// A Compactor shortens a conversation for the turns that go on from it
// (the Responses API's POST /v1/responses/compact): it says which
// messages the model still sees and what it reads of the others. The
// orchestration replays the dropped messages anyway (WithCompacted), so
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
