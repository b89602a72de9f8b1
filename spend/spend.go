// Package spend counts what API keys spend on models and bounds it.
//
// Every model call's usage, as the model reports it, is charged to the
// owner of the turn (an API key's fingerprint): its tokens, and its cost
// when the server's price table prices the model (Prices). The counts
// live in the session store (session.Ledger), per UTC day and month, so
// that every replica shares them. A turn that starts when its owner has
// spent a budget (Limits) is refused with an *ExceededError; a turn that
// runs is never cut for it, so an owner overspends by at most what the
// turns that had started before the budget was reached spend.
package spend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

// Price is what a model costs per million tokens: of input, of the input
// read from the provider's cache, and of output, in one currency (USD,
// say) for the whole table.
type Price struct {
	Input, CachedInput, Output float64
}

// Prices are the prices of models, by the model's name as its provider
// knows it (llmorch.Info.Model: "gpt-4o-mini"), or by provider and name
// ("openai/gpt-4o-mini"), which wins.
type Prices map[string]Price

// Of returns the price of provider's model.
func (p Prices) Of(provider, model string) (Price, bool) {
	if pr, ok := p[provider+"/"+model]; ok {
		return pr, true
	}
	pr, ok := p[model]
	return pr, ok
}

// Charge is what a model call's usage u counts for: its cost (0 when the
// model has no price), and the spending budgets count, whose Tokens are
// the input and output tokens with the cached input at its own price's
// rate (CachedInput/Input of the model's price; every token counts one
// without a price).
func (p Prices) Charge(provider, model string, u chat.Usage) session.Spending {
	s := session.Spending{Input: u.Prompt, CachedInput: min(u.CacheRead, u.Prompt), Output: u.Completion, Calls: 1}
	s.Tokens = u.Prompt + u.Completion
	pr, ok := p.Of(provider, model)
	if !ok {
		return s
	}
	fresh := float64(s.Input - s.CachedInput)
	s.Cost = (fresh*pr.Input + float64(s.CachedInput)*pr.CachedInput + float64(s.Output)*pr.Output) / 1e6
	if pr.Input > 0 {
		cached := math.Round(float64(s.CachedInput) * pr.CachedInput / pr.Input)
		s.Tokens = s.Input - s.CachedInput + int64(cached) + s.Output
	}
	return s
}

// ParsePrices reads a price table as MODEL_PRICES writes it: entries
// separated by commas, each a model's name (or provider/name), "=", and
// its input, cached input and output prices per million tokens separated
// by slashes ("gpt-4o-mini=0.15/0.075/0.60,gpt-4o=2.50/1.25/10"). A
// model without a cached price ("m=1//4", or "m=1/4" for input/output)
// has its cached input priced as input.
func ParsePrices(s string) (Prices, error) {
	out := Prices{}
	var probs []string
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, vals, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			probs = append(probs, fmt.Sprintf("%q: want model=input/cached/output, prices per million tokens", entry))
			continue
		}
		parts := strings.Split(vals, "/")
		if len(parts) == 2 {
			parts = []string{parts[0], "", parts[1]}
		}
		if len(parts) != 3 {
			probs = append(probs, fmt.Sprintf("%s: want input/cached/output (or input/output), got %q", name, vals))
			continue
		}
		var nums [3]float64
		bad := false
		for i, v := range parts {
			v = strings.TrimSpace(v)
			if v == "" && i == 1 {
				nums[1] = -1
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				probs = append(probs, fmt.Sprintf("%s: %q is not a price (a non-negative number per million tokens)", name, v))
				bad = true
				break
			}
			nums[i] = f
		}
		if bad {
			continue
		}
		if nums[1] < 0 {
			nums[1] = nums[0]
		}
		if _, dup := out[name]; dup {
			probs = append(probs, fmt.Sprintf("%s is priced twice", name))
			continue
		}
		out[name] = Price{Input: nums[0], CachedInput: nums[1], Output: nums[2]}
	}
	if len(probs) > 0 {
		return nil, errors.New(strings.Join(probs, "; "))
	}
	return out, nil
}

// Limits bound the tokens (session.Spending.Tokens) one owner may spend
// in a UTC day and in a UTC month; 0 is no limit.
type Limits struct {
	PerDay, PerMonth int64
}

