package turnlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/turnlogtest"
)

// newClient connects to srv as the session store would (its options), so
// that each Log instance is a replica with its own connection pool.
func newClient(t testing.TB, srv *redistest.Server, cluster bool) redis.UniversalClient {
	t.Helper()
	rc := session.RedisConfig{URL: srv.URL()}
	if cluster {
		rc = session.RedisConfig{ClusterAddrs: []string{srv.Addr()}}
	}
	store, err := session.NewRedis(rc)
	if err != nil {
		t.Fatalf("connect to redis-server: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store.Client()
}

func openRedis(t testing.TB, client redis.UniversalClient, cfg turnlog.RedisConfig) *turnlog.Redis {
	t.Helper()
	cfg.Client = client
	l, err := turnlog.NewRedis(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// redisOpener gives each test its own key prefix on one server and two
// replicas with their own clients.
func redisOpener(srv *redistest.Server, cluster bool) turnlogtest.Open {
	return func(t *testing.T, cfg turnlog.Config) (turnlog.Log, turnlog.Log) {
		rc := turnlog.RedisConfig{Config: cfg, Prefix: "test-" + session.NewID(), Poll: 50 * time.Millisecond}
		return openRedis(t, newClient(t, srv, cluster), rc), openRedis(t, newClient(t, srv, cluster), rc)
	}
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	turnlogtest.Run(t, redisOpener(srv, false))
}

// On a Cluster every script and every XREAD must keep to one slot.
func TestRedisClusterConformance(t *testing.T) {
	srv := redistest.Start(t, redistest.Cluster())
	turnlogtest.Run(t, redisOpener(srv, true))
}
