package redisstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redisstore"
	"github.com/agentdock-go/agentdock/session/redistest"
)

func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		want    redisstore.Config
		wantErr string
	}{
		{url: "redis://localhost:6379/2", want: redisstore.Config{URL: "redis://localhost:6379/2"}},
		{url: "rediss://user:pw@cache:6380/0?prefix=p1", want: redisstore.Config{URL: "rediss://user:pw@cache:6380/0", Prefix: "p1"}},
		{url: "redis://localhost:6379?dial_timeout=3s", want: redisstore.Config{URL: "redis://localhost:6379?dial_timeout=3s"}},
		{url: "redis+sentinel://s1:26379,s2:26379/mymaster/3", want: redisstore.Config{
			SentinelMaster: "mymaster", SentinelAddrs: []string{"s1:26379", "s2:26379"}, DB: 3}},
		{url: "redis+sentinel://:secret@s1:26379/mymaster?read_timeout=250ms&prefix=x", want: redisstore.Config{
			SentinelMaster: "mymaster", SentinelAddrs: []string{"s1:26379"}, Password: "secret", ReadTimeout: 250 * time.Millisecond, Prefix: "x"}},
		{url: "redis+cluster://n1:7000,n2:7001,n3:7002?write_timeout=1s&dial_timeout=2s", want: redisstore.Config{
			ClusterAddrs: []string{"n1:7000", "n2:7001", "n3:7002"}, WriteTimeout: time.Second, DialTimeout: 2 * time.Second}},
		{url: "rediss+cluster://u:p@n1:7000", want: redisstore.Config{ClusterAddrs: []string{"n1:7000"}, Username: "u", Password: "p"}},

		{url: "http://localhost:6379", wantErr: `unknown scheme "http"`},
		{url: "localhost:6379", wantErr: `unknown scheme "localhost"`},
		{url: "/just/a/path", wantErr: "missing scheme"},
		{url: "redis://localhost:6379/notadb", wantErr: "invalid database number"},
		{url: "redis://h:1?prefix=", wantErr: "prefix is empty"},
		{url: "redis://h:1?bogus=1", wantErr: "unexpected option: bogus"},
		{url: "redis+sentinel://s1:26379", wantErr: "want the path /mastername"},
		{url: "redis+sentinel://s1:26379/m/x", wantErr: `database "x"`},
		{url: "redis+sentinel://s1:26379/m/1/2", wantErr: "want the path"},
		{url: "redis+sentinel://s1/m", wantErr: `address "s1": want host:port`},
		{url: "redis+cluster://n1:7000,n2:99999", wantErr: `port "99999"`},
		{url: "redis+cluster://n1:7000/0", wantErr: "a cluster URL has no path"},
		{url: "redis+cluster://", wantErr: "no host:port given"},
		{url: "redis+cluster://n1:7000?timeout=1s", wantErr: `unknown query parameter "timeout"`},
		{url: "redis+cluster://n1:7000?read_timeout=fast", wantErr: "read_timeout: want a positive duration"},
		{url: "redis+sentinel://user:hunter2@s1/m", wantErr: "xxxxx"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := redisstore.ParseURL(tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TLS != nil != strings.HasPrefix(tc.url, "rediss+") {
				t.Errorf("TLS = %v for %s", got.TLS, tc.url)
			}
			got.TLS = nil
			if !equalRC(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func equalRC(a, b redisstore.Config) bool {
	return a.URL == b.URL && a.SentinelMaster == b.SentinelMaster && slices.Equal(a.SentinelAddrs, b.SentinelAddrs) &&
		a.DB == b.DB && slices.Equal(a.ClusterAddrs, b.ClusterAddrs) && a.Username == b.Username && a.Password == b.Password &&
		a.Prefix == b.Prefix && a.DialTimeout == b.DialTimeout && a.ReadTimeout == b.ReadTimeout && a.WriteTimeout == b.WriteTimeout
}

func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{"redis://h:1/0", "rediss://u:p@h:1", "redis+sentinel://a:1,b:2/m/1?prefix=x",
		"redis+cluster://a:1,b:2?dial_timeout=1s", "memory://", "redis://[::1]:6379", "redis+cluster://,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rc, err := redisstore.ParseURL(s)
		if err != nil {
			return
		}
		modes := 0
		for _, set := range []bool{rc.URL != "", rc.SentinelMaster != "", len(rc.ClusterAddrs) > 0} {
			if set {
				modes++
			}
		}
		if modes != 1 {
			t.Fatalf("%q parsed into %d modes: %+v", s, modes, rc)
		}
	})
}

func TestNewRedisConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		rc   redisstore.Config
		want string
	}{
		{"nothing", redisstore.Config{}, "set exactly one of URL"},
		{"two modes", redisstore.Config{URL: "redis://h:1", ClusterAddrs: []string{"a:1", "b:2"}}, "(2 set)"},
		{"sentinel without addrs", redisstore.Config{SentinelMaster: "m"}, "needs both"},
		{"negative timeout", redisstore.Config{URL: "redis://h:1", ReadTimeout: -time.Second}, "ReadTimeout is negative"},
		{"bad url", redisstore.Config{URL: "redis://u:hunter2@h:1/x"}, "invalid database number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redisstore.New(tc.rc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, session.ErrUnavailable) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("a configuration error must be plain and hide passwords: %v", err)
			}
		})
	}
}

