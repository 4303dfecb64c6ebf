package alerts_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
)

// combinedLine is one nginx combined-format log line.
func combinedLine(at time.Time, path string, status int, ua string) string {
	return fmt.Sprintf("203.0.113.7 - - [%s] \"GET %s HTTP/1.1\" %d 153 \"-\" \"%s\"\n",
		at.Format("02/Jan/2006:15:04:05 -0700"), path, status, ua)
}

// collect writes lines to an access log and runs the real collector over it
// into the env's store until the hits table holds every line.
func (e *env) collect(lines []string) {
	t := e.t
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "access.log"), []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := collector.New(e.store, collector.Options{
		Sources:   []collector.Source{{Glob: filepath.Join(dir, "access.log"), Site: "www.example.com", Format: "combined", MaxLine: 1 << 20}},
		BatchRows: 1000, BatchDelay: 50 * time.Millisecond, Poll: 20 * time.Millisecond, Scan: 50 * time.Millisecond,
		StateDir: t.TempDir(), Metrics: collector.NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := testenv.Count(context.Background(), e.store, "SELECT count() FROM "+e.db+".hits")
		if err != nil {
			t.Fatal(err)
		}
		if n == uint64(len(lines)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector stored %d of %d lines", n, len(lines))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watermark reads the sweeps table: how many sweeps finished, the latest
// watermark.
func (e *env) watermark() (uint64, time.Time) {
	e.t.Helper()
	var n uint64
	var wm time.Time
	if err := e.store.Select(context.Background(), "SELECT count(), max(watermark) FROM "+e.db+".sweeps", nil,
		func(scan func(...any) error) error { return scan(&n, &wm) }); err != nil {
		e.t.Fatal(err)
	}
	return n, wm
}

// sizedDB passes queries through to the store and keeps the largest SQL text
// one of them bound (arguments counted as the bytes they bring).
type sizedDB struct {
	alerts.DB
	mu      sync.Mutex
	largest int
	queries int
}

func (d *sizedDB) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	n := len(q)
	for _, a := range args {
		n += argSize(a)
	}
	d.mu.Lock()
	d.largest, d.queries = max(d.largest, n), d.queries+1
	d.mu.Unlock()
	return d.DB.Select(ctx, q, args, fn)
}

func argSize(a any) int {
	switch a := a.(type) {
	case string:
		return len(a) + 2
	case clickhouse.GroupSet:
		n := 2
		for _, v := range a.Value {
			n += argSize(v) + 2
		}
		return n
	}
	return 8
}

// longPath is a path of n bytes nginx serves (a 404 is enough): letters,
// with quotes and percent signs that the SQL literal must escape.
func longPath(i, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz'%"
	var b strings.Builder
	fmt.Fprintf(&b, "/blog/x%03d", i)
	for b.Len() < n {
		b.WriteByte(alphabet[rand.IntN(len(alphabet))])
	}
	return b.String()
}

const hostileRulesYAML = `
sources: [{path: /x, site: www.example.com}]
rules:
  - name: pricing-hot
    match: {site: www.example.com, path: /pricing}
    threshold: 100
    window: 1h
    to: [ops@example.com]
  - name: blog-glob
    match: {path: /blog/*}
    threshold: 1000
    window: lifetime
    to: [editors@example.com]
  - name: blog-regex
    match: {path: "~^/blog/x0[0-9]{2}[a-z'%]*$"}
    threshold: 1000
    window: 1h
    to: [editors@example.com]
`

// The reviewer's attack: requests for 40 distinct paths of ~8,000 characters
// (404s, written by nginx to its log) under a glob and a regex rule. Every
// sweep must still succeed, the exact-path rule's crossing must be recorded
// and emailed, and the watermark must advance. Before the fix the count query
// bound all 40 paths into one IN list (~320 KB of SQL, over max_query_size),
// failed, and failed again on every later sweep.
func TestHostilePathsDoNotStopSweeps(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testHostilePathsDoNotStopSweeps)
}

func testHostilePathsDoNotStopSweeps(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	now := time.Now()
	var lines []string
	for i := range 40 {
		p := longPath(i, 8000)
		lines = append(lines, combinedLine(now, p, 404, "Mozilla/5.0"), combinedLine(now, p, 404, "Mozilla/5.0"))
	}
	// Two paths no nginx accepts by default, but another server's log may
	// hold (the collector takes lines up to 1 MiB): one alone is over
	// max_query_size. Not counted; skipped and counted as skipped.
	for i := range 2 {
		lines = append(lines, combinedLine(now, longPath(100+i, 300_000), 404, "Mozilla/5.0"))
	}
	for range 120 {
		lines = append(lines, combinedLine(now, "/pricing", 200, "Mozilla/5.0"))
	}
	e.collect(lines)

	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	db := &sizedDB{DB: e.store}
	m := alerts.NewMetrics(prometheus.NewRegistry())
	var logs strings.Builder
	sw := alerts.NewSweeper(alerts.NewStore(db, e.db), e.rules(hostileRulesYAML), claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", Metrics: m,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for i := range 2 {
		t0 := time.Now()
		res, err := sw.Sweep(context.Background())
		if err != nil {
			t.Fatalf("sweep %d failed: %v", i+1, err)
		}
		t.Logf("sweep %d: %v, %d queries, the largest %d bytes; detected %d, sent %d", i+1, time.Since(t0).Round(time.Millisecond),
			db.queries, db.largest, len(res.Detected), res.Sent)
		db.queries, db.largest = 0, 0
		if want := 1 - i; len(res.Detected) != want || res.Sent != want {
			t.Fatalf("sweep %d detected %d, sent %d; want %d and %d (pricing once)", i+1, len(res.Detected), res.Sent, want, want)
		}
	}
	if n, wm := e.watermark(); n != 2 || wm.Before(now.Add(-time.Second)) {
		t.Fatalf("%d sweeps recorded, watermark %v; want 2 sweeps and a watermark from now", n, wm)
	}
	msgs := smtp.Messages(t)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Header.Get("Subject"), "/pricing") {
		t.Fatalf("mailbox holds %d messages, want the pricing crossing", len(msgs))
	}
	if st := e.states(); st["sent"] != 1 || len(st) != 1 {
		t.Errorf("state table %v, want 1 sent", st)
	}
	if n := testutil.ToFloat64(m.PagesSkipped.WithLabelValues("path_too_long")); n != 4 {
		t.Errorf("%v pages skipped as too long, want 4 (2 in each sweep)", n)
	}
	// Nothing failed on the way: the 8 KB pages were counted, not skipped.
	for _, rule := range []string{"blog-glob", "blog-regex", "pricing-hot"} {
		if n := testutil.ToFloat64(m.RuleErrors.WithLabelValues(rule)); n != 0 {
			t.Errorf("%v errors of rule %s:\n%.3000s", n, rule, logs.String())
		}
	}
}

