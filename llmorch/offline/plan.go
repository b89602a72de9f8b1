package offline

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// response is what one model call produces: text, a tool call, or both.
type response struct {
	text string
	call *chat.ToolCall
}

// turn is the part of the conversation the model reacts to: the latest user
// message and what happened after it.
type turn struct {
	hasUser bool
	message string
	calls   []chat.ToolCall
	results []result
}

type result struct {
	name    string
	content string
	isError bool
	// denied: a person declined the call, which did not run; not a
	// failure.
	denied bool
}

func readTurn(msgs []chat.Message) turn {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chat.RoleUser {
			last = i
			break
		}
	}
	var t turn
	if last < 0 {
		return t
	}
	t.hasUser, t.message = true, msgs[last].Content
	names := map[string]string{}
	for _, msg := range msgs[last+1:] {
		switch msg.Role {
		case chat.RoleAssistant:
			for _, c := range msg.ToolCalls {
				t.calls = append(t.calls, c)
				names[c.ID] = c.Name
			}
		case chat.RoleTool:
			name := msg.ToolName
			if name == "" {
				name = names[msg.ToolCallID]
			}
			t.results = append(t.results, result{name: name, content: msg.Content, isError: msg.IsError,
				denied: msg.Denied || msg.IsError && declinedText.MatchString(msg.Content)})
		}
	}
	return t
}

// declinedText finds a declined call in a conversation that lost the
// Denied flag (kept as text, replayed by a client).
var declinedText = regexp.MustCompile(`(?i)\buser declined\b`)

// respond decides what one model call does; see the package documentation.
func respond(req llmorch.Request) (response, error) {
	// The offline model keeps to the tools it may call now, whatever else
	// the request lists (stable tool filtering sends them all).
	req.Tools, req.Offered = req.Callable(), nil
	t := readTurn(req.Messages)
	if t.hasUser {
		if i := strings.Index(t.message, EchoMarker); i >= 0 {
			return response{text: strings.TrimLeft(t.message[i+len(EchoMarker):], " \t\r\n")}, nil
		}
	}
	tp := newTopic(t.message)
	name, mode := choose(req, t, tp)
	if name == "" && req.Require && len(req.Tools) > 0 {
		// The client requires a call: the tool that fits best.
		if name = bestTool(req.Tools, tp); name == "" {
			name = req.Tools[0].Name
		}
	}
	if name == "" {
		text := finalAnswer(req, t, tp, mode)
		if req.Format != nil {
			var err error
			if text, err = answerIn(req.Format, text, tp); err != nil {
				return response{}, err
			}
		}
		return response{text: text}, nil
	}
	spec := findTool(req.Tools, name)
	args, err := validArguments(spec, tp)
	if err != nil {
		return response{}, fmt.Errorf("tool %q: %w", name, err)
	}
	return response{call: &chat.ToolCall{ID: nextCallID(req.Messages), Name: name, Arguments: args}}, nil
}

// choose returns the tool to call next ("" for none) and the mode the turn
// follows (nil if none).
func choose(req llmorch.Request, t turn, tp *topic) (string, *llmorch.Mode) {
	snap := req.Orchestration
	var active *llmorch.Mode
	if snap != nil && snap.ActiveStep != "" {
		active = findMode(req.Modes, snap.ActiveStep)
	}
	if len(req.Tools) == 0 || !t.hasUser || len(t.calls) >= maxTurnCalls {
		return "", followed(active, req.Modes, tp)
	}
	if snap != nil && snap.ActiveStep != "" && snap.SequenceIndex >= 0 && snap.SequenceIndex < len(snap.Sequence) {
		return firstOffered(strings.Split(snap.Sequence[snap.SequenceIndex], "|"), req.Tools), active
	}
	// No sequence of the active step is pending (it is the default step,
	// a step without a sequence, or one whose sequence is done): follow the
	// mode that fits the message, as far as its tools are offered.
	if m := bestMode(req.Modes, tp); m != nil {
		pos := progress(m.Sequence, t.calls)
		if pos < len(m.Sequence) {
			if name := firstOffered(m.Sequence[pos], req.Tools); name != "" {
				return name, m
			}
		}
		if len(t.calls) > 0 || pos >= len(m.Sequence) {
			return "", m
		}
	}
	if len(t.calls) == 0 {
		if active != nil && !active.Default && len(req.Tools) == 1 {
			// The step the message led to offers one tool: the choice is
			// made ("quick: …" → a step of one search).
			return req.Tools[0].Name, nonDefault(active)
		}
		if name := bestTool(approvalSpecs(req), tp); name != "" {
			return name, nonDefault(active)
		}
		if len(req.ApprovalTools) > 0 {
			return firstOffered(req.ApprovalTools, req.Tools), nonDefault(active)
		}
		return bestTool(req.Tools, tp), nonDefault(active)
	}
	return "", nonDefault(active)
}

