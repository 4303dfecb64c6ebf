package alerts_test

import (
	"context"
	"fmt"
	"mime"
	"mime/multipart"
	"net/mail"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// Below and no_traffic rules and the no-data notice (issue 19), on both
// stores with a real SMTP server. Time is the sweeper's clock
// (Options.Clock), moved by each test; the collectors' records in
// source_owners are written as a collector writes them, at the times the
// test says (internal/collector's owners tests check that a real collector
// writes them so).

// clockEnv is an env with a moving clock, a collector's records and a
// sweeper on real SMTP.
type clockEnv struct {
	*env
	now   time.Time
	smtp  *testenv.SMTPServer
	sw    *alerts.Sweeper
	met   *alerts.Metrics
	since time.Time // when the collector's claim began
}

func newClockEnv(t *testing.T, d *testenv.Database, rules string, start time.Time, o alerts.Options) *clockEnv {
	t.Helper()
	ce := &clockEnv{env: newEnv(t, d), now: start, smtp: testenv.SMTP(t), since: start}
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { claims.Close() })
	ce.met = alerts.NewMetrics(prometheus.NewRegistry())
	o.From, o.Owner, o.Metrics = "hitcount <alerts@example.com>", "test", ce.met
	o.Clock = func(context.Context) (time.Time, error) { return ce.now, nil }
	if o.DigestAfter == 0 {
		o.DigestAfter = 1000 // one message per crossing: counted one by one
	}
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: ce.smtp.Host(), Port: ce.smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	ce.sw = alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(rules), claims, sender, o)
	return ce
}

// record writes collector c's record of a source as its refresh round
// does: seen now, caught up at caught (zero: not caught up, the last value
// kept by the collector is what it writes), and its site record.
func (ce *clockEnv) record(site, c string, source uint64, path string, caught time.Time) {
	ce.t.Helper()
	rows := [][]any{
		{source, site, c, "web-" + c, path, ce.since, ce.now, uint8(0), caught},
		{sink.SiteRecordID(site), site, c, "web-" + c, "/var/log/nginx/*.log", ce.now, ce.now, uint8(0), ce.now},
	}
	if err := ce.store.InsertRows(context.Background(), ce.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		ce.t.Fatal(err)
	}
}

func (ce *clockEnv) sweep() alerts.Result {
	ce.t.Helper()
	res, err := ce.sw.Sweep(context.Background())
	if err != nil {
		ce.t.Fatal(err)
	}
	for res.More {
		more, err := ce.sw.Sweep(context.Background())
		if err != nil {
			ce.t.Fatal(err)
		}
		res.Detected = append(res.Detected, more.Detected...)
		res.Sent += more.Sent
		res.More = more.More
	}
	return res
}

// crossings lists the recorded crossings as "kind rule page window_start"
// lines, sorted.
func (ce *clockEnv) crossings() []string {
	ce.t.Helper()
	var out []string
	err := ce.store.Select(context.Background(), "SELECT argMax(kind, version), argMax(rule, version), argMax(site, version), argMax(path, version), argMax(window_start, version), argMax(state, version) FROM "+ce.db+".crossings GROUP BY key", nil,
		func(scan func(...any) error) error {
			var kind, rule, site, path, state string
			var ws time.Time
			if err := scan(&kind, &rule, &site, &path, &ws, &state); err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %s %s%s %s %s", kind, rule, site, path, ws.UTC().Format("01-02 15:04"), state))
			return nil
		})
	if err != nil {
		ce.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// mails returns the subjects of the messages delivered, sorted, failing on
// a Message-ID delivered twice.
func (ce *clockEnv) mails() []string {
	ce.t.Helper()
	var out []string
	ids := map[string]bool{}
	for _, m := range ce.smtp.Messages(ce.t) {
		id := m.Header.Get("Message-Id")
		if ids[id] {
			ce.t.Errorf("Message-ID %s delivered twice", id)
		}
		ids[id] = true
		dec := new(mime.WordDecoder)
		subj, err := dec.DecodeHeader(m.Header.Get("Subject"))
		if err != nil {
			subj = m.Header.Get("Subject")
		}
		out = append(out, subj)
	}
	sort.Strings(out)
	return out
}

// body is the plain-text part of the message whose subject contains s.
func (ce *clockEnv) body(s string) string {
	ce.t.Helper()
	for _, m := range ce.smtp.Messages(ce.t) {
		dec := new(mime.WordDecoder)
		subj, _ := dec.DecodeHeader(m.Header.Get("Subject"))
		if strings.Contains(subj, s) {
			return textPart(ce.t, m)
		}
	}
	ce.t.Fatalf("no message with %q in its subject", s)
	return ""
}

func textPart(t *testing.T, m *mail.Message) string {
	t.Helper()
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			t.Fatalf("no text part: %v", err)
		}
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/plain") {
			var b strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := p.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					break
				}
			}
			return decodeQP(b.String(), p.Header.Get("Content-Transfer-Encoding"))
		}
	}
}

