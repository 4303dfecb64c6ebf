package collector_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

func adversaryGate(t *testing.T) {
	if os.Getenv("HITCOUNT_ADVERSARY") == "" {
		t.Skip("adversary reproduction: HITCOUNT_ADVERSARY=1")
	}
}

// openClusterSink opens a cluster sink on addrs (migrated), closed at the
// end of the test.
func openClusterSink(t *testing.T, ctx context.Context, addrs ...string) *sink.Sink {
	t.Helper()
	s, err := sink.Open(ctx, sink.Options{Addr: addrs, Database: "hc", Cluster: "web", InsertTimeout: 5 * time.Second, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// Guarantee 5: a rejected line is never doubled by a replay after a restart
// or a failover re-send.
//
// A batch of 10 lines, the 5th unparseable (a reject), the last a hit. The
// collector ships it through r1: the hits insert commits (r2 fetches it,
// ingest_progress included); the rejects insert reaches r1 and r1 is paused
// (SIGSTOP) with the insert's data in its socket, longer than the insert
// timeout. The collector is restarted meanwhile and reaches r2 (r1 does not
// answer). There the committed offset (from hits) is past the whole batch,
// so open() reads the batch in flight again "for the rejects it may lack":
// Holds on r2 says none, and the reject is sent again, stamped with a new
// time (the record's RejectsAt is not used on this path). r1 is thawed well
// within its ZooKeeper session and commits the first rejects block, whose
// checksum differs: the line is in rejects twice, on both replicas.
func TestAdversaryRejectsDoubledAfterFailoverRestart(t *testing.T) {
	t.Parallel()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	openClusterSink(t, ctx, r2.Addr()) // r2's schema

	frozen := make(chan struct{})
	proxy := newHoldProxy(t, r1.Addr(), "INSERT INTO hc.rejects_local", func() {
		// The hits of the batch committed on r1: let r2 fetch them (and
		// ingest_progress), then pause r1 before it reads the rejects.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if replicaRows(t, r2, "www") == 9 &&
				replicaCount(t, r2, "SELECT count() FROM hc.ingest_progress_local") > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		r1.Freeze()
		close(frozen)
	})
	s1 := openClusterSink(t, ctx, proxy.Addr())

	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "access.log")
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	data := append(logLines(71, 4, base), []byte("this line is not an access log line\n")...)
	data = append(data, logLines(72, 5, base.Add(time.Minute))...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func(o *collector.Options) { o.StateDir = state }
	stop := startInserter(t, s1, path, tune)
	select {
	case <-frozen:
	case <-time.After(60 * time.Second):
		t.Fatal("the rejects insert never reached r1")
	}
	frozenAt := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			r1.Thaw()
		}
	}()
	stop() // returns once the rejects insert timed out: its outcome unknown
	pos, _ := os.ReadFile(filepath.Join(state, "positions.json"))
	t.Logf("collector 1 stopped %v after r1 froze; positions.json: %s", time.Since(frozenAt).Round(time.Millisecond), pos)

	// The collector comes back on the replica that answers.
	s2 := openClusterSink(t, ctx, r2.Addr())
	stop2 := startInserter(t, s2, path, tune)
	defer stop2()
	deadline := time.Now().Add(20 * time.Second)
	for replicaCount(t, r2, "SELECT count() FROM hc.rejects_local") == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("collector 2 (on r2) sent the reject %v after r1 froze", time.Since(frozenAt).Round(time.Millisecond))
	r1.Thaw()
	thawed = true
	t.Logf("r1 thawed %v after it froze", time.Since(frozenAt).Round(time.Millisecond))
	time.Sleep(10 * time.Second) // r1 commits what it was sent; r2 fetches it
	stop2()

	for _, r := range servers {
		rej := replicaCount(t, r, "SELECT count() FROM hc.rejects_local")
		distinct := replicaCount(t, r, "SELECT uniqExact(source_id, offset) FROM hc.rejects_local")
		hits := replicaRows(t, r, "www")
		t.Logf("replica %s: rejects rows %d (distinct lines %d), hits rows %d", r.Addr(), rej, distinct, hits)
		if rej != 1 || hits != 9 {
			t.Errorf("replica %s: expected 1 reject row and 9 hits, got %d reject rows (%d distinct lines) and %d hits", r.Addr(), rej, distinct, hits)
		}
	}
}

// Guarantee 1 (exactly once) through "a batch split after a permanent
// refusal" and a replica paused longer than the insert timeout, with a
// collector restart in between.
//
// A guard (throwIf in a MATERIALIZED column of hits_local, as
// TestPermanentRefusalShipsTheRest uses) refuses line 2 of a 10-line batch:
// the batch is split, [L0..L4] again split, L1 ends as a reject, L0 and
// L2..L4 land. The insert of the second half, L5..L9, reaches r1 and r1 is
// paused (SIGSTOP) with its data in the socket. The collector restarts and
// reaches r2; the file has grown meanwhile (L10..L14). At open, the batch in
// flight is the whole original span [L0, L9]; Holds finds L0..L4, so the
// rest is read as an ordinary new batch, L5..L14: a block of other content
// than the one r1 still has. r1 is thawed (within its ZooKeeper session)
// and commits L5..L9: five lines twice, on both replicas.
func TestAdversaryHitsDoubledAfterSplitAndFailoverRestart(t *testing.T) {
	t.Parallel()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	openClusterSink(t, ctx, r2.Addr())

	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "access.log")
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	var data []byte
	var offsets []int64
	for i := range 10 {
		offsets = append(offsets, int64(len(data)))
		p := fmt.Sprintf("/page/%d", i)
		if i == 1 {
			p = "/refused"
		}
		data = append(data, combinedLine(base.Add(time.Duration(i)*time.Second), p)...)
	}

	frozen := make(chan struct{})
	sawReject, hitsAfter := false, 0
	proxy := newArmedProxy(t, r1.Addr(), func(chunk []byte) bool {
		switch {
		case bytes.Contains(chunk, []byte("INSERT INTO hc.rejects_local")):
			sawReject = true
		case sawReject && bytes.Contains(chunk, []byte("INSERT INTO hc.hits_local")):
			hitsAfter++
			return hitsAfter == 2 // L5..L9, after L2..L4
		}
		return false
	}, func() {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if replicaRows(t, r2, "www") == 4 && replicaCount(t, r2, "SELECT count() FROM hc.rejects_local") == 1 &&
				replicaCount(t, r2, "SELECT maxMerge(max_offset) FROM hc.ingest_progress_local") == uint64(offsets[4]) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		r1.Freeze()
		close(frozen)
	})
	s1 := openClusterSink(t, ctx, proxy.Addr())
	r1.Exec(t, "ALTER TABLE hc.hits_local ADD COLUMN refuse_guard UInt8 MATERIALIZED throwIf(path = '/refused')")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func(o *collector.Options) { o.StateDir = state }
	stop := startInserter(t, s1, path, tune)
	select {
	case <-frozen:
	case <-time.After(60 * time.Second):
		t.Fatal("the insert of the second half never reached r1")
	}
	frozenAt := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			r1.Thaw()
		}
	}()
	stop()
	pos, _ := os.ReadFile(filepath.Join(state, "positions.json"))
	t.Logf("collector 1 stopped %v after r1 froze; r2 holds %d hits, %d rejects; positions.json: %s",
		time.Since(frozenAt).Round(time.Millisecond), replicaRows(t, r2, "www"), replicaCount(t, r2, "SELECT count() FROM hc.rejects_local"), pos)

	// The log goes on; the collector comes back on the replica that answers.
	for i := 10; i < 15; i++ {
		appendTo(t, path, combinedLine(base.Add(time.Duration(i)*time.Second), fmt.Sprintf("/page/%d", i)))
	}
	s2 := openClusterSink(t, ctx, r2.Addr())
	stop2 := startInserter(t, s2, path, tune)
	defer stop2()
	deadline := time.Now().Add(20 * time.Second)
	for replicaRows(t, r2, "www") < 14 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("collector 2 (on r2): r2 holds %d hits %v after r1 froze", replicaRows(t, r2, "www"), time.Since(frozenAt).Round(time.Millisecond))
	r1.Thaw()
	thawed = true
	t.Logf("r1 thawed %v after it froze", time.Since(frozenAt).Round(time.Millisecond))
	time.Sleep(10 * time.Second)
	stop2()

	for _, r := range servers {
		hits, distinct := replicaRows(t, r, "www"), replicaDistinct(t, r, "www")
		rej := replicaCount(t, r, "SELECT count() FROM hc.rejects_local")
		t.Logf("replica %s: hits rows %d (distinct lines %d), rejects %d", r.Addr(), hits, distinct, rej)
		if hits != 14 || distinct != 14 || rej != 1 {
			t.Errorf("replica %s: expected 14 hits rows of 14 distinct lines and 1 reject (15 lines), got %d hits rows (%d distinct) and %d rejects", r.Addr(), hits, distinct, rej)
		}
	}
}

