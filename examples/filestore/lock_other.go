//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package filestore

import (
	"errors"
	"os"
	"runtime"
)

// lockDir is not written for this system: without a lock that the system
// drops when the process dies, one process per directory cannot be ensured.
func lockDir(string) (*os.File, error) {
	return nil, errors.New("locking a directory is not implemented on " + runtime.GOOS + " (the store needs flock)")
}
