package docs

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// statement is SQL the pages show, and where.
type statement struct {
	where, sql string
}

// splitSQL cuts a block into statements on the semicolons outside quotes;
// comment-only pieces are dropped.
func splitSQL(body string) []string {
	var out []string
	var cur strings.Builder
	quote := rune(0)
	for _, r := range body {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == ';':
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	out = append(out, cur.String())
	var stmts []string
	for _, s := range out {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			stmts = append(stmts, strings.TrimSpace(strings.Join(lines, "\n")))
		}
	}
	return stmts
}

var inlineSelect = regexp.MustCompile("`(SELECT [^`]* FROM [^`]*)`")

// statements collects the SQL of the pages: every sql block, the SQL given
// to `hitcount query` and `clickhouse-client -q/--query` in sh blocks, and
// inline `SELECT ... FROM ...` in the prose. Statements with "..." in them
// are sketches, not SQL, and are left out.
func statements(t *testing.T) []statement {
	t.Helper()
	var out []statement
	add := func(where, sql string) {
		if !strings.Contains(sql, "...") {
			out = append(out, statement{where, strings.TrimSuffix(strings.TrimSpace(sql), ";")})
		}
	}
	for _, p := range pages(t) {
		bs, prose := split(p.text)
		for _, b := range bs {
			where := p.path + ":" + strconv.Itoa(b.line)
			switch b.lang() {
			case "sql":
				for _, s := range splitSQL(b.body) {
					add(where, s)
				}
			case "sh":
				for _, c := range shellCommands(b.body) {
					switch filepath.Base(c.words[0].text) {
					case "hitcount":
						if last := c.words[len(c.words)-1]; len(c.words) > 1 && c.words[1].text == "query" && last.quoted {
							add(where, last.text)
						}
					case "clickhouse-client":
						for i, w := range c.words[:len(c.words)-1] {
							if w.text == "-q" || w.text == "--query" {
								add(where, c.words[i+1].text)
							}
						}
					}
				}
			}
		}
		for n, l := range strings.Split(prose, "\n") {
			for _, m := range inlineSelect.FindAllStringSubmatch(l, -1) {
				add(p.path+":"+strconv.Itoa(n+1), m[1])
			}
		}
	}
	return out
}

