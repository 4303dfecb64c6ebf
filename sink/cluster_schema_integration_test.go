package sink_test

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// Cluster mode with a replica down, on a fresh database: Migrate creates
// the schema on each replica it reaches and does not wait for the one that
// is down (an ON CLUSTER statement waits distributed_ddl_task_timeout, 180 s
// by default, for it); the next Migrate after it is back gives it every
// table, and it fetches the rows inserted meanwhile from the other replica.
// Whichever place the down replica has in the addresses: last, its
// "connection refused" must not hide that the first one answered that the
// database does not exist yet.
func TestClusterMigrateReplicaDown(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	for i, tc := range []struct {
		name  string
		addrs []string
	}{
		{"down replica first", []string{r2.Addr(), r1.Addr()}},
		{"down replica last", []string{r1.Addr(), r2.Addr()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fmt.Sprintf("hc%d", i)
			r2.Stop()
			down := true
			defer func() {
				if down { // a failed case leaves the next one both replicas
					r2.Start()
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			s := openCluster(t, ctx, db, tc.addrs...)

			// A server that waited for r2 would hold Migrate for
			// minutes: 30 s says it did.
			mctx, mcancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			err := s.Migrate(mctx)
			took := time.Since(t0)
			mcancel()
			t.Logf("migrate with replica r2 down: %v (err %v)", took.Round(time.Millisecond), err)
			if err != nil {
				t.Fatalf("migrate with replica r2 down: %v after %v", err, took.Round(time.Millisecond))
			}
			if took > 10*time.Second {
				t.Errorf("migrate with replica r2 down took %v", took)
			}
			want := tablesOn(t, ctx, r1, db)
			if len(want) == 0 {
				t.Fatal("r1 has no tables after migrate")
			}
			b := resendBatch(0xd0e1)
			if err := s.Insert(ctx, b); err != nil {
				t.Fatalf("insert with r2 down: %v", err)
			}

			r2.Start()
			down = false
			t0 = time.Now()
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("migrate with both replicas up: %v", err)
			}
			t.Logf("migrate with r2 back: %v", time.Since(t0).Round(time.Millisecond))
			if got := tablesOn(t, ctx, r2, db); !slices.Equal(got, want) {
				t.Fatalf("r2 after migrate has tables %v; want %v", got, want)
			}
			checkRows(t, ctx, r2, db, b.Rows(), len(b.Rejects))
		})
	}
}

// A replica rebuilt empty (its disk lost: data and metadata gone, its old
// replica nodes removed from ZooKeeper, as an operator of 18.16 rebuilds
// one) gets its tables when a sink fails over to it: the sink creates what
// is missing on the server it reaches and the insert goes through, and the
// replica fetches the rows it had before from the other one. A sink opened
// on an existing database has it as its session's, so connecting to the
// rebuilt replica fails (UNKNOWN_DATABASE); one opened before the database
// existed (the first start) is in "default", connects, and the insert
// fails.
func TestClusterRebuiltReplica(t *testing.T) {
	t.Parallel()
	zks := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zks, "web", 2)
	r1, r2 := servers[0], servers[1]
	for i, tc := range []struct {
		name          string
		openAfterMigr bool
	}{
		{"session on the database", true},
		{"session on default", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := fmt.Sprintf("hc%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			s := openCluster(t, ctx, db, r1.Addr(), r2.Addr())
			if err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.openAfterMigr {
				s = openCluster(t, ctx, db, r1.Addr(), r2.Addr())
			}
			before := resendBatch(0xb4f0)
			if err := s.Insert(ctx, before); err != nil {
				t.Fatal(err)
			}

			rebuild(t, zks, r2, "r2", db)
			// The replica the sink inserts into dies: its pool fails
			// over to r2.
			r1.Stop()
			down := true
			defer func() {
				if down { // a failed case leaves the next one both replicas
					r1.Start()
				}
			}()
			after := resendBatch(0xaf7e)
			t0 := time.Now()
			var err error
			for time.Since(t0) < 30*time.Second {
				if err = s.Insert(ctx, after); err == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				t.Fatalf("insert into the rebuilt replica r2 (r1 down): still failing after %v: %v", time.Since(t0).Round(time.Second), err)
			}
			t.Logf("insert into the rebuilt replica r2 took %v", time.Since(t0).Round(time.Millisecond))

			r1.Start()
			down = false
			for _, srv := range []*testenv.ClickHouseServer{r1, r2} {
				checkRows(t, ctx, srv, db, before.Rows()+after.Rows(), len(before.Rejects)+len(after.Rejects))
			}
			if got, want := tablesOn(t, ctx, r2, db), tablesOn(t, ctx, r1, db); !slices.Equal(got, want) {
				t.Errorf("rebuilt r2 has tables %v; r1 has %v", got, want)
			}
		})
	}
}

