package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
)

// Cluster mode on two ClickHouse 18.16 servers, replicas of one shard through
// ZooKeeper: the collector binary ships a growing log while the replica it
// inserts into is SIGKILLed and restarted mid-stream. Both replicas end with
// every line exactly once, and a sweeper run against the cluster (reading the
// Distributed tables) records and emails exactly the milestones the log
// crossed.
func TestClusterReplicaKilledMidStream(t *testing.T) {
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	first := servers[0]
	bins := t.TempDir()
	collector, sweeper := build(t, bins, "cmd/collector"), build(t, bins, "cmd/sweeper")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	outbox := filepath.Join(dir, "outbox")
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse:
  addr: [%q, %q]
  database: hc
  cluster: web
  insert_timeout: 5s
  dial_timeout: 1s
sources: [{path: %q, site: www, start_at: beginning}]
batch: {rows: 2000, delay: 200ms}
http: {listen: ""}
state_dir: %q
outbox: %q
sweep: {every: 1m}
rules:
  - name: pricing-milestones
    match: {site: www, path: /pricing}
    milestones: [100, 1000, 5000, 1000000]
    window: lifetime
    to: [ops@example.com]
`, servers[0].Addr(), servers[1].Addr(), logPath, filepath.Join(dir, "state"), outbox)), 0o644)

	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := loggen.New(loggen.Options{Seed: rand.Uint64()})
	var buf []byte
	lines := 0
	write := func(n int) {
		buf = buf[:0]
		for range n {
			buf, _ = g.Line(buf, time.Now())
			lines++
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	col := exec.Command(collector, "-config", cfg, "-log-level", "warn")
	col.Stderr = testWriter{t}
	if err := col.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { col.Process.Signal(syscall.SIGTERM); col.Wait() }()
	writeFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			write(1 + rand.IntN(100))
		}
	}
	writeFor(4 * time.Second)
	first.Kill() // the replica the collector inserts into (first in addr)
	writeFor(5 * time.Second)
	first.Start()
	writeFor(4 * time.Second)
	t.Logf("%d lines written; replica %s killed and restarted mid-stream", lines, first.Addr())

	for _, s := range servers {
		waitCount(t, s, "SELECT count() FROM hc.hits_local", uint64(lines), 3*time.Minute)
	}
	for _, s := range servers {
		var rows, distinct, rollup uint64
		conn := s.Conn(t)
		// Each table replicates on its own: let the rollup catch up too.
		for _, table := range []string{"hits_local", "hits_1m_local"} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := conn.Exec(ctx, "SYSTEM SYNC REPLICA hc."+table)
			cancel()
			if err != nil {
				t.Fatalf("replica %s: sync %s: %v", s.Addr(), table, err)
			}
		}
		if err := conn.QueryRow(context.Background(), "SELECT count(), uniqExact(source_id, offset) FROM hc.hits_local").Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(context.Background(), "SELECT sum(hits) FROM hc.hits_1m_local").Scan(&rollup); err != nil {
			t.Fatal(err)
		}
		if rows != uint64(lines) || distinct != uint64(lines) {
			t.Errorf("replica %s: %d rows, %d distinct (source, offset); want %d each", s.Addr(), rows, distinct, lines)
		}
		// 18.16 writes a view's part after the table's: a server killed
		// between the two keeps the rows and loses that batch's rollup
		// block (the README's documented gap), at most one batch here.
		if rollup > uint64(lines) || rollup+2000 < uint64(lines) {
			t.Errorf("replica %s: rollup sum %d for %d lines", s.Addr(), rollup, lines)
		}
		t.Logf("replica %s: %d rows, %d distinct, rollup %d", s.Addr(), rows, distinct, rollup)
	}

	// The milestones the log crossed, counted from the log itself.
	pricing := countPath(t, logPath, "/pricing")
	want := 0
	for _, m := range []int{100, 1000, 5000, 1000000} {
		if pricing >= m+2000 { // clear of the one-batch rollup gap above
			want++
		} else if pricing >= m-2000 {
			t.Fatalf("/pricing has %d hits, too close to milestone %d for an exact expectation", pricing, m)
		}
	}
	sw := exec.Command(sweeper, "-config", cfg, "-once")
	if out, err := sw.CombinedOutput(); err != nil {
		t.Fatalf("sweeper -once against the cluster: %v\n%s", err, out)
	}
	emls, _ := filepath.Glob(filepath.Join(outbox, "*.eml"))
	// Read on the other replica, once it has fetched the sweeper's writes.
	if err := servers[1].Conn(t).Exec(context.Background(), "SYSTEM SYNC REPLICA hc.crossings_local"); err != nil {
		t.Fatal(err)
	}
	var sent uint64
	if err := servers[1].Conn(t).QueryRow(context.Background(),
		"SELECT countIf(st = 'sent') FROM (SELECT argMax(state, version) AS st FROM hc.crossings GROUP BY key)").Scan(&sent); err != nil {
		t.Fatal(err)
	}
	if len(emls) != want || sent != uint64(want) {
		t.Fatalf("/pricing had %d hits: %d emails, %d crossings sent; want %d", pricing, len(emls), sent, want)
	}
	t.Logf("/pricing %d hits: %d milestones crossed, %d emails, read through the Distributed tables", pricing, want, len(emls))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func waitCount(t *testing.T, s *testenv.ClickHouseServer, q string, want uint64, timeout time.Duration) {
	t.Helper()
	conn := s.Conn(t)
	var n uint64
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := conn.QueryRow(context.Background(), q).Scan(&n); err == nil && n >= want {
			if n > want {
				t.Fatalf("%s on %s: %d, more than %d: a line twice", q, s.Addr(), n, want)
			}
			return
		}
	}
	t.Fatalf("%s on %s: %d after %v, want %d", q, s.Addr(), n, timeout, want)
}

// countPath counts the log's lines whose path (without query) is path.
func countPath(t *testing.T, logPath, path string) int {
	p, err := parser.New("combined")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	var h parser.Hit
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if p.Parse(sc.Bytes(), &h) == nil && string(h.Path) == path {
			n++
		}
	}
	return n
}
