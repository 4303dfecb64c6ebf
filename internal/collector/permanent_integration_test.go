package collector_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A batch the store refuses for good is not retried forever, stalling its
// file: it is split until the pieces are taken, and a line refused alone is
// a reject ("store refused: ..."). Every line ends once in hits or in
// rejects, and the file keeps shipping. Before the split, each of these
// files stalled at its first batch for good (an insert retried every 30 s).
func TestPermanentRefusalShipsTheRest(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		later := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

		// hits is PARTITION BY toYYYYMM(ts), and an insert may touch 100
		// partitions (max_partitions_per_insert_block; 18.16 has no such
		// limit and takes the block whole).
		t.Run("101 months in one batch", func(t *testing.T) {
			var data []byte
			for i := range 101 {
				ts := time.Date(1990, 1, 15, 12, 0, 0, 0, time.UTC).AddDate(0, i, 0)
				data = append(data, combinedLine(ts, fmt.Sprintf("/month/%d", i))...)
			}
			reg, glob, stop := refusalCollector(t, st, "months", data)
			defer stop()
			waitSiteRows(t, st, "months", 101, 60*time.Second)
			appendTo(t, glob, logLines(11, 50, later))
			waitSiteRows(t, st, "months", 151, 60*time.Second)
			assertSite(t, st, "months", 151, 0)
			splits := counterValue(t, reg, "hitcount_collector_batches_total", map[string]string{"result": "split"})
			t.Logf("%s: %v splits", d.Backend, splits)
			if d.Backend == "embedded" && splits < 1 {
				t.Errorf("the embedded engine refuses 101 partitions in one block: want a split, got %v", splits)
			}
		})

		// A MATERIALIZED column's throwIf refuses the block before hits
		// takes any of it: the line is isolated and recorded as a reject.
		t.Run("a line refused alone", func(t *testing.T) {
			execSQL(t, st, "ALTER TABLE "+st.db+".hits ADD COLUMN refuse_guard UInt8 MATERIALIZED throwIf(path = '/refused')")
			defer execSQL(t, st, "ALTER TABLE "+st.db+".hits DROP COLUMN refuse_guard")
			refused := combinedLine(later.Add(-time.Hour), "/refused")
			head := logLines(12, 137, later.Add(-2*time.Hour))
			data := append(append(append([]byte{}, head...), refused...), logLines(13, 62, later.Add(-time.Hour+time.Second))...)
			reg, glob, stop := refusalCollector(t, st, "guard", data)
			defer stop()
			waitSiteRows(t, st, "guard", 199, 60*time.Second)
			appendTo(t, glob, logLines(14, 50, later))
			waitSiteRows(t, st, "guard", 249, 60*time.Second)
			assertSite(t, st, "guard", 249, 1)
			var off uint64
			var reason, line string
			err := st.store.Select(context.Background(), "SELECT offset, reason, line FROM "+st.db+".rejects WHERE site = 'guard'", nil,
				func(scan func(...any) error) error { return scan(&off, &reason, &line) })
			if err != nil {
				t.Fatal(err)
			}
			if off != uint64(len(head)) || !strings.HasPrefix(reason, "store refused: Code: 395.") || line != strings.TrimSuffix(string(refused), "\n") {
				t.Errorf("reject at %d, reason %q, line %q; want at %d, store refused (395), the raw line %q", off, reason, line, len(head), refused)
			}
			if n := st.count(t, fmt.Sprintf("SELECT count() FROM %s.hits WHERE site = 'guard' AND offset = %d", st.db, off)); n != 0 {
				t.Errorf("the refused line is in hits too (%d rows)", n)
			}
			if got := counterValue(t, reg, "hitcount_collector_lines_refused_total", map[string]string{"site": "guard", "outcome": "rejected"}); got != 1 {
				t.Errorf("lines refused and rejected: %v, want 1", got)
			}
			t.Logf("%s: %v splits", d.Backend, counterValue(t, reg, "hitcount_collector_batches_total", map[string]string{"result": "split"}))
		})

		// A view's throwIf refuses the block after hits took the rows: they
		// stay, once; nothing is sent again, the file goes on.
		t.Run("a view refuses after hits took the rows", func(t *testing.T) {
			execSQL(t, st, "CREATE TABLE "+st.db+".refuse_guard (x UInt8) ENGINE = Log")
			execSQL(t, st, "CREATE MATERIALIZED VIEW "+st.db+".refuse_guard_mv TO "+st.db+".refuse_guard AS SELECT throwIf(path = '/refused') AS x FROM "+st.db+".hits")
			defer execSQL(t, st, "DROP TABLE "+st.db+".refuse_guard")
			defer execSQL(t, st, "DROP TABLE "+st.db+".refuse_guard_mv")
			data := append(append(logLines(15, 40, later.Add(-3*time.Hour)), combinedLine(later.Add(-2*time.Hour), "/refused")...), logLines(16, 59, later.Add(-2*time.Hour+time.Second))...)
			_, glob, stop := refusalCollector(t, st, "viewguard", data)
			defer stop()
			waitSiteRows(t, st, "viewguard", 100, 60*time.Second)
			appendTo(t, glob, logLines(17, 50, later))
			waitSiteRows(t, st, "viewguard", 150, 60*time.Second)
			assertSite(t, st, "viewguard", 150, 0)
		})
	})
}

