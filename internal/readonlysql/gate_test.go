package readonlysql_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hitcount/hitcount/internal/readonlysql"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Attacks reproduced against the job's /query endpoint, and their cousins:
// each must be refused before it runs, by the engine's parser or the gate.
func TestGateRefusesWhatReachesOutside(t *testing.T) {
	e := testenv.Embedded(t)
	ctx := context.Background()
	g, err := readonlysql.NewGate(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bashrc")
	q := func(s string) string { return strings.ReplaceAll(s, "OUT", out) }
	for _, sql := range []string{
		q("SELECT 1 INTO OUTFILE 'OUT'"),
		q("SELECT 1 INTO/**/OUTFILE 'OUT' APPEND"),
		q("SELECT 1 INTO -- x\nOUTFILE 'OUT' TRUNCATE"),
		q("select 'echo pwned' into outfile 'OUT' append"),
		q("(SELECT 1) UNION ALL (SELECT 2) INTO OUTFILE 'OUT'"),
		q("SELECT 1; SELECT 2 INTO OUTFILE 'OUT'"),
		"SELECT 1; SELECT 2",
		"SELECT file('/etc/passwd')",
		"SELECT FILE('/etc/passwd')",
		"SELECT `file`('/proc/self/environ')",
		"WITH (SELECT file('/proc/self/environ')) AS e SELECT e",
		"SELECT * FROM file('/etc/passwd', LineAsString)",
		"SELECT * FROM numbers(1) WHERE toString(number) IN (SELECT * FROM file('/etc/passwd', LineAsString))",
		"SELECT * FROM view(SELECT file('/etc/passwd'))",
		"SELECT * FROM url('http://127.0.0.1:1/', CSV, 'a String')",
		"SELECT * FROM remote('127.0.0.1:9000', system.one)",
		"SELECT * FROM executable('id', TSV, 'a String')",
		"SELECT * FROM filesystem('/etc')",
		"SELECT * FROM s3('http://127.0.0.1:1/b/k', CSV, 'a String')",
		"SELECT * FROM input('a String')",
		"SELECT * FROM system.zookeeper WHERE path = '/'",
		"SELECT * FROM system.distributed_ddl_queue",
		"SELECT dictGet('d', 'a', toUInt64(1))",
		"SELECT catboostEvaluate('/tmp/model.bin', 1)",
		// Found by an adversarial review: APPLY hides its function from the
		// tree; a structure string hides ALIAS expressions.
		"SELECT * APPLY(file) FROM (SELECT '/etc/passwd' AS p)",
		"SELECT COLUMNS('p') APPLY(x -> dictGet('a', 'b', x)) FROM (SELECT 1 AS p)",
		"SELECT y FROM values('p String, y String ALIAS file(p)', '/etc/passwd')",
		"SELECT y FROM generateRandom('x UInt8, y String ALIAS file(''/etc/passwd'')') LIMIT 1",
		"SELECT y FROM null('x UInt8, y String ALIAS file(''/etc/shadow'')')",
		"SELECT * FROM format(JSONEachRow, 'x String, y String ALIAS file(x)', '{\"x\":\"/etc/passwd\"}')",
		"SELECT arrayMap(x -> file(x), ['/etc/passwd'])",
		"SELECT (SELECT count() FROM merge('system', '^one$'))",
		"SELECT * FROM loop(numbers(1)) LIMIT 1",
		"SELECT addressToSymbol(toUInt64(1))",
		"SELECT 1 SETTINGS readonly = 0",
		"SELECT 1 FORMAT JSON",
		"INSERT INTO t VALUES (1)",
		"SET readonly = 0",
		"USE system",
		"DROP TABLE hits",
		"SHOW TABLES",
		"EXPLAIN SELECT 1",
		"DESCRIBE TABLE system.one",
		"CREATE TEMPORARY TABLE t (a UInt8)",
		"SYSTEM SHUTDOWN",
		"KILL QUERY WHERE 1",
		"",
	} {
		canonical, err := g.Check(ctx, e, sql)
		if err == nil {
			t.Errorf("%q passed the gate as %q", sql, canonical)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused statement wrote its file")
	}
	// The refusals that are the gate's own say so.
	_, err = g.Check(ctx, e, "SELECT file('/etc/passwd')")
	var refused *readonlysql.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "function file") {
		t.Errorf("file(): %v; want a RefusedError naming the function", err)
	}
}

// What an operator asks for analytics passes, and runs as checked.
func TestGateAdmitsReads(t *testing.T) {
	e := testenv.Embedded(t)
	ctx := context.Background()
	g, err := readonlysql.NewGate(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	for sql, want := range map[string]string{
		"SELECT count() FROM system.one":                                 "1\n",
		"select 'INTO OUTFILE file(x)' AS s;":                            "INTO OUTFILE file(x)\n",
		"SELECT number FROM numbers(3) ORDER BY number DESC":             "2\n1\n0\n",
		"WITH x AS (SELECT 1 AS a) SELECT a FROM x UNION ALL SELECT 2":   "",
		"SELECT format('{}-{}', 'a', 'b')":                               "a-b\n",
		"SELECT count() FROM system.tables WHERE database = 'system'":    "",
		"SELECT sum(number) FROM numbers(10) WHERE number IN (1, 2, 3)":  "6\n",
		"-- the top pages\nSELECT 1 AS n /* a comment */":                "1\n",
		"SELECT name FROM system.functions WHERE name = 'file' LIMIT 1":  "file\n",
		"SELECT toStartOfHour(toDateTime('2026-11-24 10:11:12', 'UTC'))": "2026-11-24 10:00:00\n",
		"SELECT n, sum(n) OVER w, count() OVER (ORDER BY n ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM (SELECT number AS n FROM numbers(3)) WINDOW w AS (ORDER BY n) ORDER BY n WITH FILL LIMIT 1 BY n LIMIT 1": "0\t0\t1\n",
		"SELECT * EXCEPT (b) REPLACE (a + 1 AS a) FROM (SELECT 1 AS a, 2 AS b, 3 AS c)":                                                   "2\t3\n",
		"SELECT arrayMap(x -> x * 2, [1, 2]), 1 IN (1, 2), CAST(1 AS String), [1][1], (1, 'a').2 INTERSECT SELECT [2, 4], 1, '1', 1, 'a'": "[2,4]\t1\t1\t1\ta\n",
	} {
		canonical, err := g.Check(ctx, e, sql)
		if err != nil {
			t.Errorf("%q refused: %v", sql, err)
			continue
		}
		got, err := e.Query(ctx, canonical, "TSV")
		if err != nil {
			t.Errorf("%q as %q: %v", sql, canonical, err)
			continue
		}
		if want != "" && string(got) != want {
			t.Errorf("%q as %q = %q, want %q", sql, canonical, got, want)
		}
	}
}

// Every ready analytics query the project ships passes the gate as written.
func TestGateAdmitsTheShippedQueries(t *testing.T) {
	e := testenv.Embedded(t)
	ctx := context.Background()
	g, err := readonlysql.NewGate(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../deploy/queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, part := range strings.Split(string(data), "\n-- name: ")[1:] {
		name, sql, _ := strings.Cut(part, "\n")
		if _, err := g.Check(ctx, e, strings.TrimSpace(sql)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		n++
	}
	if n < 5 {
		t.Fatalf("found %d queries in deploy/queries.sql", n)
	}
}
