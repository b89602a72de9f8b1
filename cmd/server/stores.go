package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentdock-go/agentdock/outbox"
	"github.com/agentdock-go/agentdock/outbox/redisoutbox"
	"github.com/agentdock-go/agentdock/responses"
	respredis "github.com/agentdock-go/agentdock/responses/redisstore"
	"github.com/agentdock-go/agentdock/server/a2a"
	"github.com/agentdock-go/agentdock/server/a2a/redistasks"
	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/telemetry"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
	"github.com/agentdock-go/agentdock/turns"
)

// backend is where a deployment keeps its state: the sessions, and beside
// them, as long as they live, the Responses API's objects, the shared turn
// log that lets a client resume on any replica (nil: a turn's stream stays
// on its replica), the A2A edge's task index (nil: in memory) and the
// outbox of the webhook calls owed (nil: in this process).
type backend struct {
	kind      string // "memory", "redis", ...: for the log
	sessions  session.Store
	responses responses.Store
	turns     turnlog.Log
	a2aIndex  a2a.Index
	outbox    outbox.Store
	// close closes what the backend opened, the sessions last.
	close func()
}

// A storeKind opens one kind of backend. A new store is one more entry in
// storeKinds: serve uses the backend through its fields alone.
type storeKind struct {
	name string
	// open opens the backend the configuration names, or reports that it
	// names none of this kind (ok false).
	open func(ctx context.Context, cfg *serveConfig, tel *telemetry.Telemetry) (b *backend, ok bool, err error)
}

// storeKinds are asked in order; the memory store, last, always opens.
var storeKinds = []storeKind{
	{"redis", openRedis},
	{"memory", openMemory},
}

// openBackend opens the backend of the first store kind the configuration
// names.
func openBackend(ctx context.Context, cfg *serveConfig, tel *telemetry.Telemetry) (*backend, error) {
	for _, k := range storeKinds {
		b, ok, err := k.open(ctx, cfg, tel)
		if err != nil {
			return nil, fmt.Errorf("opening the session store (%s): %w", k.name, err)
		}
		if ok {
			return b, nil
		}
	}
	return nil, errors.New("no store kind opened (the memory store always should)")
}

// sessionConfig is the session.Config of every store kind.
func sessionConfig(cfg *serveConfig) session.Config {
	scfg := cfg.Quotas
	scfg.TTL, scfg.LockTTL, scfg.WriteRetry = cfg.SessionTTL, cfg.LockTTL, cfg.WriteRetry
	return scfg
}

// openMemory keeps everything in this process.
func openMemory(_ context.Context, cfg *serveConfig, _ *telemetry.Telemetry) (*backend, bool, error) {
	stored, err := responses.NewMemory(responses.Config{TTL: cfg.SessionTTL})
	if err != nil {
		return nil, false, err
	}
	sessions := session.NewMemory(sessionConfig(cfg))
	return &backend{kind: "memory", sessions: sessions, responses: stored, close: func() { sessions.Close() }}, true, nil
}

// openRedis opens Redis as named by --store/SESSION_STORE (a redis:// or
// rediss:// URL, or a cluster's) or configured by the REDIS_* variables,
// with the Responses objects, the turn log and the A2A index under the
// sessions' key prefix.
func openRedis(ctx context.Context, cfg *serveConfig, tel *telemetry.Telemetry) (_ *backend, _ bool, err error) {
	scfg := sessionConfig(cfg)
	var rc redisstore.Config
	kind := "redis"
	switch cfg.Store {
	case "memory://", "memory:":
		return nil, false, nil
	case "":
		var ok bool
		if rc, ok, err = redisstore.ConfigFromEnv(); err != nil || !ok {
			return nil, false, err
		}
		rc.LockTTL = cfg.LockTTL
		rc.WriteRetry = cfg.WriteRetry
		rc.SessionsPerOwner, rc.BytesPerOwner = scfg.SessionsPerOwner, scfg.BytesPerOwner
	default:
		kind, _, _ = strings.Cut(cfg.Store, "://")
		if rc, err = redisstore.ParseURL(cfg.Store); err != nil {
			return nil, false, err
		}
		rc.Config = scfg
	}
	rc.WaitReplicas, rc.WaitTimeout = cfg.WaitReplicas, cfg.WaitTimeout
	prefix := rc.Prefix
	if prefix == "" {
		prefix = redisstore.DefaultPrefix
	}
	st, err := redisstore.New(rc)
	if err != nil {
		return nil, false, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if tel.Tracing() {
		if err := redisstore.Instrument(st.Client(), tel.TracerProvider()); err != nil {
			return nil, false, fmt.Errorf("tracing redis: %w", err)
		}
	}
	stored, err := respredis.New(respredis.Config{Config: responses.Config{TTL: cfg.SessionTTL}, Client: st.Client(), Prefix: prefix + ":responses"})
	if err != nil {
		return nil, false, fmt.Errorf("the responses store: %w", err)
	}
	tl, err := redislog.New(ctx, redislog.Config{
		Config: turnlog.Config{MaxFrames: cfg.MaxTurnEvents + turns.EventSlack, Retention: cfg.StreamRetention},
		Client: st.Client(),
		Prefix: prefix + ":turns",
	})
	if err != nil {
		return nil, false, fmt.Errorf("the shared turn log: %w", err)
	}
	owed, err := redisoutbox.New(redisoutbox.Config{Client: st.Client(), Prefix: prefix + ":outbox"})
	if err != nil {
		tl.Close()
		return nil, false, fmt.Errorf("the webhooks' outbox: %w", err)
	}
	return &backend{
		kind:      kind,
		sessions:  st,
		responses: stored,
		turns:     tl,
		a2aIndex:  redistasks.New(st.Client(), prefix+":a2a", cfg.SessionTTL),
		outbox:    owed,
		close: func() {
			tl.Close()
			st.Close()
		},
	}, true, nil
}
