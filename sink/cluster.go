package sink

import (
	"context"
	"database/sql"
	"fmt"
)

// Cluster mode. Every table of the schema becomes a local table on each
// server, <name>_local, with the Replicated variant of its engine under
// /clickhouse/tables/{shard}/<db>/<name> and replica {replica} (the servers'
// macros), and a Distributed table <name> over the cluster for reading. The
// materialized views run on each server from hits_local into the local
// rollups. Each server gets the schema by itself: see cluster_schema.go.
//
// Where inserts go: the collector inserts each batch as one block into
// hits_local (and rejects_local) of the server it is connected to. A block
// insert into a ReplicatedMergeTree table is atomic and is registered in
// Keeper by its checksum, so an identical block inserted again, on any
// replica of the shard, is dropped: the collector answers an unknown outcome
// by sending exactly the same batch again. A Distributed insert has neither
// property (it splits blocks and forwards them later), so it is never used.
// A collector's addresses must be replicas of one shard.
//
// Where the resume point comes from: a replica may not yet have fetched a
// part that another replica acknowledged. Before reading a source's committed
// offset the collector runs SYSTEM SYNC REPLICA on ingest_progress_local and
// reads it on the same connection: the replica has then fetched every part
// committed so far, or the call fails (a part only a stopped replica has) and
// the collector waits and tries again instead of cutting batches that would
// duplicate it.

// table is where the collector writes table: the local replicated table in
// cluster mode.
func (s *Sink) table(name string) string {
	if s.cluster != "" {
		return s.db + "." + name + "_local"
	}
	return s.db + "." + name
}

// syncedRead runs SYSTEM SYNC REPLICA on the local progress table and then fn
// on the same connection, so fn reads a replica that has every committed part.
func (s *Sink) syncedRead(ctx context.Context, fn func(c *sql.Conn) error) error {
	c, err := s.pinned.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, s.insertTimeout)
	defer cancel()
	if _, err := c.ExecContext(sctx, "SYSTEM SYNC REPLICA "+s.table("ingest_progress")); err != nil {
		return fmt.Errorf("sync replica (a part may be on a replica that is down): %w", err)
	}
	return fn(c)
}

// Cluster is the cluster name, "" on a single server.
func (s *Sink) Cluster() string { return s.cluster }
