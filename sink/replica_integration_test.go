package sink_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// twoReplicas starts r1 and r2 of one shard with the schema on both, and a
// sink on each, and stops r2 fetching: what is written through r1 then
// exists on r1 alone.
func twoReplicas(t *testing.T) (r1, r2 *testenv.ClickHouseServer, s1, s2 *sink.Sink) {
	t.Helper()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	open := func(r *testenv.ClickHouseServer) *sink.Sink {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := sink.Open(ctx, sink.Options{Addr: []string{r.Addr()}, Database: "hc", Cluster: "web", InsertTimeout: 10 * time.Second, DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s2, s1 = open(servers[1]), open(servers[0])
	servers[1].Exec(t, "SYSTEM STOP FETCHES")
	return servers[0], servers[1], s1, s2
}

func crossingRow(key string) []any {
	now := time.Now()
	return []any{key, "rule", "www", "/p", now, uint64(10), uint64(11), "sent", uint64(3 << 61), "r1", uint64(1), uint32(1), "<id@x>", "", now}
}

const crossingColumns = "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated"

func countVia(ctx context.Context, s *sink.Sink, q string) (uint64, error) {
	var n uint64
	err := s.Select(ctx, q, nil, func(scan func(...any) error) error { return scan(&n) })
	return n, err
}

// A sweeper's read is served by the replica it checked (issue 16, finding
// 3). Through the Distributed table, with prefer_localhost_replica=0 (or a
// server that does not recognise itself in remote_servers: NAT, a port
// mapping), a read may go to the other replica: before, 11 of 20 reads of
// the crossings r1 holds came from r2, which had never fetched them.
func TestSweeperReadsTheReplicaItChecked(t *testing.T) {
	t.Parallel()
	_, _, s1, _ := twoReplicas(t)
	ctx := context.Background()
	if err := s1.InsertRows(ctx, "hc.crossings", crossingColumns, [][]any{crossingRow("k1"), crossingRow("k2")}); err != nil {
		t.Fatal(err)
	}
	far := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"prefer_localhost_replica": 0}))
	short := 0
	for range 20 {
		n, err := countVia(far, s1, "SELECT count() FROM hc.crossings")
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			short++
		}
	}
	if short > 0 {
		t.Errorf("%d of 20 reads missed the crossings this replica holds: served by the replica that never fetched them", short)
	}
}

// A part only a replica that is down holds (issue 16, finding 1), seen by
// the sweeper: a read of its inputs goes on without it, bounded, and the
// sink says which table lacks what; a read of its state fails, bounded,
// since a crossing's row only the down replica has could send an email
// again. Neither leaves a SYSTEM SYNC REPLICA running on the server. Before:
// both reads waited out the insert timeout on SYSTEM SYNC REPLICA, failed,
// and left it running.
func TestSweeperReadsWithAPartOnlyOnADownReplica(t *testing.T) {
	t.Parallel()
	r1, r2, s1, s2 := twoReplicas(t)
	ctx := context.Background()
	if err := s1.InsertRows(ctx, "hc.crossings", crossingColumns, [][]any{crossingRow("k1")}); err != nil {
		t.Fatal(err)
	}
	minute := time.Now().Truncate(time.Minute)
	if err := s1.InsertRows(ctx, "hc.hits_1m", "minute, site, host, path, method, status, bot, hits, bytes",
		[][]any{{minute, "www", "h", "/p", "GET", uint16(200), uint8(0), uint64(5), uint64(50)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	r1.Stop()
	r2.Exec(t, "SYSTEM START FETCHES")

	t0 := time.Now()
	n, err := countVia(ctx, s2, "SELECT count() FROM hc.hits_1m")
	took := time.Since(t0)
	t.Logf("input read with its part on the down replica: %d rows, err %v, in %v", n, err, took.Round(10*time.Millisecond))
	if err != nil {
		t.Errorf("reading the inputs failed: %v; want what the replica has", err)
	}
	if got := s2.Incomplete(); len(got) != 1 || got[0].Table != "hc.hits_1m_local" {
		t.Errorf("incomplete tables: %+v, want hc.hits_1m_local", got)
	}
	if err := s2.ReplicaProblem(); err == nil {
		t.Error("no replica problem reported for /readyz")
	}

	t0 = time.Now()
	_, err = countVia(ctx, s2, "SELECT count() FROM hc.crossings")
	t.Logf("state read: %v in %v", err, time.Since(t0).Round(10*time.Millisecond))
	if !errors.As(err, new(*sink.IncompleteError)) {
		t.Errorf("reading the state with a crossing's row on the down replica: %v, want an *IncompleteError", err)
	}
	if took := time.Since(t0); took > 15*time.Second {
		t.Errorf("the state read took %v: unbounded", took)
	}
	var running uint64
	if err := r2.Conn(t).QueryRow(ctx, "SELECT count() FROM system.processes WHERE query LIKE 'SYSTEM SYNC%'").Scan(&running); err != nil {
		t.Fatal(err)
	}
	if running != 0 {
		t.Errorf("%d SYSTEM SYNC REPLICA left running on r2", running)
	}

	r1.Start()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := countVia(ctx, s2, "SELECT count() FROM hc.crossings")
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1 is back, and the state read still says %d, %v", n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		n, err := countVia(ctx, s2, "SELECT sum(hits) FROM hc.hits_1m")
		if err != nil {
			t.Fatal(err)
		}
		if n == 5 && len(s2.Incomplete()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r1 is back, and the input read says %d hits, the sink %+v", n, s2.Incomplete())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
