package mcp

import "syscall"

// setDeathSignal asks Linux to kill a stdio server when the runtime dies
// without closing it (SIGKILL, a crash): the last line of defence against
// orphans, after Manager.Close.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
