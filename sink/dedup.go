package sink

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Deduplication is a property of the tables, not of the server version. A
// batch insert writes hits (or rejects) and, through materialized views,
// every table those views write to; a batch sent again after an unknown
// outcome is dropped only if each of them drops it:
//   - a Replicated*MergeTree table drops a block whose checksum (or token) it
//     has seen among its last replicated_deduplication_window blocks (on by
//     default in every version);
//   - a plain *MergeTree table only with non_replicated_deduplication_window
//     > 0, which the schema sets from ClickHouse 22.2 on, with the batch id
//     as insert_deduplication_token (the rollups hold now() and aggregates,
//     so only the token makes their blocks equal);
//   - any other engine never.
//
// A table created by an older hitcount, or on the server before an upgrade
// to 22.2, lacks the setting, and CREATE TABLE IF NOT EXISTS leaves it so:
// Migrate reads what each table is and brings the schema's tables up to it
// with ALTER TABLE ... MODIFY SETTING where the server and the user allow.

// Selecter runs a query with ? parameters and scans each row: Sink.Select and
// the embedded store's Select.
type Selecter interface {
	Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error
}

// TableDedup is what one table does with a block inserted again.
type TableDedup struct {
	Table  string // database.name
	Engine string // "" when the table does not exist
	On     bool
	Why    string // when not On: why, and what would change it

	fixable bool // a plain MergeTree of the schema lacking the window, on a server that has it
}

// Dedup is what the tables a batch insert writes do with a batch sent again.
type Dedup struct {
	// Tables are hits and rejects, then each table their materialized views
	// write to, transitively.
	Tables []TableDedup
	// Session is why the session does not deduplicate at all
	// (insert_deduplicate = 0 in the user's profile), or "".
	Session string
	// Token is whether the server takes insert_deduplication_token.
	Token bool
}

// On reports whether a batch inserted again is dropped wherever it landed.
func (d Dedup) On() bool {
	if d.Session != "" || len(d.Tables) == 0 {
		return false
	}
	for _, t := range d.Tables {
		if !t.On {
			return false
		}
	}
	return true
}

// Off lists the tables that do not deduplicate.
func (d Dedup) Off() []TableDedup {
	var off []TableDedup
	for _, t := range d.Tables {
		if !t.On {
			off = append(off, t)
		}
	}
	return off
}

// log says what the collector can rely on: a warning for each table that does
// not deduplicate on a server where it could; on a server where no plain
// table can (before 22.2) one line, since that is how such a server is.
func (d Dedup) log(log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	const consequence = "a batch sent again after an unknown outcome would be stored twice, so the collector resolves unknown outcomes from what is committed instead of re-sending"
	if d.Session != "" {
		log.Warn("inserts are not deduplicated: "+d.Session, "consequence", consequence)
		return
	}
	if d.On() {
		log.Debug("inserts are deduplicated", "tables", len(d.Tables))
		return
	}
	if !d.Token && !slices.ContainsFunc(d.Tables, func(t TableDedup) bool { return t.On }) {
		log.Info("inserts are not deduplicated on this server (no insert_deduplication_token before ClickHouse 22.2, and no replicated tables): unknown outcomes are resolved from what is committed")
		return
	}
	for _, t := range d.Off() {
		log.Warn("deduplication is off for a table", "table", t.Table, "why", t.Why, "consequence", consequence)
	}
}

// dedupWindow is what the schema sets on each plain MergeTree table an insert
// writes, and what Migrate sets on one that lacks it.
const dedupWindow = 1000

// tableInfo is a row of system.tables.
type tableInfo struct {
	engine, full, create string
	deps                 []string // database.name of the views reading it
}

