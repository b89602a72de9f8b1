package template

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/internal/testenv"
	"github.com/agentdock-go/agentdock/orchestration"
)

// tmpl builds a template with the given steps JSON and nodes.
func tmpl(nodes, steps string) string {
	return `{"agentId": "t", "name": "T", "nodes": [` + nodes + `], "orchestration": {"steps": [` + steps + `]}}`
}

const stdNodes = `"llm.openai", "think", "search", "critique", "debate"`

// TestValidationErrors has one case per error class of the contract (and of
// the template fields); each message must name the file, the step and the
// field.
func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string // the whole diagnostic line
	}{
		{"unknown condition type", tmpl(stdNodes, `{"name":"A"},{"name":"B"},{"name":"EvaluationMode","conditions":[{"type":"message_sounds_like","value":"x"}]}`),
			`cognitive.json: orchestration.steps[2] "EvaluationMode": conditions[0].type: unknown condition "message_sounds_like" (known: tool_used, sequence_match, message_contains, message_starts_with, message_regex, not_recently_used)`},
		{"missing condition type", tmpl(stdNodes, `{"name":"A","conditions":[{"value":"x"}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].type: missing condition type`},
		{"missing value", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"tool_used"}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].value: tool_used needs a value`},
		{"missing window", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"not_recently_used","value":"think"}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].window: not_recently_used needs a window`},
		{"window below one", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"not_recently_used","value":"think","window":0}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].window: window must be at least 1, got 0`},
		{"invalid regex", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"message_regex","value":"(unclosed"}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].value: invalid regex "(unclosed": missing closing ): ` + "`(?i)(unclosed`"},
		{"regex too long", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"message_regex","value":"`+strings.Repeat("a", 1025)+`"}]}`),
			`cognitive.json: orchestration.steps[0] "A": conditions[0].value: regex is 1025 characters long; the limit is 1024`},
		{"duplicate step names", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"tool_used","value":"think"}]},{"name":"A","conditions":[{"type":"tool_used","value":"search"}]}`),
			`cognitive.json: orchestration.steps[1] "A": name: duplicate step name (also orchestration.steps[0])`},
		{"missing step name", tmpl(stdNodes, `{"description":"nameless","isDefault":true}`),
			`cognitive.json: orchestration.steps[0]: name: a step needs a name`},
		{"two default steps", tmpl(stdNodes, `{"name":"A","isDefault":true},{"name":"B","isDefault":true}`),
			`cognitive.json: orchestration.steps[1] "B": isDefault: more than one default step (orchestration.steps[0] "A" is default too)`},
		{"sequence tool the agent lacks", tmpl(stdNodes, `{"name":"A","isDefault":true,"sequence":["think","summarize"]}`),
			`cognitive.json: orchestration.steps[0] "A": sequence[1]: tool "summarize" is not one of the agent's tools (think, search, critique, debate)`},
		{"sequence tool not allowed", tmpl(stdNodes, `{"name":"A","isDefault":true,"availableTools":{"allowed":["think"]},"sequence":["think",["search","debate"]]}`),
			`cognitive.json: orchestration.steps[0] "A": sequence[1]: tool "search" is not in this step's availableTools.allowed`},
		{"sequence tool denied", tmpl(stdNodes, `{"name":"A","isDefault":true,"availableTools":{"denied":["de*"]},"sequence":["debate"]}`),
			`cognitive.json: orchestration.steps[0] "A": sequence[0]: tool "debate" is excluded by this step's availableTools.denied`},
		{"empty sequence group", tmpl(stdNodes, `{"name":"A","isDefault":true,"sequence":[[]]}`),
			`cognitive.json: orchestration.steps[0] "A": sequence[0]: an empty group of tools`},
		{"unknown step scope", `{"agentId":"t","name":"T","nodes":["think"],"orchestration":{"stepScope":"forever","steps":[]}}`,
			`cognitive.json: orchestration.stepScope: unknown step scope "forever" (known: session, turn)`},
		{"missing agentId", `{"name":"T"}`, `cognitive.json: agentId: required: the ID the agent is served under`},
		{"guardrail check", `{"agentId":"t","name":"T","options":{"guardrails":[{"name":"g","on":["output"],"check":"pi","action":"redact"}]}}`,
			`cognitive.json: options.guardrails[0].check: unknown check "pi" (known: regex, pii, secrets, deny, max_length, model)`},
		{"guardrail unbounded on output", `{"agentId":"t","name":"T","options":{"guardrails":[{"name":"g","on":"output","check":"regex","pattern":"[0-9]+","action":"block"}]}}`,
			`cognitive.json: options.guardrails[0].pattern: can match text of any length`},
		{"guardrail key", `{"agentId":"t","name":"T","options":{"guardrails":[{"name":"g","on":"input","check":"pii","action":"log","kind":["email"]}]}}`,
			`cognitive.json: options.guardrails[0].kind: unknown key`},
		{"step guardrail", tmpl(stdNodes, `{"name":"Pay","isDefault":true,"guardrails":[{"name":"cards","on":["output"],"check":"pii","kinds":["card"],"action":"redact"}]}`),
			`cognitive.json: orchestration.steps[0] "Pay": guardrails[0].kinds[0]: unknown pii kind "card"`},
		{"step guardrail named like the template's", `{"agentId":"t","name":"T","nodes":["think"],"options":{"guardrails":[{"name":"cards","on":"output","check":"pii","action":"redact"}]},
			"orchestration":{"steps":[{"name":"Pay","isDefault":true,"guardrails":[{"name":"cards","on":"input","check":"pii","action":"block"}]}]}}`,
			`cognitive.json: orchestration.steps[0] "Pay": guardrails[0].name: "cards" is also the name of a guardrail of options.guardrails`},
		{"guardrail model", `{"agentId":"t","name":"T","options":{"guardrails":[{"name":"g","on":"input","check":"model","model":"llm.judge","prompt":"?","action":"block"}]}}`,
			`cognitive.json: options.guardrails[0].model: "llm.judge" names no model: want "offline" or an llm.* key of nodeConfigurations`},
		{"guardrail approve on output", `{"agentId":"t","name":"T","options":{"guardrails":[{"name":"g","on":"output","check":"secrets","action":"approve"}]}}`,
			`cognitive.json: options.guardrails[0].action: approve holds a tool call for a person's approval, so it applies to tool_arguments only`},
		{"bad agentId", `{"agentId":"a b","name":"T"}`, `cognitive.json: agentId: "a b" is not a valid ID`},
		{"missing name", `{"agentId":"t"}`, `cognitive.json: name: required: the agent's display name`},
		{"unknown history policy", `{"agentId":"t","name":"T","chatSettings":{"historyPolicy":"some"}}`,
			`cognitive.json: chatSettings.historyPolicy: unknown history policy "some" (known: all, lastN, none)`},
		{"negative maxSteps", `{"agentId":"t","name":"T","options":{"maxSteps":-1}}`, `cognitive.json: options.maxSteps: must be between 1 and 100, got -1`},
		{"maxToolCalls over its bound", `{"agentId":"t","name":"T","options":{"maxToolCalls":100000}}`, `cognitive.json: options.maxToolCalls: must be between 1 and 256, got 100000`},
		{"negative maxOutputBytes", `{"agentId":"t","name":"T","options":{"maxOutputBytes":-5}}`, `cognitive.json: options.maxOutputBytes: must be between 1 and 16777216, got -5`},
		{"maxToolResultBytes under its bound", `{"agentId":"t","name":"T","options":{"maxToolResultBytes":100}}`, `cognitive.json: options.maxToolResultBytes: must be between 1024 and 16777216 bytes, got 100`},
		{"turnTimeout not a duration", `{"agentId":"t","name":"T","options":{"turnTimeout":"soon"}}`, `cognitive.json: options.turnTimeout: want a duration between 1s and 24h0m0s such as "5m" or "90s", got "soon"`},
		{"toolFiltering unknown", `{"agentId":"t","name":"T","options":{"toolFiltering":"stabel"}}`, `cognitive.json: options.toolFiltering: unknown tool filtering "stabel" (known: stable, which keeps the provider's prompt cache, and filter, which sends only the offered tools)`},
		{"turnTimeout too short", `{"agentId":"t","name":"T","options":{"turnTimeout":"10ms"}}`, `cognitive.json: options.turnTimeout: want a duration between 1s and 24h0m0s`},
		{"malformed JSON", "{\n  \"agentId\": \"t\",\n  \"name\": \"T\"\n  \"nodes\": []\n}", `cognitive.json: line 4, column 3: malformed JSON: invalid character '"' after object key:value pair`},
		{"truncated JSON", "{\n  \"agentId\": \"t\",", `cognitive.json: line 2, column 17: malformed JSON: unexpected end of JSON input`},
		{"wrong JSON type", "{\"agentId\": \"t\", \"name\": \"T\",\n \"nodes\": \"think\"}", `cognitive.json: line 2, column 11: nodes: expected []string, found a JSON string`},
		{"wrongly typed window names the step", "{\"agentId\": \"t\", \"name\": \"T\", \"nodes\": [\"think\"], \"orchestration\": {\"steps\": [\n" +
			`  {"name": "Start", "isDefault": true},` + "\n" +
			`  {"name": "EvaluationMode", "conditions": [{"type": "tool_used", "value": "think"}, {"type": "not_recently_used", "value": "think", "window": "3"}]}` + "\n]}}",
			`cognitive.json: line 3, column 144: orchestration.steps[1] "EvaluationMode": conditions[1].window: expected int, found a JSON string`},
		{"wrongly typed allowed entry names the step", tmpl(stdNodes, `{"name":"A","isDefault":true,"availableTools":{"allowed":["think",3]}}`),
			`orchestration.steps[0] "A": availableTools.allowed[1]: expected string, found a JSON number`},
		{"wrongly typed step name", tmpl(stdNodes, `{"name":"A","isDefault":true},{"name":7}`),
			`orchestration.steps[1]: name: expected string, found a JSON number`},
		{"wrongly typed option", `{"agentId":"t","name":"T","options":{"historyLimit":"50"}}`,
			`cognitive.json: line 1, column 53: options.historyLimit: expected int, found a JSON string`},
		{"historyLimit zero", `{"agentId":"t","name":"T","options":{"historyLimit":0}}`,
			`cognitive.json: options.historyLimit: must be a whole number from 1 to 10000 (how many tool uses a session remembers; default 100), got 0`},
		{"historyLimit negative", `{"agentId":"t","name":"T","options":{"historyLimit":-5}}`, `options.historyLimit: must be a whole number from 1 to 10000`},
		{"historyLimit too large", `{"agentId":"t","name":"T","options":{"historyLimit":10001}}`, `options.historyLimit: must be a whole number from 1 to 10000`},
		{"context too small", `{"agentId":"t","name":"T","options":{"context":{"maxInputTokens":10}}}`,
			`cognitive.json: options.context.maxInputTokens: must be from 1000 to 10000000 input tokens, got 10`},
		{"context keepTurns negative", `{"agentId":"t","name":"T","options":{"context":{"keepTurns":-1}}}`,
			`cognitive.json: options.context.keepTurns: must be from 1 to 100 turns, got -1`},
		{"context summarizer names no node", `{"agentId":"t","name":"T","nodes":["llm.openai"],"options":{"context":{"summarizer":{"model":"gpt-4o-mini"}}}}`,
			`cognitive.json: options.context.summarizer.model: "gpt-4o-mini" names no model: want "offline" or an llm.* key of nodeConfigurations, such as "llm.openai" with its own "model"`},
		{"step model names no node", `{"agentId":"t","name":"T","nodes":["llm.openai","think"],"nodeConfigurations":{"llm.openai":{"model":"gpt-4o"}},"orchestration":{"steps":[{"name":"A","isDefault":true,"model":"llm.cheap"}]}}`,
			`cognitive.json: orchestration.steps[0] "A": model: "llm.cheap" names no model: want an llm.* key of nodeConfigurations (known: llm.openai)`},
		{"step model names a tool's node", `{"agentId":"t","name":"T","nodes":["think"],"nodeConfigurations":{"think":{}},"orchestration":{"steps":[{"name":"A","isDefault":true,"model":"think"}]}}`,
			`orchestration.steps[0] "A": model: "think" names no model: want an llm.* key of nodeConfigurations (known: none`},
		{"fallback names no node", `{"agentId":"t","name":"T","nodes":["llm.openai"],"nodeConfigurations":{"llm.openai":{"fallbacks":["llm.backup"]}}}`,
			`cognitive.json: nodeConfigurations.llm.openai.fallbacks[0]: "llm.backup" names no model: want an llm.* key of nodeConfigurations (known: llm.openai)`},
		{"fallback to itself", `{"agentId":"t","name":"T","nodes":["llm.openai"],"nodeConfigurations":{"llm.openai":{"fallbacks":["llm.openai"]}}}`,
			`nodeConfigurations.llm.openai.fallbacks[0]: "llm.openai" is the model itself`},
		{"fallback twice", `{"agentId":"t","name":"T","nodes":["llm.openai"],"nodeConfigurations":{"llm.openai":{"fallbacks":["llm.b","llm.b"]},"llm.b":{}}}`,
			`nodeConfigurations.llm.openai.fallbacks[1]: "llm.b" is listed twice`},
		{"negative context window", `{"agentId":"t","name":"T","nodes":["llm.openai"],"nodeConfigurations":{"llm.openai":{"contextWindow":-1}}}`,
			`nodeConfigurations.llm.openai.contextWindow: must not be negative, got -1`},
		{"context neither off nor an object", `{"agentId":"t","name":"T","options":{"context":"on"}}`,
			`options.context: want "off" or an object such as {"maxInputTokens": 32000}, got "on"`},
		{"historyLimit not whole", `{"agentId":"t","name":"T","options":{"historyLimit":2.5}}`, `options.historyLimit: expected int, found a JSON number 2.5`},
		{"bad sequence entry", tmpl(stdNodes, `{"name":"A","isDefault":true,"sequence":[42]}`), `a sequence entry must be a tool name or a list of tool names`},
		// A misspelt key inside the orchestration would change what the
		// model may do unnoticed: an error at every level.
		{"misspelt orchestration key", `{"agentId":"t","name":"T","nodes":["think"],"orchestration":{"step":[]}}`,
			`cognitive.json: orchestration.step: unknown key; did you mean "steps"?`},
		{"misspelt availableTools", tmpl(stdNodes, `{"name":"A","isDefault":true},{"name":"Research","conditions":[{"type":"tool_used","value":"think"}],"availableTool":{"allowed":["search"]}}`),
			`cognitive.json: orchestration.steps[1].availableTool: unknown key; did you mean "availableTools"? (step "Research")`},
		{"misspelt conditions", tmpl(stdNodes, `{"name":"A","isDefault":true},{"name":"B","conditons":[{"type":"tool_used","value":"think"}]}`),
			`cognitive.json: orchestration.steps[1].conditons: unknown key; did you mean "conditions"? (step "B")`},
		{"misspelt sequence", tmpl(stdNodes, `{"name":"A","isDefault":true,"sequense":["think"]}`),
			`orchestration.steps[0].sequense: unknown key; did you mean "sequence"?`},
		{"misspelt allowed", tmpl(stdNodes, `{"name":"A","isDefault":true,"availableTools":{"alowed":["think"]}}`),
			`orchestration.steps[0].availableTools.alowed: unknown key; did you mean "allowed"?`},
		{"misspelt condition value", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"tool_used","value":"think","vaule":"search"}]}`),
			`orchestration.steps[0].conditions[0].vaule: unknown key; did you mean "value"?`},
		// Outside it, a misspelling of a key whose whole content it would
		// drop (the orchestration, the options, the approvals, the tools,
		// the MCP servers) is an error too.
		{"misspelt orchestration", `{"agentId":"t","name":"T","nodes":["think"],"orchestraton":{"steps":[{"name":"A","isDefault":true}]}}`,
			`cognitive.json: orchestraton: unknown key; did you mean "orchestration"? Read as nothing, it would leave the agent without its orchestration`},
		{"misspelt options", `{"agentId":"t","name":"T","nodes":["think"],"option":{"maxSteps":3}}`,
			`cognitive.json: option: unknown key; did you mean "options"?`},
		{"misspelt requireApproval", `{"agentId":"t","name":"T","nodes":["think"],"options":{"requireAproval":["think"]}}`,
			`cognitive.json: options.requireAproval: unknown key; did you mean "requireApproval"? Read as nothing, it would leave the agent without approvals`},
		{"misspelt nodes", `{"agentId":"t","name":"T","node":["llm.openai","think"]}`,
			`cognitive.json: node: unknown key; did you mean "nodes"?`},
		{"misspelt mcpServers", `{"agentId":"t","name":"T","mcpServer":{"fs":{"command":"x"}}}`,
			`cognitive.json: mcpServer: unknown key; did you mean "mcpServers"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, ds := Load("cognitive.json", []byte(tt.json), Config{})
			if agent != nil {
				t.Fatalf("template loaded despite the error; diagnostics: %v", ds)
			}
			for _, d := range ds.Errors() {
				if strings.Contains(d.String(), tt.want) {
					return
				}
			}
			t.Errorf("no error contains\n  %s\ngot:\n  %s", tt.want, lines(ds))
		})
	}
}

