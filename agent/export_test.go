package agent

import (
	"context"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// Compact is compact, for the tests of package agent_test.
func (n *Agent) Compact(ctx context.Context, prev *chat.Message, msgs []chat.Message) (llmorch.Compacted, error) {
	return n.compact(ctx, prev, msgs)
}
