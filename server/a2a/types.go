package a2a

import "encoding/json"

// The A2A v1.0 objects as their JSON binding writes them (the protobuf
// JSON mapping: camelCase fields, enums as their names). Only the fields
// this server reads or writes are here; unknown fields of a request are
// ignored, as the JSON mapping wants.

// Task states.
const (
	StateSubmitted     = "TASK_STATE_SUBMITTED"
	StateWorking       = "TASK_STATE_WORKING"
	StateCompleted     = "TASK_STATE_COMPLETED"
	StateFailed        = "TASK_STATE_FAILED"
	StateCanceled      = "TASK_STATE_CANCELED"
	StateInputRequired = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      = "TASK_STATE_REJECTED"
)

// Roles of a message.
const (
	RoleUser  = "ROLE_USER"
	RoleAgent = "ROLE_AGENT"
)

// terminal reports whether a task in state can change no more.
func terminal(state string) bool {
	switch state {
	case StateCompleted, StateFailed, StateCanceled, StateRejected:
		return true
	}
	return false
}

// Part is one piece of a message or an artifact: text, structured data, or
// a file (by URL or inline), which this server does not read.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

func textPart(s string) Part { return Part{Text: &s} }

func dataPart(v any) Part {
	b, _ := json.Marshal(v)
	return Part{Data: b, MediaType: "application/json"}
}

// Message is one message of a conversation.
type Message struct {
	MessageID string         `json:"messageId"`
	ContextID string         `json:"contextId,omitempty"`
	TaskID    string         `json:"taskId,omitempty"`
	Role      string         `json:"role"`
	Parts     []Part         `json:"parts"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatus is a task's state, with the agent's message about it.
type TaskStatus struct {
	State     string   `json:"state"`
	Message   *Message `json:"message,omitempty"`
	Timestamp string   `json:"timestamp,omitempty"`
}

// Artifact is an output of a task: here the agent's answer.
type Artifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []Part `json:"parts"`
}

// Task is the A2A task of one message: a session turn, and the turns that
// carry out the approvals it waited for.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent reports a task's new status in a stream.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent carries a piece of an artifact in a stream.
type TaskArtifactUpdateEvent struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Artifact  Artifact `json:"artifact"`
	Append    bool     `json:"append,omitempty"`
	LastChunk bool     `json:"lastChunk,omitempty"`
}

// StreamResponse is one event of a stream: exactly one field is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any            `json:"metadata,omitempty"`
}

// SendMessageConfiguration is how a client wants the answer.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	// ReturnImmediately answers with the task as soon as it started.
	ReturnImmediately          bool                        `json:"returnImmediately,omitempty"`
	TaskPushNotificationConfig *TaskPushNotificationConfig `json:"taskPushNotificationConfig,omitempty"`
}

// taskRequest is the params of GetTask, CancelTask and SubscribeToTask.
type taskRequest struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// TaskPushNotificationConfig is a webhook a task's updates are posted to.
type TaskPushNotificationConfig struct {
	ID             string              `json:"id,omitempty"`
	TaskID         string              `json:"taskId,omitempty"`
	URL            string              `json:"url"`
	Token          string              `json:"token,omitempty"`
	Authentication *AuthenticationInfo `json:"authentication,omitempty"`
}

// AuthenticationInfo is the credentials sent to a webhook.
type AuthenticationInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// pushConfigRequest is the params of the push configs' get, list and
// delete.
type pushConfigRequest struct {
	TaskID string `json:"taskId"`
	ID     string `json:"id,omitempty"`
}

// AgentCard describes the server's agents, or one agent.
type AgentCard struct {
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	SupportedInterfaces  []AgentInterface  `json:"supportedInterfaces"`
	Provider             *AgentProvider    `json:"provider,omitempty"`
	Version              string            `json:"version"`
	Capabilities         AgentCapabilities `json:"capabilities"`
	SecuritySchemes      map[string]any    `json:"securitySchemes,omitempty"`
	SecurityRequirements []map[string]any  `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string          `json:"defaultInputModes"`
	DefaultOutputModes   []string          `json:"defaultOutputModes"`
	Skills               []AgentSkill      `json:"skills"`
}

// AgentInterface is one endpoint of a card, and its binding.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider names who serves the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// AgentCapabilities are the optional parts of the protocol served.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// AgentSkill is one thing an agent does: on the server's card an agent, on
// an agent's card a step of its orchestration.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
}
