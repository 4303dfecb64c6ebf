package collector_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// Two collectors with state directories of their own on the same log file
// (two containers sharing a log volume, a second instance with another
// config) each shipped it: 12,166 lines became 15,569 rows (issue 16,
// finding 6). The second collector must find the first in source_owners and
// leave the file alone, say so in Ready(), and take the file over once the
// first stops; two started at the same moment ship a line twice only within
// one refresh interval.
//
// Run against one 18.16 server and against two 18.16 replicas of one shard,
// the collectors' address lists [r1, r2] and [r2, r1] (the finding's shape).

// ownersRefresh is the collectors' refresh interval in these tests.
const ownersRefresh = time.Second

// ownersEnv is a store two collectors ship into, each through its own
// connection, and how to count what it holds of a site.
type ownersEnv struct {
	a, b   collector.Inserter
	counts func(t *testing.T, site string) (rows, distinct uint64)
	// lastDup is the largest offset of site held more than once (-1: none).
	lastDup func(t *testing.T, site string) int64
	// oneServer: one ClickHouse server (no replicas to lag).
	oneServer bool
}

func ownersEnvs(t *testing.T, fn func(t *testing.T, e *ownersEnv)) {
	t.Run("server", func(t *testing.T) {
		ch := testenv.ClickHouse(t)
		d := testenv.ServerDatabase(ch)
		open := func() collector.Inserter {
			s, err := d.OpenStore(context.Background(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		a, b := open(), open()
		q := func(t *testing.T, sql string) uint64 {
			t.Helper()
			n, err := testenv.Count(context.Background(), a.(testenv.Store), sql)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		fn(t, &ownersEnv{a: a, b: b, oneServer: true,
			counts: func(t *testing.T, site string) (uint64, uint64) {
				return q(t, fmt.Sprintf("SELECT count() FROM %s.hits WHERE site = '%s'", d.Name, site)),
					q(t, fmt.Sprintf("SELECT uniqExact(source_id, offset) FROM %s.hits WHERE site = '%s'", d.Name, site))
			},
			lastDup: func(t *testing.T, site string) int64 {
				return int64(q(t, fmt.Sprintf("SELECT toUInt64(if(count() = 0, 0, max(offset) + 1)) FROM (SELECT offset, count() AS n FROM %s.hits WHERE site = '%s' GROUP BY source_id, offset HAVING n > 1)", d.Name, site))) - 1
			},
		})
	})
	t.Run("cluster", func(t *testing.T) {
		zk := testenv.ZooKeeper(t)
		servers := testenv.ClickHouseCluster(t, zk, "web", 2)
		r1, r2 := servers[0], servers[1]
		open := func(addrs ...string) collector.Inserter {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := sink.Open(ctx, sink.Options{Addr: addrs, Database: "hc", Cluster: "web", InsertTimeout: 10 * time.Second, DialTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := open(r1.Addr(), r2.Addr()), open(r2.Addr(), r1.Addr())
		// Counted on r1 once it has what r2 took (each collector inserts
		// into the replica it reaches first).
		sync := func(t *testing.T) {
			t.Helper()
			r1.Exec(t, "SYSTEM SYNC REPLICA hc.hits_local")
		}
		fn(t, &ownersEnv{a: a, b: b,
			counts: func(t *testing.T, site string) (uint64, uint64) {
				sync(t)
				return replicaRows(t, r1, site), replicaDistinct(t, r1, site)
			},
			lastDup: func(t *testing.T, site string) int64 {
				sync(t)
				return int64(replicaCount(t, r1, "SELECT toUInt64(if(count() = 0, 0, max(offset) + 1)) FROM (SELECT offset, count() AS n FROM hc.hits_local WHERE site = ? GROUP BY source_id, offset HAVING n > 1)", site)) - 1
			},
		})
	})
}

// ownersTune points a collector at the file with a state directory of its
// own and a short refresh interval.
func ownersTune(path, site, state string) func(*collector.Options) {
	return ownersTuneEvery(path, site, state, ownersRefresh)
}

func ownersTuneEvery(path, site, state string, refresh time.Duration) func(*collector.Options) {
	return func(o *collector.Options) {
		o.Sources = []collector.Source{{Glob: path, Site: site, Format: "combined"}}
		o.StateDir = state
		o.OwnersRefresh = refresh
	}
}

// waitOnce waits until site has want distinct lines, then checks that it
// has each once.
func (e *ownersEnv) waitOnce(t *testing.T, site string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var rows, distinct uint64
	for time.Now().Before(deadline) {
		rows, distinct = e.counts(t, site)
		if rows > distinct {
			t.Fatalf("%s: %d rows for %d distinct lines: %d shipped twice", site, rows, distinct, rows-distinct)
		}
		if distinct == want {
			time.Sleep(500 * time.Millisecond) // anything late shows now
			if rows, distinct = e.counts(t, site); rows != want || distinct != want {
				t.Fatalf("%s: %d rows, %d distinct lines, want %d of each", site, rows, distinct, want)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %d rows, %d distinct lines after %v, want %d", site, rows, distinct, timeout, want)
}

// waitReady waits until fn says c's Ready() is as wanted.
func waitReady(t *testing.T, c *collector.Collector, timeout time.Duration, want func(error) bool) error {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := c.Ready()
		if want(err) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ready() = %v after %v", err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func collectorID(t *testing.T, state string) string {
	t.Helper()
	id, err := os.ReadFile(filepath.Join(state, "collector.id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(id))
}

// One collector ships the file; a second, started later, leaves it alone
// and says who ships it; once the first stops, the second takes the file
// over within one refresh interval: every line once.
func TestSecondCollectorOnOneFileRefused(t *testing.T) {
	t.Parallel()
	ownersEnvs(t, func(t *testing.T, e *ownersEnv) {
		const site = "owned"
		path := filepath.Join(t.TempDir(), "access.log")
		base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
		if err := os.WriteFile(path, logLines(61, 2000, base), 0o644); err != nil {
			t.Fatal(err)
		}
		stateA, stateB := t.TempDir(), t.TempDir()
		_, stopA := runShipping(t, e.a, ownersTune(path, site, stateA))
		e.waitOnce(t, site, 2000, time.Minute)

		b, stopB := runShipping(t, e.b, ownersTune(path, site, stateB))
		defer stopB()
		idA := collectorID(t, stateA)
		ready := waitReady(t, b, 30*time.Second, func(err error) bool { return err != nil && strings.Contains(err.Error(), idA) })
		t.Logf("second collector: /readyz: %v", ready)
		host, _ := os.Hostname()
		if !strings.Contains(ready.Error(), path) || !strings.Contains(ready.Error(), host) {
			t.Errorf("Ready() = %v, want the path and the other collector's host %s", ready, host)
		}
		// The first collector ships what is written now, the second none of
		// it. Written in steps, as a web server writes: two collectors
		// reading it cut different batches (identical ones would be
		// dropped as duplicates by the store or refused as a query
		// already running).
		appendSlowly(t, path, 62, 30, 100, base.Add(time.Hour), 3*time.Second)
		e.waitOnce(t, site, 5000, time.Minute)
		time.Sleep(3 * ownersRefresh) // the second's refreshes find the first still there
		e.waitOnce(t, site, 5000, time.Second)

		// The first stops (and gives its files up): the second takes over.
		t0 := time.Now()
		stopA()
		appendSlowly(t, path, 63, 10, 100, base.Add(2*time.Hour), time.Second)
		e.waitOnce(t, site, 6000, time.Minute)
		t.Logf("the first collector stopped: the second shipped the file's new lines %v later", time.Since(t0).Round(100*time.Millisecond))
		waitReady(t, b, 10*time.Second, func(err error) bool { return err == nil })
	})
}

// Two collectors started at the same moment on the same file. Each writes
// its record before it reads the others', so at least one sees the other
// and waits: on one server every line is shipped once. Where a replica
// hides a record (TestCollectorsOnLaggingReplicas) the bound is one
// refresh interval: a line read after that is shipped once; none is lost.
func TestCollectorsStartedTogetherOnOneFile(t *testing.T) {
	t.Parallel()
	ownersEnvs(t, func(t *testing.T, e *ownersEnv) {
		const site = "together"
		path := filepath.Join(t.TempDir(), "access.log")
		base := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
		if err := os.WriteFile(path, logLines(71, 3000, base), 0o644); err != nil {
			t.Fatal(err)
		}
		var cs [2]*collector.Collector
		var wg sync.WaitGroup
		start := time.Now()
		for i, ins := range []collector.Inserter{e.a, e.b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs[i], _ = runShipping(t, ins, ownersTune(path, site, t.TempDir()))
			}()
		}
		wg.Wait()
		// Lines written in small steps over 4 intervals (two collectors
		// cut different batches of them); the file's size after 2
		// intervals and a second (the refresh that sees both, the stop at
		// the next batch, the batch in flight) bounds the duplicates.
		var bound int64 = -1
		for i := range 100 {
			appendTo(t, path, logLines(uint64(100+i), 20, base.Add(time.Duration(i+1)*time.Minute)))
			time.Sleep(4 * ownersRefresh / 100)
			if fi, err := os.Stat(path); err == nil && bound < 0 && time.Since(start) > 2*ownersRefresh+time.Second {
				bound = fi.Size()
			}
		}
		e.waitDistinct(t, site, 5000, time.Minute)
		rows, distinct := e.counts(t, site)
		last := e.lastDup(t, site)
		t.Logf("started together: %d rows for %d lines (%d twice), the last line twice at offset %d; the bound is offset %d", rows, distinct, rows-distinct, last, bound)
		if distinct != 5000 {
			t.Errorf("%d distinct lines of 5000", distinct)
		}
		if last >= bound {
			t.Errorf("a line at offset %d, written after the bound (offset %d), was shipped twice", last, bound)
		}
		if e.oneServer && rows != distinct {
			t.Errorf("one server: %d lines shipped twice, want none (each collector writes its record before it reads the other's)", rows-distinct)
		}
		refused := 0
		for _, c := range cs {
			if err := c.Ready(); err != nil && strings.Contains(err.Error(), "shipped by collector") {
				refused++
				t.Logf("/readyz: %v", err)
			}
		}
		if refused != 1 {
			t.Errorf("%d of the 2 collectors leave the file to the other, want 1", refused)
		}
	})
}

// waitDistinct waits until site has want distinct lines (duplicates
// allowed).
func (e *ownersEnv) waitDistinct(t *testing.T, site string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, distinct := e.counts(t, site); distinct == want {
			time.Sleep(500 * time.Millisecond)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, distinct := e.counts(t, site)
	t.Fatalf("%s: %d distinct lines after %v, want %d", site, distinct, timeout, want)
}

// appendSlowly appends steps chunks of n lines to path over span.
func appendSlowly(t *testing.T, path string, seed uint64, steps, n int, at time.Time, span time.Duration) {
	t.Helper()
	for i := range steps {
		appendTo(t, path, logLines(seed*1000+uint64(i), n, at.Add(time.Duration(i)*time.Minute)))
		time.Sleep(span / time.Duration(steps))
	}
}

// Two replicas that do not fetch each other's source_owners parts hide each
// collector's record from the other: both ship the file (ClickHouse has no
// compare-and-set; this is what detection cannot prevent). Once the
// replicas have each other's records, the next refresh stops one of the
// two: no line written after that is shipped twice, and none is lost.
func TestCollectorsOnLaggingReplicas(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	open := func(addrs ...string) collector.Inserter {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := sink.Open(ctx, sink.Options{Addr: addrs, Database: "hc", Cluster: "web", InsertTimeout: 10 * time.Second, DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(r1.Addr(), r2.Addr()), open(r2.Addr(), r1.Addr())
	for _, r := range servers {
		r.Exec(t, "SYSTEM STOP FETCHES hc.source_owners_local")
	}
	const site = "lagging"
	path := filepath.Join(t.TempDir(), "access.log")
	base := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, logLines(81, 1000, base), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each read of the records waits for the replica, at most 5 s (the
	// parts it does not fetch): the window (3 intervals) must be longer
	// than a round, or every refresh finds its own record lapsed.
	const refresh = 3 * time.Second
	ca, _ := runShipping(t, a, ownersTuneEvery(path, site, t.TempDir(), refresh))
	cb, _ := runShipping(t, b, ownersTuneEvery(path, site, t.TempDir(), refresh))
	counts := func() (rows, distinct uint64) {
		r1.Exec(t, "SYSTEM SYNC REPLICA hc.hits_local")
		return replicaRows(t, r1, site), replicaDistinct(t, r1, site)
	}
	// Both read once their claims are made (each waits, 5 s, for its
	// replica's records).
	deadline := time.Now().Add(time.Minute)
	for _, d := counts(); d < 1000 && time.Now().Before(deadline); _, d = counts() {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	// Small steps, faster than a batch fills: the two collectors cut
	// different batches (identical ones the replicated table would drop).
	appendSlowly(t, path, 82, 100, 20, base.Add(time.Hour), 4*time.Second)
	for _, d := counts(); d < 3000 && time.Now().Before(deadline); _, d = counts() {
		time.Sleep(200 * time.Millisecond)
	}
	rows, distinct := counts()
	t.Logf("each collector unseen by the other: %d rows for %d lines (%d twice)", rows, distinct, rows-distinct)
	if rows == distinct {
		t.Fatalf("no line shipped twice while neither collector saw the other: the case does not arise (%v / %v)", ca.Ready(), cb.Ready())
	}

	t0 := time.Now()
	for _, r := range servers {
		r.Exec(t, "SYSTEM START FETCHES hc.source_owners_local")
	}
	var waiting *collector.Collector
	for waiting == nil {
		for _, c := range []*collector.Collector{ca, cb} {
			if err := c.Ready(); err != nil && strings.Contains(err.Error(), "another collector ships") {
				waiting = c
			}
		}
		if time.Since(t0) > time.Minute {
			t.Fatalf("neither collector gave way a minute after the replicas fetched again: %v / %v", ca.Ready(), cb.Ready())
		}
		time.Sleep(50 * time.Millisecond)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	bound := fi.Size()
	t.Logf("the replicas fetch each other's records again: one collector gave way %v later (refresh %v)", time.Since(t0).Round(100*time.Millisecond), refresh)
	appendSlowly(t, path, 83, 100, 20, base.Add(2*time.Hour), 4*time.Second)
	deadline = time.Now().Add(time.Minute)
	for _, d := counts(); d < 5000 && time.Now().Before(deadline); _, d = counts() {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	rows, distinct = counts()
	last := int64(replicaCount(t, r1, "SELECT toUInt64(if(count() = 0, 0, max(offset) + 1)) FROM (SELECT offset, count() AS n FROM hc.hits_local WHERE site = ? GROUP BY source_id, offset HAVING n > 1)", site)) - 1
	t.Logf("in the end: %d rows for %d lines (%d twice), the last line twice at offset %d; the file's size when one gave way: %d", rows, distinct, rows-distinct, last, bound)
	if distinct != 5000 {
		t.Errorf("%d distinct lines of 5000", distinct)
	}
	if last >= bound {
		t.Errorf("a line at offset %d, written after one collector gave way (offset %d), was shipped twice", last, bound)
	}
}

// On both stores (an 18.16 server, the embedded engine): a collector's
// record of the file it ships names it (the id kept in its state
// directory) and its host, and is released when it stops. Where the store
// refuses source_owners (a schema from before it, a collector user without
// the grant), the files are shipped all the same, said in the log and in
// hitcount_collector_owners_unchecked: an upgrade whose schema step was
// skipped must not stop shipping.
func TestSourceOwnersOnEachStore(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		base := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
		live := func(t *testing.T, site string) []sink.Owner {
			t.Helper()
			var out []sink.Owner
			q := "SELECT collector, its_host FROM (" + strings.NewReplacer("IN ?", "IN (SELECT DISTINCT source_id FROM "+st.db+".hits WHERE site = '"+site+"')", "- ?", "- 3600").
				Replace(sink.OwnersQuery(st.db+".source_owners")) + ")"
			err := st.store.Select(context.Background(), q, nil, func(scan func(...any) error) error {
				var o sink.Owner
				if err := scan(&o.Collector, &o.Host); err != nil {
					return err
				}
				out = append(out, o)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}

		t.Run("recorded, then released", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "access.log")
			if err := os.WriteFile(path, logLines(91, 500, base), 0o644); err != nil {
				t.Fatal(err)
			}
			state := t.TempDir()
			_, stop := runShipping(t, st.store, ownersTune(path, "recorded", state))
			waitSiteRows(t, st, "recorded", 500, time.Minute)
			host, _ := os.Hostname()
			if got := live(t, "recorded"); len(got) != 1 || got[0].Collector != collectorID(t, state) || got[0].Host != host {
				t.Errorf("live records %v, want one of collector %s on %s", got, collectorID(t, state), host)
			}
			stop()
			if got := live(t, "recorded"); len(got) != 0 {
				t.Errorf("live records after the collector stopped: %v, want none", got)
			}
		})

		t.Run("table missing", func(t *testing.T) {
			execSQL(t, st, "DROP TABLE "+st.db+".source_owners")
			path := filepath.Join(t.TempDir(), "access.log")
			if err := os.WriteFile(path, logLines(92, 500, base), 0o644); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			c, _ := runShipping(t, st.store, func(o *collector.Options) {
				ownersTune(path, "unchecked", t.TempDir())(o)
				o.Metrics = collector.NewMetrics(reg)
			})
			waitSiteRows(t, st, "unchecked", 500, time.Minute)
			if v := gaugeValue(t, reg, "hitcount_collector_owners_unchecked"); v != 1 {
				t.Errorf("hitcount_collector_owners_unchecked = %v, want 1", v)
			}
			if err := c.Ready(); err != nil {
				t.Errorf("Ready() = %v; shipping without the check is said in the log and the gauge, not by /readyz", err)
			}
		})
	})
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// A collector killed while it ships (no release) leaves its record live
// until it is stale, 3 refresh intervals; the collector waiting for the
// file then takes it over from where the store's lines end, after any
// insert the killed one left running: every line once.
func TestKilledCollectorsFileTakenOver(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	st := newServerStore(t, ch, 10*time.Second)
	path := filepath.Join(t.TempDir(), "access.log")
	base := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, logLines(101, 2000, base), 0o644); err != nil {
		t.Fatal(err)
	}
	stateA := t.TempDir()
	a := exec.Command(os.Args[0], "-test.run=^$")
	a.Env = append(append(os.Environ(), st.d.Env()...), "HITCOUNT_CHILD_COLLECTOR=1",
		"HC_GLOB="+path, "HC_ROWS=300", "HC_STATE="+stateA, "HC_OWNERS_REFRESH="+ownersRefresh.String())
	a.Stderr = testWriter{t}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	st.waitRows(t, 2000, time.Minute)

	b, _ := runShipping(t, st.store, ownersTune(path, "www", t.TempDir()))
	idA := collectorID(t, stateA)
	waitReady(t, b, 30*time.Second, func(err error) bool { return err != nil && strings.Contains(err.Error(), idA) })

	// Lines keep coming; the first collector is killed while it ships them.
	written := make(chan int)
	stopWriting := make(chan struct{})
	go func() {
		n := 0
		for i := 0; ; i++ {
			select {
			case <-stopWriting:
				written <- n
				return
			case <-time.After(20 * time.Millisecond):
			}
			appendTo(t, path, logLines(uint64(2000+i), 20, base.Add(time.Duration(i)*time.Second)))
			n += 20
		}
	}()
	time.Sleep(time.Second)
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	t0 := time.Now()
	waitReady(t, b, time.Minute, func(err error) bool { return err == nil })
	t.Logf("the first collector killed: the second took its file over %v later (stale after %v)", time.Since(t0).Round(100*time.Millisecond), 3*ownersRefresh)
	time.Sleep(time.Second)
	close(stopWriting)
	total := 2000 + uint64(<-written)
	st.waitRows(t, total, time.Minute)
	rows, distinct, _ := st.counts(t)
	if rows != total || distinct != total {
		t.Errorf("%d rows, %d distinct lines, want %d of each", rows, distinct, total)
	}
}
