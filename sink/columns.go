package sink

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Columns added to tables of the schema after they were first released.
// CREATE TABLE IF NOT EXISTS leaves a table made by an older hitcount as it
// is, so Migrate reads system.columns and adds what such a table lacks
// (ALTER TABLE ... ADD COLUMN, which every supported version has; 18.16 has
// no ADD COLUMN IF NOT EXISTS, hence the read first). In cluster mode each
// replica's local table gets the column, and the Distributed table over it
// too (its own column list is what a query through it sees).
//
// A user who may not ALTER (the least-privilege collector) leaves the table
// as it is: the column is reported missing, and what writes it falls back
// to the columns the table has (see Sink.ClaimSources); `collector -migrate`
// run by an administrator adds it.

// addedColumn is a column a later version added to a table.
type addedColumn struct {
	table, name, typ string
}

// addedColumns, in the order they were added.
var addedColumns = []addedColumn{
	// When the collector last had every line of the source committed
	// (owners.go): the sweeper's completeness of a site's windows.
	{"source_owners", "caught_up", "DateTime"},
	// What kind of alert a crossing is (threshold, below, no_traffic,
	// no_data) and what the sweeper noted when it found it (held back).
	{"crossings", "kind", "String"},
	{"crossings", "note", "String"},
	// The visitor hash of each hit (visitor.go), which hits_visitors_1m
	// counts.
	{"hits", "visitor", visitorColumn},
}

// columnsOf lists db's columns as table.name.
type columnsOf func(ctx context.Context) (map[string]bool, error)

// ColumnsQuery lists a database's columns as table.name, with ? for the
// database.
const ColumnsQuery = "SELECT concat(table, '.', name) FROM system.columns WHERE database = ?"

// addColumns gives each table of the schema (stmts: single-server or a
// replica's) that lacks an added column that column, and returns the
// columns still missing (as table.name: the user may not ALTER) with why.
func addColumns(ctx context.Context, have columnsOf, alter func(context.Context, string) error, db string, stmts []string) (map[string]string, error) {
	objects := map[string]bool{}
	for _, stmt := range stmts {
		if m := objectRE.FindStringSubmatch(stmt); m != nil {
			objects[m[1]] = true
		}
	}
	cols, err := have(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the tables' columns: %w", err)
	}
	// A table of which the user sees no column is not this user's (the
	// collector has no right on crossings): nothing to add for it.
	visible := map[string]bool{}
	for col := range cols {
		t, _, _ := strings.Cut(col, ".")
		visible[t] = true
	}
	missing := map[string]string{}
	for _, c := range addedColumns {
		// The replicated table first: the Distributed one describes it.
		for _, t := range []string{c.table + "_local", c.table} {
			if !objects[db+"."+t] || !visible[t] || cols[t+"."+c.name] {
				continue
			}
			stmt := fmt.Sprintf("ALTER TABLE %s.%s ADD COLUMN %s %s", db, t, c.name, c.typ)
			err := alter(ctx, stmt)
			if err != nil && strings.HasSuffix(t, "_local") {
				// Another replica may have added it to the replicated
				// table meanwhile (the ALTER reaches this one through
				// ZooKeeper): what counts is whether it is there now.
				for range 10 {
					if cols, _ = have(ctx); cols[t+"."+c.name] {
						err = nil
						break
					}
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
			if err != nil {
				missing[t+"."+c.name] = fmt.Sprintf("%s: %v", stmt, err)
			}
		}
	}
	return missing, nil
}

// AddColumns is Migrate's added-columns step for the embedded engine (one
// server, the single-server schema).
func AddColumns(ctx context.Context, sel Selecter, alter func(context.Context, string) error, db string, v Version) (map[string]string, error) {
	have := func(ctx context.Context) (map[string]bool, error) {
		out := map[string]bool{}
		err := sel.Select(ctx, ColumnsQuery, []any{db}, func(scan func(...any) error) error {
			var n string
			if err := scan(&n); err != nil {
				return err
			}
			out[n] = true
			return nil
		})
		return out, err
	}
	return addColumns(ctx, have, alter, db, Schema(db, v))
}

// logMissingColumns says which added columns a table still lacks, and what
// that costs.
func (s *Sink) logMissingColumns(missing map[string]string) {
	for col, why := range missing {
		effect := ""
		if strings.HasPrefix(col, "source_owners") {
			effect = "the collector does not report how far it has committed each file, so the sweeper holds below and no_traffic rules of its sites"
		} else if strings.HasPrefix(col, "hits") {
			effect = "hits are inserted without their visitor hash and the visitors rollup is not made: rules with count: visitors count nothing"
		} else if strings.HasPrefix(col, "crossings") {
			effect = "the sweeper cannot record crossings"
		}
		s.logger().Warn("a table lacks a column of the schema: run `collector -migrate` as a user allowed to ALTER it (deploy/sql/users.sql, step 3)",
			"column", col, "effect", effect, "err", why)
	}
}