func TestRedisConfigFromEnv(t *testing.T) {
	vars := []string{"REDIS_URL", "REDIS_SENTINEL_MASTER", "REDIS_SENTINEL_ADDRS", "REDIS_CLUSTER_ADDRS",
		"REDIS_USERNAME", "REDIS_PASSWORD", "REDIS_PREFIX", "REDIS_DIAL_TIMEOUT", "REDIS_READ_TIMEOUT",
		"REDIS_WRITE_TIMEOUT", "SESSION_TTL_SECONDS"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		ok      bool
		want    redisstore.Config
		wantErr string
	}{
		{name: "unset", env: nil, ok: false},
		{name: "url", env: map[string]string{"REDIS_URL": "redis://h:1/1", "REDIS_PREFIX": "agents", "SESSION_TTL_SECONDS": "60"},
			ok: true, want: redisstore.Config{URL: "redis://h:1/1", Prefix: "agents", Config: session.Config{TTL: time.Minute}}},
		{name: "sentinel", env: map[string]string{"REDIS_SENTINEL_MASTER": "m", "REDIS_SENTINEL_ADDRS": "a:1, b:2", "REDIS_PASSWORD": "pw", "REDIS_DIAL_TIMEOUT": "300ms"},
			ok: true, want: redisstore.Config{SentinelMaster: "m", SentinelAddrs: []string{"a:1", "b:2"}, Password: "pw", DialTimeout: 300 * time.Millisecond, Config: session.Config{TTL: session.DefaultTTL}}},
		{name: "cluster", env: map[string]string{"REDIS_CLUSTER_ADDRS": "a:1,b:2,c:3", "REDIS_READ_TIMEOUT": "2s", "REDIS_WRITE_TIMEOUT": "1s"},
			ok: true, want: redisstore.Config{ClusterAddrs: []string{"a:1", "b:2", "c:3"}, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second, Config: session.Config{TTL: session.DefaultTTL}}},
		{name: "two", env: map[string]string{"REDIS_URL": "redis://h:1", "REDIS_CLUSTER_ADDRS": "a:1"}, wantErr: "set only one"},
		{name: "sentinel addrs alone", env: map[string]string{"REDIS_SENTINEL_ADDRS": "a:1"}, wantErr: "REDIS_SENTINEL_MASTER is not"},
		{name: "bad url", env: map[string]string{"REDIS_URL": "mysql://h"}, wantErr: "REDIS_URL:"},
		{name: "bad addrs", env: map[string]string{"REDIS_CLUSTER_ADDRS": "a"}, wantErr: "REDIS_CLUSTER_ADDRS:"},
		{name: "bad timeout", env: map[string]string{"REDIS_URL": "redis://h:1", "REDIS_READ_TIMEOUT": "1"}, wantErr: "REDIS_READ_TIMEOUT"},
		{name: "bad ttl", env: map[string]string{"REDIS_URL": "redis://h:1", "SESSION_TTL_SECONDS": "-5"}, wantErr: "SESSION_TTL_SECONDS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range vars {
				t.Setenv(v, tc.env[v])
			}
			got, ok, err := redisstore.ConfigFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok=%v err=%v, want ok=%v", ok, err, tc.ok)
			}
			if ok && (!equalRC(got, tc.want) || got.TTL != tc.want.TTL) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	ctx := t.Context()
	for _, u := range []string{"", "memory://"} {
		s, err := redisstore.Open(ctx, u, session.Config{})
		if err != nil {
			t.Fatalf("Open(%q): %v", u, err)
		}
		if _, ok := s.(*session.Memory); !ok {
			t.Fatalf("Open(%q) = %T, want *session.Memory", u, s)
		}
		s.Close()
	}
	if _, err := redisstore.Open(ctx, "postgres://db", session.Config{}); err == nil || !strings.Contains(err.Error(), `unknown scheme "postgres"`) {
		t.Fatalf("Open with an unknown scheme: %v", err)
	}

	srv := redistest.Start(t)
	s, err := redisstore.Open(ctx, srv.URL()+"?prefix=opened", session.Config{TTL: time.Minute})
	if err != nil {
		t.Fatalf("Open(%s): %v", srv.URL(), err)
	}
	defer s.Close()
	r, ok := s.(*redisstore.Store)
	if !ok {
		t.Fatalf("Open(redis URL) = %T, want *redisstore.Store", s)
	}
	id := session.NewID()
	if _, _, err := s.Claim(ctx, id); err != nil {
		t.Fatal(err)
	}
	ttl, err := r.Client().PTTL(ctx, "opened:{"+id+"}:state").Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("key with the URL's prefix and the Config's TTL: TTL %v, err %v", ttl, err)
	}
}
