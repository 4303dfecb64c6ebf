package collector_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// A part that exists only on a replica that is down (it took the insert,
// the other had not fetched it yet) must not stall what does not depend on
// it (issue 16, finding 1). Before: the collector's start-up read waited on
// SYSTEM SYNC REPLICA for that part for ever (0 of 100 new lines shipped
// after 60 s, and one more SYNC REPLICA left running on the server per
// attempt).
//
// Two files ship through r1 while r2 fetches nothing; r1 goes down with
// their parts. A collector on the same state directory, now on r2, ships
// the two files' new lines at once (it knows where it stopped: its record
// of acknowledged batches), while a file it never shipped waits (its lines
// could be in the missing parts, as far as anyone can tell), /readyz says
// why, and no SYNC REPLICA is left running. Then either r1 comes back, and
// every line is on both replicas once; or the operator removes r1 for good
// (README), the part is declared lost, and the waiting file ships.
func TestPartOnlyOnDownReplica(t *testing.T) {
	t.Parallel()
	for _, comesBack := range []bool{true, false} {
		name := map[bool]string{true: "the replica comes back", false: "the replica is removed for good"}[comesBack]
		t.Run(name, func(t *testing.T) { testPartOnlyOnDownReplica(t, comesBack) })
	}
}

func testPartOnlyOnDownReplica(t *testing.T, comesBack bool) {
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	open := func(addr string) *sink.Sink { return openClusterSink(t, ctx, addr) }
	open(r2.Addr()) // r2's tables exist before it stops fetching
	s1 := open(r1.Addr())
	r2.Exec(t, "SYSTEM STOP FETCHES")

	dir, state := t.TempDir(), t.TempDir()
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	path := func(site string) string { return filepath.Join(dir, site+".log") }
	for i, site := range []string{"a", "b"} {
		if err := os.WriteFile(path(site), logLines(uint64(40+i), 100, base), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tune := func(o *collector.Options) {
		o.Sources = nil
		for _, site := range []string{"a", "b", "c"} {
			o.Sources = append(o.Sources, collector.Source{Glob: path(site), Site: site, Format: "combined"})
		}
		o.StateDir = state
	}
	stop := startInserter(t, s1, path("a"), tune)
	for _, site := range []string{"a", "b"} {
		waitReplicaRows(t, r1, site, 100, time.Minute)
	}
	stop()
	if n := replicaRows(t, r2, "a") + replicaRows(t, r2, "b"); n != 0 {
		t.Fatalf("r2 fetched %d rows with fetches stopped: the case does not arise", n)
	}

	r1.Stop()
	r2.Exec(t, "SYSTEM START FETCHES")
	s2 := open(r2.Addr())
	for i, site := range []string{"a", "b"} {
		appendTo(t, path(site), logLines(uint64(50+i), 50, base.Add(time.Hour)))
	}
	if err := os.WriteFile(path("c"), logLines(60, 30, base), 0o644); err != nil {
		t.Fatal(err)
	}
	c, stop := runShipping(t, s2, tune)
	defer stop()
	t0 := time.Now()
	for _, site := range []string{"a", "b"} {
		waitReplicaRows(t, r2, site, 50, time.Minute)
	}
	t.Logf("with r1 down, r2 took the 2 known files' 100 new lines in %v", time.Since(t0).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second)
	if n := replicaRows(t, r2, "c"); n != 0 {
		t.Errorf("r2 holds %d lines of a file this collector never shipped, while parts only r1 has could hold it", n)
	}
	ready := c.Ready()
	t.Logf("/readyz: %v", ready)
	if ready == nil || !strings.Contains(ready.Error(), "no active replica has") && !strings.Contains(ready.Error(), "1 of 2 replicas active") {
		t.Errorf("ready = %v, want the parts r2 lacks", ready)
	}
	if n := syncsRunning(t, r2); n != 0 {
		t.Errorf("%d SYSTEM SYNC REPLICA queries left running on r2", n)
	}

	if comesBack {
		r1.Start()
		for _, site := range []string{"a", "b"} {
			waitReplicaRows(t, r2, site, 150, time.Minute)
		}
		waitReplicaRows(t, r2, "c", 30, time.Minute)
		stop()
		for _, r := range servers {
			for site, want := range map[string]uint64{"a": 150, "b": 150, "c": 30} {
				waitReplicaRows(t, r, site, want, time.Minute)
				if n := replicaDistinct(t, r, site); n != want {
					t.Errorf("replica %s: %d distinct lines of %s, want %d", r.Addr(), n, site, want)
				}
			}
		}
	} else {
		t0 := time.Now()
		forgetReplica(t, zoo, r2, "hc", "r1")
		waitReplicaRows(t, r2, "c", 30, 2*time.Minute)
		t.Logf("r1 removed from ZooKeeper: the waiting file shipped %v later", time.Since(t0).Round(100*time.Millisecond))
		deadline := time.Now().Add(time.Minute)
		for c.Ready() != nil && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if err := c.Ready(); err != nil {
			t.Errorf("still not ready after r1 was removed: %v", err)
		}
		// r1's parts are lost with it: what r2 holds is each line at most
		// once, and every line written while r1 was down.
		for site, want := range map[string]uint64{"a": 50, "b": 50, "c": 30} {
			if n, d := replicaRows(t, r2, site), replicaDistinct(t, r2, site); n != want || d != want {
				t.Errorf("r2: %d rows, %d distinct lines of %s, want %d", n, d, site, want)
			}
		}
	}
}

// runShipping runs a collector on ins like startInserter, and returns it.
func runShipping(t *testing.T, ins collector.Inserter, tune func(*collector.Options)) (*collector.Collector, func()) {
	t.Helper()
	opts := collector.Options{
		BatchRows: 5000, BatchDelay: 100 * time.Millisecond, Poll: 20 * time.Millisecond, Scan: 100 * time.Millisecond,
		RotatedIdle: 300 * time.Millisecond,
		Logger:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: testLogLevel()})),
	}
	tune(&opts)
	c, err := collector.New(ins, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return c, stop
}

