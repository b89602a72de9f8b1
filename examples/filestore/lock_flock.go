//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package filestore

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on the file at path, creating it. The
// lock belongs to the open file, so a second Open in the same process is
// refused too, and the kernel drops it when the process exits, so a crash
// never leaves the directory locked. The file stays: removing it would let
// a newcomer lock a fresh file while another store still holds the old one.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, err
	}
	return f, nil
}
