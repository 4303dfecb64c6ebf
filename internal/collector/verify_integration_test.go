package collector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A store that deduplicates writes a block's id into its deduplication log
// before the part is committed: a server killed between the two, or a part
// later removed by a mutation while its id stays in the log, makes the
// identical re-send of an unknown outcome (or the replay of the batch in
// flight after a restart) be dropped as a duplicate while the rows are not
// in the table. Simulated here as faithfully as a test can: the batch lands
// with its token, a mutation removes its rows from every table (its block
// id stays in the log), and the collector is told the insert failed. Every
// line must still end in hits once, and in the rollups once.
//
// Run on the embedded engine (a token per batch), on a two-replica 18.16
// cluster (replicated tables drop a block by its checksum) and on a single
// 18.16 server, which does not deduplicate and settles unknown outcomes from
// hits (it held before verification too). Before verification, on the
// embedded engine and the cluster, hits held 0 of the 300 lines after the
// re-send or the replay was acknowledged.
func TestResentBatchVerified(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		testResentBatchVerified(t, newStore(t, d), "")
	})
	// Replicated tables deduplicate by a checksum of the block: no token on
	// 18.16, and a renewed batch's rows are the same rows.
	t.Run("cluster", func(t *testing.T) {
		zk := testenv.ZooKeeper(t)
		servers := testenv.ClickHouseCluster(t, zk, "web", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := sink.Open(ctx, sink.Options{Addr: []string{servers[0].Addr()}, Database: "hc", Cluster: "web", InsertTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		d := &testenv.Database{Backend: "cluster", Addr: servers[0].Addr(), Name: "hc", Server: servers[0]}
		testResentBatchVerified(t, &store{d: d, db: "hc", store: s}, "_local")
	})
}

// testResentBatchVerified runs the cases on st, whose tables an insert
// writes are <name><suffix>.
func testResentBatchVerified(t *testing.T, st *store, suffix string) {
	base := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	remove := func(site string) func() error { return func() error { return removeSite(st, site, suffix) } }
	backend := st.d.Backend

	// The premise, on the store alone: after the mutation, the identical
	// block is dropped though the table lacks its rows.
	t.Run("premise", func(t *testing.T) {
		b := premiseBatch(t)
		if err := st.store.Insert(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if err := remove("premise")(); err != nil {
			t.Fatal(err)
		}
		if err := st.store.Insert(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a replica fetching the part
		n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE site = 'premise'")
		t.Logf("%s (deduplicates: %v): the identical batch sent again after its rows were removed: %d of %d rows in hits",
			backend, st.store.Deduplicates(), n, b.Rows())
		if st.store.Deduplicates() && n != 0 {
			t.Fatalf("the store took the identical block again (%d rows): the case this test is about does not arise", n)
		}
	})

	t.Run("a failed insert, then the identical re-send", func(t *testing.T) {
		ls := &lossyStore{Inserter: st.store, remove: remove("resend")}
		glob := filepath.Join(t.TempDir(), "access.log")
		if err := os.WriteFile(glob, logLines(21, 300, base), 0o644); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		stop := startInserter(t, ls, glob, func(o *collector.Options) {
			o.Sources[0].Site = "resend"
			o.Metrics = collector.NewMetrics(reg)
		})
		defer stop()
		ls.waitFailing(t, 1, 30*time.Second) // the rows landed and were removed
		waitSiteRows(t, st, "resend", 300, 60*time.Second)
		appendTo(t, glob, logLines(22, 50, base.Add(time.Hour)))
		waitSiteRows(t, st, "resend", 350, 60*time.Second)
		assertSiteRollup(t, st, "resend", 350)
		if err := ls.err(); err != nil {
			t.Fatal(err)
		}
		resent := counterValue(t, reg, "hitcount_collector_batches_total", map[string]string{"result": "resent"})
		t.Logf("%s: %v batches resent after verification", backend, resent)
		if st.store.Deduplicates() && resent != 1 {
			t.Errorf("batches resent after verification: %v, want 1", resent)
		}
	})

	t.Run("a replay at reopen", func(t *testing.T) {
		ls := &lossyStore{Inserter: st.store, remove: remove("replay"), hold: true}
		glob := filepath.Join(t.TempDir(), "access.log")
		if err := os.WriteFile(glob, logLines(23, 300, base), 0o644); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		tune := func(o *collector.Options) {
			o.Sources[0].Site = "replay"
			o.StateDir = state
		}
		stop := startInserter(t, ls, glob, tune)
		ls.waitFailing(t, 3, 30*time.Second)
		stop() // the batch's outcome unknown: its record stays
		if err := ls.err(); err != nil {
			t.Fatal(err)
		}
		if n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE site = 'replay'"); n != 0 {
			t.Fatalf("hits holds %d rows of the batch, want none before the restart", n)
		}
		// The restart replays the batch in flight, identical (the embedded
		// engine), or asks the tables what they hold and reads the rest
		// (a server): the same batch again when they hold none of it.
		stop = startCollector(t, st, glob, tune)
		defer stop()
		waitSiteRows(t, st, "replay", 300, 60*time.Second)
		appendTo(t, glob, logLines(24, 50, base.Add(time.Hour)))
		waitSiteRows(t, st, "replay", 350, 60*time.Second)
		assertSiteRollup(t, st, "replay", 350)
	})
}

// premiseBatch is a batch of 10 rows of site "premise".
func premiseBatch(t *testing.T) *sink.Batch {
	t.Helper()
	p, err := parser.New("combined")
	if err != nil {
		t.Fatal(err)
	}
	b := sink.NewBatch(10)
	b.Reset("premise", 77)
	var h parser.Hit
	var off int64
	for i := range 10 {
		line := combinedLine(time.Date(2026, 11, 25, 7, 0, i, 0, time.UTC), fmt.Sprintf("/premise/%d", i))
		if err := p.Parse(line, &h); err != nil {
			t.Fatal(err)
		}
		b.Add(&h, off, off+int64(len(line)))
		off += int64(len(line))
	}
	return b
}

// lossyStore lets the first insert land, then removes its rows as a
// mutation would (the block's id stays in the deduplication log) and says
// the insert failed: an outcome unknown to the collector. Later inserts go
// through, or with hold fail until the collector stops.
type lossyStore struct {
	collector.Inserter
	remove func() error
	hold   bool

	mu        sync.Mutex
	landed    bool
	failures  int
	removeErr error
}

func (s *lossyStore) Insert(ctx context.Context, b *sink.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.landed {
		if s.hold {
			s.failures++
			return errors.New("injected: the store is unreachable")
		}
		return s.Inserter.Insert(ctx, b)
	}
	if err := s.Inserter.Insert(ctx, b); err != nil {
		return err
	}
	s.landed = true
	s.failures++
	s.removeErr = s.remove()
	return errors.New("injected: the connection dropped before the insert was acknowledged")
}

func (s *lossyStore) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removeErr != nil {
		return fmt.Errorf("remove the batch's rows: %w", s.removeErr)
	}
	return nil
}

// waitFailing waits until n inserts have failed (the first once its rows
// are removed: both happen under mu).
func (s *lossyStore) waitFailing(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		f := s.failures
		s.mu.Unlock()
		if f >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("fewer than %d inserts failed after %v", n, timeout)
}

// startInserter runs a collector on ins (the test's store, or an Inserter
// of the test's own wrapping it) until stop is called or the test ends.
func startInserter(t *testing.T, ins collector.Inserter, glob string, tune func(*collector.Options)) (stop func()) {
	t.Helper()
	opts := collector.Options{
		Sources:   []collector.Source{{Glob: glob, Site: "www", Format: "combined"}},
		BatchRows: 5000, BatchDelay: 100 * time.Millisecond, Poll: 20 * time.Millisecond, Scan: 100 * time.Millisecond,
		RotatedIdle: 300 * time.Millisecond, StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: testLogLevel()})),
	}
	if tune != nil {
		tune(&opts)
	}
	c, err := collector.New(ins, opts)
	if err != nil {
		t.Fatal(err)
	}
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

