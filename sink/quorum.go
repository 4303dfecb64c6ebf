package sink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Quorum inserts (cluster mode, Options.InsertQuorum >= 2).
//
// Without a quorum, a replica acknowledges an insert once the part is on its
// own disk and registered in Keeper; the other replicas fetch it later. A
// batch acknowledged so lives on one disk until fetched: if that disk dies
// first, the batch is gone, while the collector has moved past its lines.
//
// With insert_quorum N the server acknowledges an insert only once N
// replicas hold the part, in every table the insert writes (hits, rejects
// and each view's table), so an acknowledged batch survives the loss of N-1
// of them. The setting goes on every statement of the sink's connections (an
// insert into a replicated table heeds it, anything else ignores it), so no
// insert can forget it: the collector's batches, progress marks and sources,
// and the sweeper's crossings and sweeps, whose rows decide whether an alert
// was sent (a "sent" row only on a dead replica would make a survivor send
// the alert again).
//
// What 18.16 does with it, measured (quorum_integration_test.go):
//   - Fewer live replicas than the quorum: refused before anything is
//     written (TOO_LESS_LIVE_REPLICAS, 285). The lines wait in the log files
//     until a replica returns.
//   - The previous quorum insert into the same table not satisfied yet:
//     refused before anything is written (UNSATISFIED_QUORUM_FOR_PREVIOUS_
//     WRITE, 286). 18.16 lets one quorum insert per table be pending,
//     cluster-wide; the sink sends such an insert again for up to the insert
//     timeout (whileRefused) before reporting it.
//   - The same refusal raised while pushing to a view comes after hits took
//     the rows: the view's table (and the views after it) lack the batch,
//     and the identical re-send, dropped as a duplicate, skips the views, so
//     they lack it for good. One sink's inserts take turns (takeTurn) and so
//     never meet; two collectors' inserts can (1 batch in 40 with two
//     writers side by side).
//   - The quorum not reached within insert_quorum_timeout: hits is written,
//     the views never run, the insert fails (UNKNOWN_STATUS_OF_INSERT, 319),
//     and the re-send skips the views too: hence a quorum timeout longer
//     than the insert timeout (DefaultInsertQuorumTimeout).
//   - The identical re-send after an unknown outcome is refused while the
//     first insert runs (216) or its quorum is pending (286); acknowledged,
//     as written or as a duplicate, it means the quorum holds: a pending
//     quorum refuses every quorum insert into the table.
//   - The replica holding a part whose quorum is pending dies: once its
//     Keeper session expires, the others mark that quorum failed and forget
//     the part's block id, SYSTEM SYNC REPLICA stops waiting for it, and the
//     re-send is written anew on a survivor.
//
// All three codes are transient (Permanent is false): they depend on the
// replicas, not on the rows, and the collector sends the batch again.

// DefaultInsertQuorumTimeout is how long the server waits for a quorum
// (18.16's own default). It must be longer than the insert timeout: an
// insert whose quorum wait times out on the server has written hits but not
// the materialized views (they run after), and its identical re-send is
// dropped as a duplicate, views and all, so the rollups would lack the batch
// for good. An insert the client stops waiting for keeps waiting on the
// server and completes, views included, once the quorum is reached; its
// re-send is refused meanwhile (216: its query id is still running), then
// dropped as a duplicate. Both measured on 18.16.
const DefaultInsertQuorumTimeout = 10 * time.Minute

// checkQuorum refuses quorum options no insert could work with.
func checkQuorum(o Options) error {
	switch {
	case o.InsertQuorum == 0:
		return nil
	case o.InsertQuorum < 2:
		return fmt.Errorf("insert quorum %d: 0 (off) or at least 2", o.InsertQuorum)
	case o.Cluster == "":
		return fmt.Errorf("insert quorum %d without a cluster: a quorum counts replicas", o.InsertQuorum)
	}
	if t := quorumTimeout(o); t <= o.InsertTimeout {
		// The server would give up first: see DefaultInsertQuorumTimeout.
		return fmt.Errorf("insert quorum timeout %v: must be longer than the insert timeout %v", t, o.InsertTimeout)
	}
	return nil
}

func quorumTimeout(o Options) time.Duration {
	if o.InsertQuorumTimeout == 0 {
		return DefaultInsertQuorumTimeout
	}
	return o.InsertQuorumTimeout
}

// quorumSettings are the settings a connection carries for quorum inserts
// (options checkQuorum took), nil when they are off.
func quorumSettings(o Options) clickhouse.Settings {
	if o.InsertQuorum == 0 {
		return nil
	}
	// Plain ints: with 18.16 the driver encodes settings the old way,
	// which takes int and bool only.
	return clickhouse.Settings{
		"insert_quorum":         o.InsertQuorum,
		"insert_quorum_timeout": int(quorumTimeout(o).Milliseconds()),
	}
}

// InsertQuorum is the number of replicas an insert waits for, 0 when off.
func (s *Sink) InsertQuorum() int { return s.quorum }

