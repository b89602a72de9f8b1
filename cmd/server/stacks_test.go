//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestServeRunsWithSmallStacks: serve runs with adaptivestackstart=0 in
// GODEBUG (stacks_unix.go says why), keeps what GODEBUG said before, and
// leaves an operator's own adaptivestackstart alone. Read from the running
// process's environment (/proc), the one the Go runtime started with.
func TestServeRunsWithSmallStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{name: "unset", args: []string{"serve"}, want: "adaptivestackstart=0"},
		{name: "default command", args: nil, want: "adaptivestackstart=0"},
		{name: "kept", env: []string{"GODEBUG=http2client=0"}, args: []string{"serve"}, want: "http2client=0,adaptivestackstart=0"},
		{name: "operator's", env: []string{"GODEBUG=adaptivestackstart=1"}, args: []string{"serve"}, want: "adaptivestackstart=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			cmd := exec.Command(bin, tc.args...)
			// exec keeps the last of a variable's entries: the machine's
			// environment first, the test's after it.
			env := withoutVar(os.Environ(), "GODEBUG")
			cmd.Env = append(append(env, offlineServe(addr)...), tc.env...)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			waitHealthy(t, "http://"+addr, func() error {
				select {
				case err := <-exited:
					exited <- err
					return fmt.Errorf("exited: %v\n%s", err, stderr.String())
				default:
					return nil
				}
			})
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for kv := range bytes.SplitSeq(environ, []byte{0}) {
				if v, ok := strings.CutPrefix(string(kv), "GODEBUG="); ok {
					got = append(got, v)
				}
			}
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("GODEBUG of the server process = %q, want [%q]", got, tc.want)
			}
			if !strings.Contains(stderr.String(), `"GODEBUG":"`+tc.want+`"`) {
				t.Errorf("the configuration record does not show GODEBUG=%s:\n%s", tc.want, stderr.String())
			}
		})
	}
}
