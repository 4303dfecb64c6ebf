package collector

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/filewake"
	"github.com/hitcount/hitcount/sink"
)

// guard only keeps a broken wait from hanging a test until go test's timeout;
// no test here says how fast anything is (bench/latency does).
const guard = 30 * time.Second

// lineStore acknowledges every insert at once and counts the lines.
type lineStore struct {
	mu    sync.Mutex
	lines int
	more  chan struct{}
}

func newLineStore() *lineStore { return &lineStore{more: make(chan struct{}, 1)} }

func (s *lineStore) Insert(_ context.Context, b *sink.Batch) error {
	s.mu.Lock()
	s.lines += b.Lines
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
	return nil
}

func (s *lineStore) waitLines(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(guard)
	for {
		s.mu.Lock()
		got := s.lines
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("%d of %d lines shipped", got, n)
		}
	}
}

func (s *lineStore) Settle(context.Context, uint64) (int64, bool, error) { return 0, false, nil }
func (s *lineStore) Committed(context.Context) (sink.Progress, error) {
	return sink.Progress{Offsets: map[uint64]int64{}, Sites: map[string]bool{}}, nil
}
func (s *lineStore) Holds(context.Context, uint64, sink.Span) (sink.Held, error) {
	return sink.Held{}, nil
}
func (s *lineStore) MarkProgress(context.Context, string, uint64, int64) error  { return nil }
func (s *lineStore) RecordSource(context.Context, string, uint64, string) error { return nil }
func (s *lineStore) Deduplicates() bool                                         { return true }
func (s *lineStore) ClaimSources(context.Context, sink.Claim) (time.Time, []sink.Owner, error) {
	return time.Now(), nil, nil
}

var testLine = `192.0.2.1 - - [22/Nov/2026:10:00:00 +0000] "GET /%d HTTP/1.1" 200 512 "-" "curl/8.5.0"` + "\n"

func appendLines(t *testing.T, path string, from, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range n {
		if _, err := fmt.Fprintf(f, testLine, from+i); err != nil {
			t.Fatal(err)
		}
	}
}

// startWith runs a collector on dir/*.log with watcher w (nil: Run makes its
// own unless PollOnly) and returns its stop.
func startWith(t *testing.T, ins Inserter, dir string, w fileWatcher, tune func(*Options)) (stop func()) {
	t.Helper()
	opts := Options{
		Sources:    []Source{{Glob: filepath.Join(dir, "*.log"), Site: "www", Format: "combined"}},
		BatchDelay: 10 * time.Millisecond, Scan: 20 * time.Millisecond, Poll: time.Hour,
	}
	if tune != nil {
		tune(&opts)
	}
	c, err := New(ins, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.watcher = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// An idle file is read when it grows, not at its next poll: with an hour's
// Poll, only the watch can wake it.
func TestWatchWakesIdleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	appendLines(t, path, 0, 2)
	st := newLineStore()
	startWith(t, st, dir, nil, nil)
	st.waitLines(t, 2)
	for i := 1; i <= 3; i++ {
		appendLines(t, path, 1+i, 1)
		st.waitLines(t, 2+i)
	}
}

// deafWatcher watches every file and never tells of a change.
type deafWatcher struct{}

func (*deafWatcher) Watch(*os.File) (<-chan struct{}, func(), error) {
	return make(chan struct{}), func() {}, nil
}

// A change the watch misses (NFS, a full queue) waits for the poll: the
// file is still read.
func TestPollBacksUpTheWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	appendLines(t, path, 0, 2)
	st := newLineStore()
	startWith(t, st, dir, &deafWatcher{}, func(o *Options) { o.Poll = 20 * time.Millisecond })
	st.waitLines(t, 2)
	appendLines(t, path, 2, 1)
	st.waitLines(t, 3)
}

// countingWatcher is a real watcher that counts the watches not stopped.
type countingWatcher struct {
	w      *filewake.Watcher
	mu     sync.Mutex
	active int
}

func (c *countingWatcher) Watch(f *os.File) (<-chan struct{}, func(), error) {
	ch, stop, err := c.w.Watch(f)
	if err != nil {
		return ch, stop, err
	}
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			stop()
			c.mu.Lock()
			c.active--
			c.mu.Unlock()
		})
	}, nil
}

func (c *countingWatcher) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// A finished file's watch is stopped, and a stopped collector leaves none,
// nor any goroutine.
func TestWatchesEndWithTheirFiles(t *testing.T) {
	before := runtime.NumGoroutine()
	fw, err := filewake.New()
	if err != nil {
		t.Fatal(err)
	}
	cw := &countingWatcher{w: fw}
	dir := t.TempDir()
	for i := range 3 {
		appendLines(t, filepath.Join(dir, fmt.Sprintf("%d.log", i)), 100*i, 2) // distinct lines: distinct files
	}
	st := newLineStore()
	stop := startWith(t, st, dir, cw, func(o *Options) {
		o.Poll = 20 * time.Millisecond
		o.RotatedIdle = 50 * time.Millisecond
	})
	st.waitLines(t, 6)
	waitFor(t, "3 files watched", func() bool { return cw.count() == 3 })
	// Moved out of the glob's reach: finished once idle for RotatedIdle.
	if err := os.Rename(filepath.Join(dir, "0.log"), filepath.Join(dir, "0.old")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the moved file's watch stopped", func() bool { return cw.count() == 2 })
	stop()
	if n := cw.count(); n != 0 {
		t.Fatalf("%d watches left after the collector stopped", n)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	// And Run's own watcher (no watcher given) is closed when Run returns.
	stop = startWith(t, st, dir, nil, func(o *Options) { o.Poll = 20 * time.Millisecond })
	appendLines(t, filepath.Join(dir, "1.log"), 102, 1)
	st.waitLines(t, 7)
	stop()
	waitFor(t, "no goroutine left", func() bool { return runtime.NumGoroutine() <= before })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !ok() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("not %s after %s; goroutines:\n%s", what, guard, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
