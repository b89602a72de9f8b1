//go:build !unix

package main

// withSmallStacks does nothing where a process cannot execute itself
// again (stacks_unix.go says what it does elsewhere).
func withSmallStacks() {}