// removeSite deletes a site's rows from hits and every table fed from it
// (<name><suffix>), with mutations, and waits until they are gone: as a
// crash before the parts were committed would have left the tables, while
// the block ids stay in the deduplication logs.
func removeSite(st *store, site, suffix string) error {
	ctx := context.Background()
	exec := func(sql string) error {
		if es, ok := st.store.(*embedded.Store); ok {
			return es.Engine().Exec(ctx, sql)
		}
		return st.store.(*sink.Sink).Conn().Exec(ctx, sql)
	}
	for _, table := range []string{"hits", "ingest_progress", "hits_1m", "hits_1d", "hits_touched", "hits_visitors_1m"} {
		if err := exec(fmt.Sprintf("ALTER TABLE %s.%s%s DELETE WHERE site = '%s'", st.db, table, suffix, site)); err != nil {
			return err
		}
	}
	// On a cluster the mutations run on every replica: wait until the
	// tables read (through any replica) lack the rows.
	q := fmt.Sprintf(`SELECT (SELECT count() FROM system.mutations WHERE database = '%[1]s' AND NOT is_done)
		+ (SELECT count() FROM %[1]s.hits WHERE site = '%[2]s') + (SELECT count() FROM %[1]s.ingest_progress WHERE site = '%[2]s')
		+ (SELECT count() FROM %[1]s.hits_1m WHERE site = '%[2]s')`, st.db, site)
	for range 300 {
		n, err := testenv.Count(ctx, st.store, q)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("rows still there 30 s after the mutations")
}

// assertSiteRollup checks, once things are quiet, that a site's lines are
// each once in hits and counted once in hits_1m.
func assertSiteRollup(t *testing.T, st *store, site string, want uint64) {
	t.Helper()
	assertSite(t, st, site, want, 0)
	if sum := st.count(t, "SELECT sum(hits) FROM "+st.db+".hits_1m WHERE site = '"+site+"'"); sum != want {
		t.Errorf("%s: hits_1m sums %d, want %d", site, sum, want)
	}
}
