package sink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// The columns added since a table was first released (columns.go):
// source_owners.caught_up, crossings.kind and .note. A database made by an
// older hitcount lacks them, and CREATE TABLE IF NOT EXISTS leaves it so.

// dropAdded makes db's tables on srv as an older hitcount left them.
func dropAdded(t *testing.T, srv *testenv.ClickHouseServer, db string, tables ...string) {
	t.Helper()
	for _, tb := range tables {
		for _, col := range []string{"caught_up", "kind", "note"} {
			if (col == "caught_up") == strings.HasPrefix(tb, "source_owners") {
				srv.Exec(t, fmt.Sprintf("ALTER TABLE %s.%s DROP COLUMN %s", db, tb, col))
			}
		}
	}
}

// columnsOn lists the added columns db's tables on srv have, as table.name.
func columnsOn(t *testing.T, ctx context.Context, srv *testenv.ClickHouseServer, db string) []string {
	t.Helper()
	rows, err := srv.Conn(t).Query(ctx, "SELECT concat(table, '.', name) FROM system.columns WHERE database = ? AND name IN ('caught_up', 'kind', 'note') ORDER BY table, name", db)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// caughtUpOf reads the caught_up a claim wrote for source, through table.
func caughtUpOf(t *testing.T, ctx context.Context, srv *testenv.ClickHouseServer, table string, source uint64) time.Time {
	t.Helper()
	var c time.Time
	if err := srv.Conn(t).QueryRow(ctx, "SELECT max(caught_up) FROM "+table+" WHERE source_id = ?", source).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// On one 18.16 server: Migrate adds the columns the tables lack, and the
// records then carry caught_up. A user who may not ALTER (allow_ddl = 0)
// leaves them missing: Migrate does not fail, and the collector's records
// are written without caught_up (shipping goes on; its sites' windows wait).
func TestMigrateAddsColumns(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	ctx := context.Background()
	// A user without DDL, added to the server's users (read at start).
	users, err := os.ReadFile(filepath.Join(ch.Dir(), "users.xml"))
	if err != nil {
		t.Fatal(err)
	}
	withUser := strings.Replace(string(users), "</profiles>", "  <noddl><allow_ddl>0</allow_ddl></noddl>\n  </profiles>", 1)
	withUser = strings.Replace(withUser, "</users>", `  <noddl><password></password><networks><ip>127.0.0.1</ip></networks><profile>noddl</profile><quota>default</quota></noddl>
  </users>`, 1)
	if err := os.WriteFile(filepath.Join(ch.Dir(), "users.xml"), []byte(withUser), 0o644); err != nil {
		t.Fatal(err)
	}
	ch.Stop()
	ch.Start()
	open := func(user string) *sink.Sink {
		t.Helper()
		s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "cols", Username: user, InsertTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	admin := open("default")
	if err := admin.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	all := []string{"crossings.kind", "crossings.note", "source_owners.caught_up"}
	if got := columnsOn(t, ctx, ch, "cols"); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Fatalf("a new schema has %v, want %v", got, all)
	}
	claim := func(s *sink.Sink, source uint64) {
		t.Helper()
		c := sink.Claim{Collector: "c1", Host: "web-1", Window: time.Minute,
			Sources: []sink.ClaimedSource{{ID: source, Site: "www", Path: "/var/log/a.log", CaughtUp: true}}}
		if _, _, err := s.ClaimSources(ctx, c); err != nil {
			t.Fatalf("claim: %v", err)
		}
	}

	// As an older hitcount left it; the user without DDL cannot fix it.
	dropAdded(t, ch, "cols", "source_owners", "crossings")
	noddl := open("noddl")
	if err := noddl.Migrate(ctx); err != nil {
		t.Fatalf("migrate as a user without ALTER: %v", err)
	}
	if got := columnsOn(t, ctx, ch, "cols"); len(got) != 0 {
		t.Fatalf("columns %v added by a user without DDL", got)
	}
	claim(noddl, 1)

	// An administrator's migrate adds them; records carry caught_up.
	if err := admin.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := columnsOn(t, ctx, ch, "cols"); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Fatalf("after migrate: %v, want %v", got, all)
	}
	before := time.Now().Add(-2 * time.Second)
	claim(admin, 2)
	if c := caughtUpOf(t, ctx, ch, "cols.source_owners", 2); c.Before(before) {
		t.Errorf("caught_up %v, want the claim's time", c)
	}
	if c := caughtUpOf(t, ctx, ch, "cols.source_owners", 1); c.Unix() != 0 {
		t.Errorf("a record written without the column reads caught_up %v, want the epoch (never)", c)
	}
}

// Cluster mode: each replica's replicated table and the Distributed table
// over it get the columns, one replica's ALTER reaching the other through
// ZooKeeper (its own ALTER then finds the column there).
func TestClusterMigrateAddsColumns(t *testing.T) {
	t.Parallel()
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	r1, r2 := servers[0], servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := openCluster(t, ctx, "colsc", r1.Addr(), r2.Addr())
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dropAdded(t, r1, "colsc", "source_owners_local", "crossings_local")
	for _, r := range servers {
		dropAdded(t, r, "colsc", "source_owners", "crossings")
	}
	for _, r := range servers {
		if got := columnsOn(t, ctx, r, "colsc"); len(got) != 0 {
			t.Fatalf("%s: columns %v left after dropping", r.Addr(), got)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	want := "crossings.kind crossings.note crossings_local.kind crossings_local.note source_owners.caught_up source_owners_local.caught_up"
	for _, r := range servers {
		if got := strings.Join(columnsOn(t, ctx, r, "colsc"), " "); got != want {
			t.Errorf("%s: %s, want %s", r.Addr(), got, want)
		}
	}
	c := sink.Claim{Collector: "c1", Host: "web-1", Window: time.Minute,
		Sources: []sink.ClaimedSource{{ID: 7, Site: "www", Path: "/var/log/a.log", CaughtUp: true}}}
	before := time.Now().Add(-2 * time.Second)
	if _, _, err := s.ClaimSources(ctx, c); err != nil {
		t.Fatal(err)
	}
	r2.Exec(t, "SYSTEM SYNC REPLICA colsc.source_owners_local")
	if got := caughtUpOf(t, ctx, r2, "colsc.source_owners", 7); got.Before(before) {
		t.Errorf("caught_up read through r2's Distributed table: %v", got)
	}
}
