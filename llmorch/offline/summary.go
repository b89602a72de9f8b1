package offline

import (
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/llmorch"
)

// The offline summary (a Request with Summarize set) is extractive and
// deterministic: one line per user message, in its own words, and under it
// one line per tool result, its first line, marked when the call did not
// run or failed. An earlier summary's lines are kept before the new ones.
// When the lines pass the summary's budget, tool lines go first, oldest
// first, then user lines from the middle of the conversation: its opening
// (where people state what the conversation is about) and its latest
// turns stay, with a line saying how many turns were left out.

// Bounds of one line of the summary.
const (
	maxUserLine = 600
	maxToolLine = 160
)

// The markers of the summary's lines, which an earlier summary's lines
// are read back by.
const (
	userMark    = "- Turn "
	toolMark    = "  - "
	omittedMark = "- (turns "
)

// summarize writes the extractive summary of in within in.MaxTokens
// (estimated as llmorch.EstimateTokens counts).
func summarize(in *llmorch.SummaryInput) string {
	var lines []string
	if p := in.Previous; p != nil {
		for _, l := range strings.Split(p.Content, "\n") {
			if strings.HasPrefix(l, userMark) || strings.HasPrefix(l, toolMark) || strings.HasPrefix(l, omittedMark) {
				lines = append(lines, l)
			}
		}
	}
	for _, t := range in.Turns {
		names := map[string]string{}
		for _, m := range t.Messages {
			switch m.Role {
			case chat.RoleUser:
				lines = append(lines, fmt.Sprintf("%s%d, the user said: %s", userMark, t.Number, oneLine(m.Content, maxUserLine)))
			case chat.RoleAssistant:
				for _, c := range m.ToolCalls {
					names[c.ID] = c.Name
				}
			case chat.RoleTool:
				name := m.ToolName
				if name == "" {
					name = names[m.ToolCallID]
				}
				first, _, _ := strings.Cut(strings.TrimSpace(m.Content), "\n")
				what := name
				switch {
				case m.Denied:
					what += " (declined by the user)"
				case m.NotRun:
					what += " (did not run)"
				case m.IsError:
					what += " (failed)"
				}
				lines = append(lines, fmt.Sprintf("%s%s: %s", toolMark, what, oneLine(first, maxToolLine)))
			}
		}
	}
	from, through := 0, 0
	if len(in.Turns) > 0 {
		from, through = in.Turns[0].Number, in.Turns[len(in.Turns)-1].Number
	}
	if p := in.Previous; p != nil && p.Summary != nil {
		from = p.Summary.From
	}
	head := fmt.Sprintf("Turns %d to %d, as the offline model keeps them: what the user said, and the first line of each tool result.", from, through)
	// Four fifths of the budget: the turn counts the summary with the
	// agent's model's tokenizer, which may count more than the estimate.
	return head + "\n" + strings.Join(fit(lines, in.MaxTokens*4/5-llmorch.EstimateTokens(head)-1), "\n")
}

// fit drops lines until they fit budget tokens: tool lines, oldest first,
// then user lines from the middle, each run of them replaced by one line
// that says how many turns it held.
func fit(lines []string, budget int) []string {
	size := func(ls []string) int {
		n := 0
		for _, l := range ls {
			n += llmorch.EstimateTokens(l) + 1
		}
		return n
	}
	total := size(lines)
	for i := 0; i < len(lines) && total > budget; i++ {
		if strings.HasPrefix(lines[i], toolMark) {
			total -= llmorch.EstimateTokens(lines[i]) + 1
			lines = append(lines[:i], lines[i+1:]...)
			i--
		}
	}
	if total <= budget {
		return lines
	}
	// Then user lines from the middle out: the one after the opening third
	// goes first, into the marker of the turns left out there.
	for total > budget && len(lines) > 2 {
		at := max(len(lines)/3, 1)
		if strings.HasPrefix(lines[at], omittedMark) && at+1 < len(lines) {
			at++ // the marker stays; the line after it joins it
		}
		dropped := turnsIn(lines[at])
		total -= llmorch.EstimateTokens(lines[at]) + 1
		lines = append(lines[:at], lines[at+1:]...)
		mark := -1
		switch {
		case strings.HasPrefix(lines[at-1], omittedMark):
			mark = at - 1
		case at < len(lines) && strings.HasPrefix(lines[at], omittedMark):
			mark = at
		}
		if mark < 0 {
			lines = append(lines[:at], append([]string{""}, lines[at:]...)...)
			mark = at
		} else {
			dropped += turnsIn(lines[mark])
			total -= llmorch.EstimateTokens(lines[mark]) + 1
		}
		lines[mark] = omitted(dropped)
		total += llmorch.EstimateTokens(lines[mark]) + 1
	}
	return lines
}

// turnsIn is how many turns a line stands for: one for a user line, the
// count of an omission marker.
func turnsIn(line string) int {
	if n := 0; strings.HasPrefix(line, omittedMark) {
		fmt.Sscanf(line, omittedMark+"left out: %d)", &n)
		return n
	}
	return 1
}

func omitted(n int) string { return fmt.Sprintf("%sleft out: %d)", omittedMark, n) }

// oneLine puts s on one line and cuts it to about n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
