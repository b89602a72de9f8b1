//go:build !unix

package mcp

import (
	"os/exec"
	"time"
)

func setProcAttr(*exec.Cmd) {}

func killGroup(int) {}

func waitGroupGone(int, time.Duration) {}
