package sessiontest

import (
	"sync"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/session"
)

// ledger: a store that keeps what owners spend (session.Ledger) counts
// each owner apart, per UTC day and month, adds concurrent spending
// without losing any, and starts a new day (and month) from zero while
// the month goes on counting.
func (h *harness) ledger(t *testing.T) {
	s, _ := h.store(t, session.Config{})
	l, ok := s.(session.Ledger)
	if !ok {
		t.Skip("the store keeps no spending (session.Ledger)")
	}
	ctx := t.Context()
	// The last day of a month, late: the next hour is another day and
	// another month.
	at := time.Date(2031, 1, 31, 23, 0, 0, 0, time.UTC)
	owner, other := "owner-"+session.NewID(), "other-"+session.NewID()
	one := session.Spending{Tokens: 100, Input: 120, CachedInput: 40, Output: 10, Cost: 0.25, Calls: 1}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- l.Spend(ctx, owner, at, one) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Spend(ctx, other, at, one); err != nil {
		t.Fatal(err)
	}
	day, month, err := l.Spent(ctx, owner, at.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := session.Spending{Tokens: 5000, Input: 6000, CachedInput: 2000, Output: 500, Cost: 12.5, Calls: 50}
	if !near(day, want) || !near(month, want) {
		t.Fatalf("50 concurrent adds: day %+v, month %+v; want %+v each", day, month, want)
	}
	if day, _, _ := l.Spent(ctx, other, at); !near(day, one) {
		t.Errorf("the other owner's day = %+v, want %+v", day, one)
	}
	// The next day is a new month too.
	next := at.Add(2 * time.Hour)
	if day, month, _ := l.Spent(ctx, owner, next); day != (session.Spending{}) || month != (session.Spending{}) {
		t.Errorf("a new day and month: %+v, %+v; want zero", day, month)
	}
	// A day later in the same month: the day is new, the month goes on.
	feb := time.Date(2031, 2, 1, 10, 0, 0, 0, time.UTC)
	if err := l.Spend(ctx, owner, feb, one); err != nil {
		t.Fatal(err)
	}
	if err := l.Spend(ctx, owner, feb.Add(24*time.Hour), one); err != nil {
		t.Fatal(err)
	}
	day, month, _ = l.Spent(ctx, owner, feb.Add(24*time.Hour))
	if !near(day, one) || !near(month, one.Add(one)) {
		t.Errorf("second day of the month: day %+v, month %+v", day, month)
	}
}

// near compares spending, its cost within rounding.
func near(a, b session.Spending) bool {
	d := a.Cost - b.Cost
	a.Cost, b.Cost = 0, 0
	return a == b && d < 1e-9 && d > -1e-9
}
