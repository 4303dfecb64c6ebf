package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hitcount/hitcount/internal/testenv"
)

// The cluster store: two ClickHouse 18.16 servers, replicas r1 and r2 of
// shard 01 of cluster ClusterName, replicating through ZooKeeper. The
// collector lists both (clickhouse.addr) and inserts into the first that
// answers; every fault of the replica kinds acts on one of them.

// ClusterName is the cluster of the servers' remote_servers the collector
// names (clickhouse.cluster).
const ClusterName = "web"

// Replica is one server of the cluster store, with its macro name (r1, r2).
type Replica struct {
	Name string
	*testenv.ClickHouseServer
}

// ClusterShape is the order the collector lists the replicas in, drawn from
// the seed: [r1, r2] or [r2, r1]. The collector prefers the first address,
// and r1, started first, is usually the replication leader (it assigns
// merges), so the two orders are not the same run with the names swapped.
func ClusterShape(seed uint64, servers []*testenv.ClickHouseServer) []Replica {
	out := make([]Replica, len(servers))
	for i, s := range servers {
		out[i] = Replica{Name: fmt.Sprintf("r%d", i+1), ClickHouseServer: s}
	}
	if seed%2 == 1 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

func replicaNames(rs []Replica) string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return "[" + strings.Join(names, ", ") + "]"
}

// replica is the replica an event picks, and the other one.
func (r *runner) replica(e Event) (Replica, Replica) {
	rs := r.env.Replicas
	i := int(e.Pick % uint64(len(rs)))
	return rs[i], rs[(i+1)%len(rs)]
}

// replicaFault carries out a fault of a replica kind and undoes it.
func (r *runner) replicaFault(e Event) {
	rep, other := r.replica(e)
	from := time.Since(r.start)
	switch e.Kind {
	case ReplicaKill:
		rep.Kill()
		r.killedReplica = true
		r.ran(e.Kind, fmt.Sprintf("replica %s killed, down %.1fs", rep.Name, e.Hold.Seconds()))
		time.Sleep(e.Hold)
		rep.Start()
		r.mark(e.Kind, rep.Name+" down", from)
	case ReplicaPause:
		rep.Freeze()
		r.ran(e.Kind, fmt.Sprintf("replica %s paused (SIGSTOP) for %.1fs (insert timeout %s)", rep.Name, e.Hold.Seconds(), InsertTimeout))
		time.Sleep(e.Hold)
		rep.Thaw()
		r.mark(e.Kind, rep.Name+" paused", from)
	case ReplicaDownLong:
		rep.Stop()
		r.ran(e.Kind, fmt.Sprintf("replica %s stopped (SIGTERM), down %.1fs", rep.Name, e.Hold.Seconds()))
		time.Sleep(e.Hold)
		rep.Start()
		r.mark(e.Kind, rep.Name+" down", from)
	case StopFetches, StopFetchesKill:
		r.stopFetches(e, rep, other)
	}
}

// stopFetches makes rep lag for e.Hold (SYSTEM STOP FETCHES: it takes
// inserts but fetches no part the other replica took) and, if the event
// says so, kills the other replica meanwhile: the parts only it has are
// then on no running replica until it is back. Every step is undone before
// it returns.
func (r *runner) stopFetches(e Event, rep, other Replica) {
	if err := r.exec(rep.ClickHouseServer, "SYSTEM STOP FETCHES"); err != nil {
		r.problem("stop-fetches: %v", err)
		return
	}
	what := fmt.Sprintf("replica %s fetches stopped for %.1fs", rep.Name, e.Hold.Seconds())
	if e.KillFor > 0 {
		what += fmt.Sprintf("; replica %s killed %.1fs in, down %.1fs", other.Name, e.KillAt.Seconds(), e.KillFor.Seconds())
	}
	r.ran(e.Kind, what)
	type step struct {
		at time.Duration
		do func()
	}
	from := time.Since(r.start)
	// killed: when the other replica went down; 0 while it is up.
	var killed time.Duration
	steps := []step{{e.Hold, func() {
		r.env.Logf("%6.1fs stop-fetches: replica %s's queue before its fetches start: %s", time.Since(r.start).Seconds(), rep.Name, r.queue(rep))
		if err := r.exec(rep.ClickHouseServer, "SYSTEM START FETCHES"); err != nil {
			r.problem("stop-fetches: %v", err)
		}
		r.env.Logf("%6.1fs stop-fetches: replica %s fetches started", time.Since(r.start).Seconds(), rep.Name)
		r.mark(e.Kind, rep.Name+" lags", from)
		if killed > 0 {
			// The stretch with the other replica's parts on no
			// running replica ends here (the other is still down).
			r.mark(e.Kind, other.Name+" down while "+rep.Name+" lags", killed)
			killed = 0
		}
	}}}
	if e.KillFor > 0 {
		steps = append(steps,
			step{e.KillAt, func() {
				r.env.Logf("%6.1fs stop-fetches: replica %s's queue as %s is killed: %s", time.Since(r.start).Seconds(), rep.Name, other.Name, r.queue(rep))
				other.Kill()
				r.killedReplica = true
				killed = time.Since(r.start)
				r.env.Logf("%6.1fs stop-fetches: replica %s killed", time.Since(r.start).Seconds(), other.Name)
			}},
			step{e.KillAt + e.KillFor, func() {
				other.Start()
				r.env.Logf("%6.1fs stop-fetches: replica %s started", time.Since(r.start).Seconds(), other.Name)
				if killed > 0 {
					r.mark(e.Kind, other.Name+" down while "+rep.Name+" lags", killed)
					killed = 0
				}
			}})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at < steps[j].at })
	t0 := time.Now()
	for _, s := range steps {
		time.Sleep(time.Until(t0.Add(s.at)))
		s.do()
	}
}

