package sink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Quorum inserts on real 18.16 replicas (sink/quorum.go): what an
// acknowledgement guarantees, and what each refusal and timeout leaves for
// the collector's identical re-send.

// quorumBatch is n hits under paths of their own (/q<source>/<i>), so a
// rollup's share of the batch can be read, and two sampled rejects.
func quorumBatch(source uint64, n int) *sink.Batch {
	b := sink.NewBatch(n)
	b.Reset("www", source)
	b.ReadAt = time.Now().Add(-time.Minute)
	now := time.Now().Unix()
	for i := range n {
		off := int64(i * 100)
		b.Add(&parser.Hit{Unix: now, Method: []byte("GET"), Path: fmt.Appendf(nil, "/q%x/%d", source, i), Status: 200}, off, off+100)
	}
	b.AddReject(int64(n*100), int64(n*100+100), "status: expected a three-digit status", []byte("garbage"))
	b.AddReject(int64(n*100+100), int64(n*100+200), "status: expected a three-digit status", []byte("garbage"))
	return b
}

// holding is what one replica holds of a batch, read on that replica's
// local tables without syncing it: what it would answer alone.
type holding struct {
	Hits, Rejects, Minutes, Days, Progress uint64
}

func (h holding) String() string {
	return fmt.Sprintf("hits %d, rejects %d, hits_1m %d, hits_1d %d, ingest_progress %d", h.Hits, h.Rejects, h.Minutes, h.Days, h.Progress)
}

// full is what a replica holding all of b, once, answers.
func full(b *sink.Batch) holding {
	n := uint64(b.Rows())
	return holding{Hits: n, Rejects: uint64(len(b.Rejects)), Minutes: n, Days: n, Progress: uint64(b.Last)}
}

func held(t *testing.T, conn driver.Conn, b *sink.Batch) holding {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var h holding
	paths := fmt.Sprintf("/q%x/%%", b.SourceID)
	err := conn.QueryRow(ctx, `SELECT
		(SELECT count() FROM hc.hits_local WHERE source_id = ?),
		(SELECT count() FROM hc.rejects_local WHERE source_id = ?),
		(SELECT sum(hits) FROM hc.hits_1m_local WHERE path LIKE ?),
		(SELECT sum(hits) FROM hc.hits_1d_local WHERE path LIKE ?),
		(SELECT max(o) FROM (SELECT maxMerge(max_offset) AS o FROM hc.ingest_progress_local WHERE source_id = ? GROUP BY source_id))`,
		b.SourceID, b.SourceID, paths, paths, b.SourceID).Scan(&h.Hits, &h.Rejects, &h.Minutes, &h.Days, &h.Progress)
	if err != nil {
		t.Fatalf("read what the replica holds of source %x: %v", b.SourceID, err)
	}
	return h
}