func TestAllErrorsInOnePass(t *testing.T) {
	_, ds := Load("x.json", []byte(tmpl(stdNodes, `
		{"name":"A","conditions":[{"type":"nope"}]},
		{"name":"A","conditions":[{"type":"tool_used"}]},
		{"name":"C","isDefault":true,"sequence":["missing"]},
		{"name":"D","isDefault":true}`)), Config{})
	if n := len(ds.Errors()); n != 5 {
		t.Fatalf("got %d errors, want 5 (unknown type, duplicate name, missing value, unknown sequence tool, second default):\n  %s", n, lines(ds))
	}
}

func TestValidationWarnings(t *testing.T) {
	tests := []struct {
		name string
		json string
		want string
	}{
		{"step that can never activate", tmpl(stdNodes, `{"name":"Lonely","availableTools":{"allowed":["think"]}}`),
			`w.json: orchestration.steps[0] "Lonely": conditions: a step without conditions that is not the default can never activate`},
		{"default step with conditions", tmpl(stdNodes, `{"name":"D","isDefault":true,"conditions":[{"type":"tool_used","value":"think"}]}`),
			`w.json: orchestration.steps[0] "D": conditions: the default step's conditions are ignored`},
		{"identical conditions", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"tool_used","value":"search"}]},{"name":"B","conditions":[{"type":"tool_used","value":"search"}]}`),
			`w.json: orchestration.steps[1] "B": conditions: this step can never win: the earlier step orchestration.steps[0] "A" has identical conditions and is chosen first`},
		{"identical sequence_match", tmpl(stdNodes, `{"name":"A","sequence":["think","search"],"conditions":[{"type":"sequence_match"}]},{"name":"B","sequence":["think","search"],"conditions":[{"type":"sequence_match"}]}`),
			`"B": conditions: this step can never win: the earlier step orchestration.steps[0] "A" has identical conditions`},
		{"subset of conditions", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"message_contains","value":"Plan"}]},{"name":"B","conditions":[{"type":"tool_used","value":"think"},{"type":"message_contains","value":"plan"}]}`),
			`"B": conditions: this step can never win: the earlier step orchestration.steps[0] "A" has a subset of these conditions`},
		{"identical regexes up to case", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"message_regex","value":"^plan\\b"}]},{"name":"B","conditions":[{"type":"message_regex","value":"(?i)^PLAN\\b"}]}`),
			`"B": conditions: this step can never win: the earlier step orchestration.steps[0] "A" has identical conditions`},
		{"identical contains up to simple folding", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"message_contains","value":"ΟΔΟΣ"}]},{"name":"B","conditions":[{"type":"message_contains","value":"οδος"}]}`),
			`"B": conditions: this step can never win: the earlier step orchestration.steps[0] "A" has identical conditions`},
		{"tool not provided", tmpl(stdNodes+`, "pubmed_search"`, ``), `w.json: nodes[5]: tool "pubmed_search" is not provided by this runtime; it will not be offered to the model`},
		{"allowed pattern matching nothing", tmpl(stdNodes, `{"name":"A","isDefault":true,"availableTools":{"allowed":["summ*"]}}`),
			`w.json: orchestration.steps[0] "A": availableTools.allowed[0]: "summ*" matches none of the agent's tools`},
		{"sequence_match without sequence", tmpl(stdNodes, `{"name":"A","conditions":[{"type":"sequence_match"}]}`),
			`"A": conditions[0].type: sequence_match on a step without a sequence never passes`},
		{"second llm node", `{"agentId":"t","name":"T","nodes":["llm.openai","llm.anthropic"]}`, `w.json: nodes[1]: "llm.anthropic": more than one llm.* node; the first one is used`},
		{"requireApproval option matching nothing", `{"agentId":"t","name":"T","nodes":["think"],"options":{"requireApproval":["serch"]}}`,
			`w.json: options.requireApproval[0]: "serch" matches none of the agent's tools (think), so it asks approval for nothing`},
		{"step requireApproval matching nothing", tmpl(stdNodes, `{"name":"A","isDefault":true,"requireApproval":["save_*"]}`),
			`w.json: orchestration.steps[0] "A": requireApproval[0]: "save_*" matches none of the agent's tools`},
		{"unpassable sequence position", tmpl(stdNodes+`, "pubmed_search"`, `{"name":"Med","isDefault":true,"sequence":["search","pubmed_search"]}`),
			`w.json: orchestration.steps[0] "Med": sequence[1]: no tool of position 2 (pubmed_search) is provided by this runtime, so the sequence cannot pass it`},
		// Outside the orchestration a misspelt key is a warning with the
		// nearest known key, at every level, unless it would drop a whole
		// feature (above).
		{"misspelt top-level key", `{"agentId":"t","name":"T","personalty":"You are terse."}`, `w.json: personalty: unknown key; did you mean "personality"?`},
		{"misspelt chatSettings key", `{"agentId":"t","name":"T","chatSettings":{"historyLenght":5}}`, `w.json: chatSettings.historyLenght: unknown key; did you mean "historyLength"?`},
		{"misspelt options key", `{"agentId":"t","name":"T","options":{"maxStep":5}}`, `w.json: options.maxStep: unknown key; did you mean "maxSteps"?`},
		{"misspelt model setting", `{"agentId":"t","name":"T","nodes":["llm.openai"],"nodeConfigurations":{"llm.openai":{"temprature":0.2}}}`,
			`w.json: nodeConfigurations.llm.openai.temprature: unknown key; did you mean "temperature"?`},
		{"unknown key far from any", `{"agentId":"t","name":"T","zzzzzzzz":1}`, `w.json: zzzzzzzz: unknown key (known: version, agentId, name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent, ds := Load("w.json", []byte(tt.json), Config{Provided: []string{"think", "search", "critique", "debate"}})
			if agent == nil {
				t.Fatalf("a warning stopped the template: %s", lines(ds))
			}
			for _, d := range ds.Warnings() {
				if strings.Contains(d.String(), tt.want) {
					return
				}
			}
			t.Errorf("no warning contains\n  %s\ngot:\n  %s", tt.want, lines(ds))
		})
	}
}

func lines(ds orchestration.Diagnostics) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Severity.String() + ": " + d.String()
	}
	return strings.Join(out, "\n  ")
}

// TestShadowWarningTellsRegexesApart: the "can never win" check compares
// regexes as the engine runs them. Lower-casing their source made ^\d+$ and
// ^\D+$ (digits, non-digits) one condition; and "İ" is not "i" under simple
// folding, for message_contains as for the regex.
func TestShadowWarningTellsRegexesApart(t *testing.T) {
	for _, pair := range [][2]string{
		{`{"type":"message_regex","value":"^\\d+$"}`, `{"type":"message_regex","value":"^\\D+$"}`},
		{`{"type":"message_regex","value":"\\bw\\b"}`, `{"type":"message_regex","value":"\\Bw\\B"}`},
		{`{"type":"message_regex","value":"\\s"}`, `{"type":"message_regex","value":"\\S"}`},
		{`{"type":"message_contains","value":"İstanbul"}`, `{"type":"message_contains","value":"istanbul"}`},
	} {
		json := tmpl(stdNodes, `{"name":"A","conditions":[`+pair[0]+`]},{"name":"B","conditions":[`+pair[1]+`]}`)
		agent, ds := Load("w.json", []byte(json), Config{})
		if agent == nil {
			t.Fatalf("%s: %s", pair, lines(ds))
		}
		for _, d := range ds.Warnings() {
			if strings.Contains(d.Message, "can never win") {
				t.Errorf("%s vs %s: %s", pair[0], pair[1], d)
			}
		}
	}
}

// TestHistoryLimit: options.historyLimit sets how many tool uses the
// orchestration remembers, per template; without it the runtime's default.
func TestHistoryLimit(t *testing.T) {
	for _, tt := range []struct {
		options string
		cfg     Config
		want    int
	}{
		{``, Config{}, orchestration.DefaultHistoryLimit},
		{`"options": {"historyLimit": 3},`, Config{}, 3},
		{`"options": {"historyLimit": 10000},`, Config{}, 10000},
		{``, Config{HistoryLimit: 7}, 7},
		{`"options": {"historyLimit": 3},`, Config{HistoryLimit: 7}, 3},
	} {
		data := `{"agentId": "t", "name": "T", ` + tt.options + ` "nodes": ["think", "search"]}`
		agent, ds := Load("h.json", []byte(data), tt.cfg)
		if agent == nil {
			t.Fatalf("%s: %s", data, lines(ds))
		}
		if got := agent.Engine.HistoryLimit(); got != tt.want {
			t.Errorf("%s with %+v: history limit %d, want %d", data, tt.cfg, got, tt.want)
		}
		if tt.want > orchestration.DefaultHistoryLimit {
			continue // the limit is set; filling 10,000 entries proves nothing more
		}
		e := agent.Engine
		s, _ := e.Apply(orchestration.State{}, orchestration.UserMessage("go"))
		for range tt.want + 2 {
			s, _ = e.Apply(s, orchestration.ToolUsed("think"))
		}
		if s.RecentlyUsedTools.Len() != tt.want {
			t.Errorf("%s: the history keeps %d tool uses, want %d", data, s.RecentlyUsedTools.Len(), tt.want)
		}
	}
	// The option survives a round trip.
	agent, _ := Load("h.json", []byte(`{"agentId": "t", "name": "T", "options": {"historyLimit": 3, "other": true}}`), Config{})
	out, err := agent.Template.MarshalJSON()
	if err != nil || !strings.Contains(string(out), `"historyLimit":3`) || !strings.Contains(string(out), `"other":true`) {
		t.Fatalf("round trip: %s, %v", out, err)
	}
}

// TestKnownKeysPassQuietly: the keys AgentDock's own templates carry,
// used here or not, and a tool node's own configuration are not reported.
func TestKnownKeysPassQuietly(t *testing.T) {
	src := `{"version": "1.0", "agentId": "t", "name": "T", "isEnabled": true, "notes": "n", "maxConcurrency": 2,
  "nodes": ["llm.gemini", "search"],
  "nodeConfigurations": {"llm.gemini": {"model": "m", "useSearchGrounding": true, "safetySettings": [], "apiKey": {}},
    "search": {"anything": 1}},
  "chatSettings": {"placeholderText": "Ask"},
  "options": {"maxSteps": 3, "tokenOptimization": {"includeDetailedOrchestration": true}},
  "orchestration": {"description": "d", "steps": [{"name": "A", "description": "a", "isDefault": true,
    "availableTools": {"allowed": ["search"], "denied": []},
    "conditions": [{"type": "tool_used", "value": "search", "description": "c"}]}]}}`
	_, ds := Load("k.json", []byte(src), Config{})
	for _, d := range ds {
		if strings.Contains(d.Message, "unknown key") {
			t.Errorf("reported: %s", d)
		}
	}
}

// TestAgentDockTemplatesHaveNoUnknownKeys: AgentDock's own templates load
// without errors and without any key reported as unknown.
func TestAgentDockTemplatesHaveNoUnknownKeys(t *testing.T) {
	dir := filepath.Join(testenv.SharedDir(t), "fixtures", "agentdock-templates")
	results, err := LoadPath(dir, Config{Provided: []string{"search", "think", "reflect", "critique", "debate", "brainstorm", "compare"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d templates, want AgentDock's 3", len(results))
	}
	for _, r := range results {
		if r.Loaded == nil {
			t.Errorf("%s did not load: %s", r.File, lines(r.Diagnostics))
		}
		for _, d := range r.Diagnostics {
			if strings.Contains(d.Message, "unknown key") {
				t.Errorf("%s", d)
			}
		}
	}
}

// TestContextOption: options.context reads "off" or an object, keeps
// unknown keys (reported as warnings) and writes back what it read.
func TestContextOption(t *testing.T) {
	for _, tc := range []struct {
		json, warning string
		off           bool
		tokens, keep  int
		model         string
	}{
		{json: `"off"`, off: true},
		{json: `{"maxInputTokens": 32000, "keepTurns": 3, "summarizer": {"model": "offline", "prompt": "Be brief."}}`, tokens: 32000, keep: 3, model: "offline"},
		{json: `{"maxInputTokens": 8000, "summarizer": {"model": "llm.small"}}`, tokens: 8000, model: "llm.small"},
		{json: `{"keepTurn": 2}`, warning: `options.context.keepTurn: unknown key; did you mean "keepTurns"?`},
	} {
		src := `{"agentId": "t", "name": "T", "nodes": ["llm.openai"], "nodeConfigurations": {"llm.small": {"model": "gpt-4o-mini"}}, "options": {"context": ` + tc.json + `}}`
		a, ds := Load("t.json", []byte(src), Config{})
		if a == nil {
			t.Fatalf("%s: %v", tc.json, ds)
		}
		c := a.Template.Options.Context
		if c.Off != tc.off || c.MaxInputTokens != tc.tokens || c.KeepTurns != tc.keep || (tc.model != "") != (c.Summarizer != nil) || c.Summarizer != nil && c.Summarizer.Model != tc.model {
			t.Errorf("%s: read %+v", tc.json, c)
		}
		if tc.warning != "" && !strings.Contains(fmt.Sprint(ds), tc.warning) {
			t.Errorf("%s: warnings %v, want %q", tc.json, ds, tc.warning)
		}
		out, err := json.Marshal(a.Template.Options)
		if err != nil {
			t.Fatal(err)
		}
		var back Options
		if err := json.Unmarshal(out, &back); err != nil || back.Context == nil || back.Context.Off != c.Off || back.Context.MaxInputTokens != c.MaxInputTokens || len(back.Context.Extra) != len(c.Extra) {
			t.Errorf("%s: round trip %s gave %+v, %v", tc.json, out, back.Context, err)
		}
	}
}

// TestMisspeltTools: a node that misspells a provided tool, an agents
// entry or an MCP server is an error naming the one meant, which stops
// the load; a node naming a tool that resembles none (a tool this runtime
// lacks, as AgentDock's templates name) loads with a warning, as the
// orchestration contract has it.
func TestMisspeltTools(t *testing.T) {
	provided := []string{"think", "search", "critique", "debate"}
	for _, tt := range []struct {
		name, nodes, extra, want string
	}{
		{"misspelt tool", `"serch"`, ``,
			`error: w.json: nodes[5]: tool "serch" is not provided; did you mean "search"? (provided: think, search, critique, debate)`},
		{"swapped letters", `"thnik"`, ``,
			`error: w.json: nodes[5]: tool "thnik" is not provided; did you mean "think"?`},
		{"misspelt MCP server", `"gitub__create_issue"`, `"mcpServers": {"github": {"command": "x"}}, `,
			`error: w.json: nodes[5]: tool "gitub__create_issue" is not provided; did you mean "github__create_issue"?`},
		{"misspelt agents entry", `"ask_prob"`, `"agents": {"ask_probe": {"agent": "probe"}}, `,
			`error: w.json: nodes[5]: tool "ask_prob" is not provided; did you mean "ask_probe"?`},
		{"a tool this runtime lacks", `"pubmed_serch"`, ``,
			`warning: w.json: nodes[5]: tool "pubmed_serch" is not provided by this runtime; it will not be offered to the model`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(tmpl(stdNodes+`, `+tt.nodes, ``), `"nodes"`, tt.extra+`"nodes"`, 1)
			agent, ds := Load("w.json", []byte(src), Config{Provided: provided})
			if !strings.Contains(lines(ds), tt.want) {
				t.Fatalf("diagnostics:\n  %s\nwant %s", lines(ds), tt.want)
			}
			if loads := !strings.HasPrefix(tt.want, "error"); (agent != nil) != loads {
				t.Errorf("loaded: %v, want %v", agent != nil, loads)
			}
		})
	}
}

// TestGuardrailsLoad: guardrails of the template and of a step load, and
// survive a round trip.
func TestGuardrailsLoad(t *testing.T) {
	src := `{"agentId":"t","name":"T","nodes":["llm.openai","think"],
		"nodeConfigurations":{"llm.openai":{"model":"m"},"llm.judge":{"model":"small"}},
		"options":{"guardrails":[
			{"name":"cards","on":["output"],"check":"pii","kinds":["credit_card"],"action":"redact"},
			{"name":"injection","on":["input"],"check":"regex","pattern":"(?i)ignore (all )?previous instructions","action":"block"},
			{"name":"secrets","on":["tool_result"],"check":"secrets","action":"redact"},
			{"name":"judge","on":"input","check":"model","model":"llm.judge","prompt":"Does it ask for medical advice?","action":"log"}]},
		"orchestration":{"steps":[{"name":"Pay","isDefault":true,"guardrails":[{"name":"big","on":"tool_arguments","check":"max_length","maxLength":2000,"tools":["think"],"action":"approve"}]}]}}`
	agent, ds := Load("g.json", []byte(src), Config{})
	if agent == nil || len(ds) > 0 {
		t.Fatalf("%s", lines(ds))
	}
	if n := len(agent.Template.Options.Guardrails); n != 4 {
		t.Fatalf("%d guardrails", n)
	}
	b, err := json.Marshal(agent.Template)
	if err != nil {
		t.Fatal(err)
	}
	again, ds := Load("g.json", b, Config{})
	if again == nil {
		t.Fatalf("round trip: %s", lines(ds))
	}
	if g := again.Template.Steps()[0].Guardrails; len(g) != 1 || g[0].MaxLength != 2000 || g[0].Tools[0] != "think" {
		t.Fatalf("step guardrails after a round trip: %+v", g)
	}
}
