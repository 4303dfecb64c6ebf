package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// One holder at a time, across processes; the file says who; the lock dies
// with its holder.
func TestOneHolder(t *testing.T) {
	if os.Getenv("LOCKFILE_CHILD") != "" {
		if _, err := Take(os.Getenv("LOCKFILE_CHILD")); err != nil {
			os.Stdout.WriteString(err.Error())
			os.Exit(3)
		}
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Take(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(path); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("second take in the same process: %v, want ErrHeld naming the holder", err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestOneHolder$")
	child.Env = append(os.Environ(), "LOCKFILE_CHILD="+path)
	out, err := child.Output()
	if code := child.ProcessState.ExitCode(); code != 3 || !strings.Contains(string(out), "held by another process") {
		t.Errorf("another process took the lock: exit %d, %q, %v", code, out, err)
	}
	l.Release()
	child = exec.Command(os.Args[0], "-test.run=^TestOneHolder$")
	child.Env = append(os.Environ(), "LOCKFILE_CHILD="+path)
	if err := child.Run(); err != nil {
		t.Errorf("after release, another process could not take it: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode: %v %v", fi.Mode(), err)
	}
}
