//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
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
