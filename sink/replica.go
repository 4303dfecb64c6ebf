package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// A replica is complete for a read when it holds every part any replica of
// its table had committed when the read began. SYSTEM SYNC REPLICA is not
// how it is learnt: on 18.16 it waits for the whole queue to empty with no
// bound but the server's receive_timeout (a query setting does not change
// it), so a part only a dead replica has holds it forever, and a client
// that gives up leaves it running on the server, one more per attempt
// (issue 16, finding 1). awaitReplica asks system.replicas and
// system.replication_queue instead, with a bound, and leaves nothing
// behind:
//
//  1. log_max_index: the replication log's last entry now. Every part
//     committed so far has its entry at or before it.
//  2. Wait until log_pointer passes it: the replica has copied every such
//     entry into its queue (in ZooKeeper and in memory together).
//  3. The GET_PART entries then in the queue are the parts it still lacks;
//     wait until each of them has gone (fetched). Entries that arrive later
//     are parts committed after the read began: not waited for, so a busy
//     cluster cannot keep the wait going.
//
// Past the bound, or as soon as every part still awaited is one no active
// replica has (a replica that holds it is down, or gone for good), it
// returns an *IncompleteError naming the table and the parts.

// IncompleteError says that a replica lacks parts it cannot fetch now.
type IncompleteError struct {
	Table string // database.table
	// Parts are the parts awaited, each with why it is not fetched yet.
	Parts []MissingPart
	// Active and Total count the table's replicas (0 when not read).
	Active, Total uint8
}

// MissingPart is a part a replica lacks.
type MissingPart struct {
	Name string
	// Unfetchable: no active replica has it (code 234): it comes only when
	// a replica that holds it is back, or once the operator has removed
	// that replica (docs/cluster.md, failure modes and the way out).
	Unfetchable bool
	Reason      string
}