// Guarantee 3: the replica check never says "complete" when the replica
// lacks a part committed before the read began; here "a table being
// created" (README: adding a replica, or rebuilding one that lost its disk).
//
// r1 holds 300 crossings, one part each (merges stopped). r2 has no schema
// yet; a sweeper-side reader on r2 (sink.Select, which checks the replica
// and reads crossings_local) polls while Migrate gives r2 its tables.
// ClickHouse makes the new table visible before its start-up is done, and
// a new replica (is_lost=1) first copies r1's log_pointer into its own and
// only then queues one GET_PART per part of r1, in ZooKeeper, one by one,
// and loads the queue into memory last. awaitReplica reads log_pointer from
// ZooKeeper and the queue from memory (system.replication_queue): in that
// window log_pointer > log_max_index with an empty queue, and the empty
// replica is declared complete.
func TestAdversaryReplicaCompleteWhileBeingCreated(t *testing.T) {
	t.Parallel()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s1 := openClusterSink(t, ctx, r1.Addr()) // the schema on r1 only
	r1.Exec(t, "SYSTEM STOP MERGES")
	const parts = 300
	for i := range parts {
		row := []any{fmt.Sprintf("key%04d", i), "rule", "www", "/p", time.Now(), uint64(10), uint64(11), "sent", uint64(3 << 61), "r1", uint64(1), uint32(1), "<id@x>", "", time.Now()}
		if err := s1.InsertRows(ctx, "hc.crossings", "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated", [][]any{row}); err != nil {
			t.Fatal(err)
		}
	}
	if n := replicaCount(t, r1, "SELECT count() FROM hc.crossings_local"); n != parts {
		t.Fatalf("r1 holds %d crossings, want %d", n, parts)
	}

	s2, err := sink.Open(ctx, sink.Options{Addr: []string{r2.Addr()}, Database: "hc", Cluster: "web", InsertTimeout: 5 * time.Second, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	type read struct {
		n  uint64
		at time.Duration
	}
	var (
		mu                sync.Mutex
		complete          []read // reads the check let through
		refused, attempts int
	)
	stopReads := make(chan struct{})
	readsDone := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(readsDone)
		for {
			select {
			case <-stopReads:
				return
			default:
			}
			var n uint64
			err := s2.Select(ctx, "SELECT count() FROM hc.crossings", nil, func(scan func(...any) error) error { return scan(&n) })
			mu.Lock()
			attempts++
			if err == nil {
				complete = append(complete, read{n, time.Since(t0)})
			} else {
				refused++
			}
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	migrateAt := time.Since(t0)
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	migrated := time.Since(t0)
	time.Sleep(3 * time.Second)
	close(stopReads)
	<-readsDone

	short := 0
	var first []read
	for _, r := range complete {
		if r.n < parts {
			short++
			if len(first) < 5 {
				first = append(first, r)
			}
		}
	}
	t.Logf("migrate of r2 from %v to %v; %d reads: %d refused (no table yet, or the check said incomplete), %d let through",
		migrateAt.Round(time.Millisecond), migrated.Round(time.Millisecond), attempts, refused, len(complete))
	t.Logf("r2 finally holds %d crossings", replicaCount(t, r2, "SELECT count() FROM hc.crossings_local"))
	if len(complete) > 0 {
		t.Logf("reads let through: first at %v, last at %v", complete[0].at.Round(time.Millisecond), complete[len(complete)-1].at.Round(time.Millisecond))
	}
	var lp, lmi, qs uint64
	var ro uint8
	if err := r2.Conn(t).QueryRow(ctx, "SELECT log_pointer, log_max_index, queue_size, is_readonly FROM system.replicas WHERE database = 'hc' AND table = 'crossings_local'").Scan(&lp, &lmi, &qs, &ro); err != nil {
		t.Log(err)
	}
	t.Logf("r2 crossings_local now: log_pointer %d, log_max_index %d, queue_size %d, readonly %d; GET_PART in its queue: %d",
		lp, lmi, qs, ro, replicaCount(t, r2, "SELECT count() FROM system.replication_queue WHERE table = 'crossings_local' AND type = 'GET_PART'"))
	if short > 0 {
		t.Errorf("expected every read the replica check lets through to see the %d crossings committed before it began; got %d reads of fewer (first: %+v)", parts, short, first)
	}
}

// Guarantee 2: the collector resumes every file it shipped from its own
// record when its replica lacks a part only a down replica has. A file
// first shipped while it had one line is known by its first line's id
// (tailer.Identity: ID = First), and keeps that id while it grows; the
// record of what the store acknowledged (positions.json acked) is under
// that id. After a restart the file has two lines and more, its
// fingerprint is Both; open() asks settle(Both), which with the replica
// incomplete finds no record under Both and waits there, before it ever
// looks at the first-line id (open.go: the rekey to First comes only after
// settle(Both) answered). The file stalls until the down replica is back or
// removed, although this collector shipped it and knows where it stopped.
// A control file shipped from two lines on resumes at once.
func TestAdversaryFileKnownByFirstLineStallsWithReplicaDown(t *testing.T) {
	t.Parallel()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	openClusterSink(t, ctx, r2.Addr())
	s1 := openClusterSink(t, ctx, r1.Addr())
	r2.Exec(t, "SYSTEM STOP FETCHES")

	dir, state := t.TempDir(), t.TempDir()
	path := func(site string) string { return filepath.Join(dir, site+".log") }
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	// "one": a quiet log, shipped when it had one line; "two": shipped
	// from two lines on.
	if err := os.WriteFile(path("one"), logLines(81, 1, base), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path("two"), logLines(82, 2, base), 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func(o *collector.Options) {
		o.Sources = nil
		for _, site := range []string{"one", "two"} {
			o.Sources = append(o.Sources, collector.Source{Glob: path(site), Site: site, Format: "combined"})
		}
		o.StateDir = state
	}
	stop := startInserter(t, s1, path("one"), tune)
	waitReplicaRows(t, r1, "one", 1, time.Minute)
	waitReplicaRows(t, r1, "two", 2, time.Minute)
	appendTo(t, path("one"), logLines(83, 20, base.Add(time.Minute)))
	appendTo(t, path("two"), logLines(84, 20, base.Add(time.Minute)))
	waitReplicaRows(t, r1, "one", 21, time.Minute)
	waitReplicaRows(t, r1, "two", 22, time.Minute)
	stop()
	pos, _ := os.ReadFile(filepath.Join(state, "positions.json"))
	t.Logf("collector 1 shipped 21 and 22 lines through r1; positions.json: %s", pos)

	r1.Stop()
	r2.Exec(t, "SYSTEM START FETCHES")
	for _, site := range []string{"one", "two"} {
		appendTo(t, path(site), logLines(85, 10, base.Add(time.Hour)))
	}
	s2 := openClusterSink(t, ctx, r2.Addr())
	_, stop2 := runShipping(t, s2, tune)
	defer stop2()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && replicaRows(t, r2, "two") < 10 {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	one, two := replicaRows(t, r2, "one"), replicaRows(t, r2, "two")
	t.Logf("with r1 down, after %v on r2: file shipped from two lines: %d of 10 new lines; file shipped from one line: %d of 10", 35*time.Second, two, one)
	if two != 10 {
		t.Fatalf("control: the file shipped from two lines did not resume (%d of 10)", two)
	}
	if one != 10 {
		t.Errorf("expected the 10 new lines of the file this collector shipped (record under its first-line id) on r2 like the other file's; got %d", one)
	}
}

// Guarantees 1 and 2: the acked record is trusted over the store whenever
// the replica is incomplete, so a stale record ships lines again. The
// README calls state_dir "local hints only: the truth of what was shipped
// is in ClickHouse"; here it is restored from a backup taken after the
// first 20 lines (as a VM snapshot or a config-management restore would).
// The next 20 lines were shipped through r1, which r2 had not fetched when
// r1 went down. The collector on r2 resumes from the restored record
// (line 20) rather than waiting, and ships lines 21..50 as a new block; r1
// comes back, r2 fetches r1's block of lines 21..40: 20 lines twice.
func TestAdversaryRestoredStateDirDoublesLines(t *testing.T) {
	t.Parallel()
	adversaryGate(t)
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	openClusterSink(t, ctx, r2.Addr())
	s1 := openClusterSink(t, ctx, r1.Addr())
	r2.Exec(t, "SYSTEM STOP FETCHES")

	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "access.log")
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, logLines(91, 20, base), 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func(o *collector.Options) { o.StateDir = state }
	stop := startInserter(t, s1, path, tune)
	waitReplicaRows(t, r1, "www", 20, time.Minute)
	stop()
	backup, err := os.ReadFile(filepath.Join(state, "positions.json"))
	if err != nil {
		t.Fatal(err)
	}
	stop = startInserter(t, s1, path, tune)
	appendTo(t, path, logLines(92, 20, base.Add(time.Minute)))
	waitReplicaRows(t, r1, "www", 40, time.Minute)
	stop()
	cur, _ := os.ReadFile(filepath.Join(state, "positions.json"))
	if err := os.WriteFile(filepath.Join(state, "positions.json"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("positions.json %s restored to the backup %s", cur, backup)

	r1.Stop()
	r2.Exec(t, "SYSTEM START FETCHES")
	appendTo(t, path, logLines(93, 10, base.Add(time.Hour)))
	s2 := openClusterSink(t, ctx, r2.Addr())
	stop2 := startInserter(t, s2, path, tune)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && replicaRows(t, r2, "www") == 0 {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	t.Logf("with r1 down, r2 took %d lines", replicaRows(t, r2, "www"))
	r1.Start()
	time.Sleep(15 * time.Second) // r2 fetches r1's parts
	stop2()
	for _, r := range servers {
		n, d := replicaRows(t, r, "www"), replicaDistinct(t, r, "www")
		t.Logf("replica %s: %d rows, %d distinct lines", r.Addr(), n, d)
		if n != 50 || d != 50 {
			t.Errorf("replica %s: expected the 50 lines once, got %d rows of %d distinct lines", r.Addr(), n, d)
		}
	}
}

// Guarantee 3 and its consequence for guarantee 1: a collector whose
// replica is being given its tables by another process (README: adding a
// replica, or rebuilding one; here another collector's migrate) reads its
// resume point in the window where the new replica has copied r1's
// log_pointer but not yet queued r1's parts: the check says complete, the
// replica says nothing of the file was committed, and the whole file is
// shipped again. r1 holds the file's 100 lines and, to make the window
// last, 290 small parts of ingest_progress from other sources (merges
// stopped; 300 is where 18.16 refuses inserts into a partition).
func TestAdversaryResumeFromReplicaBeingCreated(t *testing.T) {
	t.Parallel()
	adversaryGate(t)
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s1 := openClusterSink(t, ctx, r1.Addr()) // r2 has no schema yet

	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "access.log")
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, logLines(101, 40, base), 0o644); err != nil {
		t.Fatal(err)
	}
	tune := func(o *collector.Options) { o.StateDir = state }
	stop := startInserter(t, s1, path, tune)
	waitReplicaRows(t, r1, "www", 40, time.Minute)
	appendTo(t, path, logLines(102, 60, base.Add(time.Minute)))
	waitReplicaRows(t, r1, "www", 100, time.Minute)
	stop()
	r1.Exec(t, "SYSTEM STOP MERGES")
	conn := r1.Conn(t)
	parts := 290
	if v := os.Getenv("HC_ADV_PARTS"); v != "" {
		fmt.Sscan(v, &parts)
	}
	t0 := time.Now()
	for i := range parts {
		if err := conn.Exec(ctx, sink.MarkProgressSQL("hc.ingest_progress_local"), "other", uint64(1_000_000+i), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("r1: the file's 100 lines, and %d parts of ingest_progress (%v)", parts, time.Since(t0).Round(time.Millisecond))

	// Another process gives r2 its schema; this collector starts on r2
	// as soon as r2 lists ingest_progress_local.
	migrated := make(chan error, 1)
	go func() {
		sA, err := sink.Open(ctx, sink.Options{Addr: []string{r2.Addr()}, Database: "hc", Cluster: "web", InsertTimeout: 5 * time.Second, DialTimeout: time.Second})
		if err != nil {
			migrated <- err
			return
		}
		defer sA.Close()
		migrated <- sA.Migrate(ctx)
	}()
	for replicaCount(t, r2, "SELECT count() FROM system.tables WHERE database = 'hc' AND name = 'ingest_progress_local'") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	t0 = time.Now()
	s2 := openClusterSink(t, ctx, r2.Addr())
	_, stop2 := runShipping(t, s2, func(o *collector.Options) {
		o.Sources = []collector.Source{{Glob: path, Site: "www", Format: "combined"}}
		o.StateDir = state
	})
	defer stop2()
	if err := <-migrated; err != nil {
		t.Fatal(err)
	}
	t.Logf("the other process's migrate of r2 returned %v after this collector started", time.Since(t0).Round(time.Millisecond))
	// r2 fetches r1's parts; whatever this collector shipped is on both.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && replicaCount(t, r2, "SELECT count() FROM system.replication_queue WHERE database = 'hc'") > 0 {
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	stop2()
	for _, r := range servers {
		n, d := replicaRows(t, r, "www"), replicaDistinct(t, r, "www")
		t.Logf("replica %s: %d rows, %d distinct lines", r.Addr(), n, d)
		if n != 100 || d != 100 {
			t.Errorf("replica %s: expected the file's 100 lines once, got %d rows of %d distinct lines", r.Addr(), n, d)
		}
	}
}

// Guarantee 2, "waiting could still stall unrelated files": a replica
// killed mid-stream, the collector running on (no restart). Its two
// batches in flight (the default batch.max_pending) are on their way to
// r1 when it is killed; each is sent again, identical, to r2, which takes it;
// then, since the outcome was unknown, verify() asks Settle and Holds what
// r2 holds, and both refuse while r2 lacks r1's earlier parts (Settle
// returns the *IncompleteError, which resolve() treats as a failure; Holds
// reads with partial=false). The two batches stay in verify, holding both
// batches of the pool, until r1 is back or removed: a third file, with
// nothing in flight and a record of what was acknowledged, ships nothing.
// (A restarted collector ships it at once: TestPartOnlyOnDownReplica.)
func TestAdversaryUnknownOutcomesHoldThePoolWithReplicaDown(t *testing.T) {
	t.Parallel()
	zoo := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zoo, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	openClusterSink(t, ctx, r2.Addr())
	// r1 is reached through a proxy (the network): once armed, an insert's
	// data is held there until the second one arrives, then r1 is killed
	// with both in flight.
	var mu sync.Mutex
	armed, held := false, 0
	var toR2 *holdProxy
	killed := make(chan struct{})
	proxy := newArmedProxy(t, r1.Addr(), func(chunk []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		return armed && bytes.Contains(chunk, []byte("INSERT INTO hc.hits_local"))
	}, func() {
		mu.Lock()
		held++
		n := held
		mu.Unlock()
		if n == 2 {
			r1.Kill()
			toR2.refuse.Store(false)
			close(killed)
			return
		}
		select {
		case <-killed:
		case <-time.After(30 * time.Second):
		}
	})
	proxy.multi = true
	// r2 cannot be reached by the collector until r1 is killed: every
	// connection of its pool is to r1.
	toR2 = newHoldProxy(t, r2.Addr(), "\x00never\x00", func() {})
	toR2.refuse.Store(true)
	s := openClusterSink(t, ctx, proxy.Addr(), toR2.Addr())
	r2.Exec(t, "SYSTEM STOP FETCHES")

	dir, state := t.TempDir(), t.TempDir()
	path := func(site string) string { return filepath.Join(dir, site+".log") }
	base := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for i, site := range []string{"a", "b", "c"} {
		if err := os.WriteFile(path(site), logLines(uint64(110+i), 10, base), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &lockedBuffer{}
	c, stop := runShipping(t, s, func(o *collector.Options) {
		o.Sources = nil
		for _, site := range []string{"a", "b", "c"} {
			o.Sources = append(o.Sources, collector.Source{Glob: path(site), Site: site, Format: "combined"})
		}
		o.StateDir = state
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(testWriter{t}, logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	defer stop()
	for _, site := range []string{"a", "b", "c"} {
		waitReplicaRows(t, r1, site, 10, time.Minute)
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	appendTo(t, path("a"), logLines(120, 10, base.Add(time.Minute)))
	appendTo(t, path("b"), logLines(121, 10, base.Add(time.Minute)))
	select {
	case <-killed:
		t.Log("r1 killed with the batches of a and b in flight")
	case <-time.After(8 * time.Second):
		mu.Lock()
		n := held
		mu.Unlock()
		t.Skipf("inconclusive: %d of the 2 inserts reached r1 together; run again", n)
	}
	r2.Exec(t, "SYSTEM START FETCHES")
	time.Sleep(8 * time.Second)
	appendTo(t, path("c"), logLines(122, 20, base.Add(time.Hour)))
	time.Sleep(30 * time.Second)
	hung := 0
	for _, site := range []string{"a", "b"} {
		if strings.Contains(string(logs.Bytes()), "insert failed; sending the identical batch again\" path="+path(site)) {
			hung++
		}
	}
	if hung < 2 {
		t.Skipf("inconclusive: %d of the 2 batches hung on r1 (a new connection went to r2 instead); run again", hung)
	}
	since := func(site string, from time.Time) uint64 {
		return replicaCount(t, r2, "SELECT count() FROM hc.hits_local WHERE site = ? AND ts >= toDateTime(?)", site, from.Unix())
	}
	a, b, cc := since("a", base.Add(time.Minute)), since("b", base.Add(time.Minute)), since("c", base.Add(time.Hour))
	t.Logf("30 s later, r2 holds a: %d, b: %d of the 10 lines of their batches in flight at the kill, c: %d of its 20 new lines; /readyz: %v", a, b, cc, c.Ready())
	if cc != 20 {
		t.Errorf("expected c's 20 new lines on r2 (c has nothing in flight, and a record of what was acknowledged); got %d", cc)
	}
}
