package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
		check   func(*options) bool
	}{
		{nil, "", func(o *options) bool {
			return slices.Equal(o.stores, []string{"relay", "relay-redis", "memory", "redis"}) && len(o.streams) == 2 && o.streams[1] == 500 && o.idle[0] == 2000 &&
				o.timing.TTFT == 100*time.Millisecond && o.timing.Chunks == 64 && o.direct
		}},
		{[]string{"-stores", "redis", "-streams", "50", "-idle", "", "-server-env", "STREAM_RETENTION=30s"}, "", func(o *options) bool {
			return len(o.stores) == 1 && o.stores[0] == "redis" && len(o.idle) == 0 && o.serverEnv[0] == "STREAM_RETENTION=30s"
		}},
		{[]string{"-soak", "10m"}, "", func(o *options) bool {
			return slices.Equal(o.stores, []string{"memory", "redis"})
		}},
		{[]string{"-stores", "redis,relay", "-json", "x.json", "-profile", "prof"}, "", func(o *options) bool {
			return slices.Equal(o.stores, []string{"redis", "relay"}) && o.jsonOut == "x.json" && o.profileDir == "prof"
		}},
		{[]string{"-stores", "relay,memory,relay"}, `"relay" twice`, nil},
		{[]string{"-soak", "10m", "-stores", "memory"}, "", func(o *options) bool {
			return o.soak.Duration == 10*time.Minute && o.soak.Streams == 100 && o.soak.Warmup == 2*time.Minute &&
				slices.Equal(o.serverEnv, envList{"STREAM_RETENTION=60s", "SESSION_TTL_SECONDS=60"})
		}},
		{[]string{"-soak", "20m", "-streams", "300", "-server-env", "STREAM_RETENTION=5m", "-soak-warmup", "6m"}, "", func(o *options) bool {
			return o.soak.Streams == 300 && o.soak.Warmup == 6*time.Minute &&
				slices.Equal(o.serverEnv, envList{"STREAM_RETENTION=5m", "SESSION_TTL_SECONDS=60"})
		}},
		{[]string{"-soak", "10m", "-streams", "100,200"}, "want one -streams count, got 2", nil},
		{[]string{"-soak", "3m"}, "shorter than -soak-warmup 2m0s + 2 x -soak-window 1m0s", nil},
		{[]string{"-soak", "3h"}, "-soak 3h0m0s: want > 0 and <= 2h0m0s", nil},
		{[]string{"-soak", "10m", "-soak-interval", "0s"}, "-soak-interval", nil},
		{[]string{"-streams", "0"}, "-streams", nil},
		{[]string{"-streams", "9000"}, "from 1 to 5000", nil},
		{[]string{"-stores", "etcd"}, "not relay, relay-redis, memory or redis", nil},
		{[]string{"-duration", "1h"}, "-duration", nil},
		{[]string{"-server-env", "NOEQUALS"}, "KEY=VALUE", nil},
		{[]string{"extra"}, "unexpected arguments", nil},
	}
	for _, tc := range tests {
		o, err := parse(tc.args, io.Discard)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parse(%q): err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !tc.check(o) {
			t.Errorf("parse(%q) = %+v, %v", tc.args, o, err)
		}
	}
}
