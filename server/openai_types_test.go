package server

// The OpenAI door's objects as the tests decode them (package
// server/openai makes them): the same JSON, read back.

import (
	"encoding/json"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/server/internal/wire"
)

var _ = json.RawMessage(nil)

// oaUsage is OpenAI's usage: prompt_tokens counts the cached input too,
// and prompt_tokens_details.cached_tokens says how much of it was cached.
type oaUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type oaCompletion struct {
	ID                string      `json:"id"`
	Object            string      `json:"object"`
	Created           int64       `json:"created"`
	Model             string      `json:"model"`
	SystemFingerprint string      `json:"system_fingerprint"`
	Choices           []oaChoice  `json:"choices"`
	Usage             oaUsage     `json:"usage"`
	AgentDock         *oaExtended `json:"agentdock,omitempty"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Message      oaReplyMessage  `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type oaReplyMessage struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Refusal   *string      `json:"refusal"`
	ToolCalls []oaToolCall `json:"tool_calls,omitempty"`
}

// oaToolCall is a call of a client tool, for the client to run.
type oaToolCall struct {
	// Index is a streamed call's position among the answer's calls.
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// oaExtended is the "agentdock" extension field.
type oaExtended struct {
	SessionID     string               `json:"sessionId,omitempty"`
	TurnID        string               `json:"turnId,omitempty"`
	ToolCall      *chat.ToolCall       `json:"toolCall,omitempty"`
	ToolResult    *chat.ToolResult     `json:"toolResult,omitempty"`
	Orchestration *chat.Snapshot       `json:"orchestration,omitempty"`
	Usage         *wire.Usage          `json:"usage,omitempty"`
	Warning       string               `json:"warning,omitempty"`
	Compaction    *wire.CompactionInfo `json:"compaction,omitempty"`
	Limit         *chat.Limit          `json:"limit,omitempty"`
	Error         *chat.Error          `json:"error,omitempty"`
	// Approval: the call of toolCall waits for a person's approval
	// (answer it with POST /api/chat/:agentId, docs/api.md).
	Approval     *chat.Approval `json:"approval,omitempty"`
	FinishReason string         `json:"finishReason,omitempty"`
	// ToolCalls and ToolResults list a whole turn's tool activity in a
	// non-streaming answer.
	ToolCalls   []chat.ToolCall   `json:"toolCalls,omitempty"`
	ToolResults []chat.ToolResult `json:"toolResults,omitempty"`
}

// oaRespExtension is the "agentdock" extension field of a response object:
// what OpenAI's shape has no place for.
type oaRespExtension struct {
	SessionID     string         `json:"sessionId,omitempty"`
	TurnID        string         `json:"turnId"`
	Orchestration *chat.Snapshot `json:"orchestration,omitempty"`
	Limit         *chat.Limit    `json:"limit,omitempty"`
	Warnings      []string       `json:"warnings,omitempty"`
	// Compaction: the turn summarized earlier turns for the model.
	Compaction   *wire.CompactionInfo `json:"compaction,omitempty"`
	FinishReason string               `json:"finishReason,omitempty"`
}