// A rule whose query fails deterministically on the store fails alone: it is
// logged and counted by rule, the other rules' crossings are recorded and
// sent, and the watermark advances.
func TestFailingRuleFailsAlone(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testFailingRuleFailsAlone)
}

func testFailingRuleFailsAlone(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	now := time.Now()
	e.hits("www.example.com", "/pricing", 120, now, "Mozilla/5.0")
	for i := range 3 {
		e.hits("www.example.com", fmt.Sprintf("/blog/p%d", i), 60, now, "Mozilla/5.0")
	}
	// broken-host's host condition is bound into its count query; the store
	// rejects the query for it whatever the data, so no retry can help.
	rules := e.rules(rulesYAML + `
  - name: broken-host
    match: {path: /blog/*, host: ` + strings.Repeat("h", 300<<10) + `}
    threshold: 1
    window: 1h
    to: [ops@example.com]
`)
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	reg := prometheus.NewRegistry()
	m := alerts.NewMetrics(reg)
	var sent []*alerts.Message
	sender := alerts.SenderFunc(func(_ context.Context, msg *alerts.Message) (bool, error) {
		sent = append(sent, msg)
		return false, nil
	})
	var logs strings.Builder
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), rules, claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", Metrics: m,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatalf("one broken rule failed the sweep: %v", err)
	}
	// pricing crosses 100; each of 3 blog pages crosses 10 and 50.
	if len(res.Detected) != 7 || res.Sent != 7 {
		t.Fatalf("detected %d, sent %d; want 7 and 7", len(res.Detected), res.Sent)
	}
	if n := testutil.ToFloat64(m.RuleErrors.WithLabelValues("broken-host")); n != 1 {
		t.Errorf("rule errors of broken-host = %v, want 1 (its query fails whatever the page: recorded once)", n)
	}
	if n := testutil.ToFloat64(m.RuleErrors.WithLabelValues("pricing-hot")); n != 0 {
		t.Errorf("rule errors of pricing-hot = %v, want 0", n)
	}
	if !strings.Contains(logs.String(), "rule=broken-host") {
		t.Errorf("no log line names the failing rule:\n%.2000s", logs.String())
	}
	if n, _ := e.watermark(); n != 1 {
		t.Fatalf("%d sweeps recorded, want 1", n)
	}
}

