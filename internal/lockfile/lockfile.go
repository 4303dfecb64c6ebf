// Package lockfile holds an exclusive lock on a file for as long as a
// process runs: the lock dies with the process (flock), so a kill -9 leaves
// nothing to clean up, and the file says who holds it.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// ErrHeld says another process holds the lock.
var ErrHeld = errors.New("held by another process")

// Lock is a held lock.
type Lock struct{ f *os.File }

// Take locks path (created 0600), or returns an error wrapping ErrHeld that
// says who holds it.
func Take(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("lock %s: %w (%s)", path, ErrHeld, strings.TrimSpace(string(holder)))
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	fmt.Fprintf(f, "pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	return &Lock{f: f}, nil
}

// Release gives the lock up.
func (l *Lock) Release() error { return l.f.Close() }
