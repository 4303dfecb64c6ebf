package filewake

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// guard only keeps a broken watch from hanging the test until go test's
// timeout: nothing here is a statement about how fast a wake comes.
const guard = 30 * time.Second

func open(t *testing.T, path string) (r, w *os.File) {
	t.Helper()
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, w
}

func appendLine(t *testing.T, w *os.File) {
	t.Helper()
	if _, err := w.WriteString("a line\n"); err != nil {
		t.Fatal(err)
	}
}

func waitWake(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(guard):
		t.Fatalf("no wake after %s", what)
	}
}

// drain takes a pending wake, if any.
func drain(c <-chan struct{}) {
	select {
	case <-c:
	default:
	}
}

// barrier returns once the watcher has handled every event the kernel queued
// before it: events are handled in order, so it appends to a file of its own
// and waits for that wake. After it, a wake not pending was not sent.
func barrier(t *testing.T, w *Watcher, dir string) {
	t.Helper()
	r, f := open(t, filepath.Join(dir, "barrier"))
	c, stop, err := w.Watch(r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	appendLine(t, f)
	waitWake(t, c, "appending to the barrier file")
}

func newWatcher(t *testing.T) *Watcher {
	t.Helper()
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestWakeOnAppend(t *testing.T) {
	w := newWatcher(t)
	r, f := open(t, filepath.Join(t.TempDir(), "access.log"))
	c, stop, err := w.Watch(r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for i := range 3 {
		appendLine(t, f)
		waitWake(t, c, "an append")
		if i == 0 {
			// Many changes before the reader looks leave one wake.
			appendLine(t, f)
			appendLine(t, f)
			barrier(t, w, t.TempDir())
			waitWake(t, c, "appends")
			drain(c)
		}
	}
}

// The watch is on the open file, not its path: renamed (rotation) or
// unlinked, it still wakes its reader; a new file at the path does not.
func TestWatchFollowsTheOpenFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the watch follows the descriptor through /proc/self/fd on Linux only")
	}
	w := newWatcher(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	r, f := open(t, path)
	c, stop, err := w.Watch(r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	barrier(t, w, dir)
	drain(c) // the rename itself
	appendLine(t, f)
	waitWake(t, c, "an append to the renamed file")

	_, newer := open(t, path)
	appendLine(t, newer)
	barrier(t, w, dir)
	select {
	case <-c:
		t.Fatal("woken by a new file at the old path")
	default:
	}

	if err := os.Remove(path + ".1"); err != nil {
		t.Fatal(err)
	}
	barrier(t, w, dir)
	drain(c)
	appendLine(t, f)
	waitWake(t, c, "an append to the unlinked file")
}

func TestStop(t *testing.T) {
	w := newWatcher(t)
	dir := t.TempDir()
	r, f := open(t, filepath.Join(dir, "access.log"))
	c, stop, err := w.Watch(r)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // twice is fine
	appendLine(t, f)
	barrier(t, w, dir)
	select {
	case <-c:
		t.Fatal("woken after stop")
	default:
	}
	w.mu.Lock()
	n := len(w.files)
	w.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d watches left after stop", n)
	}
	// The same descriptor can be watched again.
	c, stop, err = w.Watch(r)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	appendLine(t, f)
	waitWake(t, c, "an append once watched again")
}

// Close ends the watcher's goroutines, whatever is still watched; Watch then
// fails, and a stop after Close does nothing.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var stops []func()
	for _, name := range []string{"a.log", "b.log", "c.log"} {
		r, f := open(t, filepath.Join(dir, name))
		c, stop, err := w.Watch(r)
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
		appendLine(t, f)
		waitWake(t, c, "an append")
	}
	stops[0]()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, stop := range stops[1:] {
		stop()
	}
	r, _ := open(t, filepath.Join(dir, "d.log"))
	if _, _, err := w.Watch(r); err != ErrClosed {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
	deadline := time.Now().Add(guard)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
