package server

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/agentdock-go/agentdock/agent"
	"github.com/agentdock-go/agentdock/orchestration"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/turns"
	"github.com/gin-gonic/gin"
)

type modelInfo struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

type agentSummary struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	Description     string    `json:"description"`
	Tags            []string  `json:"tags"`
	ChatPrompts     []string  `json:"chatPrompts"`
	InitialMessages []string  `json:"initialMessages"`
	Model           modelInfo `json:"model"`
	// Offline is set when the agent runs on the offline demo model.
	Offline          bool `json:"offline"`
	HasOrchestration bool `json:"hasOrchestration"`
	// MCPServers are the MCP servers the agent's tools come from (absent
	// when none): the tools of one that is not ready are not offered.
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
}

type agentDetail struct {
	agentSummary
	// Tools are the agent's tools that can run (built in, given, from MCP
	// servers, whose state mcpServers says); NotProvided the nodes naming
	// a tool nobody provides, never offered to the model.
	Tools         []string           `json:"tools"`
	NotProvided   []string           `json:"notProvided"`
	Warnings      []string           `json:"warnings"`
	Orchestration *orchestrationInfo `json:"orchestration"`
}

type orchestrationInfo struct {
	Description []string   `json:"description"`
	StepScope   string     `json:"stepScope"`
	Steps       []stepInfo `json:"steps"`
}

type stepInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	IsDefault   bool   `json:"isDefault"`
	// Sequence lists the enforced tool order; each entry is a group of
	// alternatives.
	Sequence   [][]string      `json:"sequence"`
	Tools      []string        `json:"tools"`
	Conditions []conditionInfo `json:"conditions"`
}

type conditionInfo struct {
	Type        string `json:"type"`
	Value       string `json:"value,omitempty"`
	Window      *int   `json:"window,omitempty"`
	Description string `json:"description,omitempty"`
}

func (s *Server) summarize(n *agent.Agent) agentSummary {
	t := n.Template()
	info := n.ModelInfo()
	return agentSummary{
		ID: n.ID(), Name: t.Name, Description: t.Description, Tags: nonNil(t.Tags),
		ChatPrompts: nonNil(t.ChatSettings.ChatPrompts), InitialMessages: nonNil(t.ChatSettings.InitialMessages),
		Model: modelInfo{Provider: info.Provider, Model: info.Model}, Offline: info.Provider == "offline",
		HasOrchestration: len(t.Steps()) > 0,
		MCPServers:       s.mcpServers(n.ID()),
	}
}

func (s *Server) mcpServers(agentID string) []MCPServer {
	if s.cfg.MCPServers == nil {
		return nil
	}
	return s.cfg.MCPServers(agentID)
}

func (s *Server) listAgents(c *gin.Context) {
	list := s.rt.Agents().List()
	out := make([]agentSummary, 0, len(list))
	for _, n := range list {
		out = append(out, s.summarize(n))
	}
	c.JSON(http.StatusOK, gin.H{"agents": out})
}

func (s *Server) getAgent(c *gin.Context) {
	n, ok := s.rt.Agents().Get(c.Param("id"))
	if !ok {
		abortWith(c, newError(http.StatusNotFound, "agent_not_found", "no agent %q; GET /api/agents lists them", c.Param("id")))
		return
	}
	t := n.Template()
	tools := n.Engine().Tools()
	d := agentDetail{agentSummary: s.summarize(n), Tools: nonNil(tools), NotProvided: []string{}, Warnings: nonNil(n.Warnings())}
	for _, name := range t.Tools() {
		if !slices.Contains(tools, name) {
			d.NotProvided = append(d.NotProvided, name)
		}
	}
	if spec := t.Orchestration; spec != nil && len(spec.Steps) > 0 {
		compiled := map[string]orchestration.StepInfo{}
		for _, st := range n.Engine().Steps() {
			compiled[st.Name] = st
		}
		oi := &orchestrationInfo{Description: nonNil(spec.Description), StepScope: spec.StepScope, Steps: []stepInfo{}}
		if oi.StepScope == "" {
			oi.StepScope = orchestration.ScopeSession
		}
		for _, st := range spec.Steps {
			si := stepInfo{Name: st.Name, Description: st.Description, IsDefault: st.IsDefault, Sequence: [][]string{}, Tools: []string{}, Conditions: []conditionInfo{}}
			if cs, ok := compiled[st.Name]; ok {
				for _, g := range cs.Sequence {
					si.Sequence = append(si.Sequence, nonNil(g))
				}
				si.Tools = nonNil(cs.Tools)
				si.IsDefault = cs.Default
			}
			for _, cond := range st.Conditions {
				si.Conditions = append(si.Conditions, conditionInfo{Type: cond.Type, Value: cond.Value, Window: cond.Window, Description: cond.Description})
			}
			oi.Steps = append(oi.Steps, si)
		}
		d.Orchestration = oi
	}
	c.JSON(http.StatusOK, d)
}

// getUsage answers GET /api/usage: what the caller's key spent on models
// today and this month (UTC), with its budgets and when they reset
// (agent.Set.Usage).
func (s *Server) getUsage(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	r, err := s.rt.Agents().Usage(ctx, ownerOf(c))
	if err != nil {
		if errors.Is(err, session.ErrUnavailable) {
			abortWith(c, turns.ErrStoreDown())
			return
		}
		s.log.Error("reading what a key spent", "err", err)
		abortWith(c, newError(http.StatusNotImplemented, "usage_unavailable", "this server's session store keeps no spending"))
		return
	}
	c.JSON(http.StatusOK, r)
}
