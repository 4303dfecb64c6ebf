package sink

import (
	"strings"
	"testing"
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