// Hostile pages that do cross a threshold are recorded and emailed like any
// other (8 KB paths through the state table, the re-check and real SMTP),
// read over several passes when they exceed MaxTouched; the watermark moves
// only with the pass that read the last page.
func TestHostileCrossingsOverSeveralPasses(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testHostileCrossingsOverSeveralPasses)
}

func testHostileCrossingsOverSeveralPasses(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	now := time.Now()
	var lines []string
	for i := range 36 {
		p := longPath(i, 8000)
		lines = append(lines, combinedLine(now, p, 404, "Mozilla/5.0"), combinedLine(now, p, 404, "Mozilla/5.0"))
	}
	for range 120 {
		lines = append(lines, combinedLine(now, "/pricing", 200, "Mozilla/5.0"))
	}
	e.collect(lines)
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	rules := e.rules(strings.Replace(hostileRulesYAML, "threshold: 1000\n    window: 1h", "threshold: 2\n    window: 1h", 1))
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), rules, claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", MaxTouched: 10, DigestAfter: 8})
	detected, sent, passes := 0, 0, 0
	for more := true; more; passes++ {
		if passes == 10 {
			t.Fatal("still more to do after 10 passes")
		}
		if n, _ := e.watermark(); n != 0 {
			t.Fatalf("a watermark was recorded after pass %d of a round", passes)
		}
		res, err := sw.Sweep(context.Background())
		if err != nil {
			t.Fatalf("pass %d: %v", passes+1, err)
		}
		detected, sent, more = detected+len(res.Detected), sent+res.Sent, res.More
	}
	// 37 touched pages, 10 a pass: 4 passes.
	if passes != 4 || detected != 37 || sent != 37 {
		t.Fatalf("%d passes detected %d, sent %d; want 4 passes, 37 and 37 (36 hostile pages over the regex rule, pricing)", passes, detected, sent)
	}
	if n, _ := e.watermark(); n != 1 {
		t.Fatalf("%d watermarks recorded, want 1", n)
	}
	if st := e.states(); st["sent"] != 37 || len(st) != 1 {
		t.Errorf("state table %v, want 37 sent", st)
	}
	msgs := smtp.Messages(t)
	long := 0
	for _, m := range msgs {
		if s := m.Header.Get("Subject"); len(s) > 400 {
			long++
		}
	}
	// Passes 1 to 3 read 10 hostile pages each: a digest each (over 8 for the
	// same recipients); pass 4 reads the last 6 and /pricing: one message each.
	if len(msgs) != 10 || long > 0 {
		t.Errorf("mailbox holds %d messages, %d with a subject over 400 bytes; want 10 (3 digests, 7 single), none", len(msgs), long)
	}
	// The next round re-reads the same pages (they are within the lateness)
	// and finds nothing new.
	for more, passes := true, 0; more; passes++ {
		res, err := sw.Sweep(context.Background())
		if err != nil || len(res.Detected) != 0 || res.Sent != 0 || passes == 10 {
			t.Fatalf("the next round, pass %d: %+v, %v; want nothing new", passes+1, res, err)
		}
		more = res.More
	}
	if n, _ := e.watermark(); n != 2 {
		t.Fatalf("%d watermarks recorded, want 2", n)
	}
}

// Latest answers for any number of crossing keys: a sweep asks about every
// crossing its touched pages make, and requests decide how many that is.
func TestLatestManyKeys(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testLatestManyKeys)
}

func testLatestManyKeys(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	store := alerts.NewStore(e.store, e.db)
	ctx := context.Background()
	now := time.Now()
	var rows []alerts.Row
	keys := make([]string, 20000) // ~720 KB of keys as literals
	for i := range keys {
		c := alerts.Crossing{Rule: "r", Subject: fmt.Sprintf("www.example.com/p%d", i), WindowStart: now.Truncate(time.Hour), Threshold: 1}
		keys[i] = c.Key()
		if i%1000 == 0 {
			rows = append(rows, alerts.Row{Crossing: c, Site: "www.example.com", Path: fmt.Sprintf("/p%d", i), Count: 1,
				State: alerts.StateDetected, Version: 1, Updated: now})
		}
	}
	if err := store.Write(ctx, rows); err != nil {
		t.Fatal(err)
	}
	got, err := store.Latest(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("Latest found %d of the %d recorded crossings", len(got), len(rows))
	}
	for _, r := range rows {
		if got[r.Key()].Path != r.Path {
			t.Errorf("crossing %s: got %+v", r.Key(), got[r.Key()])
		}
	}
}

