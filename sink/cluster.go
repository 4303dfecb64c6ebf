package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Cluster mode. Every table of the schema becomes a local table on each
// server, <name>_local, with the Replicated variant of its engine under
// /clickhouse/tables/{shard}/<db>/<name> and replica {replica} (the servers'
// macros), and a Distributed table <name> over the cluster for reading. The
// materialized views run on each server from hits_local into the local
// rollups. Every statement runs ON CLUSTER.
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

var (
	createTableRE = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) \(`)
	engineRE      = regexp.MustCompile(`ENGINE = (\w*)MergeTree(\(([^\n]*)\))?\n`)
	createViewRE  = regexp.MustCompile(`^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) TO (\w+)\.(\w+) AS`)
	fromRE        = regexp.MustCompile(`FROM (\w+)\.(\w+) GROUP BY`)
)

// clusterSchema rewrites the single-server schema for a cluster.
func clusterSchema(stmts []string, cluster string) []string {
	on := " ON CLUSTER " + cluster
	var out []string
	for _, s := range stmts {
		switch {
		case strings.HasPrefix(s, "CREATE DATABASE"):
			out = append(out, s+on)
		case createTableRE.MatchString(s):
			m := createTableRE.FindStringSubmatch(s)
			db, name := m[1], m[2]
			s = createTableRE.ReplaceAllString(s, "CREATE TABLE IF NOT EXISTS ${1}.${2}_local"+on+" (")
			s = engineRE.ReplaceAllStringFunc(s, func(e string) string {
				em := engineRE.FindStringSubmatch(e)
				args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", db, name)
				if em[3] != "" {
					args += ", " + em[3]
				}
				return "ENGINE = Replicated" + em[1] + "MergeTree(" + args + ")\n"
			})
			out = append(out, s, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s%s AS %s.%s_local ENGINE = Distributed(%s, %s, %s_local, rand())",
				db, name, on, db, name, cluster, db, name))
		case createViewRE.MatchString(s):
			s = createViewRE.ReplaceAllString(s, "CREATE MATERIALIZED VIEW IF NOT EXISTS ${1}.${2}"+on+" TO ${3}.${4}_local AS")
			s = fromRE.ReplaceAllString(s, "FROM ${1}.${2}_local GROUP BY")
			out = append(out, s)
		default:
			panic("cluster schema: statement of unknown shape: " + s)
		}
	}
	return out
}

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
