package orchestration

import (
	"encoding/base32"
	"encoding/json"
	"strings"
)

// A client that keeps only OpenAI's chat messages of a conversation (the
// official clients' chat.completions, which drop every field but role,
// content and tool_calls) never sends back the calls of the agent's own
// tools: a chat completion shows the client the calls of its tools only.
// Replayed without them, its conversation would leave a sequence that
// mixes the agent's tools and the client's where it was before the
// agent's calls, and refuse the client's call that came after them.
//
// So a turn whose conversation is such a client's gives each call of a
// client tool an ID that carries its trail: the calls of the agent's tools
// that ran in the turn before it, model call by model call, and those of
// the answer that made it. The client sends the ID back verbatim (the
// tool message answering the call must name it), and Replay records the
// trail at the assistant message, as a session that holds the whole turn
// records it.
//
// The ID is the model's own, then trailMark, then the trail as JSON (a list
// of model calls, each the list of the agent's tools that ran, the answer
// that made the call last) in lower-case base32 without padding: letters
// and digits a provider takes in an ID, and no '_', so the last trailMark
// of an ID starts its trail. A trail claims no more than a client could
// write itself as assistant and tool messages, which a replay records the
// same way: it is checked against the offers by the same rules.
const trailMark = "_ad1"

var trailEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// maxTrail bounds the trail an ID may carry, decoded: a longer one is
// not a trail this runtime wrote, and is read as no trail.
const maxTrail = 16 << 10

// TrailID returns id carrying trail: the agent's tools that ran in the
// turn's model calls before the one that made the call (one list per
// model call, in order), then those that ran in the answer that made it.
// With no tool in the trail it returns id as it is.
func TrailID(id string, before [][]string, answer []string) string {
	ran := false
	for _, c := range before {
		ran = ran || len(c) > 0
	}
	if !ran && len(answer) == 0 {
		return id
	}
	calls := make([][]string, 0, len(before)+1)
	for _, c := range before {
		if c == nil {
			c = []string{}
		}
		calls = append(calls, c)
	}
	if answer == nil {
		answer = []string{}
	}
	data, _ := json.Marshal(append(calls, answer))
	return id + trailMark + strings.ToLower(trailEncoding.EncodeToString(data))
}

// trailOf returns the trail an ID carries: the model calls before the one
// that made the call, and the answer's own; ok is false when the ID
// carries none.
func trailOf(id string) (before [][]string, answer []string, ok bool) {
	i := strings.LastIndex(id, trailMark)
	if i < 0 {
		return nil, nil, false
	}
	enc := id[i+len(trailMark):]
	if enc == "" || trailEncoding.DecodedLen(len(enc)) > maxTrail {
		return nil, nil, false
	}
	data, err := trailEncoding.DecodeString(strings.ToUpper(enc))
	if err != nil {
		return nil, nil, false
	}
	var calls [][]string
	if err := json.Unmarshal(data, &calls); err != nil || len(calls) == 0 {
		return nil, nil, false
	}
	return calls[:len(calls)-1], calls[len(calls)-1], true
}
