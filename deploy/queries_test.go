package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A named query of queries.sql.
type namedQuery struct{ name, sql string }

// nameMarker starts each query of queries.sql.
var nameMarker = regexp.MustCompile(`(?m)^-- name: *(.+?) *$`)

// loadQueries splits queries.sql on its "-- name:" lines. Each part is one
// statement; the trailing semicolon is dropped (one statement per call).
func loadQueries(t *testing.T) []namedQuery {
	t.Helper()
	data, err := os.ReadFile("queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	locs := nameMarker.FindAllStringSubmatchIndex(text, -1)
	if len(locs) == 0 {
		t.Fatal("queries.sql: no -- name: lines")
	}
	if head := stripComments(text[:locs[0][0]]); head != "" {
		t.Fatalf("queries.sql: a statement before the first -- name: line: %q", head)
	}
	var out []namedQuery
	seen := map[string]bool{}
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		name := text[loc[2]:loc[3]]
		body := strings.TrimSpace(text[loc[1]:end])
		body = strings.TrimSpace(strings.TrimSuffix(body, ";"))
		if seen[name] {
			t.Fatalf("queries.sql: two queries named %q", name)
		}
		seen[name] = true
		if stripComments(body) == "" {
			t.Fatalf("queries.sql: %q has no statement", name)
		}
		if strings.Contains(stripComments(body), ";") {
			t.Fatalf("queries.sql: %q holds more than one statement", name)
		}
		out = append(out, namedQuery{name, body})
	}
	return out
}

// stripComments drops -- comments and surrounding space (queries.sql has no
// "--" inside string literals).
func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i] + "\n"
		}
		b.WriteString(line)
	}
	return strings.TrimSpace(b.String())
}

// queryFor returns the query whose name starts with prefix.
func queryFor(t *testing.T, qs []namedQuery, prefix string) namedQuery {
	t.Helper()
	for _, q := range qs {
		if strings.HasPrefix(q.name, prefix) {
			return q
		}
	}
	t.Fatalf("queries.sql has no query named %q...", prefix)
	return namedQuery{}
}

// Features that ClickHouse 18.16 lacks; queries.sql must not use them.
var newerThan18 = regexp.MustCompile(`(?i)\b(toStartOfInterval|WITH\s+FILL|OVER\s*\(|WINDOW\s+\w+\s+AS|\{\w+:\w+\})`)

