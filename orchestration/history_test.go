package orchestration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestHistoryAppend(t *testing.T) {
	tests := []struct {
		name  string
		start []string
		add   []string
		limit int
		want  []string
	}{
		{"empty", nil, []string{"a"}, 3, []string{"a"}},
		{"within the limit", []string{"a"}, []string{"b", "c"}, 3, []string{"a", "b", "c"}},
		{"oldest dropped", []string{"a", "b", "c"}, []string{"d"}, 3, []string{"b", "c", "d"}},
		{"limit 1", []string{"a", "b"}, []string{"c", "d"}, 1, []string{"d"}},
		{"a limit below 1 keeps the new entry", []string{"a"}, []string{"b"}, 0, []string{"b"}},
		{"a lowered limit", []string{"a", "b", "c", "d", "e"}, []string{"f"}, 2, []string{"e", "f"}},
		{"many, past several arrays", nil, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19"}, 4, []string{"16", "17", "18", "19"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(tc.start...)
			for _, a := range tc.add {
				h = h.Append(a, tc.limit)
			}
			if !h.Equal(tc.want...) || h.Len() != len(tc.want) || !slices.Equal(slices.Collect(h.All()), tc.want) {
				t.Fatalf("got %v (len %d), want %v", h, h.Len(), tc.want)
			}
			for i, w := range tc.want {
				if h.At(i) != w || !h.Contains(w) {
					t.Fatalf("At(%d) = %q, Contains = %v; want %q", i, h.At(i), h.Contains(w), w)
				}
			}
		})
	}
}

// TestHistoryVersions appends from random earlier versions, as stores,
// failed updates and retries do, and checks every version against a plain
// slice model after every step: no append changes another version.
func TestHistoryVersions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		limit := 1 + r.IntN(12)
		versions := []History{{}}
		model := [][]string{nil}
		for step := range 60 {
			i := r.IntN(len(versions))
			if r.IntN(3) > 0 {
				i = len(versions) - 1 // mostly the newest, the fast path
			}
			name := fmt.Sprintf("t%d", step)
			versions = append(versions, versions[i].Append(name, limit))
			m := append(slices.Clone(model[i]), name)
			model = append(model, m[max(0, len(m)-limit):])
			for k := range versions {
				if !versions[k].Equal(model[k]...) {
					t.Fatalf("round %d step %d (limit %d): version %d is %v, want %v", round, step, limit, k, versions[k], model[k])
				}
			}
		}
	}
}

// TestHistoryConcurrentAppends appends to one version from many goroutines
// (run with -race): one may extend the shared array, the others copy, and
// every result holds its own entry.
func TestHistoryConcurrentAppends(t *testing.T) {
	base := NewHistory("a", "b").Append("c", 100) // room to append in place
	results := make([]History, 16)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = base.Append(fmt.Sprint(i), 100) })
	}
	wg.Wait()
	for i, h := range results {
		if !h.Equal("a", "b", "c", fmt.Sprint(i)) {
			t.Errorf("append %d gave %v", i, h)
		}
	}
	if !base.Equal("a", "b", "c") {
		t.Errorf("the shared version became %v", base)
	}
}

func TestHistoryJSON(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     []string
		wantJSON string
	}{
		{`["a","b"]`, []string{"a", "b"}, `["a","b"]`},
		{`[]`, nil, `[]`},
		{`null`, nil, `[]`},
	} {
		var h History
		if err := json.Unmarshal([]byte(tc.in), &h); err != nil || !h.Equal(tc.want...) {
			t.Fatalf("Unmarshal(%s) = %v, %v", tc.in, h, err)
		}
		b, err := json.Marshal(h)
		if err != nil || string(b) != tc.wantJSON {
			t.Fatalf("Marshal(%v) = %s, %v; want %s", h, b, err, tc.wantJSON)
		}
	}
	var h History
	if err := json.Unmarshal([]byte(`["a",1]`), &h); err == nil {
		t.Fatal("a number in the history was accepted")
	}
	// In a State, the field keeps its name and shape.
	b, _ := json.Marshal(State{RecentlyUsedTools: NewHistory("x").Append("y", 5)})
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || string(raw["recentlyUsedTools"]) != `["x","y"]` {
		t.Fatalf("state JSON %s", b)
	}
	// Decoded histories can be appended to.
	var s State
	if err := json.Unmarshal(b, &s); err != nil || !s.RecentlyUsedTools.Append("z", 2).Equal("y", "z") || !s.RecentlyUsedTools.Equal("x", "y") {
		t.Fatalf("decoded state %+v, %v", s, err)
	}
}

func TestHistoryString(t *testing.T) {
	if got := fmt.Sprint(NewHistory("a", "b")); got != "[a b]" {
		t.Fatalf("got %q", got)
	}
	if got := fmt.Sprintf("%v", History{}); got != "[]" {
		t.Fatalf("got %q", got)
	}
	// NewHistory copies its argument.
	in := []string{"a"}
	h := NewHistory(in...)
	in[0] = "changed"
	if !h.Equal("a") {
		t.Fatalf("NewHistory kept its caller's array: %v", h)
	}
}
