package session_test

import (
	"testing"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/sessiontest"
)

func TestMemoryConformance(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T, cfg session.Config) session.Store {
		return session.NewMemory(cfg)
	})
}
