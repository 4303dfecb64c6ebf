package alerts_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Spike and drop rules (issue 19) on both stores with a real SMTP server,
// in the clock env of below_integration_test.go.

// traffic is hits of a site to insert in one batch.
type traffic struct {
	path string
	n    int
	at   time.Time
}

// bulk inserts the hits as the collector would, in one batch.
func (ce *clockEnv) bulk(site string, ts []traffic) {
	ce.t.Helper()
	total := 0
	for _, x := range ts {
		total += x.n
	}
	b := sink.NewBatch(total)
	b.Reset(site, 7)
	for _, x := range ts {
		h := parser.Hit{Unix: x.at.Unix(), Method: []byte("GET"), Path: []byte(x.path), Status: 200, UserAgent: []byte("Mozilla/5.0"), RemoteAddr: []byte("10.0.0.1")}
		for range x.n {
			b.Add(&h, ce.next, ce.next+100)
			ce.next += 100
		}
	}
	if err := ce.store.Insert(context.Background(), b); err != nil {
		ce.t.Fatal(err)
	}
}

// hourly is n(at) hits at minute 5 of every hour in [from, to).
func hourly(path string, from, to time.Time, n func(time.Time) int) []traffic {
	var out []traffic
	for at := from; at.Before(to); at = at.Add(time.Hour) {
		if k := n(at); k > 0 {
			out = append(out, traffic{path, k, at.Add(5 * time.Minute)})
		}
	}
	return out
}

const spikeYAML = `
sources: [{path: /x, site: shop}, {path: /y, site: fresh}]
rules:
  - name: checkout-spike
    match: {site: shop, path: /checkout}
    spike: {factor: 3, min: 100}
    window: 1h
    no_data_after: 0
    to: [checkout@example.com]
  - name: checkout-drop
    match: {site: shop, path: /checkout}
    drop: {factor: 4, min_baseline: 40}
    window: 1h
    baseline: {periods: 6, every: 1h}
    no_data_after: 0
    to: [checkout@example.com]
  - name: pages-spike
    match: {site: shop, path: "/p/*"}
    spike: {factor: 3, min: 100}
    window: 1h
    no_data_after: 0
    to: [pages@example.com]
  - name: site-spike
    match: {site: shop}
    spike: {factor: 3, min: 100}
    window: 1h
    no_data_after: 0
    to: [site@example.com]
  - name: site-drop
    match: {site: shop}
    drop: {factor: 4, min_baseline: 200}
    window: 1h
    no_data_after: 0
    to: [site@example.com]
  - name: fresh-spike
    match: {site: fresh}
    spike: {factor: 3, min: 100}
    window: 1h
    no_data_after: 0
    to: [fresh@example.com]
`

// Spike and drop rules fire exactly once per complete window that is far
// from its baseline, never for one that is not: an exact page against the
// same hour on the previous 7 days and against the previous 6 hours, the
// site's total, each page of a glob; a rule whose baseline would be
// anything but a drop (a site under min_baseline) never fires; a site
// collected for two days has fewer than min_periods (4) known days and is
// not judged, spike or not. Sweeping again sends nothing new.
func TestSpikeAndDropOncePerWindow(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSpikeAndDropOncePerWindow)
}

