//go:build !linux

package mcp

import (
	"os"
	"os/exec"
)

// supervised has no supervisor to give outside Linux, which alone lets a
// process become the reaper of its descendants: the server runs in a
// process group of its own, which Close kills (setProcAttr, killGroup).
func supervised(*exec.Cmd) (*exec.Cmd, *os.File, *os.File, error) {
	return nil, nil, nil, errNoSupervisor
}
