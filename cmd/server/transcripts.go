package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/agentdock-go/agentdock/transcript"
)

const testUsage = `usage: agentdock test [-q] PATH...

Plays template transcripts through the runtime's turn loop (the agent, the
orchestration, the built-in tools, a memory store) with the model's answers
written out in each transcript, and checks what the runtime did: the tools
offered at each model call, the refused calls, the active step, the sequence
position, the tool history and the finish reason. A PATH is a transcript file,
or a directory whose tests folders' *.json files are run (templates/ runs
templates/*/tests/*.json). See docs/testing.md.

Exit status: 0 when every expectation holds, 1 on a mismatch (the turn, the
model call, expected and got are printed), 2 when a transcript or its template
cannot be read.

flags:
`

// runTest is the test subcommand.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.Bool("q", false, "print only failing transcripts")
	fs.Usage = func() {
		fmt.Fprint(stderr, testUsage)
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	files, err := transcript.Files(fs.Args()...)
	if err != nil {
		fmt.Fprintln(stderr, "agentdock test:", err)
		return 2
	}
	return runFiles(files, *quiet, stdout, func(file string) (*transcript.Report, error) { return testOne(ctx, file) })
}

// report is what playing one file says: a transcript's or a scenario's.
type report interface {
	Failed() bool
	Print(w io.Writer)
}

// runFiles plays the files one after another, prints their reports (with
// quiet, the failing ones only) and a count, and returns the exit status
// of test and simulate: 0 when every expectation holds, 1 on a mismatch,
// 2 when a file cannot be played.
func runFiles[R report](files []string, quiet bool, stdout io.Writer, play func(file string) (R, error)) int {
	code, passed, failed := 0, 0, 0
	for _, file := range files {
		rep, err := play(file)
		if err != nil {
			fmt.Fprintf(stdout, "ERROR %v\n", err)
			code = 2
			continue
		}
		if rep.Failed() {
			failed++
			code = max(code, 1)
		} else {
			passed++
		}
		if !quiet || rep.Failed() {
			rep.Print(stdout)
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	return code
}

func testOne(ctx context.Context, file string) (*transcript.Report, error) {
	tr, err := transcript.Load(file)
	if err != nil {
		return nil, err
	}
	return transcript.Run(ctx, tr)
}
