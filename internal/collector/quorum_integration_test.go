package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// The collector on two 18.16 replicas with insert_quorum 2, two files
// shipping at once. While r2 is stopped every insert is refused (too few
// live replicas): nothing lands, the lines wait in the files. While r2 is
// frozen, inserts wait for its quorum, the collector gives up on them
// (insert_timeout) and sends them again identically. After each, every line
// ends on both replicas once, in hits and in the rollup: nothing lost,
// nothing doubled, no rollup short of a batch.
func TestCollectorQuorumReplicaDown(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{r1.Addr(), r2.Addr()}, Database: "hc", Cluster: "web", InsertQuorum: 2, InsertTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")}
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	seed := uint64(160)
	write := func(n int) {
		for _, f := range files {
			seed++
			appendTo(t, f, logLines(seed, n, base.Add(time.Duration(seed)*time.Minute)))
		}
	}
	for _, f := range files {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(300)
	stop := startInserter(t, s, filepath.Join(dir, "*.log"), nil)
	defer stop()
	st := &store{d: &testenv.Database{Backend: "cluster", Name: "hc", Server: r1}, db: "hc", store: s}
	waitSiteRows(t, st, "www", 600, 30*time.Second)

	// count reads what a replica holds on its own tables.
	count := func(t *testing.T, srv *testenv.ClickHouseServer) (rows, distinct, rollup uint64) {
		t.Helper()
		conn := srv.Conn(t)
		for _, table := range []string{"hits_local", "hits_1m_local"} {
			if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA hc."+table); err != nil {
				t.Fatal(err)
			}
		}
		if err := conn.QueryRow(ctx, "SELECT (SELECT count() FROM hc.hits_local), (SELECT uniqExact(source_id, offset) FROM hc.hits_local), (SELECT sum(hits) FROM hc.hits_1m_local)").Scan(&rows, &distinct, &rollup); err != nil {
			t.Fatal(err)
		}
		return rows, distinct, rollup
	}
	// check waits until both replicas hold want lines in hits and in the
	// rollup: an insert writes the views' tables after hits, each waiting
	// for its quorum, so hits may show a batch a moment before hits_1m.
	check := func(t *testing.T, want uint64) {
		t.Helper()
		waitSiteRows(t, st, "www", want, 60*time.Second)
		for i, srv := range servers {
			var rows, distinct, rollup uint64
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if rows, distinct, rollup = count(t, srv); rows > want || rollup > want || rows == want && rollup == want {
					break
				}
			}
			if rows != want || distinct != want || rollup != want {
				t.Errorf("r%d: %d rows, %d distinct (source, offset), hits_1m %d; want %d each", i+1, rows, distinct, rollup, want)
			}
		}
	}

	t.Run("r2 stopped", func(t *testing.T) {
		r2.Stop()
		write(200)
		time.Sleep(3 * time.Second)
		if rows, _, _ := count(t, r1); rows != 600 {
			t.Errorf("r1 took %d rows while r2 was down; want 600 (every insert refused)", rows)
		}
		r2.Start()
		check(t, 1000)
	})
	t.Run("r2 frozen", func(t *testing.T) {
		r2.Freeze()
		write(200)
		time.Sleep(5 * time.Second) // past insert_timeout: outcomes unknown
		r2.Thaw()
		check(t, 1400)
	})
}
