package guardrail

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// mustSet compiles specs into a set, failing the test on a problem.
func mustSet(t testing.TB, specs ...Spec) *Set {
	t.Helper()
	gs, problems := Compile("guardrails", specs)
	if problems != nil {
		t.Fatalf("Compile: %v", problems)
	}
	return NewSet(gs)
}

// streamed is what a Stream let through, end to end.
type streamed struct {
	text    string
	hits    []Hit
	blocked *Hit
}

// streamChunks writes chunks to a stream of set and flushes it.
func streamChunks(set *Set, judge Judge, chunks []string) streamed {
	st := set.Stream(context.Background(), judge)
	var out streamed
	var b strings.Builder
	take := func(r Release) {
		b.WriteString(r.Text)
		out.hits = append(out.hits, r.Hits...)
		if r.Blocked != nil {
			h := *r.Blocked
			out.blocked = &h
		}
	}
	for _, c := range chunks {
		take(st.Write(c))
	}
	take(st.Flush())
	out.text = b.String()
	slices.SortStableFunc(out.hits, func(a, b Hit) int { return a.At - b.At })
	return out
}

// splits returns text split in two at every byte offset, and in one-byte
// chunks.
func splits(text string) [][]string {
	var out [][]string
	for k := 0; k <= len(text); k++ {
		out = append(out, []string{text[:k], text[k:]})
	}
	var bytes []string
	for i := range len(text) {
		bytes = append(bytes, text[i:i+1])
	}
	return append(out, bytes)
}

// sameStream compares two streams' outputs.
func sameStream(t testing.TB, what string, got, want streamed) {
	t.Helper()
	if got.text != want.text {
		t.Fatalf("%s: text\n got %q\nwant %q", what, got.text, want.text)
	}
	if !slices.Equal(got.hits, want.hits) {
		t.Fatalf("%s: hits\n got %+v\nwant %+v", what, got.hits, want.hits)
	}
	if (got.blocked == nil) != (want.blocked == nil) || got.blocked != nil && *got.blocked != *want.blocked {
		t.Fatalf("%s: blocked %+v, want %+v", what, got.blocked, want.blocked)
	}
}

// checkEverySplit checks that text streamed in any split gives what it
// gives whole, and that the whole gives want.
func checkEverySplit(t *testing.T, set *Set, judge Judge, text, want string) {
	t.Helper()
	whole := streamChunks(set, judge, []string{text})
	if whole.text != want {
		t.Fatalf("%q: streamed whole\n got %q\nwant %q", text, whole.text, want)
	}
	for _, chunks := range splits(text) {
		sameStream(t, strings.Join(chunks, "|"), streamChunks(set, judge, chunks), whole)
	}
}
