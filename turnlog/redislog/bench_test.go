package redislog_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/agentdock-go/agentdock/session"
	"github.com/agentdock-go/agentdock/session/redistest"
	"github.com/agentdock-go/agentdock/turnlog"
	"github.com/agentdock-go/agentdock/turnlog/redislog"
)

// benchLogs yields the memory log and a Redis log on a real redis-server
// with the client-side command counter and the server's call counter.
func benchLogs(b *testing.B, fn func(b *testing.B, l turnlog.Log, count *commandCounter, raw redis.UniversalClient)) {
	b.Run("memory", func(b *testing.B) {
		m, err := turnlog.NewMemory(turnlog.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		fn(b, m, nil, nil)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		client := newClient(b, srv, false)
		count := &commandCounter{}
		client.AddHook(count)
		fn(b, openRedis(b, client, redislog.Config{}), count, newClient(b, srv, false))
	})
}

// serverCalls sums the calls of every command in INFO commandstats: the
// commands inside scripts included, INFO itself excluded.
func serverCalls(b *testing.B, raw redis.UniversalClient) int64 {
	info, err := raw.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats line %q", line)
		}
		n += v
	}
	return n
}

func newTurn(b *testing.B, l turnlog.Log) turnlog.Ref {
	ref := turnlog.Ref{Session: session.NewID(), Turn: session.NewID()}
	if err := l.Start(context.Background(), turnlog.Meta{Ref: ref, Owner: "owner", AgentID: "agent"}); err != nil {
		b.Fatal(err)
	}
	return ref
}

// BenchmarkAppend appends 1 or 8 frames per call (a UI chunk of about 60
// bytes each), starting a new turn every 1024 calls (outside the timer).
func BenchmarkAppend(b *testing.B) {
	benchLogs(b, func(b *testing.B, l turnlog.Log, count *commandCounter, raw redis.UniversalClient) {
		for _, n := range []int{1, 8} {
			b.Run("frames="+strconv.Itoa(n), func(b *testing.B) {
				ctx := context.Background()
				batch := make([][]byte, n)
				for i := range batch {
					batch[i] = []byte(`{"type":"text-delta","id":"txt-1","delta":"token ` + strconv.Itoa(i) + `"}`)
				}
				ref := newTurn(b, l)
				var cmds0, calls0 int64
				if count != nil {
					cmds0, calls0 = count.n.Load(), serverCalls(b, raw)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if i > 0 && i%1024 == 0 {
						b.StopTimer()
						if err := l.Finish(ctx, ref); err != nil {
							b.Fatal(err)
						}
						ref = newTurn(b, l)
						b.StartTimer()
					}
					if _, err := l.Append(ctx, ref, batch...); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if count != nil {
					// Start and Finish are one command each on both counters
					// (scripts) plus the calls inside them on the server's.
					turns := int64(b.N/1024) * 2
					frames := float64(b.N * n)
					b.ReportMetric(float64(count.n.Load()-cmds0-turns)/frames, "cmds/frame")
					b.ReportMetric(float64(serverCalls(b, raw)-calls0)/frames, "server-calls/frame")
				}
			})
		}
	})
}

// BenchmarkRead64 reads a finished turn of 64 frames from the start.
func BenchmarkRead64(b *testing.B) {
	benchLogs(b, func(b *testing.B, l turnlog.Log, count *commandCounter, _ redis.UniversalClient) {
		ctx := context.Background()
		ref := newTurn(b, l)
		batch := make([][]byte, 64)
		for i := range batch {
			batch[i] = []byte(`{"type":"text-delta","id":"txt-1","delta":"token ` + strconv.Itoa(i) + `"}`)
		}
		if _, err := l.Append(ctx, ref, batch...); err != nil {
			b.Fatal(err)
		}
		if err := l.Finish(ctx, ref); err != nil {
			b.Fatal(err)
		}
		var cmds0 int64
		if count != nil {
			cmds0 = count.n.Load()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			got, err := l.Read(ctx, ref, 0)
			if err != nil || len(got.Frames) != 64 || !got.Done {
				b.Fatalf("Read = %d frames, done %v, %v", len(got.Frames), got.Done, err)
			}
		}
		b.StopTimer()
		if count != nil {
			b.ReportMetric(float64(count.n.Load()-cmds0)/float64(b.N), "cmds/op")
		}
	})
}
