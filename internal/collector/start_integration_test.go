package collector_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// history writes a live log and two rotated ones (one gzipped), n lines each.
func history(t *testing.T, dir string, n int) {
	t.Helper()
	for i, name := range []string{"access.log.2.gz", "access.log.1", "access.log"} {
		var buf bytes.Buffer
		g := loggen.New(loggen.Options{Seed: uint64(100 + i), Start: time.Date(2026, 11, 20+i, 0, 0, 0, 0, time.UTC)})
		if _, err := g.WriteN(&buf, n); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		if filepath.Ext(name) == ".gz" {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(data)
			zw.Close()
			data = z.Bytes()
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		// Oldest first by modification time, as logrotate leaves them.
		mt := time.Now().Add(time.Duration(i-3) * time.Hour)
		os.Chtimes(filepath.Join(dir, name), mt, mt)
	}
}

// start_at: beginning backfills the live log and its rotated siblings, gzipped
// ones included, each line once.
func TestBackfillReadsRotatedHistoryOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testBackfillReadsRotatedHistoryOnce)
}

func testBackfillReadsRotatedHistoryOnce(t *testing.T, d *testenv.Database) {
	st := newStore(t, d)
	dir := t.TempDir()
	history(t, dir, 5000)
	runCollector(t, st, filepath.Join(dir, "access.log"), nil)
	st.assertExactlyOnce(t, 15000)
}

// start_at: end skips what the files held at the first start, ships what is
// written after, and reads a file created later (rotation) from its beginning.
// A deleted file replaced by a new one at the same path is a new source: the
// identity is the content, so a reused inode (the filesystem's choice, logged)
// changes nothing.
func TestStartAtEndThenRotationAndInodeReuse(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testStartAtEndThenRotationAndInodeReuse)
}

func testStartAtEndThenRotationAndInodeReuse(t *testing.T, d *testenv.Database) {
	st := newStore(t, d)
	dir := t.TempDir()
	history(t, dir, 5000)
	runCollector(t, st, filepath.Join(dir, "access.log"), func(o *collector.Options) { o.Sources[0].StartAtEnd = true })
	time.Sleep(500 * time.Millisecond) // let the first scan choose its start
	w := &writer{t: t, dir: dir, name: filepath.Join(dir, "access.log"), gen: loggen.New(loggen.Options{Seed: 9})}
	f, err := os.OpenFile(w.name, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.f = f
	t.Cleanup(func() { w.f.Close() })
	w.write(3000)
	st.waitRows(t, 3000, 30*time.Second)

	w.rotateCreate() // the new access.log appears after the first run: read from 0
	w.write(2000)
	st.waitRows(t, 5000, 30*time.Second)

	// Delete the live file and create another in its place.
	var old syscall.Stat_t
	syscall.Stat(w.name, &old)
	w.mu.Lock()
	w.f.Close()
	os.Remove(w.name)
	time.Sleep(time.Second) // the collector finishes the deleted file and frees its inode
	nf, err := os.OpenFile(w.name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	w.f = nf
	w.mu.Unlock()
	var cur syscall.Stat_t
	syscall.Stat(w.name, &cur)
	w.write(1500)
	t.Logf("inode reused: %v", old.Ino == cur.Ino)
	st.assertExactlyOnce(t, 6500)
}

// start_at: end leaves the history out at the first start, gzipped files
// included, and a restart (the site now has lines) does not take that
// history for files new since the first run.
func TestStartAtEndLeavesHistoryOutAcrossRestarts(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		history(t, dir, 2000)
		state := t.TempDir()
		tune := func(o *collector.Options) { o.Sources[0].StartAtEnd = true; o.StateDir = state }
		glob := filepath.Join(dir, "access.log")
		f, err := os.OpenFile(glob, os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		stop := startCollector(t, st, glob, tune)
		time.Sleep(500 * time.Millisecond) // let the first scan choose its start
		f.Write(logLines(1, 300, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)))
		st.waitRows(t, 300, 30*time.Second)
		stop()
		f.Write(logLines(2, 200, time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)))
		startCollector(t, st, glob, tune)
		st.waitRows(t, 500, 30*time.Second)
		time.Sleep(2 * time.Second) // several scans: the history must stay out
		st.assertExactlyOnce(t, 500)
	})
}
