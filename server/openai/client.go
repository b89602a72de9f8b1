package openai

import (
	"fmt"
	"net/http"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/server/internal/wire"
	"github.com/agentdock-go/agentdock/turns"
)

// What an OpenAI request brings to a turn besides its conversation: its
// own tools (run by the client, offered under the agent's orchestration),
// its tool_choice, the answer's format and its own instructions.
type clientRequest struct {
	tools        []chat.ToolSpec
	choice       orchestration.ToolChoice
	format       *llmorch.Format
	instructions string
}

// newClientRequest compiles the request's format (formatParam names it in
// errors).
func newClientRequest(tools []chat.ToolSpec, choice orchestration.ToolChoice, wf *wire.Format, formatParam, instructions string) (clientRequest, *turns.Problem) {
	c := clientRequest{tools: tools, choice: choice, instructions: instructions}
	if wf != nil {
		f, err := llmorch.NewFormat(wf.Type, wf.Name, wf.Description, wf.Schema, wf.Strict)
		if err != nil {
			return c, turns.ParamProblem(http.StatusBadRequest, "invalid_request", formatParam, "%s", err.Error())
		}
		c.format = f
	}
	return c, nil
}

// input is a turn's input with what the request brought.
func (c clientRequest) input() agent.Input {
	return agent.Input{ClientTools: c.tools, ToolChoice: c.choice, Format: c.format, Instructions: c.instructions}
}

// names returns the names of the client's tools.
func (c clientRequest) names() []string {
	out := make([]string, len(c.tools))
	for i, t := range c.tools {
		out[i] = t.Name
	}
	return out
}

// checkAttachments refuses, before a turn starts, the attachments the
// agent's model does not take (index maps msgs to the positions of the
// request's list param).
func checkAttachments(node *agent.Agent, msgs []chat.Message, index []int, param string) *turns.Problem {
	info := node.ModelInfo()
	for i, m := range msgs {
		for _, a := range m.Attachments {
			if !info.Takes(a.Kind) {
				at := fmt.Sprintf("%s[%d].content", param, index[i])
				return turns.ParamProblem(http.StatusBadRequest, "unsupported_parameter", at,
					"%s: agent %q runs on a model that does not take %s attachments (%s %s); send text, or use an agent whose model takes them", at, node.ID(), a.Kind, info.Provider, info.Model)
			}
		}
	}
	return nil
}
