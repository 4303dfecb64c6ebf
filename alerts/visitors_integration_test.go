package alerts_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Rules with count: visitors (issue 19), on both stores with a real SMTP
// server: a visitor is a distinct (client address, user agent) pair,
// counted from the hits_visitors_1m aggregate states merged over the
// window.

// visits inserts, as the collector would, n hits at time at on a page from
// each visitor, written "client|user agent".
func (e *env) visits(site, path string, at time.Time, n int, visitors ...string) {
	e.t.Helper()
	b := sink.NewBatch(n * len(visitors))
	b.Reset(site, 7)
	for _, v := range visitors {
		client, ua, _ := strings.Cut(v, "|")
		h := parser.Hit{Unix: at.Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200, UserAgent: []byte(ua), RemoteAddr: []byte(client)}
		for range n {
			b.Add(&h, e.next, e.next+100)
			e.next += 100
		}
	}
	if err := e.store.Insert(context.Background(), b); err != nil {
		e.t.Fatal(err)
	}
}

// people is n visitors, each its own address with the same browser.
func people(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("198.51.100.%d|Mozilla/5.0 (%s)", i+1, prefix)
	}
	return out
}

const visitorsThresholdYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: pricing-visitors
    match: {site: shop, path: /pricing}
    count: visitors
    threshold: 5
    window: 1h
    timezone: Europe/Berlin
    to: [growth@example.com]
  - name: pricing-hits
    match: {site: shop, path: /pricing}
    threshold: 50
    window: 1h
    timezone: Europe/Berlin
    to: [ops@example.com]
`

// A threshold on visitors fires once per window when the window's distinct
// (client, user agent) pairs reach it, whatever the number of hits: many
// hits of few visitors do not fire it, a visitor seen in several minutes
// counts once, the same address with another browser is another visitor,
// and a visitor logged late into an earlier window makes that window cross
// at the next sweep. The hits rule on the same page fires on hits only.
func TestVisitorsThresholdOncePerWindow(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsThresholdOncePerWindow)
}

func testVisitorsThresholdOncePerWindow(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	hour := time.Now().Truncate(time.Hour)
	h3, h2, h1 := hour.Add(-3*time.Hour), hour.Add(-2*time.Hour), hour.Add(-time.Hour)
	// 3 visitors, 60 hits: the hits rule crosses, not the visitors one.
	e.visits("shop", "/pricing", h3.Add(5*time.Minute), 20, people("a", 3)...)
	// 6 visitors in two minutes each (12 hits): 4 addresses, one of them
	// with two browsers, and one browser from two addresses.
	six := []string{"198.51.100.1|Firefox", "198.51.100.1|Chrome", "198.51.100.2|Firefox", "198.51.100.3|Firefox", "198.51.100.4|Safari", "2001:db8::1|Safari"}
	e.visits("shop", "/pricing", h2.Add(5*time.Minute), 1, six...)
	e.visits("shop", "/pricing", h2.Add(40*time.Minute), 1, six...)
	// 4 visitors, 32 hits over four minutes: neither.
	four := people("c", 4)
	for i := range 4 {
		e.visits("shop", "/pricing", h1.Add(time.Duration(10*i)*time.Minute), 2, four...)
	}

	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), e.rules(visitorsThresholdYAML), claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", DigestAfter: 1000})
	got := func(res alerts.Result) []string {
		var out []string
		for _, r := range res.Detected {
			out = append(out, fmt.Sprintf("%s %s %d", r.Rule, r.WindowStart.Sub(hour), r.Count))
		}
		sort.Strings(out)
		return out
	}
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pricing-hits -3h0m0s 60", "pricing-visitors -2h0m0s 6"}
	if g := got(res); strings.Join(g, "; ") != strings.Join(want, "; ") || res.Sent != 2 {
		t.Fatalf("first sweep detected %v, sent %d; want %v, 2 sent", g, res.Sent, want)
	}
	for range 2 {
		if res, err := sw.Sweep(context.Background()); err != nil || len(res.Detected) != 0 || res.Sent != 0 {
			t.Fatalf("a repeated sweep detected %d, sent %d (%v)", len(res.Detected), res.Sent, err)
		}
	}
	// Late: a fifth visitor in h1, and a visitor already counted in h2.
	e.visits("shop", "/pricing", h1.Add(50*time.Minute), 1, "203.0.113.9|Mozilla/5.0")
	e.visits("shop", "/pricing", h2.Add(59*time.Minute), 3, six[0])
	res, err = sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g := got(res); strings.Join(g, "; ") != "pricing-visitors -1h0m0s 5" || res.Sent != 1 {
		t.Fatalf("the sweep after late visitors detected %v, sent %d; want the h1 window with 5 visitors", g, res.Sent)
	}
	msgs := smtp.Messages(t)
	if len(msgs) != 3 {
		t.Fatalf("mailbox holds %d messages, want 3", len(msgs))
	}
	ce := &clockEnv{env: e, smtp: smtp}
	body := ce.body("shop/pricing passed 5 visitors in 1h")
	for _, s := range []string{"reached 6 visitors", "distinct client address and user agent", "Visitors per 5m0s"} {
		if !strings.Contains(body, s) {
			t.Errorf("the email lacks %q:\n%s", s, body)
		}
	}
	if st := e.states(); st["sent"] != 3 || len(st) != 1 {
		t.Errorf("state table %v, want 3 sent", st)
	}
}

const visitorsBelowYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-visitors
    match: {site: shop, path: /checkout}
    count: visitors
    below: 3
    window: 1h
    no_data_after: 30m
    to: [checkout@example.com]
  - name: checkout-hits
    match: {site: shop, path: /checkout}
    below: 20
    window: 1h
    no_data_after: 0
    to: [checkout@example.com]
  - name: site-visitors
    match: {site: shop}
    count: visitors
    below: 4
    window: 1h
    no_data_after: 0
    to: [site@example.com]
`

