package collector_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// logLines returns n good combined-format lines, one per millisecond from
// start.
func logLines(seed uint64, n int, start time.Time) []byte {
	g := loggen.New(loggen.Options{Seed: seed})
	var buf []byte
	for i := range n {
		buf, _ = g.Line(buf, start.Add(time.Duration(i)*time.Millisecond))
	}
	return buf
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(data)
	zw.Close()
	f.Close()
}

// Any number of files, busy or idle, ship with the default two batches in
// use at once: a file takes a batch only with a line in hand and gives it
// back once committed, so a quiet file holds nothing.
func TestManyFilesNeverStall(t *testing.T) {
	t.Parallel()
	t.Run("rotated history at first start", func(t *testing.T) {
		testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
			st := newStore(t, d)
			dir := t.TempDir()
			base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
			want := 0
			for i := 5; i >= 1; i-- {
				data := logLines(uint64(i), 8000, base.Add(time.Duration(5-i)*time.Hour))
				name := filepath.Join(dir, fmt.Sprintf("access.log.%d", i))
				if i >= 3 {
					writeGzip(t, name+".gz", data)
				} else if err := os.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
				want += 8000
			}
			if err := os.WriteFile(filepath.Join(dir, "access.log"), logLines(9, 2000, base.Add(6*time.Hour)), 0o644); err != nil {
				t.Fatal(err)
			}
			want += 2000
			runCollector(t, st, filepath.Join(dir, "access.log"), func(o *collector.Options) {
				o.MaxPending = 2
				o.BatchRows = 1000
			})
			st.assertExactlyOnce(t, uint64(want))
		})
	})
	t.Run("quiet live logs and a busy one", func(t *testing.T) {
		testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
			st := newStore(t, d)
			dir := t.TempDir()
			var written atomic.Uint64
			start := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
			for i, vhost := range []string{"a.example", "b.example", "c.example", "d.example"} {
				if err := os.MkdirAll(filepath.Join(dir, vhost), 0o755); err != nil {
					t.Fatal(err)
				}
				// Quiet ones: one line now, then nothing.
				if err := os.WriteFile(filepath.Join(dir, vhost, "access.log"), logLines(uint64(i), 1, start), 0o644); err != nil {
					t.Fatal(err)
				}
				written.Add(1)
			}
			busy := filepath.Join(dir, "shop.example", "access.log")
			os.MkdirAll(filepath.Dir(busy), 0o755)
			f, err := os.Create(busy)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			runCollector(t, st, filepath.Join(dir, "**", "access*.log"), func(o *collector.Options) {
				o.MaxPending = 2
				o.BatchRows = 500
			})
			g := loggen.New(loggen.Options{Seed: rand.Uint64()})
			var buf []byte
			for i := range 40 {
				buf = buf[:0]
				for j := range 250 {
					buf, _ = g.Line(buf, start.Add(time.Duration(i*250+j)*time.Millisecond))
				}
				if _, err := f.Write(buf); err != nil {
					t.Fatal(err)
				}
				written.Add(250)
				time.Sleep(25 * time.Millisecond)
			}
			st.assertExactlyOnce(t, written.Load())
		})
	})
}

// A finished file's last line without a newline (a rotated log cut short,
// a gzip of one) is a line like the others: shipped once, counted, and not
// read again when the collector restarts.
func TestFinishedFileLastLineWithoutNewline(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
		cut := func(b []byte) []byte { return b[:len(b)-1] }
		writeGzip(t, filepath.Join(dir, "access.log.2.gz"), cut(logLines(1, 30, base)))
		if err := os.WriteFile(filepath.Join(dir, "access.log.1"), cut(logLines(2, 50, base.Add(time.Hour))), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "access.log"), logLines(3, 100, base.Add(2*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		for run := range 2 {
			t.Run(fmt.Sprint("run ", run+1), func(t *testing.T) {
				m := runCollector(t, st, filepath.Join(dir, "access.log"), nil)
				st.assertExactlyOnce(t, 180)
				// The next run starts from what the store holds; a
				// reopen must read nothing of the finished files again.
				_ = m
			})
		}
	})
}

// The record of a batch in flight is cleared once the store acknowledged it:
// a finished source that reappears (logrotate's delaycompress gzips
// yesterday's access.log.1 into access.log.2.gz) is not inserted again, even
// past the store's deduplication window (1,000 blocks).
func TestNoReplayOfAcknowledgedBatches(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		live := filepath.Join(dir, "access.log")
		old := logLines(1, 300, base)
		if err := os.WriteFile(live+".1", old, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(live)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		state := t.TempDir()
		tune := func(o *collector.Options) {
			o.BatchRows = 10
			o.StateDir = state
		}
		// The embedded engine's window shrunk from 1,000 blocks to 100 (the
		// server has none): the same test at a tenth of its inserts.
		const window = 100
		if es, ok := st.store.(*embedded.Store); ok {
			for _, tbl := range []string{"hits", "rejects", "ingest_progress", "hits_1m", "hits_touched", "hits_1d"} {
				q := fmt.Sprintf("ALTER TABLE %s.%s MODIFY SETTING non_replicated_deduplication_window = %d", st.db, tbl, window)
				if err := es.Engine().Exec(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
		}
		runCollector(t, st, live, tune)
		st.waitRows(t, 300, 60*time.Second)
		// Half as many blocks again as the window from the live file: the
		// deduplication window of the store no longer holds access.log.1's
		// last batch.
		const more = window * 10 * 3 / 2
		g := loggen.New(loggen.Options{Seed: 7})
		var buf []byte
		for i := range more / 500 {
			buf = buf[:0]
			for j := range 500 {
				buf, _ = g.Line(buf, base.Add(time.Hour+time.Duration(i*500+j)*time.Millisecond))
			}
			f.Write(buf)
			time.Sleep(20 * time.Millisecond)
		}
		st.waitRows(t, 300+more, 180*time.Second)
		// delaycompress, a day later: .1 becomes .2.gz.
		writeGzip(t, live+".2.gz", old)
		os.Remove(live + ".1")
		time.Sleep(2 * time.Second) // several scans
		st.assertExactlyOnce(t, 300+more)
	})
}