// decodeQP undoes quoted-printable soft breaks and =XX escapes enough to
// search the text.
func decodeQP(s, enc string) string {
	if !strings.EqualFold(enc, "quoted-printable") {
		return s
	}
	s = strings.ReplaceAll(s, "=\r\n", "")
	s = strings.ReplaceAll(s, "=\n", "")
	return strings.NewReplacer("=3D", "=", "=20", " ").Replace(s)
}

const belowYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout
    match: {site: shop, path: /checkout}
    below: 50
    window: 1h
    no_data_after: 0
    to: [checkout@example.com]
  - name: pages
    match: {site: shop, path: "/p/*"}
    below: 5
    window: 1h
    no_data_after: 0
    to: [pages@example.com]
  - name: whole
    match: {site: shop}
    below: 20
    window: 1h
    no_data_after: 0
    to: [site@example.com]
`

// A below rule fires exactly once per complete window whose count is
// under N, never for one that is not: on an exact page, on the site's
// total, and on every page of a glob that had traffic within active_within
// (a page with traffic last week and none now fires; one quiet for longer
// than active_within does not; a page born within the lookback fires from
// its first hit on). Sweeping again sends nothing new.
func TestBelowOncePerCompleteWindow(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testBelowOncePerCompleteWindow)
}

func testBelowOncePerCompleteWindow(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, belowYAML, base, alerts.Options{})
	for h := -24; h < 8; h++ {
		at := base.Add(time.Duration(h) * time.Hour)
		n := 60
		if h == 3 {
			n = 10 // below 50
		}
		ce.hits("shop", "/checkout", n, at.Add(5*time.Minute), "Mozilla/5.0")
		ce.hits("shop", "/p/a", 10, at.Add(20*time.Minute), "Mozilla/5.0")
	}
	ce.hits("shop", "/p/b", 30, base.Add(-5*24*time.Hour), "Mozilla/5.0")       // last week: every window below
	ce.hits("shop", "/p/old", 30, base.Add(-10*24*time.Hour), "Mozilla/5.0")    // quiet longer than active_within
	ce.hits("shop", "/p/new", 1, base.Add(2*time.Hour+30*time.Minute), "Bot/1") // born at 02:30
	ce.hits("shop", "/blog/x", 1, base.Add(time.Hour), "Mozilla/5.0")           // matches no rule's path

	// 06:11, the collector caught up at 06:10: the windows of the lookback
	// (a day) complete, from 11-19 07:00 to 11-20 06:00.
	ce.now = base.Add(6*time.Hour + 11*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	res := ce.sweep()
	want := []string{
		"below checkout shop/checkout 11-20 03:00 sent",
		"below pages shop/p/new 11-20 03:00 sent", "below pages shop/p/new 11-20 04:00 sent", "below pages shop/p/new 11-20 05:00 sent",
	}
	for at := base.Add(-17 * time.Hour); at.Before(base.Add(6 * time.Hour)); at = at.Add(time.Hour) {
		want = append(want, "below pages shop/p/b "+at.Format("01-02 15:04")+" sent")
	}
	sort.Strings(want)
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after the first sweep:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.Sent != len(want) {
		t.Errorf("sent %d, want %d", res.Sent, len(want))
	}
	// The same time again, and later with nothing new complete: nothing.
	ce.sweep()
	ce.now = ce.now.Add(30 * time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	if res := ce.sweep(); len(res.Detected) != 0 || res.Sent != 0 {
		t.Fatalf("a sweep with no new complete window recorded %d, sent %d", len(res.Detected), res.Sent)
	}
	// 08:12: windows 06 and 07 complete; 07 of the whole site is 10+60+10
	// hits: not below 20; window 08 has not ended.
	ce.now = base.Add(8*time.Hour + 12*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	want = append(want,
		"below pages shop/p/b 11-20 06:00 sent", "below pages shop/p/b 11-20 07:00 sent",
		"below pages shop/p/new 11-20 06:00 sent", "below pages shop/p/new 11-20 07:00 sent")
	sort.Strings(want)
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after 08:12:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mails := ce.mails()
	if len(mails) != len(want) {
		t.Fatalf("%d emails for %d crossings: %v", len(mails), len(want), mails)
	}
	body := ce.body("shop/checkout: 10 hits in 1h, below 50")
	for _, s := range []string{"shop/checkout had 10 hits from 2026-11-20 03:00 to 2026-11-20 04:00 UTC (1h), fewer than the 50 of rule checkout.", "the count is complete"} {
		if !strings.Contains(body, s) {
			t.Errorf("the email lacks %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "Held back") {
		t.Errorf("a window found on time says it was held back:\n%s", body)
	}
	// The whole site (/checkout + /p/a + ...) was never below 20 an hour;
	// the rule held nothing.
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("whole")); v != 0 {
		t.Errorf("rules_held{whole} = %v", v)
	}
}

const outageYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-low
    match: {site: shop, path: /checkout}
    below: 50
    window: 1h
    no_data_after: 30m
    to: [ops@example.com]
  - name: checkout-silent
    match: {site: shop, path: /checkout}
    no_traffic: 30m
    no_data_after: 0
    to: [ops@example.com]
  - name: cart-silent
    match: {site: shop, path: /cart}
    no_traffic: 30m
    no_data_after: 0
    to: [ops@example.com]
`