func testSpikeAndDropOncePerWindow(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, spikeYAML, base, alerts.Options{})
	from, to := base.Add(-9*day), base.Add(9*time.Hour)
	var ts []traffic
	ts = append(ts, hourly("/checkout", from, to, func(at time.Time) int {
		switch at {
		case base.Add(3 * time.Hour):
			return 400 // a spike against 50
		case base.Add(4 * time.Hour):
			return 5 // a drop against 50
		}
		return 50
	})...)
	ts = append(ts, hourly("/p/a", from, to, func(time.Time) int { return 10 })...)
	ts = append(ts, hourly("/p/b", from, to, func(at time.Time) int {
		if at == base.Add(5*time.Hour) {
			return 200 // a spike against 10
		}
		return 10
	})...)
	ce.bulk("shop", ts)
	// fresh: collected since two days ago, with a burst now.
	ce.bulk("fresh", hourly("/", base.Add(-2*day), to, func(at time.Time) int {
		if at == base.Add(3*time.Hour) {
			return 500
		}
		return 10
	}))

	ce.now = base.Add(6*time.Hour + 11*time.Minute)
	caughtUp := func() {
		ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
		ce.record("fresh", "c1", 2, "/var/log/nginx/fresh.log", ce.now.Add(-time.Minute))
	}
	caughtUp()
	res := ce.sweep()
	want := []string{
		"drop checkout-drop shop/checkout 11-20 04:00 sent",
		"spike checkout-spike shop/checkout 11-20 03:00 sent",
		"spike pages-spike shop/p/b 11-20 05:00 sent",
		"spike site-spike shop 11-20 03:00 sent", // 400+20 against 70
		"spike site-spike shop 11-20 05:00 sent", // 50+10+200 against 70
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after the first sweep:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Sent != len(want) {
		t.Errorf("sent %d, want %d", res.Sent, len(want))
	}
	var fresh string
	for _, n := range res.Notes {
		if strings.HasPrefix(n, "rule fresh-spike:") {
			fresh = n
		}
	}
	if !strings.Contains(fresh, "not judged: fewer than 4 of the 7 baseline windows after the site's first hit") {
		t.Errorf("the dry-run note of the fresh site does not say why it is not judged: %q", fresh)
	}
	// Again, and later: nothing new fires.
	ce.sweep()
	ce.now = base.Add(8*time.Hour + 12*time.Minute)
	caughtUp()
	if res := ce.sweep(); len(res.Detected) != 0 || res.Sent != 0 {
		t.Fatalf("a sweep with no new spike recorded %d, sent %d: %v", len(res.Detected), res.Sent, ce.crossings())
	}
	if mails := ce.mails(); len(mails) != len(want) {
		t.Fatalf("%d emails for %d crossings: %v", len(mails), len(want), mails)
	}
	body := ce.body("spike on shop/checkout: 400 hits in 1h, baseline 50")
	for _, s := range []string{
		"shop/checkout had 400 hits from 2026-11-20 03:00 to 2026-11-20 04:00 UTC (1h): at least 3x its baseline of 50 hits (and at least 100), by rule checkout-spike.",
		"The baseline is the median of the same 1h window on the previous 7 days, 7 of them counted:",
		"  2026-11-19 03:00 UTC  50\n", "  2026-11-13 03:00 UTC  50\n",
		"the count is complete",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the spike email lacks %q:\n%s", s, body)
		}
	}
	body = ce.body("drop on shop/checkout: 5 hits in 1h, baseline 50")
	for _, s := range []string{
		"at most 1/4 of its baseline of 50 hits (a baseline of at least 40), by rule checkout-drop.",
		"The baseline is the median of the previous 6 1h windows, 6 of them counted:",
		"  2026-11-20 03:00 UTC  400\n", "  2026-11-19 22:00 UTC  50\n",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the drop email lacks %q:\n%s", s, body)
		}
	}
}

const spikeOutageYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-drop
    match: {site: shop, path: /checkout}
    drop: {factor: 4, min_baseline: 40}
    window: 1h
    no_data_after: 30m
    to: [ops@example.com]
  - name: checkout-spike
    match: {site: shop, path: /checkout}
    spike: {factor: 3, min: 10}
    window: 1h
    no_data_after: 0
    to: [ops@example.com]
