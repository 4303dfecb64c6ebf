package collector_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Child mode: the kill test runs the collector in a re-executed copy of this
// test binary so it can SIGKILL it, exactly as an operator's kill -9 would.
func TestMain(m *testing.M) {
	if os.Getenv("HITCOUNT_CHILD_COLLECTOR") != "" {
		os.Exit(childCollector())
	}
	os.Exit(m.Run())
}

func childCollector() int {
	collector.ApplyMemoryLimit()
	ctx := context.Background()
	d := testenv.DatabaseFromEnv()
	s, err := d.OpenStore(ctx, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	rows, _ := strconv.Atoi(os.Getenv("HC_ROWS"))
	refresh, _ := time.ParseDuration(os.Getenv("HC_OWNERS_REFRESH")) // 0: the default
	detectWait, _ := time.ParseDuration(os.Getenv("HC_DETECT_WAIT")) // 0: the default
	level := slog.LevelWarn
	if os.Getenv("HC_LOG_INFO") != "" {
		level = slog.LevelInfo
	}
	// The final run (HC_UNTIL_QUIET) ships a file nothing is written to
	// any more: format detection has no lines to wait for. With the
	// default wait (2 s, as long as a round) a round that resumed with
	// fewer than 200 lines left spent all of it waiting, shipped nothing,
	// and was taken for quiet: the file's last lines were reported lost
	// (TestAdversary17KillNineWhileFormatsChange, 93 and 108 lines). Lines
	// that look like header lines only (W3C's, or any line starting with a
	// letter, a Cloud Storage CSV header to gcs: "garbage ...") wait 10
	// times as long, so the final run waits 50 ms at most (HC_DETECT_WAIT
	// is for the children before it): 500 ms at most of a 2 s round.
	if os.Getenv("HC_UNTIL_QUIET") != "" && (detectWait == 0 || detectWait > 50*time.Millisecond) {
		detectWait = 50 * time.Millisecond
	}
	run := func(ctx context.Context) error {
		c, err := collector.New(s, collector.Options{
			Sources:   []collector.Source{{Glob: os.Getenv("HC_GLOB"), Site: "www", Format: cmp.Or(os.Getenv("HC_FORMAT"), "combined"), StartAtEnd: os.Getenv("HC_START_END") != ""}},
			BatchRows: rows, BatchDelay: 100 * time.Millisecond, Poll: 20 * time.Millisecond, Scan: 100 * time.Millisecond,
			RotatedIdle: 300 * time.Millisecond, StateDir: os.Getenv("HC_STATE"), OwnersRefresh: refresh, DetectWait: detectWait,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		})
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
	if os.Getenv("HC_UNTIL_QUIET") == "" {
		if err := run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	// Ship what is there and exit once a 2-second run adds nothing to hits
	// or rejects (a run that ships only rejects is not quiet). The store
	// is counted only between runs, never while the collector inserts.
	last := uint64(1<<64 - 1)
	for range 60 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := run(rctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Asked up to 3 times: a round's end cancels the collector's
		// queries, and the driver may hand out a connection that left
		// broken ("use of closed network connection", seen once after the
		// 7th round of a final run); the next attempt dials afresh.
		var n uint64
		for try := range 3 {
			n, err = testenv.Count(ctx, s, "SELECT (SELECT count() FROM "+d.Name+".hits) + (SELECT count() FROM "+d.Name+".rejects)")
			if err == nil {
				break
			}
			fmt.Fprintf(os.Stderr, "count the store's rows (attempt %d): %v\n", try+1, err)
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if n == last {
			return 0
		}
		last = n
	}
	fmt.Fprintln(os.Stderr, "the store still grew after 60 runs")
	return 1
}

// store is a fresh database on a backend: a ClickHouse server or the
// embedded engine.
type store struct {
	d     *testenv.Database
	db    string
	store testenv.Store
}

// newStore opens a fresh database on backend d.
func newStore(t *testing.T, d *testenv.Database) *store {
	t.Helper()
	return &store{d: d, db: d.Name, store: d.Open(t)}
}

// newServerStore is a fresh database on server ch, whose inserts time out
// after timeout (for the tests of server faults).
func newServerStore(t *testing.T, ch *testenv.ClickHouseServer, timeout time.Duration) *store {
	t.Helper()
	d := testenv.ServerDatabase(ch)
	s, err := d.OpenStore(context.Background(), timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &store{d: d, db: d.Name, store: s}
}

func (s *store) count(t *testing.T, q string) uint64 {
	t.Helper()
	n, err := testenv.Count(context.Background(), s.store, q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// counts reads the three numbers every exactly-once test checks: rows, distinct
// (source, offset) pairs, and the per-minute rollup's sum.
func (s *store) counts(t *testing.T) (rows, distinct, rollup uint64) {
	t.Helper()
	rows = s.count(t, "SELECT count() FROM "+s.db+".hits")
	distinct = s.count(t, "SELECT uniqExact(source_id, offset) FROM "+s.db+".hits")
	rollup = s.count(t, "SELECT sum(hits) FROM "+s.db+".hits_1m")
	return
}

// waitRows waits until the hits table holds want rows and stays there; it fails
// the test if it goes beyond (a duplicate) or never gets there.
func (s *store) waitRows(t *testing.T, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var rows uint64
	for time.Now().Before(deadline) {
		if n, err := testenv.Count(context.Background(), s.store, "SELECT count() FROM "+s.db+".hits"); err == nil {
			rows = n
			if rows > want {
				t.Fatalf("hits holds %d rows, more than the %d lines written: a line was inserted twice", rows, want)
			}
			if rows == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("hits holds %d rows after %v, want %d", rows, timeout, want)
}

// assertExactlyOnce checks the table holds every good line once.
func (s *store) assertExactlyOnce(t *testing.T, good uint64) {
	t.Helper()
	s.waitRows(t, good, 90*time.Second)
	time.Sleep(500 * time.Millisecond) // anything late would show up now
	rows, distinct, rollup := s.counts(t)
	if rows != good || distinct != good || rollup != good {
		t.Fatalf("rows %d, distinct (source, offset) %d, rollup sum %d; want all %d", rows, distinct, rollup, good)
	}
}

// writer appends generated traffic to a log file and can rotate it as logrotate
// would. Lines are written whole (one write per chunk), as a web server does.
type writer struct {
	t     *testing.T
	dir   string
	name  string
	mu    sync.Mutex
	f     *os.File
	gen   *loggen.Generator
	good  uint64
	lines uint64
	buf   []byte
	rot   int
}

func newWriter(t *testing.T, dir string, badEvery int) *writer {
	w := &writer{t: t, dir: dir, name: filepath.Join(dir, "access.log"),
		gen: loggen.New(loggen.Options{Seed: rand.Uint64(), BadEvery: badEvery})}
	f, err := os.OpenFile(w.name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.f = f
	t.Cleanup(func() { w.f.Close() })
	return w
}

// write appends n lines in one write.
func (w *writer) write(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = w.buf[:0]
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(time.Duration(w.lines) * time.Millisecond)
	for range n {
		var ok bool
		w.buf, ok = w.gen.Line(w.buf, now)
		if ok {
			w.good++
		}
		w.lines++
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.t.Error(err)
	}
}

func (w *writer) goodLines() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.good
}

// shiftRotated renames access.log.N.gz to .N+1.gz, oldest first, as logrotate
// does before rotating.
func (w *writer) shiftRotated() {
	for i := w.rot; i >= 1; i-- {
		from := fmt.Sprintf("%s.%d.gz", w.name, i)
		if err := os.Rename(from, fmt.Sprintf("%s.%d.gz", w.name, i+1)); err != nil && !os.IsNotExist(err) {
			w.t.Error(err)
		}
	}
	w.rot++
}

// rotateCreate is logrotate's default: rename the live file to .1, create a new
// one that the server reopens, then compress .1 into .1.gz (written in place,
// as gzip does) and remove .1.
func (w *writer) rotateCreate() {
	w.mu.Lock()
	w.shiftRotated()
	if err := os.Rename(w.name, w.name+".1"); err != nil {
		w.t.Error(err)
	}
	old := w.f
	// The server keeps writing to the renamed file until it reopens its log.
	w.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	w.mu.Lock()
	f, err := os.OpenFile(w.name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		w.t.Error(err)
	}
	w.f = f
	w.mu.Unlock()
	old.Close()
	w.compress(w.name + ".1")
}

// rotateCopyTruncate is logrotate's copytruncate: copy the live file to .1 and
// truncate it in place, then compress .1. Lines written between the copy and
// the truncation are lost by logrotate itself, so the writer is held for that
// moment: the test checks the collector, not logrotate's documented window.
func (w *writer) rotateCopyTruncate() {
	w.mu.Lock()
	w.shiftRotated()
	data, err := os.ReadFile(w.name)
	if err != nil {
		w.t.Error(err)
	}
	if err := os.WriteFile(w.name+".1", data, 0o644); err != nil {
		w.t.Error(err)
	}
	if err := w.f.Truncate(0); err != nil {
		w.t.Error(err)
	}
	w.mu.Unlock()
	w.compress(w.name + ".1")
}

func (w *writer) compress(path string) {
	time.Sleep(30 * time.Millisecond)
	data, err := os.ReadFile(path)
	if err != nil {
		w.t.Error(err)
		return
	}
	out, err := os.Create(path + ".gz")
	if err != nil {
		w.t.Error(err)
		return
	}
	zw := gzipWriter(out)
	for len(data) > 0 { // in pieces, so a reader can see a partial .gz
		n := min(len(data), 64<<10)
		zw.Write(data[:n])
		zw.Flush()
		data = data[n:]
	}
	zw.Close()
	out.Close()
	os.Remove(path)
}