// A below rule on visitors fires exactly once per complete window with
// fewer distinct visitors than its floor, however many hits they made;
// the site's total counts a visitor of two pages once. A collector
// stopped for more than an hour makes no visitors alert for the hours it
// missed (held, a no-data notice instead); once it has caught up, the
// window really below fires, saying it was held back.
func TestVisitorsBelowAndCollectorStopped(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsBelowAndCollectorStopped)
}

func testVisitorsBelowAndCollectorStopped(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, visitorsBelowYAML, base, alerts.Options{})
	// Every 10 minutes: 5 visitors on /checkout, 2 hits each, and the
	// same 5 on /cart (the site has 5 visitors an hour); from 03:00 to
	// 04:00, 2 visitors with 10 hits each (20 hits: not below 20).
	traffic := func(from, to time.Time) {
		for at := from; at.Before(to); at = at.Add(10 * time.Minute) {
			if at.Hour() == 3 {
				ce.visits("shop", "/checkout", at, 10, people("x", 2)[:1]...)
				ce.visits("shop", "/checkout", at.Add(time.Minute), 10, people("x", 2)[1:]...)
				continue
			}
			ce.visits("shop", "/checkout", at, 2, people("x", 5)...)
			ce.visits("shop", "/cart", at, 1, people("x", 5)...)
		}
	}
	const log = "/var/log/nginx/access.log"
	stop := base.Add(2*time.Hour + 3*time.Minute)
	traffic(base, stop)
	for ce.now = base.Add(70 * time.Minute); ce.now.Before(stop); ce.now = ce.now.Add(5 * time.Minute) {
		ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
		ce.sweep()
	}
	ce.now = stop
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	if got := ce.crossings(); len(got) != 0 {
		t.Fatalf("crossings while all was well: %v", got)
	}
	// Stopped at 02:03 until 04:35: no alert but the notice.
	back := base.Add(4*time.Hour + 35*time.Minute)
	for ce.now = stop.Add(5 * time.Minute); ce.now.Before(back); ce.now = ce.now.Add(5 * time.Minute) {
		ce.sweep()
	}
	ce.now = back
	if got := ce.crossings(); len(got) != 1 || !strings.HasPrefix(got[0], "no_data checkout-visitors shop ") {
		t.Fatalf("crossings during the outage: %v, want only the no-data notice", got)
	}
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("checkout-visitors")); v != 1 {
		t.Errorf("rules_held{checkout-visitors} = %v during the outage, want 1", v)
	}
	traffic(stop, back)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	ce.now = base.Add(5*time.Hour + 12*time.Minute)
	traffic(back, ce.now)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	ce.sweep()
	want := []string{
		"below checkout-visitors shop/checkout 11-20 03:00 sent",
		"below site-visitors shop 11-20 03:00 sent",
		"no_data checkout-visitors shop 11-20 02:02 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after the collector caught up:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mails := ce.mails(); len(mails) != len(want) {
		t.Fatalf("emails: %v, want %d", mails, len(want))
	}
	body := ce.body("shop/checkout: 2 visitors in 1h, below 3")
	for _, s := range []string{"shop/checkout had 2 visitors from 2026-11-20 03:00 to 2026-11-20 04:00 UTC (1h), fewer than the 3 of rule checkout-visitors.",
		"Held back from 2026-11-20 04:10 UTC until 2026-11-20 04:35 UTC", "Visitors per 5m0s"} {
		if !strings.Contains(body, s) {
			t.Errorf("the email lacks %q:\n%s", s, body)
		}
	}
}