func TestQueriesFileShape(t *testing.T) {
	qs := loadQueries(t)
	want := []string{"top pages", "hourly series", "status mix", "bots vs humans", "top referers", "slowest pages", "crossings history", "ingest progress"}
	for _, w := range want {
		queryFor(t, qs, w)
	}
	for _, q := range qs {
		if m := newerThan18.FindString(stripComments(q.sql)); m != "" {
			t.Errorf("%s: uses %q, which ClickHouse 18.16 does not have", q.name, m)
		}
		// Every table is named with its database, so the file runs whatever
		// the session's current database.
		for _, m := range regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+([A-Za-z_][\w.]*)`).FindAllStringSubmatch(stripComments(q.sql), -1) {
			if !strings.Contains(m[1], ".") {
				t.Errorf("%s: table %s without its database (hitcount.%s)", q.name, m[1], m[1])
			}
		}
	}
}

// fixture is what insertFixture put into the tables.
type fixture struct {
	pages      map[string]uint64 // "site path" -> hits
	botHits    uint64            // bot hits of www.example.com/pricing
	sourcePath string
	lastOffset uint64 // of the www.example.com source
	crossing   string // key of a crossing written as detected, claimed, sent
}

const site = "www.example.com"

// insertFixture ships hits through the sink as the collector does, records
// their sources, and writes the versions of one crossing as the sweeper does.
func insertFixture(t *testing.T, ctx context.Context, s *sink.Sink) fixture {
	t.Helper()
	f := fixture{pages: map[string]uint64{}, sourcePath: "/var/log/nginx/access.log"}
	ts := time.Now().Add(-10 * time.Minute).Unix()
	type line struct {
		site, path, ua, referer string
		status                  uint16
		reqTime                 time.Duration
		n                       int
	}
	lines := []line{
		{site, "/pricing", "Mozilla/5.0 (X11; Linux x86_64)", "https://news.example.org/item?id=1", 200, 120 * time.Millisecond, 35},
		{site, "/pricing", "Googlebot/2.1 (+http://www.google.com/bot.html)", "", 200, 80 * time.Millisecond, 5},
		{site, "/blog/a", "Mozilla/5.0", "https://www.example.com/", 200, 30 * time.Millisecond, 20},
		{site, "/blog/a", "Mozilla/5.0", "", 404, 5 * time.Millisecond, 5},
		{site, "/", "Mozilla/5.0", "", 200, 0, 12},
		{site, "/", "curl/8.0", "", 500, 0, 3},
		{"shop.example.com", "/cart", "Mozilla/5.0", "https://www.example.com/pricing", 302, 250 * time.Millisecond, 8},
	}
	batches := map[string]*sink.Batch{}
	offsets := map[string]int64{}
	for i, l := range lines {
		b := batches[l.site]
		if b == nil {
			b = sink.NewBatch(100)
			b.Reset(l.site, uint64(0xfeed0000+i))
			batches[l.site] = b
		}
		for range l.n {
			h := &parser.Hit{
				Unix: ts, RemoteAddr: []byte("203.0.113.7"), Method: []byte("GET"), Path: []byte(l.path),
				Protocol: []byte("HTTP/1.1"), Status: l.status, Bytes: 1234, Referer: []byte(l.referer),
				UserAgent: []byte(l.ua), Host: []byte(l.site), RequestTime: l.reqTime,
			}
			off := offsets[l.site]
			b.Add(h, off, off+100)
			offsets[l.site] = off + 100
			f.pages[l.site+" "+l.path]++
			if l.site == site && l.path == "/pricing" && strings.Contains(l.ua, "bot") {
				f.botHits++
			}
		}
	}
	// One line that did not parse, so the rejects have a row.
	off := offsets[site]
	batches[site].AddReject(off, off+20, "status: expected a three-digit status at column 67", []byte("garbage"))
	f.lastOffset = uint64(off)
	for s2, b := range batches {
		if err := s.Insert(ctx, b); err != nil {
			t.Fatalf("insert hits of %s: %v", s2, err)
		}
		if err := s.RecordSource(ctx, s2, b.SourceID, f.sourcePath); err != nil {
			t.Fatal(err)
		}
		// The collector's record of the file, caught up now, and of the
		// site (owners.go).
		claim := sink.Claim{Collector: "0123456789abcdef", Host: "web-1", Window: time.Minute, Sources: []sink.ClaimedSource{
			{ID: b.SourceID, Site: s2, Path: f.sourcePath, CaughtUp: true}, sink.SiteRecord(s2, "/var/log/nginx/*.log")}}
		if _, _, err := s.ClaimSources(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}

	store := alerts.NewStore(s, s.Database())
	c := alerts.Crossing{Rule: "pricing-hot", Subject: site + "/pricing", WindowStart: time.Unix(ts, 0).Truncate(time.Hour), Threshold: 30}
	f.crossing = c.Key()
	now := time.Now().Truncate(time.Second)
	var rows []alerts.Row
	for v, state := range []string{alerts.StateDetected, alerts.StateClaimed, alerts.StateSent} {
		rows = append(rows, alerts.Row{Crossing: c, Site: site, Path: "/pricing", Count: 40, State: state,
			Version: uint64(v + 1), Owner: "sweeper-test", Fencing: 7, Attempts: 1, MsgID: c.MessageID("example.com"),
			Updated: now.Add(time.Duration(v) * time.Second)})
	}
	if err := store.Write(ctx, rows); err != nil {
		t.Fatal(err)
	}
	return f
}

// result is the rows of a query, by column name.
type result []map[string]any

// queryAll runs a statement and reads every row generically.
func queryAll(ctx context.Context, conn driver.Conn, sql string) (result, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := rows.Columns()
	types := rows.ColumnTypes()
	var out result
	for rows.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := map[string]any{}
		for i, c := range cols {
			row[c] = reflect.ValueOf(dest[i]).Elem().Interface()
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// checkQueries runs every query of queries.sql with run and, when strict,
// checks what each says about the fixture f.
func checkQueries(t *testing.T, run func(string) (result, error), f fixture, strict bool) {
	qs := loadQueries(t)
	results := map[string]result{}
	for _, q := range qs {
		res, err := run(q.sql)
		if err != nil {
			t.Errorf("query %q failed: %v", q.name, err)
			continue
		}
		if strict && len(res) == 0 {
			t.Errorf("query %q returned no rows", q.name)
		}
		results[q.name] = res
	}
	if t.Failed() || !strict {
		return
	}
	get := func(prefix string) result { return results[queryFor(t, qs, prefix).name] }

	got := map[string]uint64{}
	for _, r := range get("top pages") {
		got[fmt.Sprint(r["site"], " ", r["path"])] = toUint(r["page_hits"])
	}
	if !reflect.DeepEqual(got, f.pages) {
		t.Errorf("top pages = %v, want the inserted pages %v", got, f.pages)
	}

	var pageHits, botHits uint64
	series := get("hourly series")
	for _, r := range series {
		pageHits += toUint(r["page_hits"])
		botHits += toUint(r["bot_hits"])
	}
	if len(series) != 168 || pageHits != f.pages[site+" /pricing"] || botHits != f.botHits {
		t.Errorf("hourly series: %d hours, %d hits, %d bot hits; want 168 hours, %d, %d",
			len(series), pageHits, botHits, f.pages[site+" /pricing"], f.botHits)
	}

	mix := map[string]uint64{}
	for _, r := range get("status mix") {
		if r["site"] == site {
			mix[fmt.Sprint(r["status_class"])] = toUint(r["class_hits"])
		}
	}
	if want := map[string]uint64{"2xx": 72, "4xx": 5, "5xx": 3}; !reflect.DeepEqual(mix, want) {
		t.Errorf("status mix of %s = %v, want %v", site, mix, want)
	}

	for _, r := range get("bots vs humans") {
		// Googlebot on /pricing and curl on / are bots.
		if r["site"] == site && toUint(r["bot_hits"]) != f.botHits+3 {
			t.Errorf("bots vs humans: %v, want %d bot hits", r, f.botHits+3)
		}
	}

	refs := map[string]uint64{}
	for _, r := range get("top referers") {
		refs[fmt.Sprint(r["site"], " ", r["referer_domain"])] = toUint(r["referred_hits"])
	}
	if want := map[string]uint64{site + " news.example.org": 35, "shop.example.com www.example.com": 8}; !reflect.DeepEqual(refs, want) {
		t.Errorf("top referers = %v, want %v (self-referrals excluded)", refs, want)
	}

	slow := get("slowest pages")
	if len(slow) == 0 || slow[0]["path"] != "/pricing" {
		t.Errorf("slowest pages = %v, want /pricing first (the slowest page with >= 10 timed requests)", slow)
	}

	// One client address with two user agents on /pricing: 2 visitors; the
	// whole site: those 2, plus curl on / (Mozilla/5.0 on /blog/a and / is
	// a third user agent).
	visitors := map[string]uint64{}
	for _, r := range get("visitors per page and hour") {
		visitors[fmt.Sprint(r["site"], " ", r["path"])] += toUint(r["page_visitors"])
	}
	if visitors[site+" /pricing"] != 2 || visitors[site+" /"] != 2 {
		t.Errorf("visitors per page = %v, want 2 on /pricing and 2 on /", visitors)
	}
	for _, r := range get("visitors per site and day") {
		if r["site"] == site && toUint(r["site_visitors"]) != 4 {
			t.Errorf("visitors of %s in a day = %v, want 4", site, r)
		}
	}

	cross := get("crossings history")
	if len(cross) != 1 || cross[0]["key"] != f.crossing || cross[0]["current_state"] != alerts.StateSent {
		t.Errorf("crossings history = %v, want crossing %s in state sent", cross, f.crossing)
	}

	found := false
	for _, r := range get("ingest progress") {
		if r["site"] == site {
			found = true
			if r["file"] != f.sourcePath || toUint(r["last_offset"]) != f.lastOffset {
				t.Errorf("ingest progress of %s = %v, want file %s at offset %d", site, r, f.sourcePath, f.lastOffset)
			}
		}
	}
	if !found {
		t.Errorf("ingest progress has no row for %s", site)
	}
}

func toUint(v any) uint64 {
	switch n := v.(type) {
	case uint64:
		return n
	case uint32:
		return uint64(n)
	case int64:
		return uint64(n)
	case float64:
		return uint64(n)
	}
	panic(fmt.Sprintf("not a count: %T %v", v, v))
}

// TestSQL runs deploy/queries.sql and the users of deploy/sql against real
// servers: a ClickHouse 18.16 server holding the schema the collector creates
// and data shipped through the collector's sink, and (for users.sql, which
// 18.16 cannot run) the ClickHouse 26 engine, libchdb.so.
func TestSQL(t *testing.T) {
	// The server also loads clickhouse/cluster.xml (its hosts made local).
	srv := testenv.ClickHouse(t, testenv.WithConfigXML(clusterSnippet(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{srv.Addr()}, Database: "hitcount"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	f := insertFixture(t, ctx, s)

	t.Run("queries.sql", func(t *testing.T) {
		checkQueries(t, func(sql string) (result, error) { return queryAll(ctx, s.Conn(), sql) }, f, true)
	})
	t.Run("cluster.xml", func(t *testing.T) {
		var replicas, shards uint64
		if err := s.Conn().QueryRow(ctx, "SELECT count(), uniqExact(shard_num) FROM system.clusters WHERE cluster = 'hitcount'").Scan(&replicas, &shards); err != nil {
			t.Fatal(err)
		}
		if replicas != 2 || shards != 1 {
			t.Errorf("cluster hitcount: %d replicas in %d shards, want 2 in 1", replicas, shards)
		}
		res, err := queryAll(ctx, s.Conn(), "SELECT macro, substitution FROM system.macros ORDER BY macro")
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0]["macro"] != "replica" || res[1]["macro"] != "shard" {
			t.Errorf("macros = %v, want replica and shard", res)
		}
	})
	t.Run("users-18.xml", func(t *testing.T) { checkUsers18(t, ctx, srv, f) })
	t.Run("users.sql", func(t *testing.T) { checkUsersSQL(t, ctx, s.Conn()) })
}

// clusterSnippet is the content of clickhouse/cluster.xml's root element, for
// the 18.16 server's <yandex>, with every host made 127.0.0.1 (the example
// hosts do not resolve here).
func clusterSnippet(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("clickhouse", "cluster.xml"))
	if err != nil {
		t.Fatal(err)
	}
	s := xmlComment.ReplaceAllString(string(data), "")
	s = regexp.MustCompile(`<\?xml[^>]*\?>|</?clickhouse>`).ReplaceAllString(s, "")
	return regexp.MustCompile(`<host>[^<]*</host>`).ReplaceAllString(s, "<host>127.0.0.1</host>")
}

// testPassword is the password each user gets in the tests.
func testPassword(user string) string { return "test-password-of-" + user }

var xmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

var sha256Placeholder = regexp.MustCompile(`<password_sha256_hex>(REPLACE_ME_sha256_hex_of_the_(\w+)_password)</password_sha256_hex>`)

// checkUsers18 installs users-18.xml (placeholders replaced by test password
// hashes) into the 18.16 server's users.d and runs, as each user, what that
// component runs.
func checkUsers18(t *testing.T, ctx context.Context, srv *testenv.ClickHouseServer, f fixture) {
	data, err := os.ReadFile("sql/users-18.xml")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	text := sha256Placeholder.ReplaceAllStringFunc(string(data), func(m string) string {
		user := sha256Placeholder.FindStringSubmatch(m)[2]
		users[user] = true
		sum := sha256.Sum256([]byte(testPassword(user)))
		return "<password_sha256_hex>" + hex.EncodeToString(sum[:]) + "</password_sha256_hex>"
	})
	if want := map[string]bool{"collector": true, "sweeper": true, "analyst": true}; !reflect.DeepEqual(users, want) {
		t.Fatalf("users-18.xml: password placeholders for %v, want %v", users, want)
	}
	if strings.Contains(xmlComment.ReplaceAllString(text, ""), "REPLACE_ME") {
		t.Fatal("users-18.xml: a REPLACE_ME placeholder outside <password_sha256_hex>")
	}
	dir := filepath.Join(srv.Dir(), "users.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hitcount.xml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	// A database the users must not reach.
	srv.Exec(t, "CREATE DATABASE IF NOT EXISTS other")
	srv.Exec(t, "CREATE TABLE IF NOT EXISTS other.secrets (x UInt8) ENGINE = Log")

	open := func(user string) *sink.Sink {
		t.Helper()
		o := sink.Options{Addr: []string{srv.Addr()}, Database: "hitcount", Username: user, Password: testPassword(user)}
		// The server reloads users.d every few seconds.
		deadline := time.Now().Add(10 * time.Second)
		for {
			s, err := sink.Open(ctx, o)
			if err == nil {
				t.Cleanup(func() { s.Close() })
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("log in as %s (users-18.xml in users.d): %v", user, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	denied := func(conn driver.Conn, user, sql string) {
		t.Helper()
		if err := conn.Exec(ctx, sql); err == nil {
			t.Errorf("%s may run %q; want it refused", user, sql)
		}
	}

	// The analyst: every query of queries.sql, and no writes.
	an := open("analyst")
	checkQueries(t, func(sql string) (result, error) { return queryAll(ctx, an.Conn(), sql) }, f, true)
	denied(an.Conn(), "analyst", "CREATE TABLE hitcount.mine (x UInt8) ENGINE = Log")
	if err := alerts.NewStore(an, "hitcount").Finish(ctx, time.Now(), "analyst", 0, 0); err == nil {
		t.Error("analyst may insert into hitcount.sweeps; want it refused (readonly)")
	}

	// The collector: schema at start, then ship a file and resume.
	col := open("collector")
	if err := col.Migrate(ctx); err != nil {
		t.Errorf("collector: schema at start: %v", err)
	}
	if err := col.Conn().Exec(ctx, "CREATE TABLE hitcount.extra (x UInt8) ENGINE = Log"); err == nil {
		t.Error("collector may create a table (allow_ddl); want it refused")
	}
	b := sink.NewBatch(10)
	b.Reset(site, 0xc011ec70)
	b.Add(&parser.Hit{Unix: time.Now().Unix(), Method: []byte("GET"), Path: []byte("/collector-user"), Status: 200}, 0, 50)
	if err := col.Insert(ctx, b); err != nil {
		t.Errorf("collector: insert: %v", err)
	}
	if err := col.RecordSource(ctx, site, b.SourceID, "/var/log/nginx/other.log"); err != nil {
		t.Errorf("collector: record source: %v", err)
	}
	claim := sink.Claim{Collector: "0123456789abcdef", Host: "web-1", Window: 3 * time.Minute,
		Sources: []sink.ClaimedSource{{ID: b.SourceID, Site: site, Path: "/var/log/nginx/other.log"}}}
	if _, owners, err := col.ClaimSources(ctx, claim); err != nil || len(owners) != 1 || owners[0].Collector != claim.Collector {
		t.Errorf("collector: claim its source: %v, %v; want its own record", owners, err)
	}
	if off, ok, err := col.Settle(ctx, b.SourceID); err != nil || !ok || off != 0 {
		t.Errorf("collector: settle = %d, %v, %v; want 0, true, nil", off, ok, err)
	}
	if p, err := col.Committed(ctx); err != nil || p.Offsets[b.SourceID] != 0 || !p.Sites[site] {
		t.Errorf("collector: committed = %v, %v", p, err)
	}
	var n uint64
	if err := col.Conn().QueryRow(ctx, "SELECT count() FROM other.secrets").Scan(&n); err == nil {
		t.Error("collector may read database other; want it refused")
	}

	// The sweeper: schema at start, its state and the rollups.
	sw := open("sweeper")
	if err := sw.Migrate(ctx); err != nil {
		t.Errorf("sweeper: schema at start: %v", err)
	}
	store := alerts.NewStore(sw, "hitcount")
	now := time.Now()
	if _, err := store.Touched(ctx, now.Add(-time.Hour), now); err != nil {
		t.Errorf("sweeper: %v", err)
	}
	rule := &alerts.Rule{Name: "r", Window: alerts.Window{Size: time.Hour, Loc: time.UTC}, ExcludeBots: true}
	if c, err := store.Counts(ctx, rule, site, []string{"/pricing"}, now.Add(-time.Hour), now.Add(time.Hour)); err != nil || c["/pricing"] != int64(f.pages[site+" /pricing"]-f.botHits) {
		t.Errorf("sweeper: counts = %v, %v", c, err)
	}
	if rows, err := store.Latest(ctx, []string{f.crossing}); err != nil || rows[f.crossing].State != alerts.StateSent {
		t.Errorf("sweeper: latest = %v, %v", rows, err)
	}
	c := alerts.Crossing{Rule: "r", Subject: site + "/x", WindowStart: now.Truncate(time.Hour), Threshold: 1}
	if err := store.Write(ctx, []alerts.Row{{Crossing: c, Site: site, Path: "/x", Count: 1, State: alerts.StateDetected, Version: 1, Updated: now}}); err != nil {
		t.Errorf("sweeper: write crossing: %v", err)
	}
	if err := store.Finish(ctx, now, "sweeper-test", 1, 0); err != nil {
		t.Errorf("sweeper: finish: %v", err)
	}
	if _, _, err := store.Watermark(ctx); err != nil {
		t.Errorf("sweeper: %v", err)
	}
}

// sqlUser is a user of users.sql: its password literal and its grants.
type sqlUser struct {
	password string
	grants   []string // "GRANT privileges ON object", without TO
}

var (
	createUserRE = regexp.MustCompile(`(?is)^CREATE USER IF NOT EXISTS (\w+) IDENTIFIED WITH sha256_password BY '([^']*)'(?: HOST .+)?$`)
	grantRE      = regexp.MustCompile(`(?is)^(GRANT .+?) TO (\w+(?:\s*,\s*\w+)*)$`)
)

