package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/responses"
	"github.com/agentdock-go/agentdock/session"
)

// answerArtifact names the artifact that holds the agent's answer.
const answerArtifact = "answer"

// tracker folds the chat.Events of a task's turns into the task, and makes
// the stream events that report them: the one conversion of this edge.
type tracker struct {
	task Task
	// text is the answer so far; chunks counts the artifact updates sent.
	text   chat.AnswerText
	chunks int
	// approvals wait for a person at the turn's end.
	approvals []approvalView
	failure   string
}

// approvalView is a call that waits for approval, as a data part shows it.
type approvalView struct {
	ID         string          `json:"id"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Input      json.RawMessage `json:"input"`
	// Agent names the agent that asks, when it is one an agent tool of
	// the task's agent asked: ToolName and Input are then its call's, and
	// ToolCallID the task's call that asked it.
	Agent string `json:"agent,omitempty"`
}

// newTracker continues task: its answer so far is the text its next turn
// appends to.
func newTracker(task Task) *tracker {
	k := &tracker{task: task}
	for _, a := range task.Artifacts {
		if a.ArtifactID == answerArtifact {
			for _, p := range a.Parts {
				if p.Text != nil {
					k.text.WriteString(*p.Text)
				}
			}
		}
	}
	if k.text.Len() > 0 {
		k.chunks = 1
	}
	return k
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// agentMessage is a message of the agent about the task.
func (k *tracker) agentMessage(parts ...Part) *Message {
	return &Message{MessageID: session.NewID(), ContextID: k.task.ContextID, TaskID: k.task.ID, Role: RoleAgent, Parts: parts}
}

func (k *tracker) status(state string, msg *Message, meta map[string]any) StreamResponse {
	st := TaskStatus{State: state, Message: msg, Timestamp: timestamp(time.Now())}
	k.task.Status = st
	return StreamResponse{StatusUpdate: &TaskStatusUpdateEvent{TaskID: k.task.ID, ContextID: k.task.ContextID, Status: st, Metadata: meta}}
}

func (k *tracker) artifact(text string, last bool) StreamResponse {
	ev := &TaskArtifactUpdateEvent{TaskID: k.task.ID, ContextID: k.task.ContextID,
		Artifact: Artifact{ArtifactID: answerArtifact, Name: answerArtifact, Parts: []Part{textPart(text)}},
		Append:   k.chunks > 0, LastChunk: last}
	k.chunks++
	return StreamResponse{ArtifactUpdate: ev}
}

// add folds ev into the task and returns the stream events it makes.
func (k *tracker) add(ev chat.Event) []StreamResponse {
	switch ev.Kind {
	case chat.KindTextDelta:
		k.text.Add(ev)
		return []StreamResponse{k.artifact(ev.Text, false)}
	case chat.KindStepStart:
		k.text.Add(ev)
	case chat.KindRestart:
		// Another server took the turn over: the answer goes back to its
		// last saved step, and the artifact is sent whole again.
		k.text.Add(ev)
		k.chunks = 0
		return []StreamResponse{k.status(StateWorking, k.agentMessage(textPart(ev.Restart.Message)), nil), k.artifact(k.text.String(), false)}
	case chat.KindToolCall:
		return []StreamResponse{k.status(StateWorking, k.agentMessage(dataPart(map[string]any{"toolCall": ev.ToolCall})), nil)}
	case chat.KindToolResult:
		return []StreamResponse{k.status(StateWorking, k.agentMessage(dataPart(map[string]any{"toolResult": ev.ToolResult})), nil)}
	case chat.KindOrchestration:
		return []StreamResponse{k.status(StateWorking, nil, map[string]any{"orchestration": ev.Orchestration})}
	case chat.KindWarning:
		return []StreamResponse{k.status(StateWorking, k.agentMessage(textPart(ev.Text)), nil)}
	case chat.KindLimit:
		return []StreamResponse{k.status(StateWorking, k.agentMessage(textPart(ev.Limit.Message)), nil)}
	case chat.KindToolProgress:
		// The work of an agent a tool call asked, as the call's progress.
		return []StreamResponse{k.status(StateWorking, k.agentMessage(dataPart(map[string]any{"progress": ev.Progress})), nil)}
	case chat.KindApproval:
		call := ev.ToolCall
		if c := ev.Approval.Call; c != nil {
			call = c
		}
		in := call.Arguments
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		k.approvals = append(k.approvals, approvalView{ID: ev.Approval.ID, ToolCallID: ev.Approval.ToolCallID, ToolName: call.Name, Input: in, Agent: ev.Approval.Agent})
	case chat.KindError:
		k.failure = ev.Error.Code + ": " + ev.Error.Message
	case chat.KindDone:
		return k.done(ev.FinishReason)
	}
	return nil
}

// done ends the turn's part of the task: the answer's last chunk, then
// the state the turn left the task in.
func (k *tracker) done(reason string) []StreamResponse {
	var out []StreamResponse
	if k.chunks > 0 {
		out = append(out, k.artifact("", true))
	}
	if k.text.Len() > 0 {
		k.task.Artifacts = []Artifact{{ArtifactID: answerArtifact, Name: answerArtifact, Parts: []Part{textPart(k.text.String())}}}
	}
	switch {
	case reason == chat.FinishApproval && len(k.approvals) > 0:
		names := make([]string, len(k.approvals))
		for i, a := range k.approvals {
			names[i] = a.ToolName
		}
		msg := k.agentMessage(
			textPart(fmt.Sprintf("The agent waits for approval of %s. Answer with a message on this task whose data part is {\"approvals\": [{\"id\": ..., \"approved\": true|false, \"reason\": \"...\"}]}, one entry per call.", strings.Join(names, ", "))),
			dataPart(map[string]any{"approvals": k.approvals}))
		out = append(out, k.status(StateInputRequired, msg, nil))
	case reason == chat.FinishStopped:
		out = append(out, k.status(StateCanceled, nil, nil))
	case reason == chat.FinishError || k.failure != "":
		out = append(out, k.status(StateFailed, k.agentMessage(textPart(k.failure)), nil))
	default:
		out = append(out, k.status(StateCompleted, nil, map[string]any{"finishReason": reason}))
	}
	return out
}

// record is a task as the task store keeps it, for every replica.
type record struct {
	Task Task `json:"task"`
	// Agent runs the task; Turn is its latest turn, in the session named
	// by the task's contextId.
	Agent string `json:"agent"`
	Turn  string `json:"turn"`
}

// taskStore keeps records in a responses.Store (the Responses API's store,
// on the session store's Redis with replicas), under the owner's keyspace
// (session.Key): another owner's task is absent.
type taskStore struct {
	s     responses.Store
	index Index
}

// errTaskNotFound: no such task of the caller.
var errTaskNotFound = errors.New("task not found")

func taskKey(owner, prefix, id string) (string, bool) {
	k := prefix + id
	if !session.ValidID(id) || !session.ValidID(k) {
		return "", false
	}
	return session.Key(owner, k), true
}

func (t taskStore) get(ctx context.Context, owner, id string) (record, error) {
	var rec record
	key, ok := taskKey(owner, "a2a_", id)
	if !ok {
		return rec, errTaskNotFound
	}
	r, err := t.s.Get(ctx, key)
	if errors.Is(err, responses.ErrNotFound) {
		return rec, errTaskNotFound
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(r.Response, &rec); err != nil {
		return rec, fmt.Errorf("a2a: task %s: %w", id, session.ErrCorrupt)
	}
	return rec, nil
}

func (t taskStore) put(ctx context.Context, owner string, rec record) error {
	key, ok := taskKey(owner, "a2a_", rec.Task.ID)
	if !ok {
		return fmt.Errorf("a2a: invalid task ID %q", rec.Task.ID)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := t.s.Put(ctx, key, responses.Record{SessionID: rec.Task.ContextID, Response: data}); err != nil {
		return err
	}
	return t.index.Touch(ctx, owner, rec.Task.ID, time.Now())
}

// pushRecord is the webhooks of a task, kept apart from the task so that a
// config written while the task's turn ends is not lost.
type pushRecord struct {
	Configs []TaskPushNotificationConfig `json:"configs"`
}

func (t taskStore) pushConfigs(ctx context.Context, owner, taskID string) ([]TaskPushNotificationConfig, error) {
	key, ok := taskKey(owner, "a2a_push_", taskID)
	if !ok {
		return nil, errTaskNotFound
	}
	r, err := t.s.Get(ctx, key)
	if errors.Is(err, responses.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pushRecord
	if err := json.Unmarshal(r.Response, &p); err != nil {
		return nil, fmt.Errorf("a2a: push configs of %s: %w", taskID, session.ErrCorrupt)
	}
	return p.Configs, nil
}

func (t taskStore) putPushConfigs(ctx context.Context, owner, taskID string, configs []TaskPushNotificationConfig) error {
	key, ok := taskKey(owner, "a2a_push_", taskID)
	if !ok {
		return errTaskNotFound
	}
	data, err := json.Marshal(pushRecord{Configs: configs})
	if err != nil {
		return err
	}
	return t.s.Put(ctx, key, responses.Record{SessionID: taskID, Response: data})
}