// Visitors logged late but within sweep.lateness make no false below: the
// window waits for them. With a lateness of 1m the same sweep would fire.
func TestVisitorsLateLogsInsideLateness(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsLateLogsInsideLateness)
}

func testVisitorsLateLogsInsideLateness(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, visitorsBelowYAML, base, alerts.Options{Lateness: 10 * time.Minute})
	ce.visits("shop", "/other", base.Add(-time.Minute), 1, "192.0.2.1|Mozilla/5.0")
	ce.visits("shop", "/checkout", base.Add(10*time.Minute), 20, people("x", 2)...) // 40 hits, 2 visitors
	ce.visits("shop", "/cart", base.Add(10*time.Minute), 1, people("y", 4)...)
	ce.now = base.Add(time.Hour + 3*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	strict := alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(visitorsBelowYAML), nil, nil,
		alerts.Options{DryRun: true, Lateness: time.Minute, Clock: func(context.Context) (time.Time, error) { return ce.now, nil }})
	res, err := strict.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(res.Detected, "checkout-visitors"); n != 1 {
		t.Fatalf("with lateness 1m the window would fire %d times, want 1 (the test would show nothing)", n)
	}
	ce.sweep()
	// The web server's buffer: a third visitor of 00:55, flushed at 01:05.
	ce.visits("shop", "/checkout", base.Add(55*time.Minute), 1, "203.0.113.50|Mozilla/5.0")
	ce.now = base.Add(time.Hour + 12*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	for _, c := range ce.crossings() {
		if strings.Contains(c, "checkout-visitors") {
			t.Errorf("a false below: %s", c)
		}
	}
}

// On the days clocks change in Europe/Berlin, windows are laid by elapsed
// time: the repeated 02:00 of 2026-10-25 is two windows, each with its own
// visitors. Two visitors come every hour, but only one in the second
// 02:00 (and in 03:00 on 2026-03-29, the day's third window): exactly that
// window fires, once, whatever the number of sweeps.
func TestVisitorsOnDaylightSavingDays(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsOnDaylightSavingDays)
}

func testVisitorsOnDaylightSavingDays(t *testing.T, d *testenv.Database) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `
sources: [{path: /x, site: shop}]
rules:
  - {name: dst, match: {site: shop, path: /v}, count: visitors, below: 2, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [ops@example.com]}
`
	for _, c := range []struct {
		day  string
		lone time.Duration // the window with one visitor, after the day's start
		want string
	}{
		{"2026-10-25", 3 * time.Hour, "below dst shop/v 10-25 01:00 sent"}, // 02:00 CET, the second 02:00
		{"2026-03-29", 2 * time.Hour, "below dst shop/v 03-29 01:00 sent"}, // 03:00 CEST
	} {
		t.Run(c.day, func(t *testing.T) {
			day, _ := time.ParseInLocation("2006-01-02", c.day, berlin)
			next := day.AddDate(0, 0, 1)
			db := d.Fresh(t)
			ce := newClockEnv(t, db, yaml, day, alerts.Options{})
			for at := day; at.Before(next); at = at.Add(time.Hour) {
				// The same two visitors each hour: each window counts them.
				ce.visits("shop", "/v", at.Add(10*time.Minute), 3, "198.51.100.1|Mozilla/5.0")
				if at.Sub(day) != c.lone {
					ce.visits("shop", "/v", at.Add(50*time.Minute), 3, "198.51.100.2|Mozilla/5.0")
				}
			}
			for at := day.Add(time.Hour + 11*time.Minute); !at.After(next.Add(11 * time.Minute)); at = at.Add(time.Hour) {
				ce.now = at
				ce.record("shop", "c1", 1, "/var/log/nginx/access.log", at.Add(-time.Minute))
				ce.sweep()
				ce.sweep()
			}
			if got := ce.crossings(); len(got) != 1 || got[0] != c.want {
				t.Fatalf("crossings %v, want [%s]", got, c.want)
			}
			if mails := ce.mails(); len(mails) != 1 {
				t.Fatalf("emails %v, want 1", mails)
			}
		})
	}
}

