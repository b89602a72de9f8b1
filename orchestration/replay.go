package orchestration

import "github.com/agentdock-go/agentdock/chat"

// Replay returns s after the orchestration followed msgs, a conversation or
// the rest of one: the state a session that had the conversation holds
// (token usage aside, which a conversation does not carry). It is the one
// derivation of a state from messages; a turn records what it stores by the
// same rules, so that replaying a session's history gives the session's
// state:
//
//   - a user message is a UserMessage input;
//   - the tool calls of an assistant message were made by a model call
//     offered Offer of the state at that message, and are checked against
//     that offer, however earlier calls of the same answer moved the state
//     (ToolUsedIn);
//   - a tool message records its call when the call ran: a message marked
//     NotRun (refused, denied, held and then declined, invalid arguments,
//     stopped before it ran, over the answer's budget) records nothing,
//     while a call that ran and failed is recorded like one that succeeded.
//
// Calls are recorded in the order of their tool messages, which is the
// order a turn records them in: a call held for approval is recorded when
// it is approved, after the other calls of its answer. A call refused here
// (one the conversation claims ran although its model call was not offered
// it) leaves the state as it was. A tool message whose call is not in msgs
// is checked against the offer of the state at the tool message.
//
// client names the client tools of the request the conversation comes
// with (nil: none): their calls are checked against offers made by the
// same rules as a turn's (OfferWith), and the result a client sent for
// one records it like a tool that ran. A call of a tool that neither the
// agent nor the request has (an earlier agent's, a name the model made
// up) is refused like any call its model call was not offered: it counts
// as not run. An assistant message whose calls carry a trail (TrailID)
// records the trail's calls first, model call by model call, those of its
// own answer against the offer its calls are checked against.
func (e *Engine) Replay(s State, msgs []chat.Message, client []string) State {
	type call struct {
		name  string
		offer Offer
	}
	var calls map[string]call
	for _, m := range msgs {
		switch m.Role {
		case chat.RoleUser:
			s, _ = e.Apply(s, UserMessage(m.Content))
		case chat.RoleAssistant:
			if len(m.ToolCalls) == 0 {
				continue
			}
			if calls == nil {
				calls = make(map[string]call)
			}
			before, own, trail := trailIn(m.ToolCalls)
			for _, ran := range before {
				s = e.recordAnswer(s, e.OfferWith(s, nil, client), ran)
			}
			offer := e.OfferWith(s, nil, client)
			if trail {
				s = e.recordAnswer(s, offer, own)
			}
			for _, c := range m.ToolCalls {
				calls[c.ID] = call{name: c.Name, offer: offer}
			}
		case chat.RoleTool:
			if m.NotRun || m.Denied {
				// Denied: a declined call, stored before NotRun was.
				continue
			}
			c, ok := calls[m.ToolCallID]
			if !ok {
				c = call{name: m.ToolName, offer: e.OfferWith(s, nil, client)}
			}
			s, _ = e.Apply(s, ToolUsedIn(c.name, c.offer))
		}
	}
	return s
}

// trailIn returns the trail the first of calls that carries one carries
// (see TrailID).
func trailIn(calls []chat.ToolCall) (before [][]string, own []string, ok bool) {
	for _, c := range calls {
		if before, own, ok = trailOf(c.ID); ok {
			return before, own, true
		}
	}
	return nil, nil, false
}

// recordAnswer records the calls of one model answer that ran, each
// judged against offer, the offer of the model call that made them.
func (e *Engine) recordAnswer(s State, offer Offer, ran []string) State {
	for _, name := range ran {
		s, _ = e.Apply(s, ToolUsedIn(name, offer))
	}
	return s
}
