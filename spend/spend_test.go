package spend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentdock-go/agentdock/chat"
	"github.com/agentdock-go/agentdock/session"
)

func TestParsePrices(t *testing.T) {
	tests := []struct {
		in   string
		want Prices
		err  string
	}{
		{"", Prices{}, ""},
		{"gpt-4o-mini=0.15/0.075/0.60, openai/gpt-4o=2.50/1.25/10", Prices{"gpt-4o-mini": {0.15, 0.075, 0.6}, "openai/gpt-4o": {2.5, 1.25, 10}}, ""},
		{"m=1//4", Prices{"m": {1, 1, 4}}, ""},
		{"m=1/4", Prices{"m": {1, 1, 4}}, ""},
		{"m=1/2/3/4", nil, "m: want input/cached/output"},
		{"m", nil, `"m": want model=input/cached/output`},
		{"m=-1/0/0", nil, `m: "-1" is not a price`},
		{"m=x/0/0", nil, `m: "x" is not a price`},
		{"m=NaN/0/0", nil, `is not a price`},
		{"m=1/1/1,m=2/2/2", nil, "m is priced twice"},
	}
	for _, tt := range tests {
		got, err := ParsePrices(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParsePrices(%q) = %v, want an error saying %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParsePrices(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("ParsePrices(%q)[%s] = %v, want %v", tt.in, k, got[k], v)
			}
		}
	}
}

func FuzzParsePrices(f *testing.F) {
	f.Add("gpt-4o-mini=0.15/0.075/0.60,gpt-4o=2.50/1.25/10")
	f.Add("m=1/4")
	f.Add("=,,/")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePrices(s)
		if err != nil {
			return
		}
		for name, pr := range p {
			if name == "" || pr.Input < 0 || pr.CachedInput < 0 || pr.Output < 0 {
				t.Fatalf("ParsePrices(%q) gave %q: %+v", s, name, pr)
			}
		}
	})
}

// TestCharge: a priced call costs its fresh input, cached input and
// output at their prices, and counts its cached input for the budget at
// the cached price's rate; an unpriced one counts every token as one.
func TestCharge(t *testing.T) {
	p := Prices{"gpt-4o-mini": {Input: 0.15, CachedInput: 0.075, Output: 0.6}, "anthropic/claude": {Input: 3, CachedInput: 0.3, Output: 15}}
	u := chat.Usage{Prompt: 1000, CacheRead: 800, Completion: 100}
	got := p.Charge("openai", "gpt-4o-mini", u)
	want := session.Spending{Tokens: 200 + 400 + 100, Input: 1000, CachedInput: 800, Output: 100, Cost: (200*0.15 + 800*0.075 + 100*0.6) / 1e6, Calls: 1}
	if !near(got, want) {
		t.Errorf("priced: %+v, want %+v", got, want)
	}
	if got := p.Charge("anthropic", "claude", u); got.Tokens != 200+80+100 {
		t.Errorf("by provider/model: %+v", got)
	}
	if got := p.Charge("openai", "claude", u); got.Cost != 0 || got.Tokens != 1100 {
		t.Errorf("unpriced: %+v, want every token as one and no cost", got)
	}
	if got := p.Charge("openai", "gpt-4o-mini", chat.Usage{Prompt: 10, CacheRead: 50}); got.CachedInput != 10 || got.Tokens < 0 {
		t.Errorf("a cache read over the prompt is bounded by it: %+v", got)
	}
}

func near(a, b session.Spending) bool {
	d := a.Cost - b.Cost
	a.Cost, b.Cost = 0, 0
	return a == b && d < 1e-12 && d > -1e-12
}

func TestCheck(t *testing.T) {
	at := time.Date(2030, 5, 31, 22, 0, 0, 0, time.UTC)
	p := &Policy{Default: Limits{PerDay: 3000, PerMonth: 50000}, Owners: map[string]Limits{"vip": {PerDay: 0, PerMonth: 100000}}}
	err := p.Check("k1", at, session.Spending{Tokens: 3000}, session.Spending{Tokens: 3000})
	var ex *ExceededError
	if !errors.As(err, &ex) || !errors.Is(err, ErrExceeded) || ex.Limit != LimitDay || ex.Used != 3000 || ex.Max != 3000 || !ex.Resets.Equal(time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("day spent: %v (%+v)", err, ex)
	}
	if !strings.Contains(err.Error(), "TOKENS_PER_OWNER_PER_DAY") || !strings.Contains(err.Error(), "2030-06-01T00:00:00Z") {
		t.Errorf("message %q", err)
	}
	if err := p.Check("", at, session.Spending{Tokens: 3000}, session.Spending{}); err == nil || !strings.Contains(err.Error(), "no API keys") {
		t.Errorf("the anonymous owner's message: %v", err)
	}
	if err := p.Check("k1", at, session.Spending{Tokens: 2999}, session.Spending{Tokens: 2999}); err != nil {
		t.Errorf("under: %v", err)
	}
	err = p.Check("k1", at, session.Spending{Tokens: 10}, session.Spending{Tokens: 60000})
	if !errors.As(err, &ex) || ex.Limit != LimitMonth {
		t.Errorf("month spent: %v", err)
	}
	// A key's own limits: no daily one, a larger monthly one.
	if err := p.Check("vip", at, session.Spending{Tokens: 9999}, session.Spending{Tokens: 60000}); err != nil {
		t.Errorf("vip: %v", err)
	}
	if err := p.Check("vip", at, session.Spending{}, session.Spending{Tokens: 100000}); !errors.As(err, &ex) || ex.Limit != LimitKeyMonth {
		t.Errorf("vip's month: %v", err)
	}
	if (&Policy{}).Bounded() || (*Policy)(nil).Bounded() || !p.Bounded() || !(&Policy{Owners: map[string]Limits{"a": {PerDay: 1}}}).Bounded() {
		t.Error("Bounded")
	}
	r := p.Report("k1", at, session.Spending{Tokens: 5}, session.Spending{Tokens: 7})
	if r.Day.Start != "2030-05-31" || r.Month.Start != "2030-05" || r.Day.Limit != 3000 || r.Day.LimitName != LimitDay || r.Month.Tokens != 7 {
		t.Errorf("report %+v", r)
	}
}
