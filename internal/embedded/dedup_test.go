package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// dedupTables are the tables a batch insert writes: hits and rejects, and
// every table their views write to.
var dedupTables = []string{"hits", "rejects", "ingest_progress", "hits_1m", "hits_touched", "hits_1d", "hits_visitors_1m"}

func dedupBatch(source uint64) *sink.Batch {
	b := sink.NewBatch(10)
	b.Reset("www", source)
	b.ReadAt = time.Now()
	for i := range 10 {
		off := int64(i * 100)
		if i == 4 {
			b.AddReject(off, off+100, "bad", []byte("junk"))
			continue
		}
		b.Add(&parser.Hit{Unix: time.Now().Unix(), Method: []byte("GET"), Path: []byte("/d"), Status: 200}, off, off+100)
	}
	return b
}

// Dedup is read from the tables, not assumed from the version: tables made
// by an older hitcount (no non_replicated_deduplication_window; CREATE TABLE
// IF NOT EXISTS keeps them so) do not deduplicate, and Deduplicates says so,
// until Migrate brings them up to the schema; a collector that may not do
// that logs each table and why. After Migrate, a batch inserted again is
// dropped everywhere.
func TestDedupIsReadFromTheTables(t *testing.T) {
	lib := testenv.RequireChdb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	const db = "hc"

	// The schema as a hitcount for ClickHouse before 22.2 made it.
	raw, err := chdb.Open(ctx, chdb.Options{LibPath: lib, DataPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range sink.Schema(db, sink.Version{Major: 21, Minor: 8}) {
		if strings.Contains(stmt, "deduplication_window") {
			t.Fatalf("the old schema has a deduplication window: %s", stmt)
		}
		if err := raw.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	st, err := embedded.Open(ctx, embedded.Options{LibPath: lib, DataPath: dir, Database: db, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkTables := func(d sink.Dedup, on bool, why string) {
		t.Helper()
		var names []string
		for _, tb := range d.Tables {
			names = append(names, strings.TrimPrefix(tb.Table, db+"."))
			if tb.On != on || !strings.Contains(tb.Why, why) {
				t.Errorf("%s: on %v (%s); want on %v, why containing %q", tb.Table, tb.On, tb.Why, on, why)
			}
		}
		slices.Sort(names)
		if want := slices.Sorted(slices.Values(dedupTables)); !slices.Equal(names, want) {
			t.Errorf("tables checked: %v; want %v", names, want)
		}
	}
	if st.Deduplicates() {
		t.Error("Deduplicates on tables without non_replicated_deduplication_window")
	}
	checkTables(st.Dedup(), false, "without non_replicated_deduplication_window")
	// Right: such a table keeps a re-sent batch twice.
	old := dedupBatch(0x01d)
	for range 2 {
		if err := st.Insert(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, ctx, st, "SELECT count() FROM hc.hits WHERE source_id = 0x01d"); n != 2*uint64(old.Rows()) {
		t.Fatalf("old tables: %d rows after two sends of %d; the premise does not hold", n, old.Rows())
	}

	// A collector that may not ALTER: the tables stay, each is logged, and
	// the reason says what to do.
	var logged bytes.Buffer
	denied := func(context.Context, string) error {
		return errors.New("Code: 497. DB::Exception: collector: Not enough privileges. (ACCESS_DENIED)")
	}
	d, err := sink.CheckDedup(ctx, st, denied, db, v, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if d.On() {
		t.Error("dedup on after a refused ALTER")
	}
	checkTables(d, false, "ALTER TABLE")
	checkTables(d, false, "ACCESS_DENIED")
	checkTables(d, false, "collector -migrate")
	for _, name := range dedupTables {
		if !strings.Contains(logged.String(), "deduplication is off for a table") || !strings.Contains(logged.String(), "table="+db+"."+name+" ") {
			t.Errorf("no warning about %s in the log:\n%s", name, logged.String())
		}
	}

	// Migrate, as an administrator's `collector -migrate` or the embedded
	// engine's own start does.
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.Deduplicates() {
		t.Errorf("Deduplicates false after Migrate: %+v", st.Dedup().Off())
	}
	checkTables(st.Dedup(), true, "")
	for _, name := range dedupTables {
		q := fmt.Sprintf("SELECT count() FROM system.tables WHERE database = '%s' AND name = '%s' AND engine_full LIKE '%%non_replicated_deduplication_window = 1000%%'", db, name)
		if count(t, ctx, st, q) != 1 {
			t.Errorf("%s: no non_replicated_deduplication_window = 1000 after Migrate", name)
		}
	}
	b := dedupBatch(0x2e3)
	for range 2 {
		if err := st.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for q, want := range map[string]int{
		"SELECT count() FROM hc.hits WHERE source_id = 0x2e3":                                   b.Rows(),
		"SELECT count() FROM hc.rejects WHERE source_id = 0x2e3":                                len(b.Rejects),
		"SELECT sum(hits) FROM hc.hits_1m WHERE path = '/d'":                                    2*old.Rows() + b.Rows(),
		"SELECT sum(hits) FROM hc.hits_1d WHERE path = '/d'":                                    2*old.Rows() + b.Rows(),
		"SELECT sum(hits) FROM hc.hits_touched WHERE path = '/d'":                               2*old.Rows() + b.Rows(),
		"SELECT toUInt64(maxMerge(max_offset)) FROM hc.ingest_progress WHERE source_id = 0x2e3": int(b.Last),
	} {
		if got := count(t, ctx, st, q); got != uint64(want) {
			t.Errorf("after two sends: %s = %d, want %d", q, got, want)
		}
	}

	// A fresh store deduplicates from the start.
	st.Close()
	fresh, err := embedded.Open(ctx, embedded.Options{LibPath: lib, DataPath: dir, Database: "fresh"})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if !fresh.Deduplicates() {
		t.Errorf("a fresh schema does not deduplicate: %+v", fresh.Dedup().Off())
	}
}

func count(t *testing.T, ctx context.Context, st *embedded.Store, q string) uint64 {
	t.Helper()
	n, err := testenv.Count(ctx, st, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