// A source with anonymize_clients stores no full client address in hits,
// while its visitors are counted exactly from the whole ones: the real
// collector reads a log of eight visitors whose addresses fall into four
// truncated ones, and the rollup counts eight.
func TestAnonymizedClientsCountedExactly(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testAnonymizedClientsCountedExactly)
}

func testAnonymizedClientsCountedExactly(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	at := time.Now().Truncate(time.Minute).Add(-time.Hour).UTC()
	clients := []string{
		"203.0.113.7", "203.0.113.99", // one /24
		"2001:db8:1:2::5", "2001:db8:1:3::5", // one /48
		"198.51.100.4", "198.51.100.250",
		"2001:db8:2::1", "2001:db8:2:ffff::1",
	}
	var lines []string
	for i, c := range clients {
		for j := range 3 { // each visitor three times, in three minutes
			lines = append(lines, fmt.Sprintf("%s - - [%s] \"GET /p HTTP/1.1\" 200 153 \"-\" \"Mozilla/5.0\"\n",
				c, at.Add(time.Duration(i+j)*time.Minute).Format("02/Jan/2006:15:04:05 -0700")))
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "access.log"), []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := collector.New(e.store, collector.Options{
		Sources: []collector.Source{{Glob: filepath.Join(dir, "access.log"), Site: "shop", Format: "combined", MaxLine: 1 << 20,
			Clients: sink.Clients{Key: sink.VisitorKey("a secret of the operator's"), Anonymize: true}}},
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
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := testenv.Count(context.Background(), e.store, "SELECT count() FROM "+e.db+".hits")
		if err != nil {
			t.Fatal(err)
		}
		if n == uint64(len(lines)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector stored %d of %d lines", n, len(lines))
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var stored []string
	err = e.store.Select(context.Background(), "SELECT DISTINCT client FROM "+e.db+".hits ORDER BY client", nil, func(scan func(...any) error) error {
		var s string
		if err := scan(&s); err != nil {
			return err
		}
		stored = append(stored, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "198.51.100.0 2001:db8:1:: 2001:db8:2:: 203.0.113.0"; strings.Join(stored, " ") != want {
		t.Errorf("stored clients %v, want %s", stored, want)
	}
	for _, c := range clients {
		n, err := testenv.Count(context.Background(), e.store, fmt.Sprintf(
			"SELECT count() FROM %s.hits WHERE position(concat(client, '|', host, '|', path, '|', query, '|', referer, '|', user_agent, '|', remote_user), '%s') > 0", e.db, c))
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows of hits hold the full address %s", n, c)
		}
	}
	for q, want := range map[string]uint64{
		"SELECT uniqExactMerge(visitors) FROM " + e.db + ".hits_visitors_1m WHERE site = 'shop' AND path = '/p'": uint64(len(clients)),
		"SELECT uniqExact(client, user_agent) FROM " + e.db + ".hits":                                            4,
	} {
		if n, err := testenv.Count(context.Background(), e.store, q); err != nil || n != want {
			t.Errorf("%s = %d (%v), want %d", q, n, err, want)
		}
	}
}

const visitorsSpikeYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: launch-visitors-spike
    match: {site: shop, path: /launch}
    count: visitors
    spike: {factor: 3, min: 30}
    window: 1h
    no_data_after: 0
    to: [growth@example.com]
  - name: launch-hits-spike
    match: {site: shop, path: /launch}
    spike: {factor: 3, min: 100}
    window: 1h
    no_data_after: 0
    to: [ops@example.com]
  - name: launch-visitors-drop
    match: {site: shop, path: /launch}
    count: visitors
    drop: {factor: 4, min_baseline: 8}
    window: 1h
    no_data_after: 0
    to: [growth@example.com]
`

// Spike and drop rules counting visitors compare a window's distinct
// visitors with the median of the same hour's visitors on the previous 7
// days: 40 visitors making 80 hits against 10 making 100 is a spike of
// visitors, not of hits; 2 visitors making 100 hits is a drop of visitors.
// Each fires once.
func TestVisitorsSpikeAndDrop(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsSpikeAndDrop)
}

func testVisitorsSpikeAndDrop(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, visitorsSpikeYAML, base, alerts.Options{})
	for at := base.Add(-8 * day); at.Before(base.Add(6 * time.Hour)); at = at.Add(time.Hour) {
		switch at {
		case base.Add(3 * time.Hour):
			ce.visits("shop", "/launch", at.Add(10*time.Minute), 2, people("s", 40)...)
		case base.Add(4 * time.Hour):
			ce.visits("shop", "/launch", at.Add(10*time.Minute), 50, people("d", 2)...)
		default:
			ce.visits("shop", "/launch", at.Add(10*time.Minute), 10, people("b", 10)...)
		}
	}
	ce.now = base.Add(6*time.Hour + 11*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	ce.sweep()
	want := []string{
		"drop launch-visitors-drop shop/launch 11-20 04:00 sent",
		"spike launch-visitors-spike shop/launch 11-20 03:00 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mails := ce.mails(); len(mails) != len(want) {
		t.Fatalf("emails %v, want %d", mails, len(want))
	}
	body := ce.body("spike on shop/launch: 40 visitors in 1h, baseline 10")
	if !strings.Contains(body, "at least 3x its baseline of 10 visitors") {
		t.Errorf("the email:\n%s", body)
	}
}

// A store migrated to visitors keeps its older hits in hits_1m and hits_1d
// but not in hits_visitors_1m, which begins at the upgrade (here: emptied
// after six hours of traffic, as if created then). A visitors rule must
// not read those hours as 0 visitors: they are before its data begins, as
// windows before a site's first hit are. Before the fix: 12 false below
// crossings (6 hours, a page rule and a site rule).
func TestVisitorsRollupBeginsAtUpgrade(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testVisitorsRollupBeginsAtUpgrade)
}

func testVisitorsRollupBeginsAtUpgrade(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, visitorsBelowYAML, base, alerts.Options{})
	traffic := func(from, to time.Time) {
		for at := from; at.Before(to); at = at.Add(10 * time.Minute) {
			ce.visits("shop", "/checkout", at, 2, people("x", 5)...)
			ce.visits("shop", "/cart", at, 1, people("x", 5)...)
		}
	}
	upgrade := base.Add(6 * time.Hour)
	traffic(base, upgrade)
	if es, ok := ce.store.(*embedded.Store); ok {
		if err := es.Engine().Exec(context.Background(), "TRUNCATE TABLE "+ce.db+".hits_visitors_1m"); err != nil {
			t.Fatal(err)
		}
	} else {
		d.Server.Exec(t, "TRUNCATE TABLE "+ce.db+".hits_visitors_1m")
	}
	ce.now = base.Add(9*time.Hour + 12*time.Minute)
	traffic(upgrade, ce.now)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	ce.sweep()
	if got := ce.crossings(); len(got) != 0 {
		t.Fatalf("crossings after the upgrade: %d, e.g. %v; want none (the hours before it have no visitor data)", len(got), got[:min(len(got), 3)])
	}
	// The rollup has its data from the upgrade on: a window after it is
	// judged (an hour with 2 visitors is below 3).
	quiet := ce.now.Truncate(time.Hour).Add(time.Hour)
	ce.visits("shop", "/checkout", quiet.Add(5*time.Minute), 10, people("y", 2)...) // 20 hits: not below the hits rule's 20
	ce.visits("shop", "/cart", quiet.Add(5*time.Minute), 1, people("x", 5)...)
	ce.now = quiet.Add(time.Hour + 12*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	want := []string{"below checkout-visitors shop/checkout 11-20 10:00 sent"}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
