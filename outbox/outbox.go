// Package outbox keeps the deliveries a deployment owes (the webhook calls
// of background runs) until they are made, so that a delivery outlives
// the replica that queued it: each is made at least once, by whichever
// replica gets to it, always under the same ID (the receiver's
// webhook-id, by which it drops a call it already had).
//
// A Delivery is saved in a Store before its first attempt. The replica
// working on one holds it (Store.Put with a due time in the future, renewed
// while the work lasts); a delivery whose holder died, or whose next
// attempt is due, is handed out by Store.Claim to the Outbox of any
// replica, which sweeps its store every Config.Poll. A delivery may be
// queued before what it reports exists (Delivery.Run: the background run
// whose end it reports): the replica that takes it then waits for the
// run's end (Config.Resolve), wherever the run goes on.
//
// Two stores share one behaviour, checked by the same tests: Memory for
// one process and, in package outbox/redisoutbox, one for replicas on the
// session store's Redis.
package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Delivery is one call owed: its body to post to Target, or, while Body
// is nil, the run whose end the body will report.
type Delivery struct {
	// ID names the delivery: the same on every attempt, on every replica
	// (a webhook's webhook-id).
	ID string `json:"id"`
	// Target is where the body goes (a webhook's URL).
	Target string `json:"target"`
	// Owner is whom the delivery is for (an API key's fingerprint, ""
	// without keys): the sender signs with the owner's secret.
	Owner string `json:"owner,omitempty"`
	// Body is what is posted; nil until the run it reports on ended.
	Body []byte `json:"body,omitempty"`
	// Run is the run whose end Body reports, while Body is nil.
	Run *Run `json:"run,omitempty"`
	// Attempts counts the calls made so far.
	Attempts int `json:"attempts,omitempty"`
}

// Run names a background run (a turn) whose end a delivery reports.
// Its owner is the delivery's.
type Run struct {
	Session string `json:"session"`
	Turn    string `json:"turn"`
	Agent   string `json:"agent,omitempty"`
}

// Store keeps deliveries. Implementations are safe for concurrent use.
// Failures to reach the backing store wrap session.ErrUnavailable.
type Store interface {
	// Put saves d, replacing the delivery of its ID, not to be handed out
	// by Claim before due: the holder of a delivery puts it with a due
	// time a hold ahead, and again before that passes while it works on
	// it; a delivery to try again later is put with that time.
	Put(ctx context.Context, d Delivery, due time.Time) error
	// Claim hands out up to n deliveries due by now, each held for hold
	// (not handed out again before now+hold, unless put again).
	Claim(ctx context.Context, now time.Time, n int, hold time.Duration) ([]Delivery, error)
	// Delete drops a delivery made, or given up.
	Delete(ctx context.Context, id string) error
}

// Defaults of Config.
const (
	DefaultAttempts = 6
	DefaultBackoff  = time.Second
	DefaultHold     = 30 * time.Second
	DefaultPoll     = time.Second
)

// ErrGiveUp, wrapped by Send's error, says that no later attempt can
// succeed (the receiver refused the call for good): the delivery is
// dropped.
var ErrGiveUp = errors.New("the delivery cannot succeed")

// Config configures an Outbox.
type Config struct {
	// Store keeps the deliveries (default: a new Memory).
	Store Store
	// Send makes one call of a delivery whose body is known: nil when it
	// was made; an error wrapping ErrGiveUp drops the delivery; any other
	// error tries again later. Required.
	Send func(ctx context.Context, d Delivery) error
	// Resolve waits for the end of the run a delivery reports on
	// (Delivery.Run) and returns the body that reports it; an error leaves
	// the delivery to be taken again a moment later, by this replica or
	// another (its run goes on elsewhere, say, as this one shuts down).
	// Required when deliveries name runs.
	Resolve func(ctx context.Context, d Delivery) ([]byte, error)
	// Attempts bounds the calls of one delivery (default 6); Backoff is
	// the wait after its first failed call, doubled after each (default
	// 1 s).
	Attempts int
	Backoff  time.Duration
	// Hold is how long a delivery taken is held for the replica working
	// on it before another may take it (default 30 s): the replica renews
	// it every third of it while it works on it (waits for its run, makes
	// a call), so that it bounds how long a delivery waits after its
	// replica died.
	Hold time.Duration
	// Poll is how often the Outbox claims the deliveries due (default
	// 1 s): one Store.Claim each time.
	Poll time.Duration
	// Logger gets the warnings (never a body); nil means slog.Default().
	Logger *slog.Logger
}