var (
	viewTargetRE = regexp.MustCompile("^CREATE MATERIALIZED VIEW \\S+ TO (`[^`]+`|[^\\s.`(]+)\\.(`[^`]+`|[^\\s`(]+)")
	settingREs   = map[string]*regexp.Regexp{
		"replicated_deduplication_window":     regexp.MustCompile(`(?:^|[\s,(])replicated_deduplication_window\s*=\s*(\d+)`),
		"non_replicated_deduplication_window": regexp.MustCompile(`(?:^|[\s,(])non_replicated_deduplication_window\s*=\s*(\d+)`),
	}
)

// checkDedup reads what the tables a batch insert into db writes do with a
// block sent again. Where alter is not nil, each of the schema's plain
// MergeTree tables lacking non_replicated_deduplication_window on a server
// that has it is first given it (alter runs the statement); a failure leaves
// the table as it is, said in its Why. suffix is "_local" in cluster mode.
func checkDedup(ctx context.Context, sel Selecter, alter func(context.Context, string) error, db string, v Version, suffix string) (Dedup, error) {
	d, err := readDedup(ctx, sel, db, v, suffix)
	if err != nil || alter == nil {
		return d, err
	}
	failed := map[string]string{}
	altered := false
	for _, t := range d.Tables {
		if !t.fixable {
			continue
		}
		stmt := fmt.Sprintf("ALTER TABLE %s MODIFY SETTING non_replicated_deduplication_window = %d", t.Table, dedupWindow)
		if err := alter(ctx, stmt); err != nil {
			failed[t.Table] = fmt.Sprintf("%s: %v", stmt, err)
			continue
		}
		altered = true
	}
	if altered {
		if d, err = readDedup(ctx, sel, db, v, suffix); err != nil {
			return d, err
		}
	}
	for i, t := range d.Tables {
		if f, ok := failed[t.Table]; ok && !t.On {
			d.Tables[i].Why += "; bringing it up to the schema failed (" + f + "): run `collector -migrate` as a user allowed to ALTER it (deploy/sql/users.sql, step 3)"
		}
	}
	return d, nil
}

// readDedup is checkDedup without changing anything.
func readDedup(ctx context.Context, sel Selecter, db string, v Version, suffix string) (Dedup, error) {
	d := Dedup{Token: featuresOf(v).dedupToken}
	// Server defaults, which a table without the setting has. A user who
	// may not read them gets ClickHouse's own.
	defaults := map[string]uint64{"replicated_deduplication_window": 100, "non_replicated_deduplication_window": 0}
	_ = sel.Select(ctx, "SELECT name, value FROM system.merge_tree_settings WHERE name IN ('replicated_deduplication_window', 'non_replicated_deduplication_window')", nil,
		func(scan func(...any) error) error {
			var name, value string
			if err := scan(&name, &value); err != nil {
				return err
			}
			if n, err := strconv.ParseUint(value, 10, 64); err == nil {
				defaults[name] = n
			}
			return nil
		})
	_ = sel.Select(ctx, "SELECT value FROM system.settings WHERE name = 'insert_deduplicate'", nil, func(scan func(...any) error) error {
		var value string
		if err := scan(&value); err != nil {
			return err
		}
		if value == "0" || value == "false" {
			d.Session = "insert_deduplicate = 0 in this user's settings profile"
		}
		return nil
	})

	tables := map[string]map[string]tableInfo{} // database -> name -> info
	lookup := func(database, name string) (tableInfo, bool, error) {
		if _, ok := tables[database]; !ok {
			m := map[string]tableInfo{}
			err := sel.Select(ctx, "SELECT name, engine, engine_full, create_table_query, arrayStringConcat(dependencies_database, '\\t'), arrayStringConcat(dependencies_table, '\\t') FROM system.tables WHERE database = ?",
				[]any{database}, func(scan func(...any) error) error {
					var n, engine, full, create, depDBs, depNames string
					if err := scan(&n, &engine, &full, &create, &depDBs, &depNames); err != nil {
						return err
					}
					ti := tableInfo{engine: engine, full: full, create: create}
					if depNames != "" {
						dbs, names := strings.Split(depDBs, "\t"), strings.Split(depNames, "\t")
						for i := range min(len(dbs), len(names)) {
							ti.deps = append(ti.deps, dbs[i]+"."+names[i])
						}
					}
					m[n] = ti
					return nil
				})
			if err != nil {
				return tableInfo{}, false, fmt.Errorf("read the tables of %s: %w", database, err)
			}
			tables[database] = m
		}
		ti, ok := tables[database][name]
		return ti, ok, nil
	}

	fixable := map[string]bool{}
	for _, name := range dedupSchemaTables() {
		fixable[db+"."+name+suffix] = suffix == ""
	}
	seen := map[string]bool{}
	queue := []string{db + ".hits" + suffix, db + ".rejects" + suffix}
	for len(queue) > 0 {
		full := queue[0]
		queue = queue[1:]
		if seen[full] {
			continue
		}
		seen[full] = true
		database, name, _ := strings.Cut(full, ".")
		ti, ok, err := lookup(database, name)
		if err != nil {
			return d, err
		}
		if !ok {
			d.Tables = append(d.Tables, TableDedup{Table: full, Why: "the table does not exist (or this user cannot see it)"})
			continue
		}
		queue = append(queue, ti.deps...)
		if ti.engine == "MaterializedView" {
			if m := viewTargetRE.FindStringSubmatch(ti.create); m != nil {
				queue = append(queue, strings.Trim(m[1], "`")+"."+strings.Trim(m[2], "`"))
			} else {
				// A view without TO stores into its inner table.
				queue = append(queue, database+"..inner."+name)
			}
			continue
		}
		t := judgeTable(full, ti, defaults, d.Token)
		t.fixable = t.fixable && fixable[full]
		d.Tables = append(d.Tables, t)
	}
	return d, nil
}