// A collector stopped for more than an hour: no below and no no_traffic
// alert for the hours it missed (the rule is held, its gauge 1), and
// exactly one no-data notice naming the collector and its file. Once it is
// back and has caught up, the windows it filled are evaluated and fire
// only if really below, the one that does saying it was held back; a
// silence of another page that began and ended during the outage is
// found too.
func TestCollectorStoppedForAnHour(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testCollectorStoppedForAnHour)
}

func testCollectorStoppedForAnHour(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, outageYAML, base, alerts.Options{})
	// The traffic of the page, 10 hits every 10 minutes, but for
	// 03:00-04:00 (really below: 12 hits, 2 every 10 minutes).
	traffic := func(from, to time.Time) {
		for at := base; at.Before(to); at = at.Add(10 * time.Minute) {
			if at.Before(from) {
				continue
			}
			n := 10
			if at.Hour() == 3 {
				n = 2
			}
			ce.hits("shop", "/checkout", n, at, "Mozilla/5.0")
			if at.Hour() != 3 { // /cart: silent from 02:51 to 04:00
				ce.hits("shop", "/cart", 1, at, "Mozilla/5.0")
			}
		}
	}
	const log = "/var/log/nginx/access.log"
	// Running: 00:00 to 02:03, shipped as it comes, swept every 5 minutes.
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
	// Stopped at 02:03 until 04:35: its records stay as they were.
	back := base.Add(4*time.Hour + 35*time.Minute)
	for ce.now = stop.Add(5 * time.Minute); ce.now.Before(back); ce.now = ce.now.Add(5 * time.Minute) {
		ce.sweep()
	}
	ce.now = back
	if got := ce.crossings(); len(got) != 1 || !strings.HasPrefix(got[0], "no_data checkout-low shop 11-20 02:02") {
		t.Fatalf("crossings during the outage: %v, want only the no-data notice since 02:02", got)
	}
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("checkout-low")); v != 1 {
		t.Errorf("rules_held{checkout-low} = %v during the outage, want 1", v)
	}
	notice := ce.body("no data from site shop since")
	for _, s := range []string{"collector c1 on web-c1, file " + log, "caught up until 2026-11-20 02:02 UTC", "held meanwhile"} {
		if !strings.Contains(notice, s) {
			t.Errorf("the notice lacks %q:\n%s", s, notice)
		}
	}
	// Back at 04:35: it ships what the file holds from 02:03 on, and
	// catches up.
	traffic(stop, back)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	ce.now = base.Add(5*time.Hour + 12*time.Minute)
	traffic(back, ce.now)
	ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
	ce.sweep()
	want := []string{
		"below checkout-low shop/checkout 11-20 03:00 sent",
		"no_data checkout-low shop 11-20 02:02 sent",
		"no_traffic cart-silent shop/cart 11-20 02:51 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings after the collector caught up:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mails := ce.mails(); len(mails) != 3 {
		t.Fatalf("emails: %v, want the notice, the one window really below and the one silence", mails)
	}
	if cart := ce.body("no hits on shop/cart for 30m"); !strings.Contains(cart, "Held back from 2026-11-20 03:31 UTC until 2026-11-20 04:35 UTC") {
		t.Errorf("the silence found late does not say it was held back:\n%s", cart)
	}
	body := ce.body("shop/checkout: 12 hits in 1h, below 50")
	if !strings.Contains(body, "Held back from 2026-11-20 04:10 UTC until 2026-11-20 04:35 UTC") {
		t.Errorf("the window found late does not say it was held back:\n%s", body)
	}
	if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("checkout-low")); v != 0 {
		t.Errorf("rules_held{checkout-low} = %v once caught up, want 0", v)
	}
}

