package sink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Every object of the schema exists once per server as a replicated local
// table (or a view over local tables), and once as a Distributed table over
// the cluster under the plain name the sweeper and operators query. Each
// statement is for one server: none waits for the cluster (ON CLUSTER).
func TestClusterSchema(t *testing.T) {
	for _, f := range []features{{}, featuresOf(Version{Major: 24, Minor: 8})} {
		stmts := clusterSchema(schema("hc", f), "web")
		var tables, dist, views int
		for _, s := range stmts {
			if strings.Contains(s, "ON CLUSTER") {
				t.Errorf("ON CLUSTER: %s", s)
			}
			switch {
			case strings.Contains(s, "ENGINE = Distributed(web, hc, "):
				dist++
			case strings.HasPrefix(s, "CREATE TABLE"):
				tables++
				if !strings.Contains(s, "_local (") || !strings.Contains(s, "MergeTree('/clickhouse/tables/{shard}/hc/") || !strings.Contains(s, "ENGINE = Replicated") {
					t.Errorf("not a replicated local table: %s", s)
				}
			case strings.HasPrefix(s, "CREATE MATERIALIZED VIEW"):
				views++
				if !strings.Contains(s, "_local AS") || !strings.Contains(s, "_local GROUP BY") {
					t.Errorf("a view not between local tables: %s", s)
				}
			}
		}
		if tables == 0 || tables != dist || views == 0 {
			t.Errorf("%d local tables, %d distributed, %d views", tables, dist, views)
		}
	}
	got := clusterSchema([]string{"CREATE TABLE IF NOT EXISTS hc.hits_1m (\n\tx UInt64\n) ENGINE = SummingMergeTree((hits, bytes))\nORDER BY x"}, "web")
	want := "CREATE TABLE IF NOT EXISTS hc.hits_1m_local (\n\tx UInt64\n) ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/hc/hits_1m', '{replica}', (hits, bytes))\nORDER BY x"
	if len(got) != 2 || got[0] != want {
		t.Errorf("got %q\nwant %q", got[0], want)
	}
}

// An insert that failed because the schema is missing on the server is
// recognised as such, whether the server raised it for the table written
// (nothing taken yet: sent again) or while pushing to a view (the table
// took the block), and whether the client joined it with other addresses'
// errors when dialing.
func TestSchemaMissing(t *testing.T) {
	ex := func(code int32, msg string) error { return &clickhouse.Exception{Code: code, Message: msg} }
	for _, tc := range []struct {
		name                string
		err                 error
		missing, afterTable bool
	}{
		{"no error", nil, false, false},
		{"table", ex(60, "Table hc.hits_local doesn't exist."), true, false},
		{"database", ex(81, "Database hc doesn't exist"), true, false},
		{"database, at dial, after a down address", errors.Join(errors.New("127.0.0.1:9000: connection refused"), fmt.Errorf("127.0.0.1:9001: %w", ex(81, "Database hc doesn't exist"))), true, false},
		{"a view's table", ex(60, "Table hc.hits_1m_local doesn't exist.: while pushing to view hc.hits_1m_mv"), true, true},
		{"another error", ex(252, "Too many parts"), false, false},
		{"no exception", errors.New("EOF"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, a := schemaMissing(tc.err)
			if m != tc.missing || a != tc.afterTable {
				t.Errorf("schemaMissing = %v, %v; want %v, %v", m, a, tc.missing, tc.afterTable)
			}
		})
	}
	if err := explainCreate(ex(253, "Replica /clickhouse/tables/01/hc/hits/replicas/r2 already exists.")); !strings.Contains(err.Error(), "remove that path") {
		t.Errorf("253 not explained: %v", err)
	}
}

// queueGet reads the part of a fetch from a replication queue entry as
// ZooKeeper holds it (18.16's text, with and without a quorum line), and
// nothing from other entries.
func TestQueueGet(t *testing.T) {
	for _, c := range []struct {
		entry, part string
		ok          bool
	}{
		{"format version: 4\ncreate_time: 2026-11-25 08:39:10\nsource replica: r1\nblock_id: 1_6318_2\nget\n1_0_0_0\n", "1_0_0_0", true},
		{"format version: 4\ncreate_time: 2026-11-25 08:39:10\nsource replica: r1\nblock_id: \nget\n202611_3_3_0\nquorum: 2\n", "202611_3_3_0", true},
		{"format version: 4\ncreate_time: 2026-11-25 08:39:10\nsource replica: r1\nblock_id: \nmerge\nall_0_0_0\nall_1_1_0\ninto\nall_0_1_1\ndeduplicate: 0\n", "", false},
		{"", "", false},
	} {
		part, ok := queueGet(c.entry)
		if part != c.part || ok != c.ok {
			t.Errorf("queueGet(%q) = %q, %v; want %q, %v", c.entry, part, ok, c.part, c.ok)
		}
	}
}
