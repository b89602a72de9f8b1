package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRedisLogger: go-redis's reports become slog warnings, each kind at
// most once per interval with the count of those left out.
func TestRedisLogger(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	l := newRedisLogger(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	const dial = "redis: connection pool: failed to dial after %d attempts: %v"
	steps := []struct {
		advance time.Duration
		format  string
		logged  bool
		skipped float64 // similar_left_out of the logged record (0: absent)
	}{
		{0, dial, true, 0},
		{time.Second, dial, false, 0},
		{time.Second, dial, false, 0},
		{0, "sentinel: new master=%q addr=%q", true, 0}, // another kind
		{redisLogInterval, dial, true, 2},
		{time.Second, dial, false, 0},
		{redisLogInterval, dial, true, 1},
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		buf.Reset()
		l.Printf(context.Background(), st.format, 5, "connection refused")
		if !st.logged {
			if buf.Len() != 0 {
				t.Fatalf("step %d: logged %q, want nothing", i, buf.String())
			}
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("step %d: not one JSON record: %q: %v", i, buf.String(), err)
		}
		if rec["level"] != "WARN" || rec["msg"] != "redis client" || !strings.HasPrefix(rec["detail"].(string), strings.SplitN(st.format, "%", 2)[0]) {
			t.Fatalf("step %d: record %v", i, rec)
		}
		if got, _ := rec["similar_left_out"].(float64); got != st.skipped {
			t.Fatalf("step %d: similar_left_out %v, want %v", i, rec["similar_left_out"], st.skipped)
		}
	}
}
