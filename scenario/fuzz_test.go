package scenario

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentdock-go/agentdock/template"
)

// FuzzParse feeds arbitrary bytes to the scenario parser; it must never
// panic, and everything it accepts must have one kind per event.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.json")
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"name":"x","tools":["a"],"events":[{"usage":{"prompt":1},"expect":{"activeStep":null}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse("fuzz.json", data)
		if err != nil {
			return
		}
		for _, ev := range sc.Events {
			n := 0
			for _, set := range []bool{ev.User != nil, ev.Tool != nil, ev.Answer != nil, ev.Usage != nil} {
				if set {
					n++
				}
			}
			if n != 1 || ev.Answer != nil && len(ev.Answer) == 0 {
				t.Fatal("accepted an event without exactly one kind")
			}
		}
		_, _ = sc.Engine(template.Config{})
	})
}