// parseUsersSQL reads users.sql: only CREATE USER IF NOT EXISTS ... IDENTIFIED
// WITH sha256_password and GRANT ... TO statements are expected.
func parseUsersSQL(t *testing.T) (stmts []string, users map[string]*sqlUser) {
	t.Helper()
	data, err := os.ReadFile("sql/users.sql")
	if err != nil {
		t.Fatal(err)
	}
	users = map[string]*sqlUser{}
	for stmt := range strings.SplitSeq(stripComments(string(data)), ";") {
		stmt = strings.Join(strings.Fields(stmt), " ")
		if stmt == "" {
			continue
		}
		stmts = append(stmts, stmt)
		if m := createUserRE.FindStringSubmatch(stmt); m != nil {
			if !strings.HasPrefix(m[2], "REPLACE_ME") {
				t.Errorf("users.sql: the password of %s is not a REPLACE_ME placeholder: ship no real password", m[1])
			}
			users[m[1]] = &sqlUser{password: m[2]}
			continue
		}
		if m := grantRE.FindStringSubmatch(stmt); m != nil {
			for name := range strings.SplitSeq(m[2], ",") {
				u := users[strings.TrimSpace(name)]
				if u == nil {
					t.Fatalf("users.sql: %q grants to a user not created before it", stmt)
				}
				u.grants = append(u.grants, m[1])
			}
			continue
		}
		t.Fatalf("users.sql: unexpected statement %q (only CREATE USER IF NOT EXISTS ... IDENTIFIED WITH sha256_password and GRANT ... TO)", stmt)
	}
	return stmts, users
}

