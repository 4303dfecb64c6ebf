package sink

import (
	"slices"
	"strings"
	"testing"
)

// The tables a batch insert writes are the schema's tables with a
// deduplication window: hits, rejects and every view's target.
func TestDedupSchemaTables(t *testing.T) {
	got := dedupSchemaTables()
	want := []string{"hits", "rejects", "ingest_progress", "hits_1m", "hits_touched", "hits_1d", "hits_visitors_1m"}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Every view of the schema writes into one of them, from hits or rejects.
	for _, stmt := range schema("db", features{dedupToken: true}) {
		if m := createViewRE.FindStringSubmatch(stmt); m != nil {
			from := fromRE.FindStringSubmatch(stmt)
			if !slices.Contains(got, m[4]) || from == nil || (from[2] != "hits" && from[2] != "rejects") {
				t.Errorf("view %s: from %v into %s", m[2], from, m[4])
			}
		}
	}
}

func TestJudgeTable(t *testing.T) {
	defaults := map[string]uint64{"replicated_deduplication_window": 100, "non_replicated_deduplication_window": 0}
	for _, c := range []struct {
		engine, full string
		token, on    bool
		why          string
		fixable      bool
	}{
		// 26.x, as Migrate creates or alters them.
		{"MergeTree", "MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (site, path, ts) SETTINGS non_replicated_deduplication_window = 1000, index_granularity = 8192", true, true, "", false},
		{"SummingMergeTree", "SummingMergeTree(hits) ORDER BY x SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 1000", true, true, "", false},
		// Created before the setting.
		{"AggregatingMergeTree", "AggregatingMergeTree ORDER BY (site, source_id) SETTINGS index_granularity = 8192", true, false, "without non_replicated_deduplication_window", true},
		{"MergeTree", "MergeTree ORDER BY x SETTINGS non_replicated_deduplication_window = 0", true, false, "without", true},
		// 18.16: no token, whatever the table says.
		{"MergeTree", "MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (site, path, ts) SETTINGS index_granularity = 8192", false, false, "before 22.2", false},
		// Replicated: on by default, off only when told.
		{"ReplicatedMergeTree", "ReplicatedMergeTree('/clickhouse/tables/{shard}/hc/hits', '{replica}') PARTITION BY toYYYYMM(ts) ORDER BY (site, path, ts) SETTINGS index_granularity = 8192", false, true, "", false},
		{"ReplicatedSummingMergeTree", "ReplicatedSummingMergeTree('/p', '{replica}', hits) ORDER BY x SETTINGS replicated_deduplication_window = 0, index_granularity = 8192", true, false, "replicated_deduplication_window = 0", false},
		{"ReplicatedMergeTree", "ReplicatedMergeTree('/p', 'r') ORDER BY x SETTINGS non_replicated_deduplication_window = 0", true, true, "", false},
		// Not a MergeTree.
		{"Log", "Log", true, false, "engine Log", false},
		{"Distributed", "Distributed(web, hc, hits_local, rand())", true, false, "engine Distributed", false},
	} {
		got := judgeTable("db.t", tableInfo{engine: c.engine, full: c.full}, defaults, c.token)
		if got.On != c.on || !strings.Contains(got.Why, c.why) || got.fixable != c.fixable || (c.on && got.Why != "") {
			t.Errorf("%s (token %v): on %v, why %q, fixable %v; want %v, %q, %v", c.full, c.token, got.On, got.Why, got.fixable, c.on, c.why, c.fixable)
		}
	}
	// A server whose default gives every plain table the window.
	got := judgeTable("db.t", tableInfo{engine: "MergeTree", full: "MergeTree ORDER BY x"}, map[string]uint64{"non_replicated_deduplication_window": 50}, true)
	if !got.On {
		t.Errorf("server default window 50: %+v", got)
	}
}

func TestViewTarget(t *testing.T) {
	for q, want := range map[string]string{
		"CREATE MATERIALIZED VIEW hc.mv TO hc.agg ( x UInt64) AS SELECT x FROM hc.hits ":         "hc.agg",    // 18.16
		"CREATE MATERIALIZED VIEW hc.mv TO hc.agg (`x` UInt64) AS SELECT x FROM hc.hits":         "hc.agg",    // 26
		"CREATE MATERIALIZED VIEW hc.mv TO `my db`.`a.b` (`x` UInt64) AS SELECT x FROM hc.hits":  "my db.a.b", // quoted
		"CREATE MATERIALIZED VIEW hc.mv2 (`x` UInt64) ENGINE = MergeTree ORDER BY x AS SELECT 1": "",          // inner table
	} {
		got := ""
		if m := viewTargetRE.FindStringSubmatch(q); m != nil {
			got = strings.Trim(m[1], "`") + "." + strings.Trim(m[2], "`")
		}
		if got != want {
			t.Errorf("%s: target %q, want %q", q, got, want)
		}
	}
}