// judgeTable decides what one table does with a block inserted again.
func judgeTable(name string, ti tableInfo, defaults map[string]uint64, token bool) TableDedup {
	t := TableDedup{Table: name, Engine: ti.engine}
	setting := func(s string) uint64 {
		if m := settingREs[s].FindStringSubmatch(ti.full); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			return n
		}
		return defaults[s]
	}
	switch {
	case !strings.HasSuffix(ti.engine, "MergeTree"):
		t.Why = "engine " + ti.engine + " does not deduplicate inserts"
	case strings.HasPrefix(ti.engine, "Replicated") || strings.HasPrefix(ti.engine, "Shared"):
		if setting("replicated_deduplication_window") == 0 {
			t.Why = "replicated_deduplication_window = 0"
		} else {
			t.On = true
		}
	case !token:
		t.Why = "a plain " + ti.engine + " table, and ClickHouse before 22.2 has no insert_deduplication_token"
	case setting("non_replicated_deduplication_window") == 0:
		t.Why = "a plain " + ti.engine + " table without non_replicated_deduplication_window (created by an older hitcount or ClickHouse version)"
		t.fixable = true
	default:
		t.On = true
	}
	return t
}

// dedupSchemaTables are the schema's tables that keep a deduplication window
// where the server has one: every table a batch insert writes.
func dedupSchemaTables() []string {
	var names []string
	for _, stmt := range schema("db", features{dedupToken: true}) {
		if m := createTableRE.FindStringSubmatch(stmt); m != nil && strings.Contains(stmt, "non_replicated_deduplication_window") {
			names = append(names, m[2])
		}
	}
	return names
}

// CheckDedup is Migrate's deduplication step for the embedded engine: it
// brings the tables a batch insert into db writes up to the schema where
// alter (nil: read only) may, then reads whether they deduplicate, on a
// server of version v. The result is logged on log (nil: slog's default).
func CheckDedup(ctx context.Context, sel Selecter, alter func(context.Context, string) error, db string, v Version, log *slog.Logger) (Dedup, error) {
	d, err := checkDedup(ctx, sel, alter, db, v, "")
	if err == nil {
		d.log(log)
	}
	return d, err
}
