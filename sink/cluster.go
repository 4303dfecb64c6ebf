package sink

import (
	"context"
	"database/sql"
	"errors"
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
// offset the collector waits until its replica of ingest_progress_local is
// complete (replica.go) and reads it on the same connection. When a part
// exists only on a replica that is down, the wait ends, bounded, with an
// *IncompleteError and what this replica has: the collector then resumes a
// source from its own record of what was acknowledged, or waits for that one
// source (internal/collector, settle).

// table is where the collector writes table: the local replicated table in
// cluster mode.
func (s *Sink) table(name string) string {
	if s.cluster != "" {
		return s.db + "." + name + "_local"
	}
	return s.db + "." + name
}

// replicaRead waits (a bounded wait, see replica.go) until this server's
// replica of each of tables (names without database or suffix) is complete,
// then runs fn on the same connection. When one lacks parts it cannot fetch,
// fn runs all the same if partial is set, and the *IncompleteError is
// returned with fn's result: the caller decides whether a read without those
// parts will do.
func (s *Sink) replicaRead(ctx context.Context, tables []string, partial bool, fn func(c *sql.Conn) error) error {
	c, err := s.pinned.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var incomplete error
	for _, t := range tables {
		err := s.awaitReplica(ctx, c, s.table(t), min(s.insertTimeout, replicaWait))
		if err == nil {
			continue
		}
		if !partial || !errors.As(err, new(*IncompleteError)) {
			return err
		}
		incomplete = errors.Join(incomplete, err)
	}
	if err := fn(c); err != nil {
		return err
	}
	return incomplete
}

// Cluster is the cluster name, "" on a single server.
func (s *Sink) Cluster() string { return s.cluster }