`

// A collector stopped for more than an hour: no drop for the hours it
// missed (the rule is held, its gauge 1) and exactly one no-data notice;
// once it is back and has caught up, the hours it filled are judged, and
// only the one really down fires, saying it was held back. The hour in
// which it comes back and ships two hours of lines is no spike either.
func TestSpikeDropCollectorStoppedForAnHour(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSpikeDropCollectorStoppedForAnHour)
}

func testSpikeDropCollectorStoppedForAnHour(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, spikeOutageYAML, base, alerts.Options{})
	// The past week: 60 hits an hour, 10 every 10 minutes.
	ce.bulk("shop", hourly("/checkout", base.Add(-8*day), base, func(time.Time) int { return 60 }))
	// Today the same, but for 03:00-04:00 (really down: 12 hits).
	today := func(from, to time.Time) {
		var ts []traffic
		for at := from.Truncate(10 * time.Minute); at.Before(to); at = at.Add(10 * time.Minute) {
			if at.Before(from) {
				continue
			}
			n := 10
			if at.Hour() == 3 {
				n = 2
			}
			ts = append(ts, traffic{"/checkout", n, at})
		}
		ce.bulk("shop", ts)
	}
	const log = "/var/log/nginx/access.log"
	stop := base.Add(2*time.Hour + 3*time.Minute)
	today(base, stop)
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
	// Stopped from 02:03 to 04:35: its records stay as they were.
	back := base.Add(4*time.Hour + 35*time.Minute)
	for ce.now = stop.Add(5 * time.Minute); ce.now.Before(back); ce.now = ce.now.Add(5 * time.Minute) {
		ce.sweep()
	}
	ce.now = back
	if got := ce.crossings(); len(got) != 1 || !strings.HasPrefix(got[0], "no_data checkout-drop shop 11-20 02:02") {
		t.Fatalf("crossings during the outage: %v, want only the no-data notice since 02:02", got)
	}
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("checkout-drop")); v != 1 {
		t.Errorf("rules_held{checkout-drop} = %v during the outage, want 1", v)
	}
	// Back: it ships what the file holds from 02:03 on, and catches up.
	today(stop, back)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	ce.now = base.Add(5*time.Hour + 12*time.Minute)
	today(back, ce.now)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	want := []string{
		"drop checkout-drop shop/checkout 11-20 03:00 sent",
		"no_data checkout-drop shop 11-20 02:02 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after the collector caught up:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mails := ce.mails(); len(mails) != 2 {
		t.Fatalf("emails: %v, want the notice and the one hour really down", mails)
	}
	body := ce.body("drop on shop/checkout: 12 hits in 1h, baseline 60")
	if !strings.Contains(body, "Held back from 2026-11-20 04:10 UTC until 2026-11-20 04:35 UTC") {
		t.Errorf("the window found late does not say it was held back:\n%s", body)
	}
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("checkout-drop")); v != 0 {
		t.Errorf("rules_held{checkout-drop} = %v once caught up, want 0", v)
	}
}

// Lines the web server writes late but within sweep.lateness make no false
// drop: the window waits for them. With a lateness of 1m the same sweep
// would have fired.
func TestSpikeDropLateLogsInsideLateness(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSpikeDropLateLogsInsideLateness)
}

func testSpikeDropLateLogsInsideLateness(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, spikeOutageYAML, base, alerts.Options{Lateness: 10 * time.Minute})
	ce.bulk("shop", hourly("/checkout", base.Add(-8*day), base, func(time.Time) int { return 60 }))
	ce.bulk("shop", []traffic{{"/checkout", 10, base.Add(10 * time.Minute)}})
	// 01:03: the collector has read all the file holds; nginx still
	// buffers 50 hits of 00:55.
	ce.now = base.Add(time.Hour + 3*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	strict := alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(spikeOutageYAML), nil, nil,
		alerts.Options{DryRun: true, Lateness: time.Minute, Clock: func(context.Context) (time.Time, error) { return ce.now, nil }})
	res, err := strict.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(res.Detected, "checkout-drop"); n != 1 {
		t.Fatalf("with lateness 1m the window would fire %d times, want 1 (the test would show nothing)", n)
	}
	if got := strict.Describe(res.Detected[0]); !strings.Contains(got, "had 10 hits in the complete window 2026-11-20 00:00 UTC to 2026-11-20 01:00 UTC, at most 1/4 of its baseline 60 (the median of the same 1h window on the previous 7 days: 60, 60, 60, 60, 60, 60, 60)") {
		t.Errorf("dry run: %s", got)
	}
	ce.sweep()
	ce.bulk("shop", []traffic{{"/checkout", 50, base.Add(55 * time.Minute)}})
	ce.now = base.Add(time.Hour + 12*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	if got := ce.crossings(); len(got) != 0 {
		t.Errorf("a false drop or spike: %v", got)
	}
}

// Days when clocks change in Europe/Berlin. Every hour of the clock has its
// own traffic (10 hits at even hours, 100 at odd ones), so a baseline
// shifted by an hour ("yesterday" as 24 hours ago) would fire spikes and
// drops all over the day after a change. Only the two injected fire, once
// each, whatever the number of sweeps: a drop in the repeated 02:00 of the
// 25-hour day (its second, CET), or in the 03:00 after the skipped hour of
// the 23-hour day, and a spike at 14:00; the day after, whose baseline
// holds the odd day, fires nothing.
func TestSpikeDropOnDaylightSavingDays(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSpikeDropOnDaylightSavingDays)
}

func testSpikeDropOnDaylightSavingDays(t *testing.T, d *testenv.Database) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `
sources: [{path: /x, site: shop}]
rules:
  - {name: up, match: {site: shop, path: /page}, spike: {factor: 3, min: 20}, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [ops@example.com]}
  - {name: down, match: {site: shop, path: /page}, drop: {factor: 4, min_baseline: 10}, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [ops@example.com]}
