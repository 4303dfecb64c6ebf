package collector_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/tailer"
	"github.com/hitcount/hitcount/internal/testenv"
)

// sourceID is the id the collector gives the file at path for site.
func sourceID(t *testing.T, path, site string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := tailer.Fingerprint(f, site)
	if err != nil {
		t.Fatal(err)
	}
	return id.ID
}

// One source whose store query does not come back (here: an insert of it
// that a killed predecessor left running on the server, which Settle waits
// out) keeps only that file waiting: every other file opens and ships
// meanwhile, and the stuck one ships once the query ends.
func TestStuckSourceDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	d := testenv.NewDatabase(t, "server")
	st := newStore(t, d)
	dir := t.TempDir()
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	// "a" sorts first: the scan meets it before the others.
	var want uint64
	for i, vhost := range []string{"a", "b", "c"} {
		os.MkdirAll(filepath.Join(dir, vhost), 0o755)
		if err := os.WriteFile(filepath.Join(dir, vhost, "access.log"), logLines(uint64(i+1), 3000, base.Add(time.Duration(i)*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		want += 3000
	}
	stuck := sourceID(t, filepath.Join(dir, "a", "access.log"), "www")
	queryID := fmt.Sprintf("hitcount-%016x-0-0", stuck)
	conn := d.Server.Conn(t)
	qctx, cancelQuery := context.WithCancel(clickhouse.Context(context.Background(), clickhouse.WithQueryID(queryID)))
	defer cancelQuery()
	go func() {
		var n uint64
		_ = conn.QueryRow(qctx, "SELECT count() FROM system.numbers SETTINGS max_execution_time = 120").Scan(&n)
	}()
	waitFor(t, 10*time.Second, "the stuck query to run", func() bool {
		return st.count(t, fmt.Sprintf("SELECT count() FROM system.processes WHERE query_id = '%s'", queryID)) == 1
	})

	startCollector(t, st, filepath.Join(dir, "*", "access.log"), nil)
	st.waitRows(t, want-3000, 60*time.Second)
	if n := st.count(t, fmt.Sprintf("SELECT count() FROM %s.hits WHERE source_id = %d", st.db, stuck)); n != 0 {
		t.Fatalf("the stuck source shipped %d rows while an insert of it still ran", n)
	}
	d.Server.Exec(t, fmt.Sprintf("KILL QUERY WHERE query_id = '%s' SYNC", queryID))
	st.assertExactlyOnce(t, want)
}

// A glob over a long history of rotated files keeps only a few open at once
// (a descriptor and buffers each), reads them all, each line once.
func TestRotatedHistoryOpenedAFewAtATime(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		const files, perFile = 30, 400
		for i := files; i >= 1; i-- {
			data := logLines(uint64(100+i), perFile, base.Add(time.Duration(files-i)*24*time.Hour))
			name := filepath.Join(dir, fmt.Sprintf("access.log.%d", i))
			if i > 1 {
				writeGzip(t, name+".gz", data)
			} else if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
			mt := base.Add(time.Duration(files-i) * 24 * time.Hour)
			os.Chtimes(name+map[bool]string{true: ".gz", false: ""}[i > 1], mt, mt)
		}
		if err := os.WriteFile(filepath.Join(dir, "access.log"), logLines(7, perFile, base.Add(40*24*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		// The most log files this process holds open, sampled until done.
		var most atomic.Int64
		stopSampling := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stopSampling:
					return
				case <-time.After(2 * time.Millisecond):
				}
				if n := int64(openLogs(dir)); n > most.Load() {
					most.Store(n)
				}
			}
		}()
		stop := startCollector(t, st, filepath.Join(dir, "access.log"), func(o *collector.Options) {
			o.MaxOpenRotated = 3
		})
		st.assertExactlyOnce(t, (files+1)*perFile)
		stop()
		close(stopSampling)
		<-sampled
		// 3 rotated, the live one, and the one the scan is looking at
		// (two descriptors while OpenLog goes from O_PATH to reading).
		if n := most.Load(); n > 3+1+2 || n < 2 {
			t.Fatalf("at most %d log files open at once, want 2..6 with MaxOpenRotated 3", n)
		}
		t.Logf("at most %d of %d log files open at once", most.Load(), files+1)
	})
}

// openLogs counts this process's descriptors on files in dir that were all
// open at one moment. One pass over /proc/self/fd is not a snapshot: a
// descriptor read early (file A, closed just after) and one read late (file B,
// opened after A closed, on a number listed for something else) would count
// together (CI, embedded engine, whose own descriptors come and go: 7 with at
// most 6 ever open). A descriptor read twice, naming the same file both
// times, with the second pass begun after the first ended, was open at the
// moment between them.
func openLogs(dir string) int {
	pass := func() map[string]string {
		fds, _ := os.ReadDir("/proc/self/fd")
		on := map[string]string{}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
			if err == nil && strings.HasPrefix(target, dir+"/") {
				on[fd.Name()] = target
			}
		}
		return on
	}
	first, second := pass(), pass()
	n := 0
	for fd, target := range first {
		if second[fd] == target {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// After a restart, rotated files already read to their end and not written
// for a while are finished at once, not after another RotatedIdle holding one
// of the few places rotated files have: the newest rotated file, opened last
// (oldest first), must not wait behind them (with RotatedIdle an hour here,
// it waited an hour; in the chaos long run files waiting for a place were
// deleted by rotation meanwhile).
func TestRotatedFilesReadBeforeFinishAtOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		old := time.Now().Add(-2 * time.Hour)
		for i := 4; i >= 1; i-- {
			p := filepath.Join(dir, fmt.Sprintf("access.log.%d", i))
			if err := os.WriteFile(p, logLines(uint64(200+i), 300, base.Add(time.Duration(5-i)*time.Hour)), 0o644); err != nil {
				t.Fatal(err)
			}
			mt := old.Add(time.Duration(5-i) * time.Minute)
			os.Chtimes(p, mt, mt)
		}
		live := filepath.Join(dir, "access.log")
		if err := os.WriteFile(live, logLines(300, 100, base.Add(6*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		stop := startCollector(t, st, live, func(o *collector.Options) { o.StateDir = state })
		st.assertExactlyOnce(t, 4*300+100)
		stop()
		// The web server wrote to .1 after the collector stopped.
		appendLines(t, filepath.Join(dir, "access.log.1"), logLines(301, 50, base.Add(7*time.Hour)))
		startCollector(t, st, live, func(o *collector.Options) {
			o.StateDir = state
			o.MaxOpenRotated = 1
			o.RotatedIdle = time.Hour
		})
		st.assertExactlyOnce(t, 4*300+100+50)
	})
}
