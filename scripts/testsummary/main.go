// Command testsummary runs `go test -json` with its arguments and prints
// what a person reading `make test` needs: each package's result line as
// `go test` prints it, the whole output of every failed test, one line per
// skipped test with its reason, and a closing count. Without -v, `go test`
// says nothing of a skipped test, so a machine without redis-server
// "passed" the Redis tests silently; with -v, the log drowns in passes.
//
//	go run ./scripts/testsummary [go test flags] [packages]
//
// It exits with go test's status.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

func main() {
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	sum, rerr := summarize(out, os.Stdout)
	sum.module = modulePath("go.mod")
	err = cmd.Wait()
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "testsummary: reading go test's output:", rerr)
	}
	sum.print(os.Stdout)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	case rerr != nil || sum.failed > 0:
		os.Exit(1)
	}
}

// event is one line of test2json's output (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// summary is what is printed at the end.
type summary struct {
	passed, failed int
	skips          []string
	// module is the module's path, left out of the skips' package names.
	module string
}

// modulePath reads the module's path from a go.mod ("" when unreadable).
func modulePath(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

func (s *summary) print(w io.Writer) {
	if len(s.skips) > 0 {
		fmt.Fprintf(w, "\nskipped tests (%d):\n", len(s.skips))
		for _, l := range s.skips {
			if s.module != "" {
				if rest, ok := strings.CutPrefix(l, s.module); ok {
					l = "." + rest
				}
			}
			fmt.Fprintln(w, "  "+l)
		}
	}
	fmt.Fprintf(w, "\ngo test: %d passed, %d failed, %d skipped\n", s.passed, s.failed, len(s.skips))
}

// summarize reads test2json events from r and writes to w, as they come,
// the package lines and build output, and each failed test's output once
// it failed. A skipped test's reason is the output it logged, without the
// runner's own "=== RUN" and "--- SKIP" lines.
func summarize(r io.Reader, w io.Writer) (*summary, error) {
	s := &summary{}
	outputs := map[string][]string{} // by package and test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Not an event (a tool's own line): pass it on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "build-output":
			fmt.Fprint(w, ev.Output)
		case "output":
			if ev.Test == "" {
				// The package's own lines: its result, a panic outside a
				// test, a failure to start.
				if !strings.HasPrefix(ev.Output, "PASS\n") && !strings.HasPrefix(ev.Output, "FAIL\n") {
					fmt.Fprint(w, ev.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], ev.Output)
		case "pass":
			if ev.Test != "" {
				s.passed++
				delete(outputs, key)
			}
		case "fail":
			if ev.Test != "" {
				s.failed++
				fmt.Fprint(w, strings.Join(outputs[key], ""))
				delete(outputs, key)
			}
		case "skip":
			if ev.Test != "" {
				s.skips = append(s.skips, ev.Package+" "+ev.Test+": "+reason(outputs[key]))
				delete(outputs, key)
			}
		}
	}
	return s, sc.Err()
}

// reason is a skipped test's logged lines, joined on one line.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}