// The engine (libchdb.so) serves one data directory per process and runs
// every statement as the user "default" of its users.xml. So each user of
// users.sql gets a process of its own: the test binary again (TestMain), with
// a users.xml whose default user has exactly that user's grants, on the same
// data directory, one process after the other.

// chdbJob is what a child process runs: statements, one result each.
type chdbJob struct {
	Lib, DataDir, ConfigFile string
	SQL                      []string
	// KeeperMap, after SQL: run the sweeper's keepermap claims (alerts) on
	// this key, the statements exactly as it sends them; one result per
	// step.
	KeeperMap string
	// Dedup, after that: run the deduplication step of the schema migration
	// (sink.CheckDedup: read the tables, ALTER those lacking the window) as
	// this user; one result, Out the verdict (dedupStep).
	Dedup   bool
	Results string // file to write []chdbResult to, as JSON
}

type chdbResult struct {
	Out, Err string
}

const chdbJobEnv = "HITCOUNT_DEPLOY_CHDB_JOB"

func TestMain(m *testing.M) {
	if job := os.Getenv(chdbJobEnv); job != "" {
		if err := runChdbJob(job); err != nil {
			fmt.Fprintln(os.Stderr, "chdb job:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChdbJob is the child process: it opens the engine and runs the job's
// statements, recording each outcome.
func runChdbJob(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var job chdbJob
	if err := json.Unmarshal(data, &job); err != nil {
		return err
	}
	ctx := context.Background()
	e, err := chdb.Open(ctx, chdb.Options{LibPath: job.Lib, DataPath: job.DataDir, ExtraArgs: []string{"--config-file=" + job.ConfigFile}})
	if err != nil {
		return err
	}
	defer e.Close()
	var results []chdbResult
	for _, sql := range job.SQL {
		out, err := e.Query(ctx, sql, "TSV")
		r := chdbResult{Out: string(out)}
		if err != nil {
			r.Err = err.Error()
		}
		results = append(results, r)
	}
	if job.KeeperMap != "" {
		results = append(results, keeperMapSteps(ctx, e, job.KeeperMap)...)
	}
	if job.Dedup {
		results = append(results, dedupStep(ctx, e))
	}
	out, err := json.Marshal(results)
	if err != nil {
		return err
	}
	return os.WriteFile(job.Results, out, 0o644)
}

// keeperMapSteps is what a sweeper with claims: keepermap does, through the
// code it runs (alerts.KeeperMapClaims): open (create the claims table if
// missing), claim key, see a held claim refused to another owner, check,
// release, claim again. One result per step, Out naming the step.
func keeperMapSteps(ctx context.Context, e *chdb.Engine, key string) []chdbResult {
	var results []chdbResult
	step := func(name string, err error) bool {
		r := chdbResult{Out: name}
		if err != nil {
			r.Err = err.Error()
		}
		results = append(results, r)
		return err == nil
	}
	open := func(owner string) (*alerts.KeeperMapClaims, error) {
		return alerts.OpenKeeperMapClaims(ctx, alerts.EngineSQL{Engine: e}, "hitcount", "/hitcount", owner, time.Now)
	}
	a, err := open("sweeper-a")
	if !step("open", err) {
		return results
	}
	b, err := open("sweeper-b")
	if !step("open again (table exists)", err) {
		return results
	}
	c, ok, err := a.Claim(ctx, key, time.Minute)
	if err == nil && !ok {
		err = errors.New("not claimed")
	}
	if !step("claim", err) {
		return results
	}
	if _, ok, err := b.Claim(ctx, key, time.Minute); err == nil && ok {
		step("held claim refused to another owner", errors.New("claimed twice"))
	} else {
		step("held claim refused to another owner", err)
	}
	if v, err := a.Valid(ctx, key, c); err == nil && !v {
		step("valid", errors.New("not valid"))
	} else {
		step("valid", err)
	}
	step("release", a.Release(ctx, key, c))
	if _, ok, err := b.Claim(ctx, key, time.Minute); err == nil && !ok {
		step("claim after release", errors.New("not claimed"))
	} else {
		step("claim after release", err)
	}
	return results
}

// engine runs statements on one data directory of the ClickHouse 26 engine,
// each batch in a child process as a user of users.sql.
type engine struct {
	t        *testing.T
	lib, dir string
	zk       string // ZooKeeper host:port, for KeeperMap tables
	users    map[string]*sqlUser
}

// step is a statement and what must come of it.
type step struct {
	sql    string
	denied bool   // must fail for lack of a privilege
	want   string // if set, the TSV output it must give
}

func ok(sql string) step     { return step{sql: sql} }
func denied(sql string) step { return step{sql: sql, denied: true} }

// run runs steps as user ("" for an administrator: every privilege) and
// checks each outcome.
func (e *engine) run(user string, steps ...step) {
	e.t.Helper()
	var sqls []string
	for _, s := range steps {
		sqls = append(sqls, s.sql)
	}
	results := e.job(user, chdbJob{SQL: sqls})
	if len(results) != len(steps) {
		e.t.Fatalf("engine process as %s: %d results for %d statements", orAdmin(user), len(results), len(steps))
	}
	for i, s := range steps {
		r := results[i]
		switch {
		case s.denied && r.Err == "":
			e.t.Errorf("%s may run %s; want it refused", orAdmin(user), s.sql)
		case s.denied && !strings.Contains(r.Err, "ACCESS_DENIED"):
			e.t.Errorf("%s: %s failed, but not for a missing privilege: %s", orAdmin(user), s.sql, r.Err)
		case !s.denied && r.Err != "":
			e.t.Errorf("%s may not run %s: %s", orAdmin(user), s.sql, r.Err)
		case s.want != "" && r.Out != s.want:
			e.t.Errorf("%s: %s = %q, want %q", orAdmin(user), s.sql, r.Out, s.want)
		}
	}
}

// runKeeperMap runs the sweeper's keepermap claims on key as user and
// checks that every step succeeds.
func (e *engine) runKeeperMap(user, key string) {
	e.t.Helper()
	results := e.job(user, chdbJob{KeeperMap: key})
	if len(results) == 0 {
		e.t.Fatalf("keepermap claims as %s: no result", orAdmin(user))
	}
	for _, r := range results {
		if r.Err != "" {
			e.t.Errorf("keepermap claims as %s: %s: %s", orAdmin(user), r.Out, r.Err)
		}
	}
}

// job runs a job in a child process as user (users.xml with that user's
// grants) and returns its results.
func (e *engine) job(user string, job chdbJob) []chdbResult {
	e.t.Helper()
	var ux strings.Builder
	ux.WriteString("<clickhouse>\n<profiles><default/></profiles>\n<quotas><default/></quotas>\n<users>\n<default><password/><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota>\n")
	if user != "" {
		ux.WriteString("<grants>\n")
		for _, g := range e.users[user].grants {
			fmt.Fprintf(&ux, "  <query>%s</query>\n", xmlText(g))
		}
		ux.WriteString("</grants>\n")
	}
	ux.WriteString("</default>\n</users>\n</clickhouse>\n")
	dir := e.t.TempDir()
	usersXML := filepath.Join(dir, "users.xml")
	configXML := filepath.Join(dir, "config.xml")
	cfg := "<clickhouse><user_directories><users_xml><path>" + xmlText(usersXML) + "</path></users_xml></user_directories>"
	if e.zk != "" {
		// As deploy/clickhouse/keeper.xml and keeper_map.xml configure a
		// server: every process, since the tables of the data directory
		// are loaded at start.
		host, port, _ := strings.Cut(e.zk, ":")
		cfg += "<zookeeper><node><host>" + host + "</host><port>" + port + "</port></node></zookeeper><keeper_map_path_prefix>/keeper_map_tables</keeper_map_path_prefix>"
	}
	cfg += "</clickhouse>\n"
	job.Lib, job.DataDir, job.ConfigFile, job.Results = e.lib, e.dir, configXML, filepath.Join(dir, "results.json")
	jobJSON, err := json.Marshal(job)
	if err != nil {
		e.t.Fatal(err)
	}
	jobFile := filepath.Join(dir, "job.json")
	for name, data := range map[string][]byte{usersXML: []byte(ux.String()), configXML: []byte(cfg), jobFile: jobJSON} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), chdbJobEnv+"="+jobFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.t.Fatalf("engine process as %s: %v\n%s", orAdmin(user), err, out)
	}
	data, err := os.ReadFile(job.Results)
	if err != nil {
		e.t.Fatal(err)
	}
	var results []chdbResult
	if err := json.Unmarshal(data, &results); err != nil {
		e.t.Fatalf("engine process as %s: results: %v", orAdmin(user), err)
	}
	return results
}

func orAdmin(user string) string {
	if user == "" {
		return "admin"
	}
	return user
}

// checkUsersSQL checks users.sql on the ClickHouse 26 engine, which has SQL
// RBAC (18.16 has none): every statement must parse, and, as each user, what
// that component runs must be allowed and what it must not do refused, on the
// schema dumped from the 18.16 server. The engine has no writable user
// storage, so each user is declared in a users.xml with users.sql's GRANTs.
func checkUsersSQL(t *testing.T, ctx context.Context, conn driver.Conn) {
	lib := testenv.RequireChdb(t)
	stmts, users := parseUsersSQL(t)
	for _, name := range []string{"collector", "sweeper", "analyst"} {
		if users[name] == nil {
			t.Fatalf("users.sql: no user %s", name)
		}
	}
	// KeeperMap tables (the sweeper's keepermap claims) need Keeper: 18.16
	// has no KeeperMap, so they are checked here, with a real ZooKeeper.
	zk := testenv.ZooKeeper(t)
	e := &engine{t: t, lib: lib, dir: filepath.Join(t.TempDir(), "data"), zk: zk.Addr(), users: users}

	// The schema as the collector created it on the 18.16 server, each
	// statement idempotent as the collector and the sweeper run it at start.
	rows, err := conn.Query(ctx, "SELECT create_table_query FROM system.tables WHERE database = 'hitcount' ORDER BY engine = 'MaterializedView', name")
	if err != nil {
		t.Fatal(err)
	}
	schema := []step{ok("CREATE DATABASE IF NOT EXISTS hitcount")}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		q = strings.Replace(q, "CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ", 1)
		q = strings.Replace(q, "CREATE MATERIALIZED VIEW ", "CREATE MATERIALIZED VIEW IF NOT EXISTS ", 1)
		schema = append(schema, ok(q))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(schema) < 10 {
		t.Fatalf("schema of the 18.16 server: only %d statements", len(schema))
	}

	// admin: every statement of users.sql parses; the schema.
	admin := []step{{sql: "SELECT version()"}}
	for _, stmt := range stmts {
		admin = append(admin, ok("SELECT formatQuery('"+strings.ReplaceAll(stmt, "'", `\'`)+"')"))
	}
	e.run("", append(admin, schema...)...)

	// That schema is an older hitcount's (18.16 has no deduplication
	// window): the collector, which may not ALTER, finds that its tables do
	// not deduplicate and says which and why; an administrator's
	// `collector -migrate` brings them up to the schema, after which the
	// collector finds them deduplicating, with no right to change them.
	e.checkDedup("collector", false, "ACCESS_DENIED", "collector -migrate")
	e.checkDedup("", true)
	e.checkDedup("collector", true)

	// At start each binary lists what exists (sink.Migrate) and, the schema
	// being current, creates nothing: it must see every object of it, and
	// needs no right to create.
	atStart := []step{
		{sql: "SELECT count() FROM system.databases WHERE name = 'hitcount'", want: "1\n"},
		{sql: "SELECT count() FROM system.tables WHERE database = 'hitcount'", want: fmt.Sprintf("%d\n", len(schema)-1)},
		denied("CREATE TABLE IF NOT EXISTS hitcount.extra (x UInt8) ENGINE = Log"),
	}

	// collector: the schema at start, a batch (hits, then rejects), its
	// source, and how it resumes. Then what it must not do.
	e.run("collector", append(slices.Clone(atStart),
		ok(`INSERT INTO hitcount.hits (ts, site, host, method, path, query, protocol, status, bytes, referer, user_agent, client, remote_user, request_time_us, source_id, offset) VALUES
			(now(), 'www.example.com', 'www.example.com', 'GET', '/pricing', '', 'HTTP/1.1', 200, 512, '', 'Mozilla/5.0', '203.0.113.7', '', 1200, 42, 0),
			(now(), 'www.example.com', 'www.example.com', 'GET', '/pricing', '', 'HTTP/1.1', 200, 512, '', 'Googlebot/2.1', '203.0.113.8', '', 900, 42, 100)`),
		ok(`INSERT INTO hitcount.rejects (inserted, site, source_id, offset, reason, line) VALUES (now(), 'www.example.com', 42, 200, 'status: expected a three-digit status at column 67', 'garbage')`),
		ok(`INSERT INTO hitcount.sources (source_id, site, path, seen) VALUES (42, 'www.example.com', '/var/log/nginx/access.log', now())`),
		ok(`SELECT count() FROM system.processes WHERE query_id LIKE 'hitcount-000000000000002a-%'`),
		step{sql: `SELECT maxMerge(max_offset) FROM hitcount.ingest_progress WHERE source_id = 42 GROUP BY source_id`, want: "200\n"},
		ok(`SELECT site, source_id, maxMerge(max_offset) FROM hitcount.ingest_progress GROUP BY site, source_id`),
		ok(`INSERT INTO hitcount.source_owners (`+sink.OwnersColumns+`) VALUES (42, 'www.example.com', '0123456789abcdef', 'web-1', '/var/log/nginx/access.log', now(), now(), 0, now())`),
		step{sql: "SELECT source_id, collector FROM (" + strings.NewReplacer("IN ?", "IN (42)", "- ?", "- 180").Replace(sink.OwnersQuery("hitcount.source_owners")) + ")", want: "42\t0123456789abcdef\n"},
		denied("SELECT client FROM hitcount.hits"),
		denied("SELECT referer, query, remote_user FROM hitcount.hits"),
		denied("SELECT * FROM hitcount.crossings"),
		denied("INSERT INTO hitcount.crossings (key) VALUES ('x')"),
		denied("DROP TABLE hitcount.hits"),
		denied("TRUNCATE TABLE hitcount.hits"),
		denied("ALTER TABLE hitcount.hits DELETE WHERE 1"),
		denied("ALTER TABLE hitcount.hits DROP COLUMN client"),
		denied("CREATE DATABASE elsewhere"),
		denied("CREATE USER intruder"),
	)...)
	// sweeper: the schema at start, what a sweep reads (which also shows
	// that the collector's inserts went through the materialized views), and
	// its state.
	e.run("sweeper", append(slices.Clone(atStart),
		step{sql: "SELECT sum(hits), sumIf(hits, bot = 1) FROM hitcount.hits_1m", want: "2\t1\n"},
		step{sql: "SELECT sum(hits) FROM hitcount.hits_touched", want: "2\n"},
		ok(`SELECT site, path, minute FROM hitcount.hits_touched WHERE ingested >= toDateTime(0) AND ingested <= now() GROUP BY site, path, minute`),
		step{sql: `SELECT path, sum(hits) FROM hitcount.hits_1m WHERE site = 'www.example.com' AND path IN ('/pricing') AND minute >= toDateTime(0) AND minute < now() + 3600 AND bot = 0 GROUP BY path`, want: "/pricing\t1\n"},
		step{sql: `SELECT path, sum(hits) FROM hitcount.hits_1d WHERE site = 'www.example.com' AND path IN ('/pricing') GROUP BY path`, want: "/pricing\t2\n"},
		ok(`SELECT toDateTime(intDiv(toUInt32(minute) - 0, 300) * 300 + 0) AS t, sum(hits) FROM hitcount.hits_1m WHERE site = 'www.example.com' AND path = '/pricing' GROUP BY t ORDER BY t`),
		ok(`INSERT INTO hitcount.crossings (key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated, kind, note) VALUES
			('k1', 'pricing-hot', 'www.example.com', '/pricing', now(), 1, 2, 'detected', 1, 'sweeper-1', 0, 0, '', '', now(), 'threshold', '')`),
		step{sql: `SELECT key, argMax(state, version), max(version) FROM hitcount.crossings WHERE key IN ('k1') GROUP BY key HAVING argMax(state, version) IN ('detected', 'claimed') ORDER BY max(version)`, want: "k1\tdetected\t1\n"},
		ok(`INSERT INTO hitcount.sweeps (finished, watermark, owner, crossings, sent) VALUES (now(), now(), 'sweeper-1', 1, 0)`),
		step{sql: `SELECT count() FROM hitcount.sweeps`, want: "1\n"},
		ok(`SELECT owner, max(finished) FROM hitcount.sweeps WHERE finished >= toDateTime(0) AND owner != 'sweeper-2' GROUP BY owner`),
		// below and no_traffic rules: how far the collectors have committed.
		step{sql: `SELECT site, source_id, collector, argMax(host, seen), argMax(path, seen), min(started) > toDateTime(0), max(seen) > toDateTime(0), max(caught_up) > toDateTime(0) FROM hitcount.source_owners WHERE site IN ('www.example.com') GROUP BY site, source_id, collector`,
			want: "www.example.com\t42\t0123456789abcdef\tweb-1\t/var/log/nginx/access.log\t1\t1\t1\n"},
		denied("INSERT INTO hitcount.source_owners (source_id) VALUES (1)"),
		denied("SELECT client FROM hitcount.hits"),
		denied("SELECT referer, query, remote_user FROM hitcount.hits"),
		denied("SELECT * FROM hitcount.sources"),
		denied(`INSERT INTO hitcount.hits (ts, site, path) VALUES (now(), 'www.example.com', '/forged')`),
		denied("DROP TABLE hitcount.crossings"),
		denied("TRUNCATE TABLE hitcount.crossings"),
		denied("ALTER TABLE hitcount.crossings DELETE WHERE 1"),
	)...)
	// sweeper with claims: keepermap: its first start creates the claims
	// table, later starts and claims only read and write its rows.
	e.runKeeperMap("sweeper", "k1")
	e.runKeeperMap("sweeper", "k2")
	// Once the table exists, the CREATE grant is not needed.
	noCreate := &sqlUser{}
	for _, g := range users["sweeper"].grants {
		if !strings.HasPrefix(g, "GRANT CREATE TABLE ON hitcount.claims") {
			noCreate.grants = append(noCreate.grants, g)
		}
	}
	if len(noCreate.grants) != len(users["sweeper"].grants)-1 {
		t.Errorf("users.sql: want one GRANT CREATE TABLE ON hitcount.claims for the sweeper, grants: %v", users["sweeper"].grants)
	}
	users["sweeper without CREATE"] = noCreate
	e.runKeeperMap("sweeper without CREATE", "k3")
	e.run("sweeper",
		denied("DROP TABLE hitcount.claims"),
		denied("TRUNCATE TABLE hitcount.claims"),
		denied("ALTER TABLE hitcount.claims UPDATE owner = 'x' WHERE 1"),
		denied("ALTER TABLE hitcount.claims ADD COLUMN x UInt8"),
		denied("CREATE TABLE IF NOT EXISTS hitcount.claims2 (key String) ENGINE = KeeperMap('/elsewhere') PRIMARY KEY key"),
	)
	e.run("collector",
		denied("SELECT * FROM hitcount.claims"),
		denied("INSERT INTO hitcount.claims (key, owner, token, expires) VALUES ('k9', 'c', 1, 1)"),
	)

	// analyst: every query of queries.sql (on this engine too), and no writes.
	var analyst []step
	for _, q := range loadQueries(t) {
		analyst = append(analyst, ok(q.sql))
	}
	e.run("analyst", append(analyst,
		denied("INSERT INTO hitcount.crossings (key) VALUES ('x')"),
		denied("CREATE TABLE hitcount.mine (x UInt8) ENGINE = Log"),
		denied("DROP TABLE hitcount.hits"),
		denied("CREATE DATABASE IF NOT EXISTS hitcount"),
	)...)
}

func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// engineSelect is sink.Selecter over the engine: ? bound as string
// literals, every column scanned as a string.
type engineSelect struct{ e *chdb.Engine }

var tsvUnescape = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\r`, "\r", `\'`, "'", `\0`, "\x00")

func (s engineSelect) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	for _, a := range args {
		q = strings.Replace(q, "?", "'"+strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(fmt.Sprint(a))+"'", 1)
	}
	out, err := s.e.Query(ctx, q, "TSV")
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		err := fn(func(dest ...any) error {
			if len(dest) != len(fields) {
				return fmt.Errorf("%d destinations for %d columns", len(dest), len(fields))
			}
			for i, d := range dest {
				p, ok := d.(*string)
				if !ok {
					return fmt.Errorf("cannot scan into %T", d)
				}
				*p = tsvUnescape.Replace(fields[i])
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// dedupStep runs the deduplication step of the migration on database
// hitcount as the process's user: "on", or "off" and each table's reason,
// one per line.
func dedupStep(ctx context.Context, e *chdb.Engine) chdbResult {
	r := chdbResult{Out: "dedup"}
	out, err := e.Query(ctx, "SELECT version()", "TSV")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	var v sink.Version
	fmt.Sscanf(string(out), "%d.%d", &v.Major, &v.Minor)
	d, err := sink.CheckDedup(ctx, engineSelect{e}, e.Exec, "hitcount", v, nil)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	if d.On() {
		r.Out = "on"
		return r
	}
	r.Out = "off"
	for _, t := range d.Off() {
		r.Out += "\n" + t.Table + ": " + t.Why
	}
	return r
}

// checkDedup runs the migration's deduplication step as user and checks its
// verdict: on, or off for each table an insert writes with every one of why
// in its reason.
func (e *engine) checkDedup(user string, on bool, why ...string) {
	e.t.Helper()
	results := e.job(user, chdbJob{Dedup: true})
	if len(results) != 1 || results[0].Err != "" {
		e.t.Fatalf("dedup step as %s: %+v", orAdmin(user), results)
	}
	out := results[0].Out
	if on {
		if out != "on" {
			e.t.Errorf("as %s, the tables do not deduplicate:\n%s", orAdmin(user), out)
		}
		return
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "off" || len(lines) != 8 {
		e.t.Errorf("as %s: dedup %q; want off for the 7 tables an insert writes", orAdmin(user), out)
	}
	for _, l := range lines[1:] {
		for _, w := range why {
			if !strings.Contains(l, w) {
				e.t.Errorf("as %s: %s; want the reason to say %q", orAdmin(user), l, w)
			}
		}
	}
}
