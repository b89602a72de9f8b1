package provider

import (
	"regexp"
	_ "unsafe" // go:linkname, below

	"github.com/tmc/langchaingo/llms/openai"
)

// langchaingo v0.1.14's openai.GenerateContent decides whether the model
// takes system messages from the table modelCapabilities, matching each
// pattern with regexp.MatchString: three regular expressions compiled on
// every model call, about 12 µs and 14 KiB of garbage in 184 allocations
// (BenchmarkModelCapabilities), the largest single cost of starting a
// model call and a fifth of the garbage a waiting stream leaves behind.
// Whether a model takes system messages depends only on its name, which
// is fixed per model here, so this package decides it once, in newModel,
// with the table compiled once, and empties langchaingo's table: its
// GenerateContent then finds no pattern and keeps system messages as they
// are, and convert folds them into the first user message itself for the
// models that take none, as langchaingo would.
//
// The table is langchaingo's own variable, reached by go:linkname: it is
// unexported and the package has no option for this. Emptying it is a
// process-wide change: a program that also calls langchaingo's openai
// package directly, with an o1 or o3 model, no longer gets its system
// messages folded by langchaingo. TestLangchaingoCapabilityTable pins the
// table this code was written against, so that an upgrade that changes it
// fails there first.
//
//go:linkname langchaingoCapabilities github.com/tmc/langchaingo/llms/openai.modelCapabilities
var langchaingoCapabilities []openai.ModelCapability

// capability is one of langchaingo's model patterns, compiled.
type capability struct {
	pattern *regexp.Regexp
	system  bool
}

// capabilities is langchaingo's table as it was, compiled once.
var capabilities = takeCapabilities()

func takeCapabilities() []capability {
	out := make([]capability, len(langchaingoCapabilities))
	for i, c := range langchaingoCapabilities {
		out[i] = capability{pattern: regexp.MustCompile(c.Pattern), system: c.SupportsSystem}
	}
	langchaingoCapabilities = nil
	return out
}

// takesSystem reports whether an OpenAI-wire model takes system messages:
// the first of langchaingo's patterns that matches its name decides, and a
// model none matches takes them (langchaingo's default).
func takesSystem(model string) bool {
	for _, c := range capabilities {
		if c.pattern.MatchString(model) {
			return c.system
		}
	}
	return true
}