`
	for _, c := range []struct {
		day      string
		hours    int
		drop     string // the UTC start of the window emptied
		dropText string
	}{
		{"2026-10-25", 25, "2026-10-25T01:00:00Z", "had 0 hits from 2026-10-25 02:00 to 2026-10-25 03:00 CET (1h)"},
		{"2026-03-29", 23, "2026-03-29T01:00:00Z", "had 0 hits from 2026-03-29 03:00 to 2026-03-29 04:00 CEST (1h)"},
	} {
		t.Run(c.day, func(t *testing.T) {
			day0, _ := time.ParseInLocation("2006-01-02", c.day, berlin)
			next := day0.AddDate(0, 0, 1)
			if got := int(next.Sub(day0) / time.Hour); got != c.hours {
				t.Fatalf("%s has %d hours here, want %d", c.day, got, c.hours)
			}
			db := d.Fresh(t)
			ce := newClockEnv(t, db, yaml, day0, alerts.Options{})
			drop, _ := time.Parse(time.RFC3339, c.drop)
			spike := time.Date(day0.Year(), day0.Month(), day0.Day(), 14, 0, 0, 0, berlin)
			ce.bulk("shop", hourly("/page", day0.AddDate(0, 0, -9), next.AddDate(0, 0, 1).Add(2*time.Hour), func(at time.Time) int {
				switch {
				case at.Equal(drop):
					return 0
				case at.Equal(spike):
					return 50
				case at.In(berlin).Hour()%2 == 1:
					return 100
				}
				return 10
			}))
			for at := day0.Add(time.Hour + 11*time.Minute); !at.After(next.AddDate(0, 0, 1).Add(11 * time.Minute)); at = at.Add(time.Hour) {
				ce.now = at
				ce.record("shop", "c1", 1, "/var/log/nginx/access.log", at.Add(-time.Minute))
				ce.sweep()
			}
			ce.sweep()
			want := []string{
				"drop down shop/page " + drop.Format("01-02 15:04") + " sent",
				"spike up shop/page " + spike.UTC().Format("01-02 15:04") + " sent",
			}
			sort.Strings(want)
			if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("crossings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if mails := ce.mails(); len(mails) != 2 {
				t.Fatalf("emails: %v, want 2", mails)
			}
			body := ce.body("drop on shop/page: 0 hits in 1h")
			if !strings.Contains(body, c.dropText) || !strings.Contains(body, "7 of them counted") {
				t.Errorf("the drop email:\n%s", body)
			}
		})
	}
}

// The day after clocks go forward, the 02:00 window's baseline has no
// 02:00 on the 23-hour day: six windows counted, and the email says which
// did not exist.
func TestSpikeAfterTheSkippedHour(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSpikeAfterTheSkippedHour)
}

func testSpikeAfterTheSkippedHour(t *testing.T, d *testenv.Database) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `
sources: [{path: /x, site: shop}]
rules:
  - {name: up, match: {site: shop, path: /page}, spike: {factor: 3, min: 20}, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [ops@example.com]}
`
	ce := newClockEnv(t, d, yaml, time.Date(2026, 3, 30, 0, 0, 0, 0, berlin), alerts.Options{})
	at := time.Date(2026, 3, 30, 2, 0, 0, 0, berlin)
	ce.bulk("shop", hourly("/page", at.AddDate(0, 0, -9), at.Add(2*time.Hour), func(t time.Time) int {
		if t.Equal(at) {
			return 90
		}
		return 10
	}))
	ce.now = at.Add(time.Hour + 11*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	if got := ce.crossings(); len(got) != 1 || got[0] != "spike up shop/page 03-30 00:00 sent" {
		t.Fatalf("crossings: %v", got)
	}
	body := ce.body("spike on shop/page: 90 hits in 1h, baseline 10")
	for _, s := range []string{"6 of them counted", "2026-03-29 02:00 (no such time that day: clocks went forward)", "2026-03-28 02:00 CET  10"} {
		if !strings.Contains(body, s) {
			t.Errorf("the email lacks %q:\n%s", s, body)
		}
	}
}
