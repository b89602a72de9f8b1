package telemetry_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/template"
)

const critiqueMessage = "Critique the argument that remote work improves productivity"

// turnSpans splits a turn's spans by operation and checks the tree:
// one invoke_agent root, every chat and execute_tool span its direct child.
type turnSpans struct {
	invoke sdktrace.ReadOnlySpan
	chats  []sdktrace.ReadOnlySpan
	tools  []sdktrace.ReadOnlySpan
	other  []sdktrace.ReadOnlySpan // store commands and the like
}

func splitTurn(t *testing.T, spans []sdktrace.ReadOnlySpan) turnSpans {
	t.Helper()
	var ts turnSpans
	for _, s := range spans {
		switch attrs(s)["gen_ai.operation.name"].AsString() {
		case "invoke_agent":
			if ts.invoke != nil {
				t.Fatal("two invoke_agent spans for one turn")
			}
			ts.invoke = s
		case "chat":
			ts.chats = append(ts.chats, s)
		case "execute_tool":
			ts.tools = append(ts.tools, s)
		default:
			ts.other = append(ts.other, s)
		}
	}
	if ts.invoke == nil {
		t.Fatal("no invoke_agent span")
	}
	if ts.invoke.Parent().IsValid() {
		t.Errorf("invoke_agent has a parent %v; the turn ran without one", ts.invoke.Parent().SpanID())
	}
	// The recorder sees spans as they end: children first. Order them by
	// start time to compare with the turn's events.
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }
	slices.SortFunc(ts.chats, byStart)
	slices.SortFunc(ts.tools, byStart)
	for _, s := range slices.Concat(ts.chats, ts.tools) {
		if s.Parent().SpanID() != ts.invoke.SpanContext().SpanID() || s.SpanContext().TraceID() != ts.invoke.SpanContext().TraceID() {
			t.Errorf("%s is not a child of invoke_agent", s.Name())
		}
	}
	return ts
}

