package sink

import (
	"context"
	"fmt"
	"strings"
)

// Select runs q with ? parameters bound by the driver and calls fn for each
// row; scan fills fn's destinations. Only builtin types cross this boundary,
// so the alerts store can take the server or the embedded engine alike.
func (s *Sink) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	if s.cluster != "" {
		return s.selectSynced(ctx, q, args, fn)
	}
	rows, err := s.conn.Query(ctx, q, args...)
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

// InsertRows inserts rows of values, in the order of columns, into table
// (database.table) as one block.
// It uses a prepared batch: an INSERT ... VALUES statement sent as text
// crashes 18.16 through this driver.
func (s *Sink) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	if s.cluster != "" && !strings.HasSuffix(table, "_local") {
		// Into the replicated table on this server: a Distributed insert
		// would be forwarded later, and a read right after could miss it.
		table += "_local"
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			b.Abort()
			return fmt.Errorf("insert into %s: %w", table, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}

// syncedTables are what a sweep reads: its state, where a read must see
// every write any sweeper made on whichever replica, and its inputs, where a
// part another replica has not shipped yet would make a count low and a
// crossing late (or, past sweep.lateness, missed).
//
// The sync covers this server's shard only: the sweeper writes crossings
// into its own shard's replicated table, and reads every shard through the
// Distributed table, whose other shards' replicas it does not sync. With
// several shards, every sweeper must therefore list the replicas of one and
// the same shard (README, Cluster mode): then all crossing rows live on that
// shard, and the sync before each read sees every replica's writes.
var syncedTables = []string{"crossings", "sweeps", "hits_touched", "hits_1m", "hits_1d"}

// selectSynced is Select in cluster mode: on one connection, it first syncs
// the local replica of each of those tables the query reads, then runs the
// query there; the Distributed tables read this server's replica first
// (prefer_localhost_replica). While a part exists only on a stopped replica
// the sync fails, and so does the sweep: it is tried again on schedule.
func (s *Sink) selectSynced(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	c, err := s.pinned.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, t := range syncedTables {
		if !strings.Contains(q, s.db+"."+t+" ") && !strings.HasSuffix(q, s.db+"."+t) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, s.insertTimeout)
		_, err := c.ExecContext(sctx, "SYSTEM SYNC REPLICA "+s.table(t))
		cancel()
		if err != nil {
			return fmt.Errorf("sync replica of %s (a write may be on a replica that is down): %w", t, err)
		}
	}
	rows, err := c.QueryContext(ctx, q, args...)
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