// flakyDB passes queries to the store, except that the count queries fail
// with a network error while fail says so: a fault injected in front of a
// real store, as a dropped connection would be.
type flakyDB struct {
	alerts.DB
	mu    sync.Mutex
	fail  func(n int) bool // given how many count queries ran before
	count int
}

func (d *flakyDB) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	if strings.Contains(q, "sum(hits)") && strings.Contains(q, " IN ") {
		d.mu.Lock()
		n := d.count
		d.count++
		d.mu.Unlock()
		if d.fail(n) {
			return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
	}
	return d.DB.Select(ctx, q, args, fn)
}

// A count query that fails for a reason that may pass is retried within the
// sweep; one that keeps failing fails the sweep without moving the watermark
// (skipping it would lose the crossing silently), and the next sweep, with
// the store back, finds the crossing.
func TestTransientCountErrors(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testTransientCountErrors)
}

func testTransientCountErrors(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	e.hits("www.example.com", "/pricing", 120, time.Now(), "Mozilla/5.0")
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sender := alerts.SenderFunc(func(context.Context, *alerts.Message) (bool, error) { return false, nil })
	sweep := func(fail func(int) bool) (alerts.Result, error) {
		db := &flakyDB{DB: e.store, fail: fail}
		sw := alerts.NewSweeper(alerts.NewStore(db, e.db), e.rules(rulesYAML), claims, sender,
			alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test"})
		return sw.Sweep(context.Background())
	}
	// Down for good: the sweep fails, nothing is recorded, no watermark.
	if _, err := sweep(func(int) bool { return true }); err == nil {
		t.Fatal("a sweep whose count queries all failed succeeded")
	}
	if n, _ := e.watermark(); n != 0 || len(e.states()) != 0 {
		t.Fatalf("after a failed sweep: %d watermarks, states %v; want none", n, e.states())
	}
	// The first try fails, the retry succeeds.
	res, err := sweep(func(n int) bool { return n == 0 })
	if err != nil || len(res.Detected) != 1 || res.Sent != 1 {
		t.Fatalf("sweep with one dropped query: %+v, %v; want the pricing crossing sent", res, err)
	}
	if n, _ := e.watermark(); n != 1 {
		t.Fatalf("%d watermarks, want 1", n)
	}
}

// A pending crossing whose series query the store refuses for good (here a
// page recorded with a 300 KB path, as an older version could) is still
// sent, without the series, and counted as its rule's error; it does not fail
// every later sweep.
func TestSeriesRefusedStillSends(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSeriesRefusedStillSends)
}

func testSeriesRefusedStillSends(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	store := alerts.NewStore(e.store, e.db)
	now := time.Now()
	path := longPath(0, 300_000)
	c := alerts.Crossing{Rule: "pricing-hot", Subject: "www.example.com" + path, WindowStart: now.Truncate(time.Hour).UTC(), Threshold: 100}
	if err := store.Write(context.Background(), []alerts.Row{{Crossing: c, Site: "www.example.com", Path: path, Count: 101,
		State: alerts.StateDetected, Version: 1, MsgID: c.MessageID("example.com"), Updated: now}}); err != nil {
		t.Fatal(err)
	}
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	var got []*alerts.Message
	sender := alerts.SenderFunc(func(_ context.Context, m *alerts.Message) (bool, error) { got = append(got, m); return false, nil })
	m := alerts.NewMetrics(prometheus.NewRegistry())
	sw := alerts.NewSweeper(store, e.rules(rulesYAML), claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", Metrics: m})
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if res.Sent != 1 || len(got) != 1 || strings.Contains(got[0].Text, "Hits per") {
		t.Fatalf("sent %d, %d messages; want 1, without a series", res.Sent, len(got))
	}
	if n := testutil.ToFloat64(m.RuleErrors.WithLabelValues("pricing-hot")); n != 1 {
		t.Errorf("rule errors of pricing-hot = %v, want 1", n)
	}
}
