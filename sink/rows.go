package sink

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
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

// insertRows inserts rows of values, in the order of columns, into table
// (database.table) as one block: InsertRows (quorum.go) but once.
// It uses a prepared batch: an INSERT ... VALUES statement sent as text
// crashes 18.16 through this driver.
func (s *Sink) insertRows(ctx context.Context, table, columns string, rows [][]any) error {
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

// What a sweep reads, in cluster mode, and how complete its replica must be.
//
// stateTables are its state: a read must see every write any sweeper made,
// on whichever replica; a crossing's row that only a replica that is down
// holds could have its email sent again, so a sweep waits (fails, and is
// tried again on schedule) while its replica lacks one of their parts.
//
// inputTables are the counts: a part not fetched yet makes a count low and
// a crossing late, never one sent twice. A sweep goes on without a part no
// active replica has, so that every rule whose hits are elsewhere still
// sends; the replica's state says so (Incomplete: /readyz, the metrics), and
// a crossing in that part is found once it is back within sweep.lateness,
// or at the page's next hit.
var (
	stateTables = []string{"crossings", "sweeps"}
	inputTables = []string{"hits_touched", "hits_1m", "hits_1d", "hits_visitors_1m"}
)

// localRE finds the schema's tables in a query.
var localRE = regexp.MustCompile(`\b(hits|rejects|sources|ingest_progress|hits_1m|hits_touched|hits_1d|hits_visitors_1m|crossings|sweeps)\b`)

// selectSynced is Select in cluster mode, on one connection: it waits for
// this server's replica of each table the query reads, then runs the query
// on the replicated tables themselves (<name>_local), so that what is read
// is the replica just checked. Through the Distributed table a read may be
// served by another replica that was never checked: with
// prefer_localhost_replica=0, or when the server does not recognise itself
// in remote_servers (NAT, a container's port mapping, a service address).
// With several shards the inputs are on every shard and are read through
// the Distributed tables, which the sink refuses unless this server is
// listed as local in its cluster (localShard); every sweeper must then list
// the replicas of one and the same shard (docs/cluster.md), where the
// state lives.
func (s *Sink) selectSynced(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	shards, tables, err := s.localShard(ctx)
	if err != nil {
		return err
	}
	reads := func(t string) bool {
		return strings.Contains(q, s.db+"."+t+" ") || strings.HasSuffix(q, s.db+"."+t) || strings.Contains(q, s.db+"."+t+")")
	}
	var state, inputs []string
	for _, t := range stateTables {
		if reads(t) {
			state = append(state, t)
		}
	}
	for _, t := range inputTables {
		if reads(t) {
			inputs = append(inputs, t)
		}
	}
	q = s.localTables(q, shards, tables)
	c, err := s.pinned.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	bound := min(s.insertTimeout, replicaWait)
	for _, t := range state {
		if err := s.awaitReplica(ctx, c, s.table(t), bound); err != nil {
			return fmt.Errorf("the sweeper's state: %w", err)
		}
	}
	for _, t := range inputs {
		err := s.awaitReplica(ctx, c, s.table(t), bound)
		var inc *IncompleteError
		if errors.As(err, &inc) {
			s.logger().Warn("sweeping without parts this replica cannot fetch now: a crossing they hold comes once they are back", "err", err)
			continue
		}
		if err != nil {
			return err
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

// localTables rewrites q to read the replicated tables of this server: all
// of them on one shard; with several, the state only.
func (s *Sink) localTables(q string, shards int, tables *regexp.Regexp) string {
	return tables.ReplaceAllStringFunc(q, func(m string) string {
		name := strings.TrimPrefix(m, s.db+".")
		if shards > 1 && !slices.Contains(stateTables, name) {
			return m
		}
		return m + "_local"
	})
}

// localShard reads, once, how many shards the cluster has and checks that
// this server is one of its replicas as remote_servers lists them: a
// Distributed read prefers the local replica only when it recognises it.
// It also compiles, once, what finds the schema's tables of this database
// in a query (localTables).
func (s *Sink) localShard(ctx context.Context) (int, *regexp.Regexp, error) {
	s.topo.Lock()
	defer s.topo.Unlock()
	if s.topo.shards > 0 {
		return s.topo.shards, s.topo.tables, nil
	}
	var shards, local uint64
	err := s.conn.QueryRow(ctx, "SELECT uniqExact(shard_num), countIf(is_local) FROM system.clusters WHERE cluster = ?", s.cluster).Scan(&shards, &local)
	if err != nil {
		return 0, nil, fmt.Errorf("read cluster %s: %w", s.cluster, err)
	}
	if shards == 0 {
		return 0, nil, fmt.Errorf("cluster %s is not in the server's remote_servers", s.cluster)
	}
	if shards > 1 && local == 0 {
		return 0, nil, fmt.Errorf("cluster %s has %d shards and this server is none of its replicas as remote_servers lists them (a NAT or port-mapped address?): "+
			"a read through its Distributed tables could be served by a replica this sweeper never checked; list the server by the address it listens on, or run the sweeper with one shard", s.cluster, shards)
	}
	s.topo.shards = int(shards)
	s.topo.tables = regexp.MustCompile(regexp.QuoteMeta(s.db+".") + localRE.String())
	return s.topo.shards, s.topo.tables, nil
}