// Lines the web server writes late (buffered log writes) but within
// sweep.lateness do not make a false below: the window waits for them.
// Without the lateness (1m) the same sweep would have fired.
func TestLateLogsInsideLateness(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testLateLogsInsideLateness)
}

func testLateLogsInsideLateness(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, belowYAML, base, alerts.Options{Lateness: 10 * time.Minute})
	ce.hits("shop", "/other", 1, base.Add(-time.Minute), "Mozilla/5.0") // the site's first hit
	ce.hits("shop", "/checkout", 40, base.Add(10*time.Minute), "Mozilla/5.0")
	// 01:03: the collector has read all the file holds (caught up at
	// 01:02); nginx still buffers the last 20 hits of 00:55.
	ce.now = base.Add(time.Hour + 3*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	strict := alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(belowYAML), nil, nil,
		alerts.Options{DryRun: true, Lateness: time.Minute, Clock: func(context.Context) (time.Time, error) { return ce.now, nil }})
	res, err := strict.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(res.Detected, "checkout"); n != 1 {
		t.Fatalf("with lateness 1m the window would fire %d times, want 1 (the test would show nothing)", n)
	}
	ce.sweep()
	// 01:05 the buffer is flushed; 01:12 the collector is caught up.
	ce.hits("shop", "/checkout", 20, base.Add(55*time.Minute), "Mozilla/5.0")
	ce.now = base.Add(time.Hour + 12*time.Minute)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	ce.sweep()
	for _, c := range ce.crossings() {
		if strings.Contains(c, "checkout ") {
			t.Errorf("a false below: %s", c)
		}
	}
}

func countKind(rows []alerts.Row, rule string) int {
	n := 0
	for _, r := range rows {
		if r.Rule == rule {
			n++
		}
	}
	return n
}

// A day when clocks change in Europe/Berlin: 1h windows laid by elapsed
// time, so the 25-hour day has 25 windows (the repeated 02:00 twice) and
// the 23-hour day 23, each fired once by a below rule on a page without a
// hit, whatever the number of sweeps.
func TestBelowOnDaylightSavingDays(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testBelowOnDaylightSavingDays)
}

