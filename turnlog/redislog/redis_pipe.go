package redislog

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipe sends the writes of concurrent callers to Redis together: while one
// batch is on the wire, the writes that arrive queue up and leave in the
// next one, as a single pipeline. A replica's turns write their frames on
// the same 50 ms grid (the server's mirror), so with many turns streaming
// Redis reads a few pipelines per tick instead of one round trip per turn:
// the same scripts run, but redis-server and the replica each make a few
// system calls per tick where they made one pair per turn, which was most
// of redis-server's CPU per turn. A lone write goes out at once, as before.
//
// The caller that finds the pipe idle sends the batches itself until the
// queue is empty (no goroutine of the pipe's own, no hand-over for a lone
// write); the others wait for their answers. Each turn has at most one
// write in flight (its writer's mutex), so the pipe never reorders a
// turn's writes.
type pipe struct {
	client  redis.UniversalClient
	timeout time.Duration

	mu       sync.Mutex
	queue    []*pipeCall
	draining bool
}

type pipeCall struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan struct{}
}

// run runs script like script.Run, in a batch with the writes of other
// callers. The batch has its own deadline (the pipe's timeout), as each
// write had; a caller whose ctx ends first stops waiting for the answer,
// and whether its write went in is then unknown, as with a cancelled
// round trip (a caller that sends batches finishes them first).
func (p *pipe) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &pipeCall{script: script, keys: keys, args: args, done: make(chan struct{})}
	p.mu.Lock()
	p.queue = append(p.queue, c)
	lead := !p.draining
	p.draining = true
	p.mu.Unlock()
	if lead {
		// Writes that start together (the mirror's batches on a grid tick,
		// each on a goroutine of its own) are on their way: yield once so
		// that they queue behind this one and leave with it in one
		// pipeline, rather than this write alone and the rest in a second
		// round trip. A lone write loses a scheduler pass, not a round trip.
		runtime.Gosched()
		p.drain()
	}
	select {
	case <-c.done:
		return c.cmd
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
}

// drain sends the queued writes, batch after batch, until none is left.
func (p *pipe) drain() {
	for {
		p.mu.Lock()
		batch := p.queue
		p.queue = nil
		if len(batch) == 0 {
			p.draining = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.send(batch)
	}
}

func (p *pipe) send(batch []*pipeCall) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		c.cmd = c.script.Run(ctx, p.client, c.keys, c.args...)
		close(c.done)
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	// Pipelined's error is the first of the commands'; each call reads its
	// own.
	_, _ = p.client.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = c.script.EvalSha(ctx, pl, c.keys, c.args...)
		}
		return nil
	})
	for i, c := range batch {
		c.cmd = cmds[i]
		if err := c.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts (a restart, SCRIPT FLUSH): Run
			// loads this one again.
			c.cmd = c.script.Run(ctx, p.client, c.keys, c.args...)
		}
		close(c.done)
	}
}
