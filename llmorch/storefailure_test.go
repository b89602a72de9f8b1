package llmorch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/session"
)

// TestStoreFailureMessage: a store failure says what is saved for sure,
// and, when the last write's fate is unknown, that it may be saved too:
// never that nothing is saved when everything may be.
func TestStoreFailureMessage(t *testing.T) {
	down := fmt.Errorf("saving: %w", session.ErrUnavailable)
	maybe := fmt.Errorf("saving: %w: %w", session.ErrUnavailable, session.ErrMaybeApplied)
	for _, tc := range []struct {
		name      string
		f         storeFailure
		want, not []string
	}{
		{"nothing written", storeFailure{err: down}, []string{"your message is saved, but none of this answer"}, []string{"may"}},
		{"two steps written", storeFailure{saved: 2, err: down}, []string{"first 2 step(s) of this answer are saved, but not the rest"}, []string{"may"}},
		{"the only step's write unknown", storeFailure{err: maybe}, []string{"your message is saved;", "may be saved too", "rest of this answer", "read the session"}, []string{"none of this answer"}},
		{"a later step's write unknown", storeFailure{saved: 1, tool: true, err: maybe}, []string{"first 1 step(s)", "a tool of that step ran", "may be saved too"}, []string{"not the rest"}},
	} {
		msg := tc.f.message()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", tc.name, msg, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(msg, n) {
				t.Errorf("%s: %q says %q", tc.name, msg, n)
			}
		}
	}
}