// Names of the default limits, as errors and /api/usage name them.
const (
	LimitDay   = "TOKENS_PER_OWNER_PER_DAY"
	LimitMonth = "TOKENS_PER_OWNER_PER_MONTH"
	// LimitKeyDay and LimitKeyMonth are a key's own, from API_KEYS_FILE.
	LimitKeyDay   = "tokens_per_day of this API key (API_KEYS_FILE)"
	LimitKeyMonth = "tokens_per_month of this API key (API_KEYS_FILE)"
)

// Policy is what owners may spend: Default for every owner but those
// with limits of their own (an API key's, from the keys file), whose
// Limits are whole (the caller fills what the key leaves unset from
// Default). Prices price the models.
type Policy struct {
	Default Limits
	Owners  map[string]Limits
	Prices  Prices
}

// For returns owner's limits and their names.
func (p *Policy) For(owner string) (l Limits, dayName, monthName string) {
	if l, ok := p.Owners[owner]; ok {
		return l, LimitKeyDay, LimitKeyMonth
	}
	return p.Default, LimitDay, LimitMonth
}

// Bounded reports whether any owner has a limit: without one, a turn's
// start reads nothing.
func (p *Policy) Bounded() bool {
	if p == nil {
		return false
	}
	if p.Default != (Limits{}) {
		return true
	}
	for _, l := range p.Owners {
		if l != (Limits{}) {
			return true
		}
	}
	return false
}

// ErrExceeded: the owner spent a budget; no turn starts until it resets.
var ErrExceeded = errors.New("budget exceeded")

// ExceededError is the ErrExceeded of one budget: which limit (its
// name), its value, what was spent, and when it resets.
type ExceededError struct {
	Limit  string
	Max    int64
	Used   int64
	Resets time.Time
	// Anonymous: the owner is a server's without API keys, whose
	// requests all share one budget.
	Anonymous bool
}

func (e *ExceededError) Error() string {
	period := "today (UTC)"
	if e.Limit == LimitMonth || e.Limit == LimitKeyMonth {
		period = "this month (UTC)"
	}
	who := "this API key has"
	if e.Anonymous {
		who = "this server's requests (it has no API keys, so they share one budget) have"
	}
	return fmt.Sprintf("%s spent %d tokens %s, its budget %s is %d tokens; it resets at %s",
		who, e.Used, period, e.Limit, e.Max, e.Resets.UTC().Format(time.RFC3339))
}

func (e *ExceededError) Unwrap() error { return ErrExceeded }

// Check returns the *ExceededError of the first budget (the day's, then
// the month's) that day and month, owner's spending at at, reached.
func (p *Policy) Check(owner string, at time.Time, day, month session.Spending) error {
	l, dayName, monthName := p.For(owner)
	if l.PerDay > 0 && day.Tokens >= l.PerDay {
		return &ExceededError{Limit: dayName, Max: l.PerDay, Used: day.Tokens, Resets: session.DayEnd(at), Anonymous: owner == ""}
	}
	if l.PerMonth > 0 && month.Tokens >= l.PerMonth {
		return &ExceededError{Limit: monthName, Max: l.PerMonth, Used: month.Tokens, Resets: session.MonthEnd(at), Anonymous: owner == ""}
	}
	return nil
}

// Report is what an owner spent so far today and this month (UTC), with
// the budgets and when they reset: GET /api/usage.
type Report struct {
	Day   Period `json:"day"`
	Month Period `json:"month"`
}

// Period is one period of a Report.
type Period struct {
	// Start is the period's first day ("2026-11-26", "2026-11").
	Start string `json:"start"`
	session.Spending
	// Limit is the period's budget of Tokens (absent without one), and
	// LimitName the setting it comes from.
	Limit     int64  `json:"limit,omitempty"`
	LimitName string `json:"limitName,omitempty"`
	// Resets is when the period ends and its counts start from zero.
	Resets time.Time `json:"resets"`
}

// Report builds owner's Report from its spending at at.
func (p *Policy) Report(owner string, at time.Time, day, month session.Spending) Report {
	var l Limits
	dayName, monthName := LimitDay, LimitMonth
	if p != nil {
		l, dayName, monthName = p.For(owner)
	}
	r := Report{
		Day:   Period{Start: session.DayOf(at), Spending: day, Limit: l.PerDay, Resets: session.DayEnd(at)},
		Month: Period{Start: session.MonthOf(at), Spending: month, Limit: l.PerMonth, Resets: session.MonthEnd(at)},
	}
	if l.PerDay > 0 {
		r.Day.LimitName = dayName
	}
	if l.PerMonth > 0 {
		r.Month.LimitName = monthName
	}
	return r
}
