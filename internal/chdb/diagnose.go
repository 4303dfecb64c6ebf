package chdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// connectFailure explains a NULL from chdb_connect. The engine reports its reason
// only on stderr, so ask the file system instead: the engine flocks
// <dir>/status for as long as it serves dir.
func connectFailure(dataPath string) error {
	if locked, note := statusLocked(dataPath); locked {
		return fmt.Errorf("%w: %s%s", ErrDataDirLocked, dataPath, note)
	}
	if other := openDataDirInProcess(dataPath); other != "" {
		return fmt.Errorf("%w: %s is open, %s was asked for; close every Engine on it first",
			ErrOtherDataDirOpen, other, dataPath)
	}
	return errors.New("chdb_connect failed; the engine printed its reason on stderr")
}

// statusLocked reports whether someone holds the flock on dir/status. A flock
// belongs to an open file description, so this conflicts even with a lock
// held by this same process.
func statusLocked(dir string) (bool, string) {
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		return false, ""
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false, ""
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return false, ""
	}
	return true, " (another chDB holds " + f.Name() + ")"
}

// openDataDirInProcess finds a data directory this process has the engine open
// on, other than dir, from the locked status file the engine keeps open.
// Linux only; "" when unknown.
func openDataDirInProcess(dir string) string {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return ""
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || filepath.Base(target) != "status" || !strings.HasPrefix(target, "/") {
			continue
		}
		other := filepath.Dir(target)
		if other == dir {
			continue
		}
		if locked, _ := statusLocked(other); locked {
			return other
		}
	}
	return ""
}

// heldInProcess reports whether this process has the engine open on dir:
// its status file is among this process's open files (a second Open on the
// same directory in one process shares the engine). Linux only; false when
// unknown, which costs only the engine's own message on a refusal.
func heldInProcess(dir string) bool {
	status := filepath.Join(dir, "status")
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == status {
			return true
		}
	}
	return false
}
