// Package chat holds the few data types that every layer of a chat turn shares:
// the conversation Message, the ToolCall a model makes, the normalised token
// Usage, and the Event that flows from the model adapter through the
// orchestration service to SSE, persistence and tracing alike.
//
// The package has no behaviour beyond small helpers, so that every other
// package can depend on it without pulling in providers, storage or HTTP.
package chat

import (
	"encoding/json"
	"strings"
)

// Role says who wrote a Message.
type Role string

// The roles of a conversation. Tool messages carry the result of one tool call
// and name it by ToolCallID.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	// RoleSummary marks a history entry that is not a message of the
	// conversation: the summary of earlier turns that the model reads in
	// their place (context compaction). Summary says which turns; the
	// entries it replaces stay in the history. Providers never see the
	// role: the turn gives the model the summary's text in a user message.
	RoleSummary Role = "summary"
)

// Message is one entry of a conversation, as sent to a model and as kept in a
// session's history. Tool calls and their results are first-class entries
// because a model that cannot see its earlier tool use repeats it.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName identify the call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	// IsError marks a tool message whose call failed or was refused.
	IsError bool `json:"isError,omitempty"`
	// Denied marks a tool message whose call a person declined to approve
	// (IsError and NotRun are set too).
	Denied bool `json:"denied,omitempty"`
	// NotRun marks a tool message whose call the orchestration did not
	// record: it never reached its tool (refused, declined, invalid
	// arguments, over the answer's budget) or the turn was stopped before
	// it completed. A result without it records its call when the
	// conversation is replayed (orchestration.Engine.Replay), as the turn
	// did; a tool that ran and failed is such a result.
	NotRun bool `json:"notRun,omitempty"`
	// Attachments are the images and files a user message carries, after
	// its text (Content). A stored session keeps each with its message,
	// once; every later model call of the session sees it there.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Summary describes a RoleSummary entry: the turns it replaces.
	Summary *Summary `json:"summary,omitempty"`
}

// Summary is what a summary entry (RoleSummary) replaces for the model.
// Turns are numbered from 1 by their user messages, as the session counts
// them (orchestration.State.UserMessages).
type Summary struct {
	// From and Through are the first and the last turn the summary
	// replaces (a summary that folds in an earlier one starts where that
	// one started).
	From    int `json:"from"`
	Through int `json:"through"`
	// Kept is how many turns before the entry the model reads verbatim
	// after the summary: they start at the Kept-th user message before
	// the entry (the stores read a history from there: see
	// session.SinceSummary).
	Kept int `json:"kept"`
	// Tokens is the summary's size, as the turn counted it.
	Tokens int `json:"tokens,omitempty"`
	// By names the summarizer: "offline", or the provider's model.
	By string `json:"by,omitempty"`
	// Usage is what the summarizer's model call cost.
	Usage Usage `json:"usage,omitzero"`
}

// Attachment is an image or a file a user attached to a message.
type Attachment struct {
	// Kind is AttachImage or AttachFile.
	Kind string `json:"kind"`
	// URL holds the content: a data: URL (base64) or an http(s) URL the
	// provider fetches itself.
	URL string `json:"url"`
	// MediaType is the content's type ("image/png", "application/pdf"),
	// when known.
	MediaType string `json:"mediaType,omitempty"`
	// Filename names a file.
	Filename string `json:"filename,omitempty"`
	// Detail is an image's detail for OpenAI ("auto", "low", "high").
	Detail string `json:"detail,omitempty"`
}

// The kinds of Attachment.
const (
	AttachImage = "image"
	AttachFile  = "file"
)

// ToolCall is one call of a tool by a model, complete and validated: the name
// is known, the ID is present and Arguments is a JSON object.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResult is what a tool call produced, as given back to the model.
type ToolResult struct {
	CallID string `json:"callId"`
	Name   string `json:"name"`
	// Content is markdown.
	Content string `json:"content"`
	// Type classifies the content (for example "critique_result" or "error").
	Type    string `json:"type,omitempty"`
	IsError bool   `json:"isError,omitempty"`
	// NotRun marks an error result for a call that never reached the tool
	// (unknown tool, arguments that fail the schema, a refused call) or
	// that the turn stopped before it completed. Such a call is not
	// recorded by the orchestration; a tool that ran and failed is.
	NotRun bool `json:"notRun,omitempty"`
	// Denied marks the result of a call a person declined to approve
	// (NotRun and IsError are set too): Content tells the model so, with
	// the person's reason.
	Denied bool `json:"denied,omitempty"`
	// Usage is what the tool spent on models: an agent tool's child
	// turn. The turn adds it to its own.
	Usage *Usage `json:"usage,omitempty"`
	// Pending, when set, are approvals that an agent the call asked waits
	// for (each with Agent and Call): the call did not complete, and the
	// turn holds it like a call that waits for approval. It runs again
	// with the answers (tools.Call.Decisions), and its result is then
	// the agent's answer. Never stored: the session keeps the approvals.
	Pending []Approval `json:"pending,omitempty"`
}

// The runtime begins the result of every call that did not run with one
// of these (see ToolResult.NotRun): refusals with RefusedPrefix, the others
// (declined, invalid arguments, stopped) with NotRunPrefix. A client that
// holds the conversation as text, as OpenAI's formats do, keeps them, so
// that a replay of the conversation can tell such a result from that of a
// tool that ran (NotRunContent).
const (
	RefusedPrefix = "Refused: "
	NotRunPrefix  = "Not run: "
)

// NotRunContent reports whether a tool result's content begins the way the
// runtime begins the result of a call that did not run.
func NotRunContent(content string) bool {
	return strings.HasPrefix(content, RefusedPrefix) || strings.HasPrefix(content, NotRunPrefix)
}

// Usage counts tokens, normalised across providers (OpenAI's prompt and
// completion tokens, Anthropic's input and output tokens). Prompt counts
// every input token, cached or not, as OpenAI does; CacheRead and
// CacheWrite are the parts of Prompt that the provider read from its prompt
// cache and wrote to it (Anthropic reports both outside its input_tokens:
// the provider adapter adds them in). Both are absent from usage stored
// before they were counted, which reads as zero.
type Usage struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Total      int64 `json:"total"`
	// CacheRead is the input read from the provider's prompt cache (billed
	// at a fraction of the price); CacheWrite the input written to it
	// (Anthropic bills it above the price, OpenAI reports none).
	CacheRead  int64 `json:"cacheRead,omitempty"`
	CacheWrite int64 `json:"cacheWrite,omitempty"`
	// Cost is what the tokens cost, in the currency of the server's price
	// table (MODEL_PRICES), when it prices the model that spent them;
	// absent otherwise.
	Cost float64 `json:"cost,omitempty"`
}

// Add returns the sum of u and v. A zero Total on either side is taken as
// Prompt+Completion, because some providers do not report it.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Prompt:     u.Prompt + v.Prompt,
		Completion: u.Completion + v.Completion,
		Total:      u.total() + v.total(),
		CacheRead:  u.CacheRead + v.CacheRead,
		CacheWrite: u.CacheWrite + v.CacheWrite,
		Cost:       u.Cost + v.Cost,
	}
}

func (u Usage) total() int64 {
	if u.Total == 0 {
		return u.Prompt + u.Completion
	}
	return u.Total
}

// IsZero reports whether u counts nothing.
func (u Usage) IsZero() bool { return u == Usage{} }

// ToolSpec describes a tool to a model: its name, what it does, and the JSON
// Schema of its arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}