// TestTurnTrace runs one tool-using turn of the cognitive reasoner with the
// offline model and the real tools, and checks the span tree, the GenAI and
// orchestration attributes, and that chat content appears in no span unless
// content capture is on.
func TestTurnTrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content bool
	}{{"default", false}, {"capture content", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := setupRecorded(t, tc.content)
			store := session.NewMemory(session.Config{})
			defer store.Close()
			n := node(t, store, rec.tel, offlineModels, "cognitive-reasoner")
			id := session.NewID()
			evs := runTurn(t, n, id, critiqueMessage)

			ts := splitTurn(t, rec.spans.Ended())
			var calls []chat.ToolCall
			var steps int
			var answer strings.Builder
			for _, ev := range evs {
				switch ev.Kind {
				case chat.KindToolCall:
					calls = append(calls, *ev.ToolCall)
				case chat.KindStepStart:
					steps++
				case chat.KindTextDelta:
					answer.WriteString(ev.Text)
				}
			}
			if len(ts.chats) != steps || len(ts.tools) != len(calls) || len(calls) != 3 {
				t.Fatalf("%d chat spans for %d model calls, %d execute_tool spans for %d tool calls (want 3)", len(ts.chats), steps, len(ts.tools), len(calls))
			}

			inv := attrs(ts.invoke)
			want := map[attribute.Key]attribute.Value{
				"gen_ai.agent.id":                       attribute.StringValue("cognitive-reasoner"),
				"gen_ai.conversation.id":                attribute.StringValue(id),
				"session.id":                            attribute.StringValue(id),
				"gen_ai.provider.name":                  attribute.StringValue("offline"),
				"agentdock.turn.finish_reason":          attribute.StringValue(chat.FinishStop),
				"agentdock.turn.model_calls":            attribute.IntValue(steps),
				"agentdock.turn.tool_calls":             attribute.IntValue(3),
				"agentdock.orchestration.active_step":   attribute.StringValue("EvaluationMode"),
				"agentdock.orchestration.transition":    attribute.BoolValue(true),
				"agentdock.orchestration.previous_step": attribute.StringValue(""),
			}
			checkAttrs(t, ts.invoke, want)
			if ts.invoke.Name() != "invoke_agent cognitive-reasoner" || ts.invoke.SpanKind() != trace.SpanKindInternal {
				t.Errorf("invoke span %q kind %v", ts.invoke.Name(), ts.invoke.SpanKind())
			}

			var in, out int64
			offered := []int64{1, 1, 1, 4}
			for i, s := range ts.chats {
				a := attrs(s)
				if s.Name() != "chat "+a["gen_ai.request.model"].AsString() || s.SpanKind() != trace.SpanKindClient {
					t.Errorf("chat span %q kind %v", s.Name(), s.SpanKind())
				}
				finish := "tool_calls"
				if i == len(ts.chats)-1 {
					finish = "stop"
				}
				checkAttrs(t, s, map[attribute.Key]attribute.Value{
					"gen_ai.provider.name":                   attribute.StringValue("offline"),
					"gen_ai.request.temperature":             attribute.Float64Value(0.6),
					"gen_ai.request.max_tokens":              attribute.IntValue(4096),
					"gen_ai.response.finish_reasons":         attribute.StringSliceValue([]string{finish}),
					"gen_ai.agent.id":                        attribute.StringValue("cognitive-reasoner"),
					"gen_ai.conversation.id":                 attribute.StringValue(id),
					"agentdock.turn.model_call":              attribute.IntValue(i + 1),
					"agentdock.orchestration.active_step":    attribute.StringValue("EvaluationMode"),
					"agentdock.orchestration.sequence_index": attribute.IntValue(i),
					"agentdock.orchestration.offered_tools":  attribute.Int64Value(offered[i]),
					"agentdock.orchestration.transition":     attribute.BoolValue(i == 0),
				})
				if a["gen_ai.usage.input_tokens"].AsInt64() <= 0 || a["gen_ai.usage.output_tokens"].AsInt64() <= 0 {
					t.Errorf("chat %d has no token usage: %v", i, s.Attributes())
				}
				in += a["gen_ai.usage.input_tokens"].AsInt64()
				out += a["gen_ai.usage.output_tokens"].AsInt64()
			}
			if inv["gen_ai.usage.input_tokens"].AsInt64() != in || inv["gen_ai.usage.output_tokens"].AsInt64() != out {
				t.Errorf("turn usage %v/%v, want the chat spans' sum %d/%d", inv["gen_ai.usage.input_tokens"], inv["gen_ai.usage.output_tokens"], in, out)
			}

			for i, s := range ts.tools {
				if s.Name() != "execute_tool "+calls[i].Name || s.SpanKind() != trace.SpanKindInternal || s.Status().Code == codes.Error {
					t.Errorf("tool span %q kind %v status %v", s.Name(), s.SpanKind(), s.Status())
				}
				checkAttrs(t, s, map[attribute.Key]attribute.Value{
					"gen_ai.tool.name":                       attribute.StringValue(calls[i].Name),
					"gen_ai.tool.call.id":                    attribute.StringValue(calls[i].ID),
					"agentdock.orchestration.active_step":    attribute.StringValue("EvaluationMode"),
					"agentdock.orchestration.sequence_index": attribute.IntValue(i),
					"agentdock.tool.outcome":                 attribute.StringValue(telemetry.OutcomeOK),
					"agentdock.tool.refused":                 attribute.BoolValue(false),
					"agentdock.orchestration.transition":     attribute.BoolValue(false),
				})
				// Tools run after the model call that asked for them.
				if !s.StartTime().After(ts.chats[i].EndTime()) && !s.StartTime().Equal(ts.chats[i].EndTime()) {
					t.Errorf("tool %d starts before chat %d ends", i, i)
				}
			}

			// The chat content of this turn: the user message, the
			// arguments the model wrote and the answer.
			secrets := []string{critiqueMessage}
			for _, c := range calls {
				var args map[string]any
				if err := json.Unmarshal(c.Arguments, &args); err != nil {
					t.Fatal(err)
				}
				for _, v := range args {
					if s, ok := v.(string); ok && len(s) >= 12 {
						secrets = append(secrets, s)
					}
				}
			}
			if len(secrets) < 4 {
				t.Fatalf("too few argument texts to look for: %q", secrets)
			}
			secrets = append(secrets, answer.String())
			found := map[string]bool{}
			for _, s := range rec.spans.Ended() {
				for where, v := range spanStrings(s) {
					for _, secret := range secrets {
						// Content inside JSON attributes is escaped.
						escaped, _ := json.Marshal(secret)
						if strings.Contains(v, secret) || strings.Contains(v, strings.Trim(string(escaped), `"`)) {
							found[secret] = true
							if !tc.content {
								t.Errorf("span %q, %s holds chat content %.40q", s.Name(), where, secret)
							}
						}
					}
				}
			}
			if tc.content {
				for _, secret := range secrets {
					if !found[secret] {
						t.Errorf("with content capture, %.60q is in no span", secret)
					}
				}
				var msgs []map[string]any
				if err := json.Unmarshal([]byte(inv["gen_ai.input.messages"].AsString()), &msgs); err != nil || len(msgs) != 1 || msgs[0]["role"] != "user" {
					t.Errorf("gen_ai.input.messages = %s (%v)", inv["gen_ai.input.messages"].AsString(), err)
				}
			}
		})
	}
}

