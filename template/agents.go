package template

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/tools/mcp/mcpconfig"
)

// toolName is the providers' rule for a tool name (as in package tools).
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// MaxAgentToolDescription bounds an agent tool's description, which goes
// with every model request.
const MaxAgentToolDescription = 2048

// checkAgents checks the template's agents entries by themselves; what
// needs the other templates (an agent that exists, cycles) is
// CheckAgents'.
func checkAgents(t *Template, cfg Config, add func(orchestration.Severity, string, string, ...any)) {
	for _, name := range t.AgentTools() {
		a := t.Agents[name]
		at := "agents." + name
		switch {
		case !toolName.MatchString(name):
			add(orchestration.SeverityError, at, "%q is not a valid tool name: want 1 to 64 letters, digits, '_' or '-'", name)
		case strings.Contains(name, mcpconfig.Separator):
			add(orchestration.SeverityError, at, "%q contains %q, which names the tools of MCP servers; name it without", name, mcpconfig.Separator)
		case slices.Contains(cfg.Provided, name):
			add(orchestration.SeverityError, at, "a tool of the runtime is called %q; give the agent tool another name", name)
		}
		keys := make([]string, 0, len(a.Extra))
		for k := range a.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			// An unknown key may be a misspelt URL or header: the entry
			// would not ask whom it should.
			add(orchestration.SeverityError, at+"."+k, "%s", orchestration.UnknownKey(k, orchestration.Keys(AgentTool{})))
		}
		switch {
		case a.Agent == "" && a.A2A == "":
			add(orchestration.SeverityError, at, `names no agent: give "agent" (the ID of another agent of this server) or "a2a" (a remote agent's A2A URL)`)
		case a.Agent != "" && a.A2A != "":
			add(orchestration.SeverityError, at, `gives both "agent" and "a2a": an agent tool asks one agent`)
		case a.Agent != "" && !agentIDPattern.MatchString(a.Agent):
			add(orchestration.SeverityError, at+".agent", "%q is not a valid agent ID", a.Agent)
		case a.Agent != "" && a.Agent == t.AgentID:
			add(orchestration.SeverityError, at+".agent", "the cycle %s -> %s: %q is this agent, and an agent that asks itself never ends", t.AgentID, t.AgentID, a.Agent)
		case a.Agent != "" && len(a.Headers) > 0:
			add(orchestration.SeverityError, at+".headers", "headers go to a remote agent (a2a); an agent of this server is asked directly")
		case a.A2A != "" && !strings.Contains(a.A2A, "${"):
			if msg := checkA2AURL(a.A2A); msg != "" {
				add(orchestration.SeverityError, at+".a2a", "%s", msg)
			}
		}
		for k := range a.Headers {
			if !validHeaderName(k) {
				add(orchestration.SeverityError, at+".headers", "%q is not a valid HTTP header name", k)
			}
		}
		if len(a.Description) > MaxAgentToolDescription {
			add(orchestration.SeverityError, at+".description", "is %d bytes; the limit is %d (it goes with every model request)", len(a.Description), MaxAgentToolDescription)
		}
		if !slices.Contains(t.Nodes, name) {
			add(orchestration.SeverityWarning, at, "no node names this tool (add %q to nodes); the agent cannot use it", name)
		}
	}
}

// checkA2AURL says what is wrong with an A2A URL ("" when nothing).
func checkA2AURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%q: want an http:// or https:// URL", raw)
	case u.Host == "":
		return fmt.Sprintf("%q has no host", raw)
	case u.User != nil:
		return fmt.Sprintf("%q carries credentials; put them in headers", raw)
	}
	return ""
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// CheckAgents checks the agent tools of a set of templates, the agents a
// server runs together: a local agent tool must name an agent of the set,
// and no agent may come back to itself through them (a cycle never
// ends). Each problem is an error of the template whose entry is at
// fault, naming the agents; a template of a cycle is reported once per
// cycle it is in. Remote agents (a2a) are not followed: their calls carry
// a depth and are refused past AGENT_CALL_DEPTH.
func CheckAgents(loaded []*Loaded) orchestration.Diagnostics {
	byID := map[string]*Loaded{}
	var ids []string
	for _, l := range loaded {
		byID[l.ID()] = l
		ids = append(ids, l.ID())
	}
	sort.Strings(ids)
	var ds orchestration.Diagnostics
	// edges: agent -> (tool, asked agent), in tool order.
	type edge struct{ tool, to string }
	edges := map[string][]edge{}
	for _, id := range ids {
		l := byID[id]
		for _, name := range l.Template.AgentTools() {
			a := l.Template.Agents[name]
			if !a.Local() || a.Agent == id {
				continue // the self-cycle is the template's own error
			}
			if _, ok := byID[a.Agent]; !ok {
				ds = append(ds, orchestration.Diagnostic{Severity: orchestration.SeverityError, File: l.File, Path: "agents." + name + ".agent",
					Message: fmt.Sprintf("no agent %q is loaded (the agents: %s)", a.Agent, strings.Join(ids, ", "))})
				continue
			}
			edges[id] = append(edges[id], edge{name, a.Agent})
		}
	}
	// Every elementary cycle, found from its smallest agent ID so that
	// each is reported once.
	seen := map[string]bool{}
	for _, start := range ids {
		var path []string
		var tools []string
		var walk func(at string)
		walk = func(at string) {
			path = append(path, at)
			for _, e := range edges[at] {
				switch {
				case e.to == start:
					cycle := strings.Join(append(slices.Clone(path), start), " -> ")
					if !seen[cycle] {
						seen[cycle] = true
						for i, id := range path {
							ds = append(ds, orchestration.Diagnostic{Severity: orchestration.SeverityError, File: byID[id].File, Path: "agents." + append(slices.Clone(tools), e.tool)[i] + ".agent",
								Message: fmt.Sprintf("the cycle %s: agents that ask one another in a circle never end", cycle)})
						}
					}
				case e.to > start && !slices.Contains(path, e.to):
					tools = append(tools, e.tool)
					walk(e.to)
					tools = tools[:len(tools)-1]
				}
			}
			path = path[:len(path)-1]
		}
		walk(start)
	}
	return ds
}
