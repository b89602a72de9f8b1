package main

import (
	"strings"
	"testing"
)

// TestSummarize: package lines pass through, a failed test's output is
// printed once it fails, a skipped test gets one line with its reason
// (subtests too), passes stay quiet, and the counts add up.
func TestSummarize(t *testing.T) {
	input := strings.Join([]string{
		`{"Action":"start","Package":"p/a"}`,
		`{"Action":"run","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"run","Package":"p/a","Test":"TestRedis"}`,
		`{"Action":"output","Package":"p/a","Test":"TestRedis","Output":"=== RUN   TestRedis\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"p/a","Test":"TestRedis","Output":"    redis_test.go:12: redis-server is not installed\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestRedis","Output":"--- SKIP: TestRedis (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestRedis"}`,
		`{"Action":"output","Package":"p/a","Test":"TestBad/case","Output":"    bad_test.go:3: got 1, want 2\n"}`,
		`{"Action":"fail","Package":"p/a","Test":"TestBad/case"}`,
		`{"Action":"output","Package":"p/a","Test":"TestSkipped/sub","Output":"--- SKIP: TestSkipped/sub (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestSkipped/sub"}`,
		`{"Action":"output","Package":"p/a","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.01s\n"}`,
		`{"Action":"fail","Package":"p/a"}`,
		`{"Action":"output","Package":"p/b","Output":"?   \tp/b\t[no test files]\n"}`,
		`{"ImportPath":"p/c","Action":"build-output","Output":"# p/c\n"}`,
		`not json from a tool`,
	}, "\n")
	var out strings.Builder
	s, err := summarize(strings.NewReader(input), &out)
	if err != nil {
		t.Fatal(err)
	}
	s.module = "p"
	s.print(&out)
	want := "    bad_test.go:3: got 1, want 2\n" +
		"FAIL\tp/a\t0.01s\n" +
		"?   \tp/b\t[no test files]\n" +
		"# p/c\n" +
		"not json from a tool\n" +
		"\nskipped tests (2):\n" +
		"  ./a TestRedis: redis_test.go:12: redis-server is not installed\n" +
		"  ./a TestSkipped/sub: (no reason given)\n" +
		"\ngo test: 1 passed, 1 failed, 2 skipped\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestModulePath(t *testing.T) {
	if got := modulePath("../../go.mod"); got != "github.com/agentdock-go/agentdock" {
		t.Errorf("modulePath = %q", got)
	}
	if got := modulePath("no-such-go.mod"); got != "" {
		t.Errorf("modulePath of a missing file = %q", got)
	}
}