// queue says what rep's replication queue holds: parts to fetch (those
// its stopped fetches left behind), and how many of them a fetch was
// refused for.
func (r *runner) queue(rep Replica) string {
	conn, err := clickhouse.Open(rep.Options())
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n, get, cancelled uint64
	err = conn.QueryRow(ctx, "SELECT count(), countIf(type = 'GET_PART'), countIf(last_exception LIKE '%cancelled%') FROM system.replication_queue WHERE database = ?",
		ServerDatabase).Scan(&n, &get, &cancelled)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d entries, %d parts to fetch, %d refused as cancelled", n, get, cancelled)
}

// restoreReplicas is the final phase's first step: every replica answers
// and fetches. The nemesis undoes each fault before the next, so this
// only makes sure of it: a run never ends with a replica down or lagging.
func (r *runner) restoreReplicas() {
	for _, rep := range r.env.Replicas {
		if err := r.exec(rep.ClickHouseServer, "SYSTEM START FETCHES"); err != nil {
			r.problem("final phase: replica %s: %v", rep.Name, err)
		}
	}
}

// exec runs one statement on srv on a connection of its own.
func (r *runner) exec(srv *testenv.ClickHouseServer, sql string) error {
	conn, err := clickhouse.Open(srv.Options())
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s on %s: %w", sql, srv.Addr(), err)
	}
	return nil
}

// ReplicaResult is the invariant's verdict on one replica of the cluster.
type ReplicaResult struct {
	Name   string
	Report *Report
	// Tables sums up each replicated table (rows and a hash of their keys),
	// to tell whether the replicas hold the same rows.
	Tables map[string]string
	// SyncErrs are tables the replica did not catch up on (caughtUpReplica,
	// then SYSTEM SYNC REPLICA) within syncTimeout: it could not fetch
	// every part the other has.
	SyncErrs []string
	SyncDur  time.Duration
	// Parts says, for the first lines a stream has twice, which parts of
	// hits_local hold them: two copies in two parts came from two inserts.
	Parts []string
}

// syncTimeout bounds the wait for each table of each replica to catch up
// before the check: both replicas run and fetch by then (a replica started
// again within its old ZooKeeper session's life starts replicating once
// that session expires, 20 s at most here), so a table that does not catch
// up in this long is a finding, not slowness.
const syncTimeout = 2 * time.Minute

// caughtUpReplica waits until this replica of table has copied the whole
// replication log and its queue in ZooKeeper is empty: every part any
// replica committed is here. SYSTEM SYNC REPLICA alone does not say so on
// 18.16: it waits for the queue in memory, which is empty on a replica
// started again while its previous ZooKeeper session lives on (it does not
// replicate until that session expires, and its log pointer is the one it
// had): a check on seed 8 read such a replica 15 s after its restart and
// found it 2993 rows short of the other.
func caughtUpReplica(ctx context.Context, q connQuerier, table string) error {
	var last, ptr uint64
	var zk, replicaPath string
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := q.c.QueryRow(ctx, "SELECT log_max_index, log_pointer, zookeeper_path, replica_path FROM system.replicas WHERE database = ? AND table = ?",
			ServerDatabase, table).Scan(&last, &ptr, &zk, &replicaPath)
		if err != nil {
			return fmt.Errorf("system.replicas: %w", err)
		}
		var logLen, queued uint64
		if err := q.c.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = ?", zk+"/log").Scan(&logLen); err != nil {
			return fmt.Errorf("its log in ZooKeeper: %w", err)
		}
		if err := q.c.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = ?", replicaPath+"/queue").Scan(&queued); err != nil {
			return fmt.Errorf("its queue in ZooKeeper: %w", err)
		}
		// log_pointer is the next entry to copy; an empty log and a log of
		// one entry both read log_max_index 0.
		copied := logLen == 0 || ptr > last
		if copied && queued == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("log pointer %d, last entry %d, %d entries queued in ZooKeeper", ptr, last, queued)
		case <-tick.C:
		}
	}
}

