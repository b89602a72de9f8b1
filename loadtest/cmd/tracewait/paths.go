package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// The -paths report follows the wake-ups back from two kinds of moments of
// an HTTP server that relays a model's stream:
//
//   - a model request on its way: the model connection's write loop
//     (net/http's persistConn.writeLoop) made runnable;
//   - a write to a client by a handler (a write system call under
//     net/http's conn.serve), split into the writes that carry a turn's
//     first token (the first after a silence of at least -gap on that
//     handler: the model's wait for its first token) and the others.
//
// From each moment it walks back: the goroutine that did it was made
// runnable by another, which was made runnable by another, up to one woken
// by the network (or by nothing the trace names). Each hop is the time from
// the goroutine's wake-up to the next moment on the path, split into the
// wait for a core and the time it ran. The same walk over two servers
// traced under the same load shows where one's first token spends the time
// the other's does not.

// unnamedKind names a goroutine on a path whose start the trace does not
// show: one started before the trace that is none of those the report
// follows, or an iter.Pull coroutine (the turn's, whose runs are the
// turn's work).
const unnamedKind = "(unnamed)"

// move is one state change of a goroutine.
type move struct {
	at    trace.Time
	from  trace.GoState
	to    trace.GoState
	waker trace.GoID // the goroutine that made it (for a wake-up: the waker)
}

// gorecord is what the walk needs of one goroutine.
type gorecord struct {
	kind   string
	moves  []move
	writes []trace.Time // write system calls to a client
	wakes  []trace.Time // made runnable, when it is a model connection's write loop
}

// hop is one goroutine's part of a path.
type hop struct {
	kind      string
	wait, run time.Duration
}

// paths is what the -paths report prints, by path kind.
type paths struct {
	model, first, other []path
}

type path []hop // the moment's goroutine first

// readPaths reads a trace and walks the paths of its model requests and
// client writes.
func readPaths(file string, gap time.Duration) (*paths, error) {
	gs := map[trace.GoID]*gorecord{}
	_, err := eachGoroutineMove(file, func(ev trace.Event, st trace.StateTransition) {
		id := st.Resource.Goroutine()
		from, to := st.Goroutine()
		g := gs[id]
		if g == nil {
			g = &gorecord{}
			gs[id] = g
		}
		switch {
		case from == trace.GoNotExist:
			g.kind = short(startOf(st.Stack))
		case g.kind == "":
			// Started before the trace: named by what it is seen doing.
			g.kind = seenAs(funcs(st.Stack))
		}
		g.moves = append(g.moves, move{at: ev.Time(), from: from, to: to, waker: ev.Goroutine()})
		if from == trace.GoWaiting && to == trace.GoRunnable && strings.HasSuffix(g.kind, "writeLoop") {
			g.wakes = append(g.wakes, ev.Time())
		}
		// The stack is read only here and for a goroutine's name: most of
		// a trace's transitions need neither.
		if to == trace.GoSyscall {
			if frames := funcs(st.Stack); has(frames, "(*FD).Write") && has(frames, "(*conn).serve") {
				g.writes = append(g.writes, ev.Time())
			}
		}
	})
	if err != nil {
		return nil, err
	}
	p := &paths{}
	for id, g := range gs {
		for _, at := range g.wakes {
			p.model = append(p.model, walk(gs, id, at))
		}
		for i, at := range g.writes {
			switch {
			case i == 0:
				// The connection's first write in the trace: what came
				// before it is unknown.
			case at.Sub(g.writes[i-1]) >= gap:
				p.first = append(p.first, walk(gs, id, at))
			default:
				p.other = append(p.other, walk(gs, id, at))
			}
		}
	}
	return p, nil
}

// seenAs names a goroutine that started before the trace by the frames it
// is seen with ("": none of those the report follows).
func seenAs(frames []string) string {
	for _, k := range []string{"writeLoop", "readLoop", "(*conn).serve"} {
		for _, f := range frames {
			if strings.Contains(f, k) {
				return short(f)
			}
		}
	}
	return ""
}

// walk follows the wake-ups back from goroutine id at time at.
func walk(gs map[trace.GoID]*gorecord, id trace.GoID, at trace.Time) path {
	var p path
	for len(p) < 12 {
		g := gs[id]
		if g == nil {
			break
		}
		// The last wake-up (or start) at or before at.
		last := sort.Search(len(g.moves), func(i int) bool { return g.moves[i].at > at }) - 1
		woke := last
		for ; woke >= 0; woke-- {
			m := g.moves[woke]
			if m.to == trace.GoRunnable && (m.from == trace.GoWaiting || m.from == trace.GoNotExist) {
				break
			}
		}
		h := hop{kind: g.kind}
		if h.kind == "" {
			h.kind = unnamedKind
		}
		if woke < 0 {
			p = append(p, h)
			break
		}
		for k := woke; k <= last; k++ {
			end := at
			if k < last {
				end = g.moves[k+1].at
			}
			switch g.moves[k].to {
			case trace.GoRunnable:
				h.wait += end.Sub(g.moves[k].at)
			case trace.GoRunning:
				h.run += end.Sub(g.moves[k].at)
			}
		}
		p = append(p, h)
		m := g.moves[woke]
		if m.waker == trace.NoGoroutine || m.waker == id {
			break // the network, a timer, or the runtime
		}
		id, at = m.waker, m.at
	}
	return p
}

// kinds is the path's goroutine kinds, the first woken first.
func (p path) kinds() string {
	ks := make([]string, len(p))
	for i, h := range p {
		ks[len(p)-1-i] = h.kind
	}
	return strings.Join(ks, " -> ")
}

func (p *paths) print(w io.Writer, top int) {
	for _, set := range []struct {
		name  string
		paths []path
	}{
		{"model requests (the model connection's write loop woken)", p.model},
		{"writes carrying a turn's first token", p.first},
		{"other writes to clients", p.other},
	} {
		fmt.Fprintf(w, "-- %s: %d\n", set.name, len(set.paths))
		by := map[string][]path{}
		for _, pa := range set.paths {
			k := pa.kinds()
			by[k] = append(by[k], pa)
		}
		for n, k := range mostFirst(by, func(ps []path) int { return len(ps) }, 1) {
			if n == top {
				break
			}
			ps := by[k]
			fmt.Fprintf(w, "%7d  %s\n", len(ps), k)
			for i := len(ps[0]) - 1; i >= 0; i-- {
				var wait, run []time.Duration
				for _, pa := range ps {
					wait, run = append(wait, pa[i].wait), append(run, pa[i].run)
				}
				slices.Sort(wait)
				slices.Sort(run)
				fmt.Fprintf(w, "         %-44s wait p50 %7.1f mean %7.1f µs | ran p50 %7.1f mean %7.1f µs\n",
					ps[0][i].kind, us(quantile(wait, .5)), us(total(wait))/float64(len(wait)), us(quantile(run, .5)), us(total(run))/float64(len(run)))
			}
		}
	}
}

func funcs(st trace.Stack) []string {
	var fs []string
	for f := range st.Frames() {
		fs = append(fs, f.Func)
	}
	return fs
}

func has(frames []string, s string) bool {
	return slices.ContainsFunc(frames, func(f string) bool { return strings.Contains(f, s) })
}
