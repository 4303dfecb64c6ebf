package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
)

// An insert whose hits part commits while a view after it fails (a view's
// table replaced for a while; to the collector the same as a server killed
// between the two)
// has an unknown outcome. The collector resolves it from hits itself, not
// from ingest_progress (written after the failing view on 18.16): every line
// once. Where the store drops a repeated block (the embedded engine), the
// identical batch is sent until it is acknowledged, which also completes the
// rollups; on 18.16 a rollup misses what the failing view dropped, measured
// here.
func TestFailingViewExactlyOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		exec := func(sql string) {
			t.Helper()
			if es, ok := st.store.(*embedded.Store); ok {
				if err := es.Engine().Exec(context.Background(), sql); err != nil {
					t.Fatal(err)
				}
				return
			}
			d.Server.Exec(t, sql)
		}
		dir := t.TempDir()
		f, err := os.Create(filepath.Join(dir, "access.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
		state := t.TempDir()
		tune := func(o *collector.Options) { o.BatchRows = 100; o.StateDir = state }
		stop := startCollector(t, st, filepath.Join(dir, "access.log"), tune)
		f.Write(logLines(1, 200, base))
		st.waitRows(t, 200, 60*time.Second)
		// hits_1d_mv is the first view 18.16 writes (name order), before
		// ingest_progress_hits. A table of another shape in its place fails
		// each insert in that view, after hits took the rows (a missing
		// table would be refused before: the server checks targets first).
		var cols []string
		err = st.store.Select(context.Background(), "SELECT name, type FROM system.columns WHERE database = ? AND table = 'hits_1d'",
			[]any{st.db}, func(scan func(...any) error) error {
				var name, typ string
				if err := scan(&name, &typ); err != nil {
					return err
				}
				if name == "site" {
					typ = "UInt8" // 'www' does not convert
				}
				cols = append(cols, name+" "+typ)
				return nil
			})
		if err != nil || len(cols) == 0 {
			t.Fatalf("columns of hits_1d: %v %v", cols, err)
		}
		exec("RENAME TABLE " + st.db + ".hits_1d TO " + st.db + ".hits_1d_away")
		exec("CREATE TABLE " + st.db + ".hits_1d (" + strings.Join(cols, ", ") + ") ENGINE = Log")
		f.Write(logLines(2, 300, base.Add(time.Minute)))
		time.Sleep(3 * time.Second) // inserts fail after hits took their rows
		exec("DROP TABLE " + st.db + ".hits_1d")
		exec("RENAME TABLE " + st.db + ".hits_1d_away TO " + st.db + ".hits_1d")
		st.waitRows(t, 500, 90*time.Second)
		time.Sleep(time.Second)
		rows, distinct, rollup := st.counts(t)
		if rows != 500 || distinct != 500 {
			t.Fatalf("rows %d, distinct (source, offset) %d; want 500 each", rows, distinct)
		}
		t.Logf("%s: hits %d, hits_1m %d (short by %d)", d.Backend, rows, rollup, rows-rollup)
		if st.store.Deduplicates() && rollup != rows {
			t.Errorf("hits_1m sums %d on a store that deduplicates, want %d", rollup, rows)
		}
		if rollup > rows {
			t.Errorf("hits_1m sums %d, more than the %d rows", rollup, rows)
		}
		// A restart resumes after what hits holds, not after where the
		// failing view left ingest_progress.
		stop()
		f.Write(logLines(4, 100, base.Add(3*time.Minute)))
		stop = startCollector(t, st, filepath.Join(dir, "access.log"), tune)
		defer stop()
		st.waitRows(t, 600, 90*time.Second)
		time.Sleep(time.Second)
		if rows, distinct, _ := st.counts(t); rows != 600 || distinct != 600 {
			t.Fatalf("after a restart: rows %d, distinct %d; want 600 each", rows, distinct)
		}
	})
}

// startCollector runs a collector on the test's store until stop is called
// (or the test ends).
func startCollector(t *testing.T, st *store, glob string, tune func(*collector.Options)) (stop func()) {
	t.Helper()
	return startInserter(t, st.store, glob, tune)
}