func replicaRows(t *testing.T, r *testenv.ClickHouseServer, site string) uint64 {
	t.Helper()
	return replicaCount(t, r, "SELECT count() FROM hc.hits_local WHERE site = ?", site)
}

func replicaDistinct(t *testing.T, r *testenv.ClickHouseServer, site string) uint64 {
	t.Helper()
	return replicaCount(t, r, "SELECT uniqExact(source_id, offset) FROM hc.hits_local WHERE site = ?", site)
}

func replicaCount(t *testing.T, r *testenv.ClickHouseServer, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := r.Conn(t).QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s on %s: %v", q, r.Addr(), err)
	}
	return n
}

func syncsRunning(t *testing.T, r *testenv.ClickHouseServer) uint64 {
	return replicaCount(t, r, "SELECT count() FROM system.processes WHERE query LIKE 'SYSTEM SYNC REPLICA%'")
}

func waitReplicaRows(t *testing.T, r *testenv.ClickHouseServer, site string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n uint64
	for time.Now().Before(deadline) {
		if n = replicaRows(t, r, site); n > want {
			t.Fatalf("replica %s holds %d rows of %s, more than the %d lines: a line twice", r.Addr(), n, site, want)
		}
		if n == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("replica %s holds %d rows of %s after %v, want %d", r.Addr(), n, site, timeout, want)
}

// forgetReplica removes a dead replica's metadata from ZooKeeper, as the
// README tells an operator to: every replicated table of db, as the live
// replica lists them.
func forgetReplica(t *testing.T, zoo *testenv.ZooKeeperServer, live *testenv.ClickHouseServer, db, replica string) {
	t.Helper()
	rows, err := live.Conn(t).Query(context.Background(), "SELECT zookeeper_path FROM system.replicas WHERE database = ?", db)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for rows.Next() {
		var p string
		rows.Scan(&p)
		paths = append(paths, p+"/replicas/"+replica)
	}
	rows.Close()
	c, _, err := zk.Connect([]string{zoo.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var del func(p string) error
	del = func(p string) error {
		kids, _, err := c.Children(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, k := range kids {
			if err := del(p + "/" + k); err != nil {
				return err
			}
		}
		if err := c.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	for _, p := range paths {
		if err := del(p); err != nil {
			t.Fatal(err)
		}
	}
}
