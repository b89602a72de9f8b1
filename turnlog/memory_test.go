package turnlog_test

import (
	"testing"

	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/turnlogtest"
)

func openMemory(t *testing.T, cfg turnlog.Config) (turnlog.Log, turnlog.Log) {
	m, err := turnlog.NewMemory(cfg)
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m, m
}

func TestMemoryConformance(t *testing.T) { turnlogtest.Run(t, openMemory) }

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  turnlog.Config
	}{
		{"negative MaxFrames", turnlog.Config{MaxFrames: -1}},
		{"negative Retention", turnlog.Config{Retention: -1}},
		{"Retention below a millisecond", turnlog.Config{Retention: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := turnlog.NewMemory(tc.cfg); err == nil {
				m.Close()
				t.Fatalf("NewMemory(%+v): no error", tc.cfg)
			}
		})
	}
}
