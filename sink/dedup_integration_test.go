package sink_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

var insertTables = []string{"hits", "rejects", "ingest_progress", "hits_1m", "hits_touched", "hits_1d", "hits_visitors_1m"}

// checkDedupTables checks that Migrate read every table a batch insert
// writes (db.<name><suffix>), each on or off as want, its reason containing why.
func checkDedupTables(t *testing.T, d sink.Dedup, db, suffix string, on bool, why string) {
	t.Helper()
	seen := map[string]bool{}
	for _, tb := range d.Tables {
		seen[tb.Table] = true
		if tb.On != on || !strings.Contains(tb.Why, why) {
			t.Errorf("%s (%s): on %v (%s); want on %v, why containing %q", tb.Table, tb.Engine, tb.On, tb.Why, on, why)
		}
	}
	for _, name := range insertTables {
		if !seen[db+"."+name+suffix] {
			t.Errorf("%s%s not checked (checked: %v)", name, suffix, d.Tables)
		}
	}
	if len(d.Tables) != len(insertTables) {
		t.Errorf("%d tables checked, want %d: %+v", len(d.Tables), len(insertTables), d.Tables)
	}
}

// On the 18.16 server, plain MergeTree tables cannot deduplicate (no token,
// no non_replicated_deduplication_window): Deduplicates is false, read from
// the tables, and the start says so once, without a warning per table.
func TestServerDedupFromTables(t *testing.T) {
	t.Parallel()
	d := testenv.NewDatabase(t, "server")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logged bytes.Buffer
	s, err := sink.Open(ctx, sink.Options{Addr: []string{d.Addr}, Database: d.Name, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Deduplicates() {
		t.Error("Deduplicates before Migrate read the tables")
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Deduplicates() {
		t.Error("Deduplicates on 18.16 with plain MergeTree tables")
	}
	checkDedupTables(t, s.Dedup(), d.Name, "", false, "before 22.2")
	if out := logged.String(); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "inserts are not deduplicated on this server") || strings.Contains(out, "WARN") {
		t.Errorf("log:\n%s", out)
	}
}