// openCluster opens a cluster-mode sink on database db over addrs, without
// migrating.
func openCluster(t *testing.T, ctx context.Context, db string, addrs ...string) *sink.Sink {
	t.Helper()
	s, err := sink.Open(ctx, sink.Options{Addr: addrs, Database: db, Cluster: "web", DialTimeout: time.Second, InsertTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tablesOn lists database db's tables on srv.
func tablesOn(t *testing.T, ctx context.Context, srv *testenv.ClickHouseServer, db string) []string {
	t.Helper()
	rows, err := srv.Conn(t).Query(ctx, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", db)
	if err != nil {
		t.Fatalf("tables on %s: %v", srv.Addr(), err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

// checkRows syncs srv's replicas of db's hits, rejects and hits_1m and checks it holds
// hits rows and rejects rows, and the rollup their views wrote.
func checkRows(t *testing.T, ctx context.Context, srv *testenv.ClickHouseServer, db string, hits, rejects int) {
	t.Helper()
	conn := srv.Conn(t)
	for _, tb := range []string{"hits_local", "rejects_local", "hits_1m_local"} {
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+db+"."+tb); err != nil {
			t.Fatalf("%s: sync %s: %v", srv.Addr(), tb, err)
		}
	}
	var h, r, rollup uint64
	err := conn.QueryRow(ctx, fmt.Sprintf("SELECT (SELECT count() FROM %[1]s.hits_local), (SELECT count() FROM %[1]s.rejects_local), (SELECT sum(hits) FROM %[1]s.hits_1m_local)", db)).Scan(&h, &r, &rollup)
	if err != nil {
		t.Fatalf("%s: %v", srv.Addr(), err)
	}
	if h != uint64(hits) || r != uint64(rejects) || rollup != uint64(hits) {
		t.Errorf("%s: %d hits, %d rejects, rollup %d; want %d, %d, %d", srv.Addr(), h, r, rollup, hits, rejects, hits)
	}
}

// rebuild does to srv (macro replica) what losing its disk and the 18.16
// recovery do: the server stops, its data and metadata are gone, its
// replica's nodes are removed from ZooKeeper (/clickhouse/tables/01/<db>/
// <table>/replicas/<replica>, zkCli's deleteall: 18.16 has no SYSTEM DROP
// REPLICA), and it starts empty.
func rebuild(t *testing.T, zks *testenv.ZooKeeperServer, srv *testenv.ClickHouseServer, replica, db string) {
	t.Helper()
	srv.Stop()
	if err := os.RemoveAll(filepath.Join(srv.Dir(), "data")); err != nil {
		t.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{zks.Addr()}, 4*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := "/clickhouse/tables/01/" + db
	tables, _, err := conn.Children(root)
	if err != nil {
		t.Fatalf("zookeeper %s: %v", root, err)
	}
	for _, tb := range tables {
		if err := zkDeleteAll(conn, path.Join(root, tb, "replicas", replica)); err != nil {
			t.Fatalf("remove the lost replica from zookeeper: %v", err)
		}
	}
	srv.Start()
}

// zkDeleteAll removes p and everything under it (zkCli's deleteall).
func zkDeleteAll(conn *zk.Conn, p string) error {
	kids, _, err := conn.Children(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, k := range kids {
		if err := zkDeleteAll(conn, path.Join(p, k)); err != nil {
			return err
		}
	}
	if err := conn.Delete(p, -1); err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	return nil
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}
