package transcript

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
	"github.com/agentdock-go/agentdock/orchestration"
)

// Report is the outcome of one transcript.
type Report struct {
	Transcript *Transcript
	SessionID  string
	// Warnings are the template's load warnings (tools the runtime does
	// not provide, steps that can never activate...).
	Warnings []string
	Turns    []TurnReport
}

// TurnReport is what the runtime did in one turn.
type TurnReport struct {
	Index int
	User  string
	// Calls are the turn's model calls, in order.
	Calls []Call
	// Unanswered counts the transcript's answers no model call used.
	Unanswered int
	// Text is the answer streamed to the user.
	Text string
	// Results are the tool results, refusals included, in order.
	Results []ToolOutcome
	// Refused are the calls the orchestration refused.
	Refused []Refusal
	// Awaiting are the tools of the calls held for approval, in order.
	Awaiting []string
	// State is the session's orchestration state after the turn.
	State        orchestration.State
	FinishReason string
	// Error is the turn's error event, if any.
	Error *chat.Error
	// Failure says why no turn ran (the message was refused).
	Failure    string
	Mismatches []Mismatch
	// Agents are the turns of the agents this turn's agent asked (agent
	// tools), one report per agent; their mismatches are among the
	// turn's Mismatches.
	Agents []AgentReport
}

// AgentReport is what an agent asked by a turn's agent did during the
// turn: its model calls and results, across the calls that asked it;
// State is its session's after the turn, FinishReason its last turn's.
type AgentReport struct {
	Agent string
	TurnReport
}

// Call is one model call: what the orchestration offered and where it was.
type Call struct {
	Offered []string
	// Model is the llm.* key of the model the call went to.
	Model         string
	Step          string
	SequenceIndex int
	// Answered is false for a call the transcript had no answer for.
	Answered bool
	// Request is the request the model got: the system prompt, the
	// conversation (with the results and refusals of earlier calls), the
	// tools.
	Request llmorch.Request
}

// Refusal is a call the orchestration refused, after model call Call.
type Refusal struct {
	Tool   string
	Call   int
	Reason string
}

// ToolOutcome is one tool result, after model call Call.
type ToolOutcome struct {
	Call   int
	Result chat.ToolResult
}

// Mismatch is one expectation that did not hold, or a turn that did not
// pair up with the transcript's answers.
type Mismatch struct {
	Turn int
	User string
	// Where names the model call: "model call 2 of 3", "after model call
	// 3 of 3", "model calls 1-3".
	Where    string
	Key      string
	Expected string
	Got      string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("turn %d (%s), %s: %s: expected %s, got %s", m.Turn+1, quote(m.User, 40), m.Where, m.Key, m.Expected, m.Got)
}

// Failed reports whether any turn had a mismatch.
func (r *Report) Failed() bool {
	for _, t := range r.Turns {
		if len(t.Mismatches) > 0 {
			return true
		}
	}
	return false
}

// Mismatches returns every mismatch, one line each.
func (r *Report) Mismatches() []string {
	var out []string
	for _, t := range r.Turns {
		for _, m := range t.Mismatches {
			out = append(out, m.String())
		}
	}
	return out
}

// Print writes the report: per turn its model calls with the step, the
// offered tools and the answer's calls, the refusals, the state after the
// turn, and under it every mismatch.
func (r *Report) Print(w io.Writer) {
	status := "PASS"
	if r.Failed() {
		status = "FAIL"
	}
	tr := r.Transcript
	fmt.Fprintf(w, "%s %s (%s)\n", status, tr.DisplayName(), tr.File)
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "  template warning: %s\n", warn)
	}
	for _, t := range r.Turns {
		fmt.Fprintf(w, "  turn %d %s -> step=%s seq=%d recent=%s finish=%s\n", t.Index+1, quote(t.User, 50),
			stepName(t.State.ActiveStep), t.State.SequenceIndex, list(t.State.RecentlyUsedTools.Slice()), finish(&t))
		printCalls(w, "    ", &t, tr.Turns[t.Index].Model)
		for _, a := range t.Agents {
			fmt.Fprintf(w, "    asked %s -> step=%s seq=%d recent=%s finish=%s\n", a.Agent,
				stepName(a.State.ActiveStep), a.State.SequenceIndex, list(a.State.RecentlyUsedTools.Slice()), finish(&a.TurnReport))
			printCalls(w, "      ", &a.TurnReport, tr.Turns[t.Index].Agents[a.Agent].Model)
		}
		if t.Error != nil {
			fmt.Fprintf(w, "    error %s: %s\n", t.Error.Code, t.Error.Message)
		}
		for _, m := range t.Mismatches {
			fmt.Fprintf(w, "    MISMATCH %s: %s: expected %s, got %s\n", m.Where, m.Key, m.Expected, m.Got)
		}
	}
}

// printCalls writes a turn's model calls, each with its step, its offer,
// the transcript's answer and the calls that failed or were refused.
func printCalls(w io.Writer, indent string, t *TurnReport, answers []Answer) {
	for k, c := range t.Calls {
		did := "(no answer in the transcript)"
		if k < len(answers) {
			did = describe(answers[k])
		}
		fmt.Fprintf(w, "%scall %d: step=%s seq=%d offered=%s -> %s\n", indent, k+1, stepName(c.Step), c.SequenceIndex, list(c.Offered), did)
		for _, res := range t.Results {
			if res.Call != k+1 || !res.Result.IsError {
				continue
			}
			what := "failed"
			switch {
			case res.Result.Type == "refused":
				what = "REFUSED"
			case res.Result.NotRun:
				what = "invalid"
			}
			fmt.Fprintf(w, "%s  %s %s: %s\n", indent, what, res.Result.Name, clip(res.Result.Content, 160))
		}
	}
}

func describe(a Answer) string {
	var parts []string
	for _, c := range a.ToolCalls {
		parts = append(parts, c.Name)
	}
	s := ""
	if len(parts) > 0 {
		s = "calls " + strings.Join(parts, ", ")
	}
	if a.Text != "" {
		if s != "" {
			s += " and "
		}
		s += "text " + quote(a.Text, 30)
	}
	return s
}

func quote(s string, n int) string { return fmt.Sprintf("%q", clip(s, n)) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
