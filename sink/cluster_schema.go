package sink

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// How each replica gets the schema in cluster mode. The statements run on
// each server by itself, never ON CLUSTER: an ON CLUSTER statement waits
// for every server of the cluster, a down one included, for
// distributed_ddl_task_timeout (180 s by default) and then fails, one
// statement after another, and a replica rebuilt empty is given nothing by
// a server that already has every table. Creating a ReplicatedMergeTree
// table on a server, with the shard's ZooKeeper path and the server's
// {replica} macro, is how ClickHouse adds a replica: it then fetches the
// parts the others hold by itself.
//
//   - Migrate creates what is missing on each server of Options.Addr (the
//     collector's addresses are replicas of one shard), each over a
//     connection of its own; a server that does not answer is skipped with
//     a warning. It then checks the server the pool is connected to, and
//     fails only if that one lacks its schema.
//   - An insert failing because a table or the database of the schema does
//     not exist on the server the pool reached (UNKNOWN_TABLE 60,
//     UNKNOWN_DATABASE 81: a replica rebuilt empty, or one that was down
//     when the schema was made, taking over from one that died) creates the
//     schema the same way and is sent once more.

var (
	createTableRE = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS (\w+)\.(\w+) \(`)
	engineRE      = regexp.MustCompile(`ENGINE = (\w*)MergeTree(\(([^\n]*)\))?\n`)
	createViewRE  = regexp.MustCompile(`^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)\.(\w+) TO (\w+)\.(\w+) AS`)
	fromRE        = regexp.MustCompile(`FROM (\w+)\.(\w+) GROUP BY`)
)

// clusterSchema rewrites the single-server schema for a replica of a
// cluster: each table becomes <name>_local, replicated, plus a Distributed
// <name> over the cluster; the views read and write the local tables.
func clusterSchema(stmts []string, cluster string) []string {
	var out []string
	for _, s := range stmts {
		switch {
		case strings.HasPrefix(s, "CREATE DATABASE"):
			out = append(out, s)
		case createTableRE.MatchString(s):
			m := createTableRE.FindStringSubmatch(s)
			db, name := m[1], m[2]
			s = createTableRE.ReplaceAllString(s, "CREATE TABLE IF NOT EXISTS ${1}.${2}_local (")
			s = engineRE.ReplaceAllStringFunc(s, func(e string) string {
				em := engineRE.FindStringSubmatch(e)
				args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", db, name)
				if em[3] != "" {
					args += ", " + em[3]
				}
				return "ENGINE = Replicated" + em[1] + "MergeTree(" + args + ")\n"
			})
			out = append(out, s, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_local ENGINE = Distributed(%s, %s, %s_local, rand())",
				db, name, db, name, cluster, db, name))
		case createViewRE.MatchString(s):
			s = createViewRE.ReplaceAllString(s, "CREATE MATERIALIZED VIEW IF NOT EXISTS ${1}.${2} TO ${3}.${4}_local AS")
			s = fromRE.ReplaceAllString(s, "FROM ${1}.${2}_local GROUP BY")
			out = append(out, s)
		default:
			panic("cluster schema: statement of unknown shape: " + s)
		}
	}
	return out
}

// createOnReplicas creates what is missing of the schema on each server of
// the sink's addresses. A server that cannot be reached or refuses is
// logged and left: it gets its schema from the next Migrate, or from the
// first insert that reaches it.
func (s *Sink) createOnReplicas(ctx context.Context, stmts []string) {
	for _, addr := range s.opts.Addr {
		if err := s.createOnServer(ctx, addr, stmts); err != nil {
			s.logger().Warn("schema not created on a replica; it will be when the replica answers (the next migrate, or the first insert that reaches it)",
				"replica", addr, "err", err)
		}
	}
}

// createOnServer creates what is missing of the schema on the server at
// addr, over a connection of its own that is closed after.
func (s *Sink) createOnServer(ctx context.Context, addr string, stmts []string) error {
	conn, err := s.serverConn(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	missing, err := createOn(ctx, conn, s.db, stmts)
	if err == nil && len(missing) > 0 {
		s.logger().Warn("a replica's tables lack columns of the schema", "replica", addr)
		s.logMissingColumns(missing)
	}
	return err
}

// serverConn connects to the one server at addr, within the dial timeout.
// The session's database is the configured one, or, where that does not
// exist yet, "default" (as Open does).
func (s *Sink) serverConn(ctx context.Context, addr string) (driver.Conn, error) {
	var err error
	for _, db := range []string{s.db, "default"} {
		o := clientOptions(s.opts, s.comp, db)
		o.Addr, o.MaxOpenConns, o.MaxIdleConns = []string{addr}, 1, 1
		var conn driver.Conn
		conn, err = clickhouse.Open(o)
		if err != nil {
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err == nil {
			return conn, nil
		}
		conn.Close()
		if code, _, _ := exception(err); code != 81 { // UNKNOWN_DATABASE
			break
		}
	}
	return nil, fmt.Errorf("connect: %w", err)
}

// explainCreate adds to a failed CREATE what the operator can do about it.
// REPLICA_IS_ALREADY_EXIST (253) on a server that lacks the table: the
// server lost its tables (rebuilt empty) and its replica's nodes are left in
// ZooKeeper; ClickHouse will not take the replica's place again.
func explainCreate(err error) error {
	if code, _, _ := exception(err); code == 253 {
		return fmt.Errorf("%w (this server lost its tables but its replica is still registered in ZooKeeper: remove that path, e.g. zkCli.sh deleteall, as 18.16 has no SYSTEM DROP REPLICA; then migrate again)", err)
	}
	return err
}

// schemaMissing reports whether err says a table or the database does not
// exist on the server, and whether it was raised while pushing to a view
// (after the table written to took the block).
func schemaMissing(err error) (missing, afterTable bool) {
	code, msg, ok := exception(err)
	if !ok || code != 60 && code != 81 { // UNKNOWN_TABLE, UNKNOWN_DATABASE
		return false, false
	}
	return true, strings.Contains(msg, inView)
}

// withSchema runs op; in cluster mode, when op failed because a table or
// the database of the schema is missing on the server the pool reached,
// it creates the schema where it is missing and runs op once more. Such a
// failure comes before the server took anything, so running op again
// sends nothing twice; one raised while pushing to a view (a view's table
// missing) comes after the table took the block: the schema is created but
// the error returned, for the caller to settle as any unknown outcome.
func (s *Sink) withSchema(ctx context.Context, op func() error) error {
	err := op()
	missing, afterTable := schemaMissing(err)
	if s.cluster == "" || !missing {
		return err
	}
	s.logger().Warn("a table of the schema is missing on the replica the connection reached; creating the schema where it is missing", "err", err)
	if cerr := s.repairSchema(ctx); cerr != nil {
		return fmt.Errorf("%w (and creating the schema: %v)", err, cerr)
	}
	if afterTable {
		return err
	}
	return op()
}

// repairSchema creates what is missing of the schema on every server of
// the addresses and then on the one the pool reaches, one call at a time
// (every shipper of a collector may hit the same missing table at once:
// the later calls find it there).
func (s *Sink) repairSchema(ctx context.Context) error {
	s.repairMu.Lock()
	defer s.repairMu.Unlock()
	stmts := s.schemaStatements()
	s.createOnReplicas(ctx, stmts)
	missing, err := createOn(ctx, s.conn, s.db, stmts)
	if err == nil {
		s.noteColumns(missing)
	}
	return err
}
