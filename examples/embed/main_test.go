package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The program is its own example: go test runs main, the MCP server
// included (go run …/examples/embed/guide), and checks what it prints.
func Example() {
	main()
	// Output:
	// [weather: sunny in Paris]
	// [packing: sunglasses and a light jacket]
	// [guide__sights: the old town, the river and the market of Paris]
	// ## Plan a day in Paris
	//
	// *This answer comes from the offline demo model: no model provider is configured, so instead of writing its own analysis it brings together the tool results of this turn.*
	//
	// **Mode:** Plan (weather → packing → guide__sights)
	//
	// ### 1. Weather
	//
	// > sunny in Paris
	//
	// ### 2. Packing
	//
	// > sunglasses and a light jacket
	//
	// ### 3. Guide__sights
	//
	// > the old town, the river and the market of Paris
	//
	// ### Conclusion
	//
	// On **Plan a day in Paris**, the weather step added its result, the packing step added its result and the guide__sights step added its result. Taken together, these results give a structured view of the question; a configured model provider would weigh them against each other in a real synthesis.
}

// templateEnv makes the test binary run main on another template: the
// program's own start, in a process of its own, as log.Fatal ends it.
const templateEnv = "EMBED_TEMPLATE"

func TestMain(m *testing.M) {
	if f := os.Getenv(templateEnv); f != "" {
		templates, file = os.DirFS(filepath.Dir(f)), filepath.Base(f)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMisspeltToolFailsAtStart runs the program on copies of its template
// with one tool name misspelt, a Go tool's and an MCP tool's: each stops
// the program before any turn, naming the node.
func TestMisspeltToolFailsAtStart(t *testing.T) {
	data, err := os.ReadFile("travel.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, from, to, want string }{
		{"go tool", `"weather"`, `"weathr"`, `travel.json: nodes[1]: tool "weathr" is not provided (provided: packing, weather); check its spelling`},
		{"mcp tool", `"guide__sights"`, `"guide__sight"`, `nodes: "guide__sight": MCP server "guide" does not list this tool (it lists guide__sights); check its spelling`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			misspelt := strings.ReplaceAll(string(data), tt.from, tt.to)
			if misspelt == string(data) {
				t.Fatal("the template does not have", tt.from)
			}
			f := filepath.Join(t.TempDir(), "travel.json")
			if err := os.WriteFile(f, []byte(misspelt), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), templateEnv+"="+f)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the program ran with a misspelt tool:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("the program's error does not say %q:\n%s", tt.want, out)
			}
			if strings.Contains(string(out), "Plan a day") {
				t.Errorf("a turn ran:\n%s", out)
			}
		})
	}
}