// refusalCollector writes data as a new log and runs a collector on it as
// site, with metrics.
func refusalCollector(t *testing.T, st *store, site string, data []byte) (*prometheus.Registry, string, func()) {
	t.Helper()
	glob := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(glob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	stop := startCollector(t, st, glob, func(o *collector.Options) {
		o.Metrics = collector.NewMetrics(reg)
		o.Sources[0].Site = site
	})
	return reg, glob, stop
}

// combinedLine is one combined-format line for ts and path.
func combinedLine(ts time.Time, path string) []byte {
	return fmt.Appendf(nil, "203.0.113.9 - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" \"hitcount-test\"\n", ts.Format("02/Jan/2006:15:04:05 -0700"), path)
}

func appendTo(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

// execSQL runs a statement on the test's store.
func execSQL(t *testing.T, st *store, sql string) {
	t.Helper()
	if es, ok := st.store.(*embedded.Store); ok {
		if err := es.Engine().Exec(context.Background(), sql); err != nil {
			t.Fatalf("exec %q: %v", sql, err)
		}
		return
	}
	st.d.Server.Exec(t, sql)
}

// waitSiteRows waits until hits holds want rows of site, failing at more.
func waitSiteRows(t *testing.T, st *store, site string, want uint64, timeout time.Duration) {
	t.Helper()
	q := fmt.Sprintf("SELECT count() FROM %s.hits WHERE site = '%s'", st.db, site)
	deadline := time.Now().Add(timeout)
	var rows uint64
	for time.Now().Before(deadline) {
		if n, err := testenv.Count(context.Background(), st.store, q); err == nil {
			if rows = n; rows > want {
				t.Fatalf("hits holds %d rows of %s, more than the %d lines: a line was inserted twice", rows, site, want)
			}
			if rows == want {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("hits holds %d rows of %s after %v, want %d", rows, site, timeout, want)
}

// assertSite checks, once things are quiet, that every line of site is once
// in hits or in rejects.
func assertSite(t *testing.T, st *store, site string, rows, rejects uint64) {
	t.Helper()
	time.Sleep(500 * time.Millisecond) // anything late would show up now
	where := fmt.Sprintf(" WHERE site = '%s'", site)
	gotRows := st.count(t, "SELECT count() FROM "+st.db+".hits"+where)
	distinct := st.count(t, "SELECT uniqExact(source_id, offset) FROM "+st.db+".hits"+where)
	gotRejects := st.count(t, "SELECT count() FROM "+st.db+".rejects"+where)
	if gotRows != rows || distinct != rows || gotRejects != rejects {
		t.Errorf("%s: hits %d rows (%d distinct lines), rejects %d; want %d, %d, %d", site, gotRows, distinct, gotRejects, rows, rows, rejects)
	}
}

// counterValue reads a counter's value from reg, 0 when the series is not
// there.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