// approvalSpecs are the offered tools that wait for a person's approval.
func approvalSpecs(req llmorch.Request) []chat.ToolSpec {
	var out []chat.ToolSpec
	for _, t := range req.Tools {
		if slices.Contains(req.ApprovalTools, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// followed names the mode a final answer reports when no tool may be called.
func followed(active *llmorch.Mode, modes []llmorch.Mode, tp *topic) *llmorch.Mode {
	if m := nonDefault(active); m != nil {
		return m
	}
	return bestMode(modes, tp)
}

func nonDefault(m *llmorch.Mode) *llmorch.Mode {
	if m == nil || m.Default || len(m.Sequence) == 0 {
		return nil
	}
	return m
}

func findMode(modes []llmorch.Mode, name string) *llmorch.Mode {
	for i := range modes {
		if modes[i].Name == name {
			return &modes[i]
		}
	}
	return nil
}

func findTool(tools []chat.ToolSpec, name string) chat.ToolSpec {
	for _, t := range tools {
		if t.Name == name {
			return t
		}
	}
	return chat.ToolSpec{Name: name}
}

// firstOffered returns the first of group that is offered, or "".
func firstOffered(group []string, offered []chat.ToolSpec) string {
	for _, name := range group {
		name = strings.TrimSpace(name)
		for _, t := range offered {
			if t.Name == name {
				return name
			}
		}
	}
	return ""
}

// progress counts how far this turn's calls, in order, got through seq.
func progress(seq [][]string, calls []chat.ToolCall) int {
	pos := 0
	for _, c := range calls {
		if pos < len(seq) && slices.Contains(seq[pos], c.Name) {
			pos++
		}
	}
	return pos
}

// bestMode returns the non-default mode with a sequence that scores highest
// for the message, the first listed on a tie, or nil if none scores at least
// 2: a message that only names one later tool of a sequence ("think ...")
// is better served by that tool alone.
func bestMode(modes []llmorch.Mode, tp *topic) *llmorch.Mode {
	var best *llmorch.Mode
	bestScore := 1
	for i := range modes {
		m := &modes[i]
		if m.Default || len(m.Sequence) == 0 {
			continue
		}
		if s := modeScore(m, tp.concepts); s > bestScore {
			best, bestScore = m, s
		}
	}
	return best
}

// modeScore scores a mode against the message's concepts (its content words
// and their synonyms, stemmed; see concepts). Each concept earns 3 when it is
// a word of the mode's name, 2 when it is a word of its description, 1 when
// it names a tool of its sequence and 1 more when that tool comes first. The
// name weighs most because template authors name modes after the kind of
// request they serve ("EvaluationMode"); the first tool is what the mode does
// before anything else.
func modeScore(m *llmorch.Mode, concepts map[string]bool) int {
	name := stemSet(splitIdentifier(m.Name))
	desc := stemSet(words(m.Description))
	tools := map[string]bool{}
	first := map[string]bool{}
	for i, g := range m.Sequence {
		for _, tool := range g {
			for _, w := range splitIdentifier(tool) {
				tools[stem(w)] = true
				if i == 0 {
					first[stem(w)] = true
				}
			}
		}
	}
	score := 0
	for c := range concepts {
		if name[c] {
			score += 3
		}
		if desc[c] {
			score += 2
		}
		if tools[c] {
			score++
		}
		if first[c] {
			score++
		}
	}
	return score
}

// bestTool returns the offered tool that scores highest for the message
// (see toolScore), the first offered on a tie, or "" when none scores at
// least 2: one description word in common is too weak a reason to call a tool.
func bestTool(tools []chat.ToolSpec, tp *topic) string {
	best, bestScore := "", 1
	for _, t := range tools {
		if s := toolScore(t, tp.concepts); s > bestScore {
			best, bestScore = t.Name, s
		}
	}
	return best
}

// toolScore gives each message concept 3 when it is a word of the tool's name
// and 1 when it is a word of its description.
func toolScore(t chat.ToolSpec, concepts map[string]bool) int {
	name := stemSet(splitIdentifier(t.Name))
	desc := stemSet(words(t.Description))
	score := 0
	for c := range concepts {
		if name[c] {
			score += 3
		}
		if desc[c] {
			score++
		}
	}
	return score
}

// nextCallID returns "call_<n>" for the first n past the number of calls in
// msgs whose ID is not already used there.
func nextCallID(msgs []chat.Message) string {
	used := map[string]bool{}
	n := 0
	for _, msg := range msgs {
		for _, c := range msg.ToolCalls {
			used[c.ID] = true
			n++
		}
		if msg.ToolCallID != "" {
			used[msg.ToolCallID] = true
		}
	}
	for {
		n++
		id := "call_" + strconv.Itoa(n)
		if !used[id] {
			return id
		}
	}
}
