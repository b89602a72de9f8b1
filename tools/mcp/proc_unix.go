//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
	"time"
)

// setProcAttr puts a stdio server in a process group of its own, so that
// closing it can end the processes it started (npx runs the server as its
// child), and so that a Ctrl-C in the runtime's terminal reaches the runtime
// only, which then closes its servers in order.
func setProcAttr(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
}

// killGroup sends SIGKILL to every process left in the group.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// waitGroupGone waits up to d for the group to have no process left.
func waitGroupGone(pgid int, d time.Duration) {
	for deadline := time.Now().Add(d); syscall.Kill(-pgid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}
