package guardrail

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchAnswer is a model's answer as it streams: about 4 KB of markdown
// prose with a table, code, numbers and a few things the built-in checks
// find, cut into chunks of 1 to 8 bytes as a tokenizer would.
func benchAnswer() []string {
	para := "## Findings\n\nThe heat pump kept the house at 21 °C through January, using 3.2 kWh per day on average " +
		"(see the table). Contact the installer at service@example.com or +44 20 7946 0958 if the defrost cycle " +
		"runs more than twice an hour. Payment went through on card 4111 1111 1111 1111, reference INV-2024-0117.\n\n" +
		"| month | kWh | cost |\n|---|---|---|\n| Jan | 99 | €31.40 |\n| Feb | 87 | €27.10 |\n\n" +
		"```go\nfor _, r := range readings {\n\ttotal += r.KWh\n}\n```\n\n" +
		"Überraschend: die Wärmepumpe lief auch bei −15 °C effizient. In short, it works; the 2019 model did not.\n\n"
	text := strings.Repeat(para, 6)
	var chunks []string
	for i, n := 0, 0; i < len(text); n++ {
		size := 1 + (n*7)%8
		chunks = append(chunks, text[i:min(i+size, len(text))])
		i += size
	}
	return chunks
}

// builtins are every built-in check at once, as a demanding template
// would declare them on output.
func builtins(tb testing.TB) *Set { return mustSet(tb, builtinSpecs()...) }

func builtinSpecs() []Spec {
	return []Spec{
		{Name: "pii", On: Stages{Output}, Check: CheckPII, Action: Redact},
		{Name: "secrets", On: Stages{Output}, Check: CheckSecrets, Action: Redact},
		{Name: "deny", On: Stages{Output}, Check: CheckDeny, Action: Redact, Words: []string{
			"forbidden fruit", "confidential", "internal only", "do not share", "password", "ΟΔΟΣ", "café", "secret sauce",
			"project falcon", "layoffs", "acquisition", "merger", "lawsuit", "salary", "bonus", "ssn", "passport", "visa", "diagnosis", "hiv"}},
		{Name: "injection", On: Stages{Output}, Check: CheckRegex, Pattern: `(?i)ignore (all )?previous instructions`, Action: Block},
		{Name: "length", On: Stages{Output}, Check: CheckMaxLength, MaxLength: 100000, Action: Redact},
	}
}

// BenchmarkStream measures the built-in checks per streamed chunk, each
// check alone and all at once: each Write is timed alone, so that the p50
// and p99 per chunk are reported beside the mean. "none" is the same
// stream without guardrails: what the turn does with a chunk then
// (nothing but pass it on).
func BenchmarkStream(b *testing.B) {
	chunks := benchAnswer()
	specs := builtinSpecs()
	cases := []struct {
		name string
		set  *Set
	}{{"none", nil}}
	for _, s := range specs {
		cases = append(cases, struct {
			name string
			set  *Set
		}{s.Name, mustSet(b, s)})
	}
	cases = append(cases, struct {
		name string
		set  *Set
	}{"builtins", builtins(b)})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			per := make([]time.Duration, 0, len(chunks))
			var sink int
			for b.Loop() {
				st := tc.set.Stream(context.Background(), nil)
				for _, c := range chunks {
					start := time.Now()
					if st != nil {
						sink += len(st.Write(c).Text)
					} else {
						sink += len(c)
					}
					per = append(per, time.Since(start))
				}
				if st != nil {
					st.Flush()
				}
			}
			slices.Sort(per)
			b.ReportMetric(float64(per[len(per)/2].Nanoseconds()), "ns-p50/chunk")
			b.ReportMetric(float64(per[len(per)*99/100].Nanoseconds()), "ns-p99/chunk")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(chunks)), "ns/chunk")
			_ = sink
		})
	}
}

// BenchmarkStreamAdversarial streams texts made to be slow for the
// scanners (long runs of what a match is made of, candidates that almost
// match), 4 KB each in 5-byte chunks: the cost per chunk stays bounded by
// the window, not by the text.
func BenchmarkStreamAdversarial(b *testing.B) {
	set := mustSet(b,
		Spec{Name: "pii", On: Stages{Output}, Check: CheckPII, Action: Redact},
		Spec{Name: "secrets", On: Stages{Output}, Check: CheckSecrets, Action: Redact},
	)
	for _, tc := range []struct{ name, unit string }{
		{"digits", "1"}, {"spaced-digits", "1 "}, {"letters", "a"}, {"at-signs", "a@"}, {"dots", "1."},
		{"colons", "a:"}, {"pem-headers", "-----BEGIN PRIVATE KEY-----"}, {"jwt-heads", "eyJ"}, {"assignments", "password="},
		{"upper-digits", "AB12"}, {"parens", "(1) "},
	} {
		text := strings.Repeat(tc.unit, 4096/len(tc.unit))
		b.Run(tc.name, func(b *testing.B) {
			chunks := 0
			for b.Loop() {
				st := set.Stream(context.Background(), nil)
				for i := 0; i < len(text); i += 5 {
					st.Write(text[i:min(i+5, len(text))])
					chunks++
				}
				st.Flush()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
		})
	}
}