// Replicas is what a quorum can count on: the replicas of this server's
// shard in remote_servers (the most a quorum can ever reach), and of those
// the ones whose hits_local exists (registered in Keeper: a replica that was
// down when the schema was created has none yet, and is not counted by
// 18.16) and is active now.
type Replicas struct {
	Configured, Registered, Active int
}

// QuorumReplicas reads Replicas, so a start can refuse a quorum no insert
// could ever reach and say what one replica down does.
func (s *Sink) QuorumReplicas(ctx context.Context) (Replicas, error) {
	var r Replicas
	rows, err := s.conn.Query(ctx, "SELECT count(), max(is_local) FROM system.clusters WHERE cluster = ? GROUP BY shard_num", s.cluster)
	if err != nil {
		return r, fmt.Errorf("read the replicas of cluster %s: %w", s.cluster, err)
	}
	defer rows.Close()
	local := false
	for rows.Next() {
		var n uint64
		var isLocal uint8
		if err := rows.Scan(&n, &isLocal); err != nil {
			return r, fmt.Errorf("read the replicas of cluster %s: %w", s.cluster, err)
		}
		// This server's shard; not recognising itself (NAT, a mapped
		// port), the largest shard.
		switch {
		case isLocal == 1 && !local:
			local, r.Configured = true, int(n)
		case !local:
			r.Configured = max(r.Configured, int(n))
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read the replicas of cluster %s: %w", s.cluster, err)
	}
	var total, active uint8
	if err := s.conn.QueryRow(ctx, "SELECT total_replicas, active_replicas FROM system.replicas WHERE database = ? AND table = ?",
		s.db, "hits_local").Scan(&total, &active); err != nil {
		return r, fmt.Errorf("read the replicas of %s: %w", s.table("hits"), err)
	}
	r.Registered, r.Active = int(total), int(active)
	return r, nil
}

// quorumRefused reports whether err is a quorum insert refused before it
// wrote anything: the quorum of another insert into the same table is still
// pending (286, both from the check before writing and from the commit that
// finds another quorum insert started). Raised while pushing to a view, the
// same code comes after the table read from took the rows: not this.
func quorumRefused(err error) bool {
	code, msg, ok := exception(err)
	return ok && code == 286 && !strings.Contains(msg, inView)
}

// whileRefused runs insert until it is not refused for another insert's
// pending quorum, or ctx ends: nothing was written, and a quorum is reached
// in the time a replica takes to fetch a part (tens of milliseconds), so the
// statement is sent again at once rather than reported as an unknown outcome.
func (s *Sink) whileRefused(ctx context.Context, insert func() error) error {
	// A quorum that stays pending (a replica that cannot fetch but keeps
	// its Keeper session) would refuse for as long: past the insert
	// timeout the refusal goes to the caller, whose ctx may have no end.
	// No attempt starts that ctx's deadline would cut short, so what the
	// caller hears is the refusal, not the deadline.
	give := time.Now().Add(s.insertTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(give) {
		give = dl
	}
	wait := quorumRetryMin
	for {
		err := insert()
		if s.quorum == 0 || !quorumRefused(err) || time.Now().Add(wait+quorumRetryMin).After(give) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, quorumRetryMax)
	}
}

const (
	quorumRetryMin = 20 * time.Millisecond
	quorumRetryMax = time.Second
)

// takeTurn waits until no other quorum insert of this sink that feeds the
// views runs, or ctx ends. 18.16 keeps one pending quorum per table, and an
// insert into hits pushes into every view's table after hits took its rows:
// two of the collector's inserts side by side would meet in a view's table,
// where the second is refused after hits took its rows, and its identical
// re-send, dropped as a duplicate, skips the views, so a rollup would lack
// the batch for good. One at a time, they never meet.
func (s *Sink) takeTurn(ctx context.Context) (release func(), err error) {
	if s.quorum == 0 {
		return func() {}, nil
	}
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the previous quorum insert: %w", ctx.Err())
	}
}

// InsertRows inserts rows of values, in the order of columns, into table
// (database.table) as one block (insertRows), sent again while a quorum
// insert refuses it before writing. The sweeper's crossings and sweeps go
// this way: with a quorum, a crossing's state is acknowledged only once
// enough replicas hold it.
func (s *Sink) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	return s.whileRefused(ctx, func() error { return s.insertRows(ctx, table, columns, rows) })
}

// MarkProgress records that a source's lines up to the one at last are
// committed (markProgress). It writes ingest_progress, a view's table, so it
// takes its turn with the batches.
func (s *Sink) MarkProgress(ctx context.Context, site string, source uint64, last int64) error {
	release, err := s.takeTurn(ctx)
	if err != nil {
		return fmt.Errorf("mark source %016x committed to %d: %w", source, last, err)
	}
	defer release()
	return s.whileRefused(ctx, func() error { return s.markProgress(ctx, site, source, last) })
}

// RecordSource notes a source's current path (recordSource).
func (s *Sink) RecordSource(ctx context.Context, site string, id uint64, path string) error {
	return s.whileRefused(ctx, func() error { return s.recordSource(ctx, site, id, path) })
}