func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]attribute.Value) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no %s", s.Name(), k)
			continue
		}
		if g.Emit() != v.Emit() {
			t.Errorf("%s: %s = %s, want %s", s.Name(), k, g.Emit(), v.Emit())
		}
	}
}

// TestRefusedAndInvalidToolCalls: a model that calls a tool the active step
// does not offer, and makes an invalid call, gets error spans and the
// refused and error metrics; a later tool use that changes the step shows
// as a transition on its span.
func TestRefusedAndInvalidToolCalls(t *testing.T) {
	rec := setupRecorded(t, false)
	store := session.NewMemory(session.Config{})
	defer store.Close()
	// EvaluationMode offers critique first: think is refused, the debate
	// call is invalid, an invented tool is invalid and unknown.
	model := &scripted{replies: [][]string{{"think", "!debate", "!made_up_tool"}, {}}}
	models := func(tp *template.Template) (llmorch.Model, error) {
		if tp.AgentID == "cognitive-reasoner" {
			return model, nil
		}
		return offlineModels(tp)
	}
	n := node(t, store, rec.tel, models, "cognitive-reasoner")
	runTurn(t, n, session.NewID(), critiqueMessage)

	ts := splitTurn(t, rec.spans.Ended())
	if len(ts.tools) != 3 {
		t.Fatalf("%d tool spans, want 3", len(ts.tools))
	}
	for i, want := range []struct{ outcome, errType string }{
		{telemetry.OutcomeRefused, "refused"},
		{telemetry.OutcomeInvalid, "invalid_tool_call"},
		{telemetry.OutcomeInvalid, "invalid_tool_call"},
	} {
		s := ts.tools[i]
		checkAttrs(t, s, map[attribute.Key]attribute.Value{
			"agentdock.tool.outcome": attribute.StringValue(want.outcome),
			"agentdock.tool.refused": attribute.BoolValue(want.outcome == telemetry.OutcomeRefused),
			"error.type":             attribute.StringValue(want.errType),
		})
		if s.Status().Code != codes.Error {
			t.Errorf("%s: status %v, want error", s.Name(), s.Status())
		}
		for where, v := range spanStrings(s) {
			if strings.Contains(v, "secret") {
				t.Errorf("%s: %s holds the arguments: %q", s.Name(), where, v)
			}
		}
	}

	m := rec.collect(t)
	refused := sumPoints(t, m, "agentdock.tool.refused", map[string]string{"gen_ai.tool.name": "think", "agentdock.orchestration.active_step": "EvaluationMode", "gen_ai.agent.id": "cognitive-reasoner"})
	if refused != 1 {
		t.Errorf("agentdock.tool.refused{think} = %d, want 1", refused)
	}
	if got := sumPoints(t, m, "agentdock.tool.errors", map[string]string{"gen_ai.tool.name": "debate", "agentdock.tool.outcome": "invalid"}); got != 1 {
		t.Errorf("agentdock.tool.errors{debate, invalid} = %d, want 1", got)
	}
	// The invented name stays out of the labels.
	if got := sumPoints(t, m, "agentdock.tool.errors", map[string]string{"gen_ai.tool.name": "_OTHER"}); got != 1 {
		t.Errorf("agentdock.tool.errors{_OTHER} = %d, want 1", got)
	}
	if got := sumPoints(t, m, "agentdock.tool.errors", map[string]string{"gen_ai.tool.name": "made_up_tool"}); got != 0 {
		t.Errorf("a model's invented tool name became a metric label")
	}
}