func testBelowOnDaylightSavingDays(t *testing.T, d *testenv.Database) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `
sources: [{path: /x, site: shop}]
rules:
  - {name: dst, match: {site: shop, path: /quiet}, below: 1, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [ops@example.com]}
`
	for _, c := range []struct {
		day   string
		hours int
	}{{"2026-10-25", 25}, {"2026-03-29", 23}} {
		t.Run(c.day, func(t *testing.T) {
			day, _ := time.ParseInLocation("2006-01-02", c.day, berlin)
			next := day.AddDate(0, 0, 1)
			if got := int(next.Sub(day) / time.Hour); got != c.hours {
				t.Fatalf("%s has %d hours here, want %d", c.day, got, c.hours)
			}
			db := d.Fresh(t)
			ce := newClockEnv(t, db, yaml, day, alerts.Options{})
			ce.hits("shop", "/other", 1, day, "Mozilla/5.0") // the site's first hit
			// A sweep 11 minutes after each hour ends, the collector
			// caught up a minute before.
			for at := day.Add(time.Hour + 11*time.Minute); !at.After(next.Add(11 * time.Minute)); at = at.Add(time.Hour) {
				ce.now = at
				ce.record("shop", "c1", 1, "/var/log/nginx/access.log", at.Add(-time.Minute))
				ce.sweep()
				ce.sweep()
			}
			got := ce.crossings()
			if len(got) != c.hours {
				t.Fatalf("%d crossings, want %d: %v", len(got), c.hours, got)
			}
			if mails := ce.mails(); len(mails) != c.hours {
				t.Fatalf("%d emails, want %d", len(mails), c.hours)
			}
		})
	}
}

const day = 24 * time.Hour

const silenceYAML = `
sources: [{path: /x, site: shop}]
rules:
  - {name: silent, match: {site: shop, path: /checkout}, no_traffic: 1h, no_data_after: 0, to: [ops@example.com]}
  - {name: silent-pages, match: {site: shop, path: "/p/*"}, no_traffic: 2h, no_data_after: 0, to: [pages@example.com]}
`

// no_traffic is sliding: a silence of three hours sends one email (not one
// per hour), swept every 10 minutes; the next hit ends it, and a second
// silence is a second email. A page of a glob that had traffic last week
// and none since fires once; one quiet for longer than active_within never.
func TestNoTrafficOncePerSilence(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testNoTrafficOncePerSilence)
}

func testNoTrafficOncePerSilence(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, silenceYAML, base, alerts.Options{})
	ce.hits("shop", "/p/b", 3, base.Add(-5*24*time.Hour), "Mozilla/5.0")
	ce.hits("shop", "/p/old", 3, base.Add(-10*24*time.Hour), "Mozilla/5.0")
	// /checkout: a hit every 10 minutes, but none from 01:00 to 04:00 and
	// from 06:00 to 07:30.
	for at := base.Add(-day); at.Before(base.Add(9 * time.Hour)); at = at.Add(10 * time.Minute) {
		ce.hits("shop", "/p/a", 1, at, "Mozilla/5.0")
		if !at.Before(base) && at.Hour() >= 1 && at.Hour() < 4 || at.After(base.Add(5*time.Hour+59*time.Minute)) && at.Before(base.Add(7*time.Hour+30*time.Minute)) {
			continue
		}
		ce.hits("shop", "/checkout", 1, at, "Mozilla/5.0")
	}
	for ce.now = base.Add(10 * time.Minute); !ce.now.After(base.Add(9 * time.Hour)); ce.now = ce.now.Add(10 * time.Minute) {
		ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
		ce.sweep()
	}
	want := []string{
		"no_traffic silent shop/checkout 11-20 00:51 sent",
		"no_traffic silent shop/checkout 11-20 05:51 sent",
		"no_traffic silent-pages shop/p/b 11-15 00:01 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mails := ce.mails(); len(mails) != 3 {
		t.Fatalf("emails: %v, want 3", mails)
	}
	body := ce.body("no hits on shop/checkout for 1h")
	if !strings.Contains(body, "has had no hit since 2026-11-20 00:51 UTC") {
		t.Errorf("email:\n%s", body)
	}
}