// Outbox makes the deliveries of its store: those Add gives it at once,
// and those due that its sweep claims. Close ends it.
type Outbox struct {
	cfg    Config
	ctx    context.Context
	stop   context.CancelFunc
	work   sync.WaitGroup
	swept  chan struct{}
	closed sync.Once
}

// New validates cfg and starts the sweep.
func New(cfg Config) (*Outbox, error) {
	if cfg.Send == nil {
		return nil, errors.New("outbox: Config.Send is nil")
	}
	for name, v := range map[string]int64{"Attempts": int64(cfg.Attempts), "Backoff": int64(cfg.Backoff), "Hold": int64(cfg.Hold), "Poll": int64(cfg.Poll)} {
		if v < 0 {
			return nil, fmt.Errorf("outbox: %s must not be negative (got %d)", name, v)
		}
	}
	if cfg.Store == nil {
		cfg.Store = NewMemory()
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	o := &Outbox{cfg: cfg, swept: make(chan struct{})}
	o.ctx, o.stop = context.WithCancel(context.Background())
	go o.sweep()
	return o, nil
}

// Add saves d and makes it in the background: at once, or, when d names
// a run, once Resolve has its body. It fails only when the store does
// not take d (then nothing will make it).
func (o *Outbox) Add(ctx context.Context, d Delivery) error {
	if d.ID == "" || d.Target == "" || d.Body == nil && d.Run == nil {
		return errors.New("outbox: a delivery needs an ID, a target, and a body or a run")
	}
	if o.ctx.Err() != nil {
		// Closed: the store keeps it for the other replicas.
		return o.cfg.Store.Put(ctx, d, time.Now())
	}
	if err := o.cfg.Store.Put(ctx, d, time.Now().Add(o.cfg.Hold)); err != nil {
		return err
	}
	o.start(d)
	return nil
}

// Close stops the sweep and the work under way, and waits for it, or for
// ctx: a delivery being made is left to the next replica that sweeps
// (at once, not after its hold).
func (o *Outbox) Close(ctx context.Context) error {
	o.closed.Do(o.stop)
	done := make(chan struct{})
	go func() {
		o.work.Wait()
		<-o.swept
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sweep claims the deliveries due every Poll, until Close.
func (o *Outbox) sweep() {
	defer close(o.swept)
	tick := time.NewTicker(o.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-o.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(o.ctx, o.cfg.Poll+5*time.Second)
		ds, err := o.cfg.Store.Claim(ctx, time.Now(), 16, o.cfg.Hold)
		cancel()
		if err != nil {
			if o.ctx.Err() == nil {
				o.cfg.Logger.Warn("outbox: claiming the deliveries due failed", "err", err)
			}
			continue
		}
		for _, d := range ds {
			o.start(d)
		}
	}
}

func (o *Outbox) start(d Delivery) {
	o.work.Add(1)
	go func() {
		defer o.work.Done()
		o.deliver(d)
	}()
}

// deliver works on d, which this replica holds: the body first, when d
// names a run, then one call; a call that failed is put back for when the
// next is due, for whichever replica takes it then.
func (o *Outbox) deliver(d Delivery) {
	ctx := o.ctx
	if d.Body == nil {
		if !o.resolve(&d) {
			return
		}
	}
	release := o.hold(d)
	err := o.cfg.Send(ctx, d)
	release()
	switch {
	case err == nil:
		o.drop(d, "")
		return
	case ctx.Err() != nil:
		// This replica closes: the call is not counted, and the next
		// replica to sweep makes it.
		o.release(d, time.Now())
		return
	case errors.Is(err, ErrGiveUp):
		o.drop(d, "the receiver refused it for good")
		return
	}
	d.Attempts++
	if d.Attempts >= o.cfg.Attempts {
		o.cfg.Logger.Warn("outbox: a delivery failed; giving up", "id", d.ID, "attempts", d.Attempts, "err", err)
		o.drop(d, "")
		return
	}
	o.release(d, time.Now().Add(o.cfg.Backoff<<(d.Attempts-1)))
}

// hold keeps d held for this replica, renewing its hold every third of
// Hold, until the returned function is called: a replica that dies
// working on d stops renewing it, and another takes d up within Hold.
func (o *Outbox) hold(d Delivery) (release func()) {
	ctx, cancel := context.WithCancel(o.ctx)
	held := make(chan struct{})
	go func() {
		defer close(held)
		tick := time.NewTicker(o.cfg.Hold / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := o.put(d, time.Now().Add(o.cfg.Hold)); err != nil && ctx.Err() == nil {
					o.cfg.Logger.Warn("outbox: renewing the hold of a delivery failed", "id", d.ID, "err", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-held
	}
}

// resolve waits for the body of d, holding d meanwhile; it reports
// whether d has its body (saved with it, so that no other replica waits
// for the run again).
func (o *Outbox) resolve(d *Delivery) bool {
	if o.cfg.Resolve == nil {
		o.cfg.Logger.Error("outbox: a delivery names a run, and the outbox resolves none; dropping it", "id", d.ID)
		o.drop(*d, "")
		return false
	}
	release := o.hold(*d)
	body, err := o.cfg.Resolve(o.ctx, *d)
	release()
	if err != nil {
		// Its run goes on elsewhere, or cannot be read now: the next
		// sweep, here or elsewhere, takes it again.
		o.release(*d, time.Now().Add(o.cfg.Poll))
		return false
	}
	d.Body, d.Run = body, nil
	if err := o.put(*d, time.Now().Add(o.cfg.Hold)); err != nil {
		o.cfg.Logger.Warn("outbox: saving a delivery's body failed", "id", d.ID, "err", err)
	}
	return true
}

// put saves d with its due time, whatever became of the outbox's life: a
// delivery is never lost for a close.
func (o *Outbox) put(d Delivery, due time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return o.cfg.Store.Put(ctx, d, due)
}

// release puts d back for due.
func (o *Outbox) release(d Delivery, due time.Time) {
	if err := o.put(d, due); err != nil {
		o.cfg.Logger.Warn("outbox: putting a delivery back failed; it is taken again once its hold expires", "id", d.ID, "err", err)
	}
}

// drop deletes a delivery made or given up.
func (o *Outbox) drop(d Delivery, why string) {
	if why != "" {
		o.cfg.Logger.Warn("outbox: dropping a delivery", "id", d.ID, "why", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.cfg.Store.Delete(ctx, d.ID); err != nil {
		o.cfg.Logger.Warn("outbox: deleting a delivery made failed; it may be made again (same ID)", "id", d.ID, "err", err)
	}
}

// Memory is a Store for one process.
type Memory struct {
	mu sync.Mutex
	m  map[string]memoryEntry
}

type memoryEntry struct {
	d   Delivery
	due time.Time
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[string]memoryEntry{}} }

var _ Store = (*Memory)(nil)

// Put implements Store.
func (s *Memory) Put(_ context.Context, d Delivery, due time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d.Body = bytes.Clone(d.Body)
	s.m[d.ID] = memoryEntry{d: d, due: due}
	return nil
}

// Claim implements Store.
func (s *Memory) Claim(_ context.Context, now time.Time, n int, hold time.Duration) ([]Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for id, e := range s.m {
		if len(out) == n {
			break
		}
		if e.due.After(now) {
			continue
		}
		e.due = now.Add(hold)
		s.m[id] = e
		out = append(out, e.d)
	}
	return out, nil
}

// Delete implements Store.
func (s *Memory) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

// Len is the number of deliveries kept.
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