func (e *IncompleteError) Error() string {
	var names []string
	unfetchable := 0
	for _, p := range e.Parts {
		names = append(names, p.Name)
		if p.Unfetchable {
			unfetchable++
		}
	}
	if unfetchable == len(e.Parts) {
		return fmt.Sprintf("replica of %s lacks %d part(s) no active replica has (%s): a replica holding them is down (docs/cluster.md, failure modes and the way out)",
			e.Table, len(e.Parts), strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("replica of %s has not fetched %d part(s) yet (%s)", e.Table, len(e.Parts), strings.Join(names, ", "))
	if e.Active < e.Total {
		msg += fmt.Sprintf("; %d of %d replicas active: one holding them may be down (docs/cluster.md, failure modes and the way out)", e.Active, e.Total)
	}
	return msg
}

// replicaWait bounds one wait for a replica to be complete; a caller that
// needs it retries on its own schedule.
const replicaWait = 5 * time.Second

// awaitReplica waits, at most bound, until the replica of table (db.name)
// that c is connected to holds every part committed before the call; see the
// top of this file.
func (s *Sink) awaitReplica(ctx context.Context, c *sql.Conn, table string, bound time.Duration) error {
	db, name, _ := strings.Cut(table, ".")
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := awaitReplica(ctx, c, db, name)
	s.noteReplica(table, err)
	if err != nil && !errors.As(err, new(*IncompleteError)) {
		return fmt.Errorf("is the replica of %s complete: %w", table, err)
	}
	return err
}

func awaitReplica(ctx context.Context, c *sql.Conn, db, name string) error {
	var last, logLen uint64
	var zk, replicaPath string
	if err := c.QueryRowContext(ctx, "SELECT log_max_index, zookeeper_path, replica_path FROM system.replicas WHERE database = ? AND table = ?", db, name).Scan(&last, &zk, &replicaPath); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s.%s is not a replicated table on this server", db, name)
		}
		return err
	}
	if last == 0 {
		// An empty log and one entry, log-0000000000, both read 0.
		if err := c.QueryRowContext(ctx, "SELECT count() FROM system.zookeeper WHERE path = ?", zk+"/log").Scan(&logLen); err != nil {
			return err
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var awaited map[string]bool // GET_PART entries once the log is copied
	var still []MissingPart     // those of them not fetched yet
	var active, total uint8
	begun := time.Now()
	incomplete := func(parts []MissingPart, why string) error {
		err := incompleteOrCtx(ctx, db, name, parts, why)
		if inc, ok := err.(*IncompleteError); ok {
			inc.Active, inc.Total = active, total
		}
		return err
	}
	for {
		var ptr uint64
		if err := c.QueryRowContext(ctx, "SELECT log_pointer, active_replicas, total_replicas FROM system.replicas WHERE database = ? AND table = ?", db, name).Scan(&ptr, &active, &total); err != nil {
			if ctx.Err() != nil {
				return incomplete(still, "the replica has not copied the replication log yet")
			}
			return err
		}
		lost, err := replicaLost(ctx, c, replicaPath)
		if err != nil {
			if ctx.Err() != nil {
				return incomplete(still, "")
			}
			return err
		}
		if lost {
			// A replica being created or repaired copies another's log
			// pointer first and queues that one's parts after, one by one:
			// until it is done, a pointer past the log says nothing (found
			// by the adversary of issue 16: an empty new replica passed).
			select {
			case <-ctx.Done():
				return incomplete(still, "the replica is being created or repaired from another (is_lost)")
			case <-tick.C:
			}
			continue
		}
		if ptr > last || last == 0 && logLen == 0 {
			parts, err := queuedFetches(ctx, c, db, name, replicaPath)
			if err != nil {
				if ctx.Err() != nil {
					return incomplete(still, "")
				}
				return err
			}
			if awaited == nil {
				awaited = map[string]bool{}
				for _, p := range parts {
					awaited[p.Name] = true
				}
			}
			still = still[:0]
			stuck := 0
			for _, p := range parts {
				if awaited[p.Name] {
					// With every replica active a failure says nothing now
					// (it is tried again shortly); with one down, a fetch
					// that failed, or is not done within a second, is
					// taken as one only it can serve, so a read does not
					// wait out its bound for it.
					p.Unfetchable = active < total && (p.Unfetchable || p.Reason != "" || time.Since(begun) > time.Second)
					still = append(still, p)
					if p.Unfetchable {
						stuck++
					}
				}
			}
			if len(still) == 0 {
				return nil
			}
			if stuck == len(still) {
				return &IncompleteError{Table: db + "." + name, Parts: still, Active: active, Total: total}
			}
		}
		select {
		case <-ctx.Done():
			return incomplete(still, fmt.Sprintf("the replica has copied the replication log to entry %d, not yet to %d", ptr, last))
		case <-tick.C:
		}
	}
}

// incompleteOrCtx is what a wait that ran out of time returns: the parts
// still awaited, or the context's error when the caller's own context ended.
func incompleteOrCtx(ctx context.Context, db, name string, parts []MissingPart, why string) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	if len(parts) == 0 {
		parts = []MissingPart{{Name: "(log: " + why + ")", Reason: why}}
	}
	return &IncompleteError{Table: db + "." + name, Parts: parts}
}

// queuedFetches lists the parts the replica's queue still has to fetch:
// the queue in ZooKeeper, where an entry is written in the same step as the
// log pointer that passed it, and the one in memory, which says why a fetch
// failed.
func queuedFetches(ctx context.Context, c *sql.Conn, db, name, replicaPath string) ([]MissingPart, error) {
	byName := map[string]MissingPart{}
	rows, err := c.QueryContext(ctx, "SELECT value FROM system.zookeeper WHERE path = ?", replicaPath+"/queue")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		if part, ok := queueGet(v); ok {
			byName[part] = MissingPart{Name: part}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = c.QueryContext(ctx, "SELECT new_part_name, last_exception FROM system.replication_queue WHERE database = ? AND table = ? AND type = 'GET_PART'", db, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var p MissingPart
		if err := rows.Scan(&p.Name, &p.Reason); err != nil {
			return nil, err
		}
		p.Unfetchable = strings.Contains(p.Reason, "Code: 234,") || strings.Contains(p.Reason, "No active replica has part")
		byName[p.Name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]MissingPart, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// queueGet reads a replication queue entry as ZooKeeper holds it ("format
// version: N", header lines, then the entry's type and its arguments, a line
// each): the part a "get" entry fetches.
func queueGet(entry string) (string, bool) {
	lines := strings.Split(entry, "\n")
	for i, l := range lines {
		if l == "get" && i+1 < len(lines) && lines[i+1] != "" {
			return lines[i+1], true
		}
	}
	return "", false
}

// replicaLost reads the replica's is_lost flag: "1" while it is being
// created from, or repaired to, another replica.
func replicaLost(ctx context.Context, c *sql.Conn, replicaPath string) (bool, error) {
	var v string
	err := c.QueryRowContext(ctx, "SELECT value FROM system.zookeeper WHERE path = ? AND name = 'is_lost'", replicaPath).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // a replica of a version without the flag
	}
	return v == "1", err
}

// replicaState is what the last wait for each table found, for /readyz and
// the metrics (Incomplete).
type replicaState struct {
	mu         sync.Mutex
	incomplete map[string]*IncompleteError
}

func (s *Sink) noteReplica(table string, err error) {
	var inc *IncompleteError
	s.replicas.mu.Lock()
	defer s.replicas.mu.Unlock()
	switch {
	case err == nil:
		delete(s.replicas.incomplete, table)
	case errors.As(err, &inc):
		if s.replicas.incomplete == nil {
			s.replicas.incomplete = map[string]*IncompleteError{}
		}
		s.replicas.incomplete[table] = inc
	}
}

// Incomplete lists the tables whose replica, at its last check, lacked parts
// it could not fetch (cluster mode), sorted by table.
func (s *Sink) Incomplete() []IncompleteError {
	s.replicas.mu.Lock()
	defer s.replicas.mu.Unlock()
	var out []IncompleteError
	for _, e := range s.replicas.incomplete {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// RecheckReplicas waits again, briefly, for each table found incomplete, so
// that Incomplete clears once the parts have come (the collector asks at
// each scan; a sweep checks its tables anyway).
func (s *Sink) RecheckReplicas(ctx context.Context) {
	s.replicas.mu.Lock()
	var tables []string
	for t := range s.replicas.incomplete {
		tables = append(tables, t)
	}
	s.replicas.mu.Unlock()
	if len(tables) == 0 || s.pinned == nil {
		return
	}
	c, err := s.pinned.Conn(ctx)
	if err != nil {
		return
	}
	defer c.Close()
	for _, t := range tables {
		s.awaitReplica(ctx, c, t, time.Second)
	}
}

// ReplicaProblem says why this server's replicas are not complete, from
// their last checks (Incomplete), or nil: for /readyz.
func (s *Sink) ReplicaProblem() error {
	var errs []error
	for _, e := range s.Incomplete() {
		errs = append(errs, &e)
	}
	return errors.Join(errs...)
}
