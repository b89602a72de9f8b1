package door

import (
	"os"
	"strings"
	"testing"

	"github.com/agentdock-go/agentdock/llmorch/provider"
)

// TestRetryCodesAreTheProviders: the codes the server names by their
// value are package provider's.
func TestRetryCodesAreTheProviders(t *testing.T) {
	for _, code := range []string{provider.CodeAuth, provider.CodeInvalidRequest, provider.CodeOutputLimit} {
		if Retryable(code) {
			t.Errorf("%s is retryable", code)
		}
	}
}

// TestRetryDocumented: docs/api.md says, for every code a retry cannot
// cure, that it carries x-should-retry: false.
func TestRetryDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Retrying")
	if !ok {
		t.Fatal("docs/api.md has no section ### Retrying")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for code := range noRetry {
		if !strings.Contains(section, "`"+code+"`") {
			t.Errorf("docs/api.md's Retrying section does not name %s", code)
		}
	}
}