// connQuerier reads one server on one connection.
type connQuerier struct{ c driver.Conn }

func (q connQuerier) Select(ctx context.Context, sql string, args []any, fn func(scan func(dest ...any) error) error) error {
	rows, err := q.c.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// tableSums are what checkCluster compares across replicas, per table: the
// same rows give the same line whatever the parts and merges.
var tableSums = map[string]string{
	"hits_local":            "SELECT toString(count()) || ' rows, keys ' || toString(sum(cityHash64(source_id, offset, path))) FROM %s",
	"rejects_local":         "SELECT toString(count()) || ' rows, keys ' || toString(sum(cityHash64(source_id, offset, line))) FROM %s",
	"hits_1m_local":         "SELECT 'hits ' || toString(sum(hits)) FROM %s",
	"hits_1d_local":         "SELECT 'hits ' || toString(sum(hits)) FROM %s",
	"ingest_progress_local": "SELECT toString(count()) || ' sources, offsets ' || toString(sum(o)) FROM (SELECT source_id, maxMerge(max_offset) AS o FROM %s GROUP BY source_id)",
}

// checkCluster checks the invariant on every replica, once each has fetched
// every part (SYSTEM SYNC REPLICA on each replicated table), then that the
// replicas agree.
func (r *runner) checkCluster(lay Layout) ([]*ReplicaResult, error) {
	var why []string
	if r.killedReplica {
		why = append(why, "docs/guarantees.md, Limits: a 18.16 server killed mid-insert keeps the hits part and can lose a view's")
	}
	o := CheckOptions{Suffix: "_local", RollupMayLag: len(why) > 0, Why: strings.Join(why, "; ")}
	var out []*ReplicaResult
	for _, rep := range r.env.Replicas {
		res, err := r.checkReplica(rep, o)
		if err != nil {
			return out, fmt.Errorf("replica %s: %w", rep.Name, err)
		}
		out = append(out, res)
	}
	first := out[0]
	for _, other := range out[1:] {
		for _, t := range sortedKeys(tableSums) {
			if first.Tables[t] != other.Tables[t] {
				r.problem("replicas differ: %s on %s: %s; on %s: %s", t, first.Name, first.Tables[t], other.Name, other.Tables[t])
			}
		}
		for i, s := range first.Report.Streams {
			if i >= len(other.Report.Streams) {
				break
			}
			a, b := streamCounts(s), streamCounts(other.Report.Streams[i])
			if !reflect.DeepEqual(a, b) {
				r.problem("replicas differ on stream %s: %s %v, %s %v (rows, distinct, seqs, hits_1m, odd in hits, odd in rejects)",
					s.Name, first.Name, a, other.Name, b)
			}
		}
	}
	return out, nil
}

func streamCounts(s *StreamResult) []uint64 {
	return []uint64{s.Rows, s.Distinct, s.Seqs, s.Rollup, s.OddHits, s.OddRejects}
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkReplica syncs every replicated table of the database on rep, then
// checks the invariant on its local tables.
func (r *runner) checkReplica(rep Replica, o CheckOptions) (*ReplicaResult, error) {
	res := &ReplicaResult{Name: rep.Name, Tables: map[string]string{}}
	conn, err := clickhouse.Open(rep.Options())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	q := connQuerier{conn}
	var tables []string
	err = q.Select(ctx, "SELECT name FROM system.tables WHERE database = ? AND engine LIKE 'Replicated%' ORDER BY name",
		[]any{ServerDatabase}, func(scan func(...any) error) error {
			var name string
			if err := scan(&name); err != nil {
				return err
			}
			tables = append(tables, name)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("list replicated tables: %w", err)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("no replicated table in database %s", ServerDatabase)
	}
	t0 := time.Now()
	for _, t := range tables {
		sctx, scancel := context.WithTimeout(ctx, syncTimeout)
		err := caughtUpReplica(sctx, q, t)
		if err == nil {
			err = conn.Exec(sctx, "SYSTEM SYNC REPLICA "+ServerDatabase+"."+t)
		}
		scancel()
		if err != nil {
			msg := fmt.Sprintf("replica %s: %s.%s did not catch up within %v: %v", rep.Name, ServerDatabase, t, syncTimeout, err)
			res.SyncErrs = append(res.SyncErrs, msg)
			r.problem("%s", msg)
		}
	}
	res.SyncDur = time.Since(t0)
	for t, sql := range tableSums {
		var v string
		err := q.Select(ctx, fmt.Sprintf(sql, ServerDatabase+"."+t), nil, func(scan func(...any) error) error { return scan(&v) })
		if err != nil {
			return nil, fmt.Errorf("sum up %s: %w", t, err)
		}
		res.Tables[t] = v
	}
	res.Report, err = Check(ctx, q, ServerDatabase, r.logs, o)
	if err != nil {
		return nil, err
	}
	for _, s := range res.Report.Failed() {
		if len(s.Duplicated) == 0 {
			continue
		}
		// Stream names and seqs are [a-z0-9-]: safe in a literal.
		var paths []string
		for _, seq := range s.Duplicated[:min(len(s.Duplicated), 20)] {
			paths = append(paths, fmt.Sprintf("'/chaos/%s/%d'", s.Name, seq))
		}
		err := q.Select(ctx, "SELECT _part, count(), min(offset), max(offset) FROM "+ServerDatabase+".hits_local WHERE path IN ("+
			strings.Join(paths, ", ")+") GROUP BY _part ORDER BY _part", nil, func(scan func(...any) error) error {
			var part string
			var n, lo, hi uint64
			if err := scan(&part, &n, &lo, &hi); err != nil {
				return err
			}
			res.Parts = append(res.Parts, fmt.Sprintf("stream %s, first %d lines in hits twice: part %s holds %d rows of them (offsets %d-%d)", s.Name, len(paths), part, n, lo, hi))
			return nil
		})
		if err != nil {
			res.Parts = append(res.Parts, fmt.Sprintf("stream %s: parts of the lines in hits twice: %v", s.Name, err))
		}
	}
	return res, nil
}

// keepReplicaLogs copies each replica's logs beside the run's files
// (information level: tens of MB at most for a run).
func (r *runner) keepReplicaLogs(dst string) {
	for _, rep := range r.env.Replicas {
		dir := filepath.Join(dst, "replicas", rep.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue
		}
		for _, name := range []string{"clickhouse-server.err.log", "clickhouse-server.log"} {
			if data, err := os.ReadFile(filepath.Join(rep.Dir(), "log", name)); err == nil {
				_ = os.WriteFile(filepath.Join(dir, name), data, 0o644)
			}
		}
	}
}

// replicaWatch records, once a second, how each replica sees its
// hits_local: read-only (replication not started, as after a restart while
// the old session's is_active node lives on), session expired, its log
// pointer against the log's last entry, its queue. Kept with a run's files
// (replicas.txt): a finding's explanation is usually there.
type replicaWatch struct {
	mu    sync.Mutex
	lines []string
}

func (w *replicaWatch) run(ctx context.Context, r *runner) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		states := make([]string, len(r.env.Replicas))
		at := time.Since(r.start)
		for i, rep := range r.env.Replicas {
			wg.Add(1)
			go func() { defer wg.Done(); states[i] = rep.Name + " " + replicaState(ctx, rep) }()
		}
		wg.Wait()
		w.mu.Lock()
		w.lines = append(w.lines, fmt.Sprintf("%.1f %s", at.Seconds(), strings.Join(states, " | ")))
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func replicaState(ctx context.Context, rep Replica) string {
	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	opts := rep.Options()
	opts.DialTimeout = 500 * time.Millisecond
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return "unreachable"
	}
	defer conn.Close()
	var ro, expired, active, total uint8
	var ptr, last uint64
	var queue, inserts uint32
	var updated time.Time
	var replicaPath string
	err = conn.QueryRow(ctx, "SELECT is_readonly, is_session_expired, log_pointer, log_max_index, queue_size, inserts_in_queue, active_replicas, total_replicas, last_queue_update, replica_path FROM system.replicas WHERE database = ? AND table = 'hits_local'",
		ServerDatabase).Scan(&ro, &expired, &ptr, &last, &queue, &inserts, &active, &total, &updated, &replicaPath)
	switch {
	case err != nil && ctx.Err() != nil:
		return "no answer"
	case err != nil:
		return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	// The queue in ZooKeeper is the replica's to-do list whether or not its
	// replication runs; system.replication_queue is its copy in memory.
	zkQueue := "?"
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = ?", replicaPath+"/queue").Scan(&n); err == nil {
		zkQueue = strconv.FormatUint(n, 10)
	}
	var flags []string
	if ro == 1 {
		flags = append(flags, "READONLY")
	}
	if expired == 1 {
		flags = append(flags, "SESSION-EXPIRED")
	}
	upd := "never"
	if updated.Unix() > 0 {
		upd = updated.Format("15:04:05")
	}
	return fmt.Sprintf("hits_local log %d/%d queue %d (fetches %d, in zk %s, updated %s) active %d/%d %s",
		ptr, last, queue, inserts, zkQueue, upd, active, total, strings.Join(flags, " "))
}

func (w *replicaWatch) write(path string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return os.WriteFile(path, []byte(strings.Join(w.lines, "\n")+"\n"), 0o644)
}
