package embedded_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A data directory made by an older hitcount lacks the columns added since
// (source_owners.caught_up, crossings.kind and .note): opening it adds them.
func TestOpenAddsColumns(t *testing.T) {
	testenv.RequireChdb(t)
	ctx := context.Background()
	data := filepath.Join(t.TempDir(), "data")
	open := func() *embedded.Store {
		t.Helper()
		st, err := embedded.Open(ctx, embedded.Options{LibPath: testenv.ChdbLibPath(), DataPath: data, Database: "hitcount"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	columns := func(st *embedded.Store) string {
		t.Helper()
		var out []string
		err := st.Select(ctx, "SELECT concat(table, '.', name) FROM system.columns WHERE database = 'hitcount' AND name IN ('caught_up', 'kind', 'note') ORDER BY table, name", nil,
			func(scan func(...any) error) error {
				var n string
				if err := scan(&n); err != nil {
					return err
				}
				out = append(out, n)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, " ")
	}
	const all = "crossings.kind crossings.note source_owners.caught_up"
	st := open()
	if got := columns(st); got != all {
		t.Fatalf("a new store has %q, want %q", got, all)
	}
	for _, stmt := range []string{
		"ALTER TABLE hitcount.source_owners DROP COLUMN caught_up",
		"ALTER TABLE hitcount.crossings DROP COLUMN kind",
		"ALTER TABLE hitcount.crossings DROP COLUMN note",
	} {
		if err := st.Engine().Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if got := columns(st); got != "" {
		t.Fatalf("left after dropping: %q", got)
	}
	st.Close()
	st = open()
	defer st.Close()
	if got := columns(st); got != all {
		t.Fatalf("reopened: %q, want %q", got, all)
	}
}
