package session

import (
	"context"
	"strings"
	"time"
)

// A Ledger is a Store that keeps what each owner spends on models (package
// spend counts it and bounds it): the tokens and cost of the model calls
// of the owner's turns, per UTC day and per UTC month. Every replica that
// shares the store shares the counts; adding to them is atomic. The
// memory store and the Redis store are Ledgers.
type Ledger interface {
	// Spend adds s to the owner's counts of the day and of the month of
	// at (UTC).
	Spend(ctx context.Context, owner string, at time.Time, s Spending) error
	// Spent returns the owner's counts of the day and of the month of at
	// (UTC); zero for a period with none.
	Spent(ctx context.Context, owner string, at time.Time) (day, month Spending, err error)
}

// Spending is what an owner spent in a period, or one model call.
type Spending struct {
	// Tokens is what budgets count: the tokens of the model calls, the
	// cached input counted at its own price's rate when the model is
	// priced (spend.Prices.Charge).
	Tokens int64 `json:"tokens"`
	// Input counts every input token, cached or not; CachedInput the part
	// of it read from the provider's cache; Output the output tokens.
	Input       int64 `json:"input"`
	CachedInput int64 `json:"cachedInput"`
	Output      int64 `json:"output"`
	// Cost is what the priced calls cost, in the price table's currency.
	Cost float64 `json:"cost"`
	// Calls counts the model calls.
	Calls int64 `json:"calls"`
}

// Add returns the sum of s and t.
func (s Spending) Add(t Spending) Spending {
	return Spending{Tokens: s.Tokens + t.Tokens, Input: s.Input + t.Input, CachedInput: s.CachedInput + t.CachedInput,
		Output: s.Output + t.Output, Cost: s.Cost + t.Cost, Calls: s.Calls + t.Calls}
}

// DayOf and MonthOf name the periods of at (UTC) as a Ledger keeps them:
// "2026-11-26" and "2026-11".
func DayOf(at time.Time) string   { return at.UTC().Format(time.DateOnly) }
func MonthOf(at time.Time) string { return at.UTC().Format("2006-01") }

// DayEnd and MonthEnd are when the day and the month of at (UTC) end, and
// their counts start again from zero.
func DayEnd(at time.Time) time.Time {
	y, m, d := at.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func MonthEnd(at time.Time) time.Time {
	y, m, _ := at.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// memSpendMax bounds the periods the memory store keeps before it drops
// those that ended.
const memSpendMax = 4096

// Spend adds s to owner's counts (Ledger).
func (m *Memory) Spend(ctx context.Context, owner string, at time.Time, s Spending) error {
	if err := m.open(ctx); err != nil {
		return err
	}
	day, month := "d:"+DayOf(at)+":"+owner, "m:"+MonthOf(at)+":"+owner
	m.spendMu.Lock()
	defer m.spendMu.Unlock()
	if m.spent == nil {
		m.spent = map[string]Spending{}
	}
	if len(m.spent) >= memSpendMax {
		// The periods that ended go: only the current ones are read.
		today, thisMonth := "d:"+DayOf(at)+":", "m:"+MonthOf(at)+":"
		for k := range m.spent {
			if !strings.HasPrefix(k, today) && !strings.HasPrefix(k, thisMonth) {
				delete(m.spent, k)
			}
		}
	}
	m.spent[day] = m.spent[day].Add(s)
	m.spent[month] = m.spent[month].Add(s)
	return nil
}

// Spent returns owner's counts (Ledger).
func (m *Memory) Spent(ctx context.Context, owner string, at time.Time) (day, month Spending, err error) {
	if err := m.open(ctx); err != nil {
		return Spending{}, Spending{}, err
	}
	m.spendMu.Lock()
	defer m.spendMu.Unlock()
	return m.spent["d:"+DayOf(at)+":"+owner], m.spent["m:"+MonthOf(at)+":"+owner], nil
}

// open is checkOpen under m.mu.
func (m *Memory) open(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.checkOpen(ctx)
}