// openStore opens the embedded engine on a new directory with the schema the
// collector and sweeper create, and ships a few hits into it.
func openStore(t *testing.T) *chdb.Engine {
	t.Helper()
	lib := testenv.RequireChdb(t)
	ctx := context.Background()
	st, err := embedded.Open(ctx, embedded.Options{LibPath: lib, DataPath: filepath.Join(t.TempDir(), "chdb"), Database: "hitcount"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := sink.NewBatch(100)
	b.Reset("www.example.com", 42)
	now := time.Now().Unix()
	for i := range 100 {
		h := parser.Hit{Unix: now - int64(i), Method: []byte("GET"), Path: []byte(fmt.Sprintf("/p%d", i%5)), Status: 200,
			UserAgent: []byte("Mozilla/5.0"), Host: []byte("www.example.com")}
		b.Add(&h, int64(i*100), int64(i*100+100))
	}
	if err := st.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordSource(ctx, "www.example.com", 42, "/var/log/nginx/access.log"); err != nil {
		t.Fatal(err)
	}
	return st.Engine()
}

var (
	outfile     = regexp.MustCompile(`INTO OUTFILE '[^']*'`)
	insertInput = regexp.MustCompile(`(?is)^INSERT INTO \S+ FORMAT \w+$`)
)

// TestEmbedded runs what the pages say against the embedded engine holding
// the real schema: every statement they show, and their table of tables
// against the tables and columns the schema has.
func TestEmbedded(t *testing.T) {
	e := openStore(t)
	ctx := context.Background()
	t.Run("statements", func(t *testing.T) {
		stmts := statements(t)
		if len(stmts) < 10 {
			t.Fatalf("%d statements found in the pages; the extraction lost some", len(stmts))
		}
		t.Logf("%d statements from the pages", len(stmts))
		for _, s := range stmts {
			sql := s.sql
			switch {
			case outfile.MatchString(sql):
				// The export: written into this test's directory.
				sql = outfile.ReplaceAllString(sql, "INTO OUTFILE '"+filepath.Join(t.TempDir(), "out.tsv")+"'")
			case insertInput.MatchString(sql):
				// Rows come from stdin: only the statement is checked.
				sql = "EXPLAIN AST " + sql
			}
			if _, err := e.Query(ctx, sql, "TSV"); err != nil {
				t.Errorf("%s: %s\n%v", s.where, s.sql, err)
			}
		}
	})
	t.Run("tables", func(t *testing.T) { checkTables(t, ctx, e) })
	t.Run("maintenance", func(t *testing.T) { checkMaintenance(t, ctx, e) })
}

// checkMaintenance runs docs/operations.md's statements on crossings in the
// states they are for, and checks that they do what the page says: a
// removed rule's pending crossings become failed; a failed crossing stays
// failed under the recipe earlier READMEs gave, and is gone after the
// per-key reset.
func checkMaintenance(t *testing.T, ctx context.Context, e *chdb.Engine) {
	const cols = "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated"
	row := func(key, rule, state string, attempts uint32) string {
		return fmt.Sprintf("('%s', '%s', 'www.example.com', '/p', now(), 10, 12, '%s', %d, 'sweeper-a', 7, %d, '<hitcount.%s@example.com>', '', now())",
			key, rule, state, alerts.Rank(state, attempts), attempts, key)
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := e.Query(ctx, sql, "TSV"); err != nil {
			t.Fatalf("%s\n%v", sql, err)
		}
	}
	state := func(key string) string {
		t.Helper()
		out, err := e.Query(ctx, "SELECT argMax(state, version) FROM hitcount.crossings WHERE key = '"+key+"'", "TSV")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	exec("INSERT INTO hitcount.crossings (" + cols + ") VALUES " + row("k-orphan", "old-rule", "detected", 0) + ", " +
		row("k-orphan-sent", "old-rule", "sent", 1) + ", " + row("k-failed", "pricing-hot", "claimed", 4) + ", " + row("k-failed", "pricing-hot", "failed", 4))

	ops := pageNamed(t, "docs/operations.md")
	var giveUp, reset string
	for _, s := range statements(t) {
		switch {
		case strings.HasPrefix(s.where, ops.path) && strings.Contains(s.sql, "'OLD-RULE'"):
			giveUp = s.sql
		case strings.HasPrefix(s.where, ops.path) && strings.Contains(s.sql, "DELETE WHERE key = 'KEY'"):
			reset = s.sql
		}
	}
	if giveUp == "" || reset == "" {
		t.Fatalf("docs/operations.md: no statement for a removed rule ('OLD-RULE') or no per-key reset (key = 'KEY')")
	}
	exec(strings.ReplaceAll(giveUp, "'OLD-RULE'", "'old-rule'"))
	if got := state("k-orphan"); got != "failed" {
		t.Errorf("a removed rule's pending crossing after the page's statement: %q, want failed", got)
	}
	if got := state("k-orphan-sent"); got != "sent" {
		t.Errorf("a removed rule's sent crossing after the page's statement: %q, want sent", got)
	}

	exec(`INSERT INTO hitcount.crossings
SELECT key, rule, site, path, window_start, threshold, count, 'detected', toUInt64(toUnixTimestamp(now())) * 1000000000, owner, fencing, 0, message_id, '', now()
FROM hitcount.crossings WHERE key = 'k-failed' ORDER BY version DESC LIMIT 1`)
	if got := state("k-failed"); got != "failed" {
		t.Errorf("a failed crossing after the old re-send recipe: %q; docs/operations.md says it stays failed", got)
	}
	exec(strings.ReplaceAll(reset, "'KEY'", "'k-failed'") + " SETTINGS mutations_sync = 1")
	if got := state("k-failed"); got != "" {
		t.Errorf("a failed crossing after the per-key reset: %q, want no rows", got)
	}
}

var tablesRow = regexp.MustCompile("^\\| `([a-z_0-9]+)` \\| (.*) \\| (.*) \\|$")

// checkTables holds docs/sql.md's table of tables against the schema: every
// table is listed, its columns in order, and its sorting key.
func checkTables(t *testing.T, ctx context.Context, e *chdb.Engine) {
	out, err := e.Query(ctx, "SELECT name, sorting_key FROM system.tables WHERE database = 'hitcount' AND engine != 'MaterializedView' ORDER BY name", "TSV")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, key, _ := strings.Cut(l, "\t")
		keys[name] = key
	}
	_, prose := split(pageNamed(t, "docs/sql.md").text)
	documented := map[string]bool{}
	for _, l := range strings.Split(prose, "\n") {
		m := tablesRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		name, what, key := m[1], m[2], m[3]
		documented[name] = true
		real, ok := keys[name]
		if !ok {
			if name != "claims" { // made by the first keepermap sweeper
				t.Errorf("docs/sql.md lists %s, which the schema does not have", name)
			}
			continue
		}
		out, err := e.Query(ctx, "SELECT name FROM system.columns WHERE database = 'hitcount' AND table = '"+name+"' ORDER BY position", "TSV")
		if err != nil {
			t.Fatal(err)
		}
		cols := strings.Fields(string(out))
		var shown []string
		for _, c := range backticked.FindAllStringSubmatch(what, -1) {
			if strings.Contains(c[1], ", ") {
				shown = strings.Split(c[1], ", ")
				break
			}
		}
		if !slices.Equal(shown, cols) {
			t.Errorf("docs/sql.md: %s has the columns %v, the page shows %v", name, cols, shown)
		}
		// The key column shows ORDER BY's list, with or without
		// parentheses, after PARTITION BY if any.
		k := key
		if i := strings.Index(k, "ORDER BY "); i >= 0 {
			k = k[i+len("ORDER BY "):]
		}
		k = strings.Trim(k, "`()")
		if k != real {
			t.Errorf("docs/sql.md: %s is ordered by %q, the page shows %q", name, real, k)
		}
	}
	for name := range keys {
		if !documented[name] {
			t.Errorf("docs/sql.md does not list the table %s", name)
		}
	}
}

// TestSplitSQL pins how sql blocks are cut into statements.
func TestSplitSQL(t *testing.T) {
	got := splitSQL("-- top\nSELECT 'a;b' FROM t;\n-- next\nALTER TABLE x DELETE WHERE k = 'K';\n-- only a comment\n")
	want := []string{"SELECT 'a;b' FROM t", "ALTER TABLE x DELETE WHERE k = 'K'"}
	if !slices.Equal(got, want) {
		t.Errorf("splitSQL = %q, want %q", got, want)
	}
}