// openQuorum opens a sink on the replicas, the first of them first (it
// takes the inserts while it answers, so the test knows which did), and
// creates the schema on each.
func openQuorum(t *testing.T, servers []*testenv.ClickHouseServer, quorum int, insertTimeout time.Duration) *sink.Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var addrs []string
	for _, srv := range servers {
		addrs = append(addrs, srv.Addr())
	}
	s, err := sink.Open(ctx, sink.Options{Addr: addrs, Database: "hc", Cluster: "web", InsertQuorum: quorum, InsertTimeout: insertTimeout, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// exceptionCode is the server's code in err, 0 without one.
func exceptionCode(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}

// resendUntilAcked sends b again, identically, as the collector does after
// an unknown outcome: every error must be transient (never split as
// permanent), and the store must take it within limit.
func resendUntilAcked(t *testing.T, s *sink.Sink, b *sink.Batch, limit time.Duration) (tries int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		tries++
		err := s.Insert(context.Background(), b)
		if err == nil {
			return tries
		}
		if sink.Permanent(err) {
			t.Fatalf("re-send %d: %v classified permanent: the batch would be split", tries, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-sent %d times for %v, last: %v", tries, limit, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The headline. A replica acknowledges an insert once the part is on its
// own disk; without a quorum, the other replica fetches it later. Here r2
// cannot fetch (SYSTEM STOP FETCHES, so the window is not left to timing),
// r1 acknowledges the batch, and r1 is killed and its data directory wiped
// (the disk died): r2 alone holds nothing of an acknowledged batch, which
// the collector has moved past. With insert_quorum 2 the acknowledgement
// comes only once r2 holds the part, every table the insert writes alike,
// so r2 alone holds all of it.
func TestQuorumAckedBatchOutlivesItsReplica(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		quorum      int
		stopFetches bool
		onR2        func(b *sink.Batch) holding
	}{
		{"no quorum: acked, then lost with r1's disk", 0, true, func(*sink.Batch) holding { return holding{} }},
		{"insert_quorum 2: on r2 at the ack", 2, false, full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zk := testenv.ZooKeeper(t)
			servers := testenv.ClickHouseCluster(t, zk, "web", 2)
			r1, r2 := servers[0], servers[1]
			s := openQuorum(t, servers, tc.quorum, 5*time.Second)
			if tc.stopFetches {
				r2.Exec(t, "SYSTEM STOP FETCHES")
			}
			b := quorumBatch(0xd15c, 200)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			t0 := time.Now()
			if err := s.Insert(ctx, b); err != nil {
				t.Fatalf("insert: %v", err)
			}
			acked := time.Since(t0)
			r1.Kill()
			if err := os.RemoveAll(filepath.Join(r1.Dir(), "data")); err != nil {
				t.Fatal(err)
			}
			got, want := held(t, r2.Conn(t), b), tc.onR2(b)
			if got != want {
				t.Errorf("r2 alone holds %v; want %v", got, want)
			}
			t.Logf("acknowledged in %v; r1 killed, its data wiped; r2 alone holds %v", acked.Round(time.Millisecond), got)
		})
	}
}

// (a) r2 freezes (SIGSTOP) with the insert's quorum pending. The collector
// gives up waiting (insert_timeout); the server keeps waiting
// (insert_quorum_timeout, 10m by default, is longer) with the part on r1.
// The identical re-send is refused while that insert runs (216, its query
// id) and, transient, sent again; once r2 thaws and fetches, the first
// insert completes, views included, and the re-send is dropped as a
// duplicate and acknowledged: at that moment r2 holds all of the batch,
// once, and so does r1.
func TestQuorumResendAfterReplicaFroze(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	s := openQuorum(t, servers, 2, 3*time.Second)
	b := quorumBatch(0xf40, 100)

	r2.Freeze()
	err := s.Insert(context.Background(), b)
	if err == nil || sink.Permanent(err) {
		t.Fatalf("insert with r2 frozen: %v; want a transient error", err)
	}
	if got := held(t, r1.Conn(t), b); got.Hits != uint64(b.Rows()) || got.Minutes != 0 {
		t.Errorf("r1 holds %v after the collector gave up: want the hits part written, the views not yet (waiting for the quorum)", got)
	}
	err = s.Insert(context.Background(), b)
	if code := exceptionCode(err); code != 216 || sink.Permanent(err) {
		t.Errorf("re-send while the first waits for its quorum: %v (code %d); want 216, transient", err, code)
	}
	r2.Thaw()
	tries := resendUntilAcked(t, s, b, 30*time.Second)
	if got, want := held(t, r2.Conn(t), b), full(b); got != want {
		t.Errorf("at the ack r2 holds %v; want %v", got, want)
	}
	if got, want := held(t, r1.Conn(t), b), full(b); got != want {
		t.Errorf("r1 holds %v; want %v", got, want)
	}
	t.Logf("acknowledged after r2 thawed, %d sends; both replicas hold the batch once", tries)
}

// Why insert_quorum_timeout must be longer than insert_timeout: when the
// server gives up first (319 UNKNOWN_STATUS_OF_INSERT), the hits part is
// written and the views never ran; the identical re-send, once the quorum
// is reached, is dropped as a duplicate, and 18.16 pushes no duplicate to
// the views: the rollups lack the batch for good. Sent here on a connection
// of the test's own, since the sink refuses such settings.
func TestQuorumServerTimeoutSkipsViews(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	openQuorum(t, servers, 0, 5*time.Second) // the schema
	opts := r1.Options()
	opts.Settings = clickhouse.Settings{"insert_quorum": 2, "insert_quorum_timeout": 1000}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ts := time.Unix(time.Now().Unix(), 0) // the same block each time
	insert := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO hc.hits_local (ts, site, path, source_id, offset)")
		if err != nil {
			return err
		}
		for i := range 50 {
			if err := batch.Append(ts, "www", fmt.Sprintf("/t/%d", i), uint64(0x319), uint64(i*100)); err != nil {
				return err
			}
		}
		return batch.Send()
	}
	r2.Freeze()
	err = insert()
	if code := exceptionCode(err); code != 319 || sink.Permanent(err) {
		t.Fatalf("insert with r2 frozen: %v (code %d); want 319, transient", err, code)
	}
	t.Logf("the server gave up: %v", err)
	r2.Thaw()
	deadline := time.Now().Add(30 * time.Second)
	for err = insert(); err != nil && time.Now().Before(deadline); err = insert() {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("re-send after r2 thawed: %v", err)
	}
	var hits, minutes uint64
	if err := r1.Conn(t).QueryRow(context.Background(), "SELECT (SELECT count() FROM hc.hits_local WHERE source_id = 0x319), (SELECT sum(hits) FROM hc.hits_1m_local WHERE path LIKE '/t/%')").Scan(&hits, &minutes); err != nil {
		t.Fatal(err)
	}
	if hits != 50 || minutes != 0 {
		t.Errorf("after the acknowledged re-send: hits %d, hits_1m %d; pinned: 50 and 0 (the views never ran)", hits, minutes)
	}
}

// (b) and (c): refusals before anything is written. With r2 stopped, every
// insert is refused (285 TOO_LESS_LIVE_REPLICAS) and nothing lands; the
// batch waits and is taken once r2 is back. With another insert's quorum
// pending, an insert is refused (286 UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE);
// the sink sends it again for up to insert_timeout, then reports it, and the
// collector's re-send is taken once the pending quorum is reached. Both are
// transient, never split, and no line is lost or doubled.
func TestQuorumRefusalsAreTransient(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	s := openQuorum(t, servers, 2, 2*time.Second)

	t.Run("replica down", func(t *testing.T) {
		b := quorumBatch(0x285, 100)
		r2.Stop()
		err := s.Insert(context.Background(), b)
		if code := exceptionCode(err); code != 285 || sink.Permanent(err) {
			t.Fatalf("insert with r2 stopped: %v (code %d); want 285, transient", err, code)
		}
		t.Logf("refused: %v", err)
		if got := held(t, r1.Conn(t), b); got != (holding{}) {
			t.Errorf("r1 holds %v of a refused batch; want nothing", got)
		}
		r2.Start()
		tries := resendUntilAcked(t, s, b, 30*time.Second)
		for i, srv := range servers {
			if got, want := held(t, srv.Conn(t), b), full(b); got != want {
				t.Errorf("r%d holds %v; want %v", i+1, got, want)
			}
		}
		t.Logf("taken after r2 returned, %d sends", tries)
	})

	t.Run("previous quorum pending", func(t *testing.T) {
		pending, b := quorumBatch(0x2860, 100), quorumBatch(0x2861, 100)
		r2.Exec(t, "SYSTEM STOP FETCHES hc.hits_local")
		if err := s.Insert(context.Background(), pending); err == nil {
			t.Fatal("an insert r2 cannot fetch was acknowledged")
		}
		t0 := time.Now()
		err := s.Insert(context.Background(), b)
		if code := exceptionCode(err); code != 286 || sink.Permanent(err) {
			t.Fatalf("insert behind a pending quorum: %v (code %d); want 286, transient", err, code)
		}
		t.Logf("refused after %v of sending again: %v", time.Since(t0).Round(time.Millisecond), err)
		if got := held(t, r1.Conn(t), b); got != (holding{}) {
			t.Errorf("r1 holds %v of a refused batch; want nothing", got)
		}
		r2.Exec(t, "SYSTEM START FETCHES hc.hits_local")
		tries := resendUntilAcked(t, s, pending, 45*time.Second)
		tries += resendUntilAcked(t, s, b, 10*time.Second)
		for i, srv := range servers {
			for _, x := range []*sink.Batch{pending, b} {
				if got, want := held(t, srv.Conn(t), x), full(x); got != want {
					t.Errorf("r%d holds %v of source %x; want %v", i+1, got, x.SourceID, want)
				}
			}
		}
		t.Logf("both taken once fetches resumed, %d sends", tries)
	})
}

// 18.16 lets one quorum insert per table be pending, and an insert into
// hits writes each view's table after hits took its rows: refused there
// (286, raised while pushing to the view), the batch is in hits and not in
// that view's table, and its identical re-send, dropped as a duplicate,
// never writes it. Pinned here with a pending quorum in hits_1m_local alone;
// two collectors' inserts meeting in a view's table do the same (measured:
// 1 batch of 40 with two writers). One sink's inserts take turns, so they
// never meet: four sources at once leave every rollup whole.
func TestQuorumInsertsMeetInAView(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r2 := servers[1]
	s := openQuorum(t, servers, 2, 2*time.Second)

	t.Run("refused in a view", func(t *testing.T) {
		r2.Exec(t, "SYSTEM STOP FETCHES hc.hits_1m_local")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.InsertRows(ctx, "hc.hits_1m_local", "minute, site, path, hits", [][]any{{time.Now(), "www", "/elsewhere", uint64(1)}})
		cancel()
		if err == nil {
			t.Fatal("a quorum insert r2 cannot fetch was acknowledged")
		}
		b := quorumBatch(0x1a, 100)
		err = s.Insert(context.Background(), b)
		if code := exceptionCode(err); code != 286 || !strings.Contains(err.Error(), "while pushing to view hc.hits_1m_mv") || sink.Permanent(err) {
			t.Fatalf("insert behind a pending quorum in hits_1m: %v (code %d); want 286 while pushing to hits_1m_mv, transient", err, code)
		}
		t.Logf("refused in the view: %v", err)
		r2.Exec(t, "SYSTEM START FETCHES hc.hits_1m_local")
		resendUntilAcked(t, s, b, 45*time.Second)
		// The re-send, a duplicate in hits, never waited for hits_1m: let
		// r2 fetch the pending part, so the quorum after this one is free.
		r2.Exec(t, "SYSTEM SYNC REPLICA hc.hits_1m_local")
		// hits_1m_mv and the views after it in name order (hits_touched_mv,
		// ingest_progress_hits) lack the batch; ingest_progress still gets
		// its last offset from the rejects, sent after the re-send.
		want := full(b)
		want.Minutes = 0
		for i, srv := range servers {
			if got := held(t, srv.Conn(t), b); got != want {
				t.Errorf("r%d holds %v; pinned: %v", i+1, got, want)
			}
		}
	})

	t.Run("one sink takes turns", func(t *testing.T) {
		// A sink whose inserts may take their time: a quorum insert of
		// 500 rows writes five replicated tables in turn, over 2 s on a
		// loaded machine (CI: i/o timeouts at 2 s once hits_visitors_1m
		// was added). What is pinned is that no rollup misses a batch.
		s := openQuorum(t, servers, 2, 30*time.Second)
		var wg sync.WaitGroup
		batches := make([]*sink.Batch, 4*5)
		t0 := time.Now()
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					b := quorumBatch(uint64(0x700+g*16+i), 500)
					batches[g*5+i] = b
					if err := s.Insert(context.Background(), b); err != nil {
						t.Errorf("source %x: %v", b.SourceID, err)
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("20 batches of 500 rows from 4 sources in %v", time.Since(t0).Round(time.Millisecond))
		for _, b := range batches {
			if got, want := held(t, r2.Conn(t), b), full(b); got != want {
				t.Errorf("r2 holds %v of source %x; want %v", got, b.SourceID, want)
			}
		}
	})
}

// With three replicas and insert_quorum 2, one may be down: inserts go on,
// each acknowledged once two replicas hold it.
func TestQuorumThreeReplicasOneDown(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 3)
	s := openQuorum(t, servers, 2, 5*time.Second)
	servers[2].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.QuorumReplicas(ctx)
	if want := (sink.Replicas{Configured: 3, Registered: 3, Active: 2}); err != nil || r != want {
		t.Errorf("replicas: %+v, %v; want %+v", r, err, want)
	}
	b := quorumBatch(0x3, 100)
	if err := s.Insert(ctx, b); err != nil {
		t.Fatalf("insert with one of three down: %v", err)
	}
	if got, want := held(t, servers[1].Conn(t), b), full(b); got != want {
		t.Errorf("at the ack r2 holds %v; want %v", got, want)
	}
	// The collector's reads run on the pinned connections, which carry the
	// quorum settings too.
	p, err := s.Committed(ctx)
	if err != nil || p.Offsets[b.SourceID] != b.Last {
		t.Errorf("committed offset %d, %v; want %d", p.Offsets[b.SourceID], err, b.Last)
	}
}

// The replica holding a part whose quorum is pending dies with its disk
// (three replicas, insert_quorum 2; r2 and r3 could not fetch). Once its
// Keeper session expires, the others find no live replica with the part,
// mark its quorum failed and forget its block id: SYSTEM SYNC REPLICA stops
// waiting for it, and the collector's identical re-send, to a survivor, is
// written anew rather than dropped as a duplicate of rows nobody holds.
func TestQuorumPartLostWithItsReplica(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	// A short session: r1's replicas count as inactive seconds after the kill.
	servers := testenv.ClickHouseCluster(t, zk, "web", 3, testenv.WithZooKeeperSession(4*time.Second))
	r1, r2, r3 := servers[0], servers[1], servers[2]
	s := openQuorum(t, servers, 2, 2*time.Second)
	for _, r := range []*testenv.ClickHouseServer{r2, r3} {
		r.Exec(t, "SYSTEM STOP FETCHES hc.hits_local")
	}
	b := quorumBatch(0x1057, 100)
	if err := s.Insert(context.Background(), b); err == nil {
		t.Fatal("an insert no other replica could fetch was acknowledged")
	}
	r1.Kill()
	killed := time.Now()
	if err := os.RemoveAll(filepath.Join(r1.Dir(), "data")); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*testenv.ClickHouseServer{r2, r3} {
		r.Exec(t, "SYSTEM START FETCHES hc.hits_local")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if err := r2.Conn(t).Exec(ctx, "SYSTEM SYNC REPLICA hc.hits_local"); err != nil {
		t.Fatalf("sync r2 after r1 died with the only copy: %v", err)
	}
	t.Logf("SYSTEM SYNC REPLICA on r2 returned %v after r1 was killed", time.Since(killed).Round(time.Second))
	// On a survivor, as the collector's next address; the schema is there.
	s2, err := sink.Open(ctx, sink.Options{Addr: []string{r2.Addr()}, Database: "hc", Cluster: "web", InsertQuorum: 2, InsertTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	tries := resendUntilAcked(t, s2, b, 30*time.Second)
	for i, srv := range servers[1:] {
		if got, want := held(t, srv.Conn(t), b), full(b); got != want {
			t.Errorf("r%d holds %v; want %v", i+2, got, want)
		}
	}
	t.Logf("re-sent to r2: taken after %d sends, %v after the kill", tries, time.Since(killed).Round(time.Second))
}