// TestToolTransition: a tool use that changes the active step shows on the
// tool's span, as an event, on the next model call's span and in the
// transitions metric with cause "tool".
func TestToolTransition(t *testing.T) {
	rec := setupRecorded(t, false)
	store := session.NewMemory(session.Config{})
	defer store.Close()
	// FollowUp needs a search and a message starting with "so"; before the
	// search the default step, Conversation, is active.
	model := &scripted{replies: [][]string{{"search"}, {}}}
	models := func(tp *template.Template) (llmorch.Model, error) {
		if tp.AgentID == "research-assistant" {
			return model, nil
		}
		return offlineModels(tp)
	}
	n := node(t, store, rec.tel, models, "research-assistant")
	runTurn(t, n, session.NewID(), "so what about heat pumps?")

	ts := splitTurn(t, rec.spans.Ended())
	if len(ts.tools) != 1 || len(ts.chats) != 2 {
		t.Fatalf("%d tool and %d chat spans, want 1 and 2", len(ts.tools), len(ts.chats))
	}
	tool := ts.tools[0]
	checkAttrs(t, tool, map[attribute.Key]attribute.Value{
		"agentdock.orchestration.active_step":   attribute.StringValue("Conversation"),
		"agentdock.orchestration.transition":    attribute.BoolValue(true),
		"agentdock.orchestration.previous_step": attribute.StringValue("Conversation"),
		"agentdock.orchestration.next_step":     attribute.StringValue("FollowUp"),
		// No search backend here: the tool ran and failed, and still
		// counts as used.
		"agentdock.tool.outcome": attribute.StringValue(telemetry.OutcomeError),
	})
	var event bool
	for _, ev := range tool.Events() {
		if ev.Name == "agentdock.orchestration.transition" {
			event = true
			if got := attribute.NewSet(ev.Attributes...); !matches(got, map[string]string{"agentdock.orchestration.from_step": "Conversation", "agentdock.orchestration.to_step": "FollowUp"}) {
				t.Errorf("transition event %v", ev.Attributes)
			}
		}
	}
	if !event {
		t.Error("the tool span has no transition event")
	}
	checkAttrs(t, ts.chats[1], map[attribute.Key]attribute.Value{
		"agentdock.orchestration.active_step":   attribute.StringValue("FollowUp"),
		"agentdock.orchestration.transition":    attribute.BoolValue(true),
		"agentdock.orchestration.previous_step": attribute.StringValue("Conversation"),
	})
	got := sumPoints(t, rec.collect(t), "agentdock.orchestration.transitions", map[string]string{
		"agentdock.orchestration.from_step": "Conversation", "agentdock.orchestration.to_step": "FollowUp", "agentdock.orchestration.cause": "tool",
	})
	if got != 1 {
		t.Errorf("tool transitions Conversation -> FollowUp = %d, want 1", got)
	}
}
