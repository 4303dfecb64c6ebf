package alerts_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// Adversary of issue 19 (below, no_traffic, the no-data notice, spike and
// drop, reports). Each test here fails while its finding stands; they run
// only with HITCOUNT_ADVERSARY=1:
//
//	HITCOUNT_ADVERSARY=1 HITCOUNT_CHDB_LIB=/work/main/.cache/chdb/current/libchdb.so CI=1 \
//	  go test -count=1 -run 'TestAdversary19' ./alerts/

func adversary19(t *testing.T) {
	t.Helper()
	if os.Getenv("HITCOUNT_ADVERSARY") != "1" {
		t.Skip("adversary reproduction: set HITCOUNT_ADVERSARY=1")
	}
}

// reconfigure replaces ce's sweeper by one with the rules of yaml, as a
// sweeper restarted with an edited configuration: same store, same SMTP
// server, same clock; local claims of its own state directory.
func (ce *clockEnv) reconfigure(yaml string) {
	ce.t.Helper()
	claims, err := alerts.OpenLocalClaims(ce.t.TempDir(), time.Now)
	if err != nil {
		ce.t.Fatal(err)
	}
	ce.t.Cleanup(func() { claims.Close() })
	ce.met = alerts.NewMetrics(prometheus.NewRegistry())
	o := alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", Metrics: ce.met, DigestAfter: 1000,
		Clock: func(context.Context) (time.Time, error) { return ce.now, nil }}
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: ce.smtp.Host(), Port: ce.smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	ce.sw = alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(yaml), claims, sender, o)
}

// recordBehind writes collector c's refresh round with its file not
// caught up (the last caught_up it knew: fileCaught) and its site record
// caught up now, as sink.ClaimRows writes a round in which the file's
// batch is being filled or in flight.
func (ce *clockEnv) recordBehind(site, c string, source uint64, path string, fileCaught time.Time) {
	ce.t.Helper()
	rows := [][]any{
		{source, site, c, "web-" + c, path, ce.since, ce.now, uint8(0), fileCaught},
		{sink.SiteRecordID(site), site, c, "web-" + c, "/var/log/nginx/*.log", ce.since, ce.now, uint8(0), ce.now},
	}
	if err := ce.store.InsertRows(context.Background(), ce.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		ce.t.Fatal(err)
	}
}

const adv19NoDataYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-low
    match: {site: shop, path: /checkout}
    below: 5
    window: 1h
    no_data_after: 1h
    to: [oncall@example.com]
`

// FINDING 1 (no-data notice sent twice for one silence). The notice is
// keyed by siteState.Silent: while the stopped collector's records are
// live, the smallest caught_up of what counts (its file's, which lags the
// site record whenever a batch of the file was being filled or in flight
// at its last round: a busy site, always); once the records are forgotten
// (forgetAfter, 24h after the last write), the largest caught_up of any
// record (the site record's). One silence, two keys: a collector whose last
// round was at 02:00 (its file last caught up at 01:59), down for two days,
// sends "no data from site shop since 01:59" at 02:59 and "no data ... since
// 02:00" a day later. Measured on both stores: 2 notices (keys 01:59 and
// 02:00), want 1.
// The same happens with two collectors of one site stopped at different
// times when the first is forgotten. No seed: deterministic.
func TestAdversary19NoDataNoticeTwiceWhenForgotten(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testAdversary19NoDataNoticeTwiceWhenForgotten)
}

func testAdversary19NoDataNoticeTwiceWhenForgotten(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, adv19NoDataYAML, base, alerts.Options{})
	const log = "/var/log/nginx/access.log"
	for at := base.Add(-2 * day); at.Before(base.Add(2*time.Hour + 3*time.Minute)); at = at.Add(10 * time.Minute) {
		ce.hits("shop", "/checkout", 10, at, "Mozilla/5.0")
	}
	// Running until 02:03, its file's batch in flight at each round (the
	// file last caught up a minute before the round).
	stop := base.Add(2*time.Hour + 3*time.Minute)
	for ce.now = base.Add(time.Hour); !ce.now.After(stop); ce.now = ce.now.Add(5 * time.Minute) {
		ce.recordBehind("shop", "c1", 1, log, ce.now.Add(-time.Minute))
		ce.sweep()
	}
	// Killed at 02:03 (its last round at 02:00), down for two days: swept
	// every 30 minutes.
	for ce.now = stop.Add(30 * time.Minute); ce.now.Before(stop.Add(50 * time.Hour)); ce.now = ce.now.Add(30 * time.Minute) {
		ce.sweep()
	}
	var notices []string
	for _, c := range ce.crossings() {
		if strings.HasPrefix(c, "no_data ") {
			notices = append(notices, c)
		}
	}
	if len(notices) != 1 {
		t.Errorf("one silence of the site's collector (stopped at 02:03 for 2 days) gave %d no-data notices, want 1:\n%s\nemails: %v",
			len(notices), strings.Join(notices, "\n"), ce.mails())
	}
}

// FINDING 2 (a report period, or a window, emailed again after a rule's
// configuration is edited). A report's crossing is keyed by (rule, period
// start as an instant); a spike's or drop's by (rule, page, window start,
// factor); a below window's by (rule, page, window start, N). Editing the
// rule's timezone or week_start moves the period start of the week that
// ended last, editing factor or N changes the key: the sweeper restarted
// with the edited rule sends the same week's report (same "week of Mon
// 2026-11-16" subject) or the same window's alert a second time. Measured
// on both stores: every case 2 emails for one period/window, want 1 (the
// timezone edit: two reports both titled "week of Mon 2026-11-16", +20.9%
// and +21.7%, the second over Sun 23:00 UTC to Sun 23:00 UTC). No seed:
// deterministic. Kept, gated, as the documented behaviour: such an edit
// makes new crossings (docs/operations.md, "Rules removed or renamed").
func TestAdversary19ConfigEditResends(t *testing.T) {
	t.Parallel()
	adversary19(t)
	testenv.EachBackend(t, testAdversary19ConfigEditResends)
}

func testAdversary19ConfigEditResends(t *testing.T, d *testenv.Database) {
	weekly := func(extra string) string {
		return `
sources: [{path: /x, site: shop}]
rules:
  - {name: weekly, match: {site: shop}, report: weekly, ` + extra + ` to: [boss@example.com]}
`
	}
	spike := func(factor string) string {
		return `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-spike
    match: {site: shop, path: /checkout}
    spike: {factor: ` + factor + `, min: 100}
    window: 1h
    no_data_after: 0
    to: [oncall@example.com]
`
	}
	below := func(n string) string {
		return `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-low
    match: {site: shop, path: /checkout}
    below: ` + n + `
    window: 1h
    no_data_after: 0
    to: [oncall@example.com]
`
	}
	cases := []struct {
		name         string
		before, edit string
		// first, second: when the sweeper runs with each configuration.
		first, second time.Time
	}{
		{"report timezone UTC to Europe/Berlin", weekly("timezone: UTC,"), weekly("timezone: Europe/Berlin,"),
			time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)},
		{"report week_start monday to sunday", weekly("timezone: UTC,"), weekly("timezone: UTC, week_start: sunday,"),
			time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)},
		{"spike factor 3 to 4", spike("3"), spike("4"),
			time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC)},
		{"below 50 to 40", below("50"), below("40"),
			time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 7, 0, 0, 0, time.UTC)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := d.Fresh(t)
			ce := newClockEnv(t, db, tc.before, tc.first, alerts.Options{})
			// Ten days of /checkout at 50 an hour, but 03:00-04:00 on
			// 11-20: 400 (a spike; not below 50 or 40), and 04:00-05:00:
			// 3 (below 50 and 40).
			from := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)
			spikeAt, lowAt := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)
			ce.bulk("shop", hourly("/checkout", from, tc.second, func(at time.Time) int {
				switch at {
				case spikeAt:
					return 400
				case lowAt:
					return 3
				}
				return 50
			}))
			const log = "/var/log/nginx/access.log"
			ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
			ce.sweep()
			firstMails := ce.mails()
			if len(firstMails) == 0 {
				t.Fatalf("nothing sent before the edit: %v", ce.crossings())
			}
			ce.reconfigure(tc.edit)
			ce.now = tc.second
			ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
			ce.sweep()
			if got := ce.mails(); len(got) != len(firstMails) {
				t.Errorf("after the edit, the same period/window emailed again: before %d email(s) %q, after %d:\n%s\ncrossings:\n%s",
					len(firstMails), firstMails, len(got), strings.Join(got, "\n"), strings.Join(ce.crossings(), "\n"))
			}
		})
	}
}

const adv19MinuteSpikeYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: minute-spike
    match: {site: shop, path: /checkout}
    spike: {factor: 3, min: 100}
    window: 1m
    baseline: {periods: 30, every: 1d}
    no_data_after: 0
    to: [oncall@example.com]
`

// FINDING 3 (a valid spike rule that can never be evaluated). A spike or
// drop rule counts every window of its lookback (a day) and each one's
// baseline windows in one query, WindowSetCounts, whose window index is an
// array literal of every start in the SQL text: a 1m window with a baseline
// of 30 days (both accepted by -check-config: periods up to 60) is
// 1440 x 31 = 44,640 starts, about 490 KB of SQL, past max_query_size
// (262,144 bytes by default, on 18.16 and the embedded engine). The rule's
// query fails at every sweep: it is skipped ("cannot evaluate"), held for
// ever, and a spike of 400 against 10 is never sent. Measured: 0 emails,
// want 1. No seed: deterministic.
func TestAdversary19SpikeQueryTooLarge(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testAdversary19SpikeQueryTooLarge)
}

func testAdversary19SpikeQueryTooLarge(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, adv19MinuteSpikeYAML, base, alerts.Options{})
	// 40 days of 10 hits at 11:30 each day; 400 today.
	var ts []traffic
	for k := 40; k >= 0; k-- {
		n := 10
		if k == 0 {
			n = 400
		}
		ts = append(ts, traffic{"/checkout", n, base.Add(-time.Duration(k)*day - 30*time.Minute)})
	}
	ce.bulk("shop", ts)
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	res, err := ce.sw.Sweep(context.Background())
	if err != nil {
		t.Fatalf("the sweep fails: %v", err)
	}
	if got := ce.mails(); len(got) != 1 {
		t.Errorf("a spike of 400 against 10 in a 1m window (baseline 30 days): %d emails, want 1; notes:\n%s", len(got), clipNotes(res.Notes))
	}
}

func clipNotes(notes []string) string {
	s := strings.Join(notes, "\n")
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}

const adv19ReplacedYAML = `
sources: [{path: /x, site: shop}]
rules:
  - name: checkout-low
    match: {site: shop, path: /checkout}
    below: 50
    window: 1h
    no_data_after: 30m
    to: [oncall@example.com]
`

// FINDING 4 (a collector replaced by one with a new id holds its site for a
// day: a false no-data notice, and a real below held until the old record
// is forgotten, 24h after its stop: about 21 hours late here). The
// sweeper counts every record written within forgetAfter (24h), released or
// not (Records ignores source_owners.released), and each collector's site
// record on its own: the site record of a collector stopped cleanly
// (SIGTERM: every record released, the site record caught up at its stop)
// keeps the site complete only until its stop for 24 hours, whatever the
// collector that took its files over ships. A collector gets a new id
// whenever its state_dir is new or empty ("the id is new for each
// process" without one: a container recreated, a host rebuilt, a
// blue/green deploy), so each such restart does it. Measured on both
// stores: c1 stopped at 02:03, c2 (new id) shipping and caught up every
// 5 minutes from 02:10; a real below window 05:00-06:00 (12 hits against
// 50); a no-data notice "since 02:03" is sent at 02:35 although c2 was
// caught up, and at 08:00 the below is still not sent (held: "site shop
// complete only until 02:03 (collector c1 ...)"). Want: the below by 06:15,
// no notice. No seed: deterministic.
func TestAdversary19ReplacedCollectorHoldsADay(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testAdversary19ReplacedCollectorHoldsADay)
}

func testAdversary19ReplacedCollectorHoldsADay(t *testing.T, d *testenv.Database) {
	base := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	ce := newClockEnv(t, d, adv19ReplacedYAML, base, alerts.Options{})
	const log = "/var/log/nginx/access.log"
	traffic := func(from, to time.Time) {
		for at := from; at.Before(to); at = at.Add(10 * time.Minute) {
			n := 10
			if at.Hour() == 5 && at.Day() == 20 {
				n = 2 // really below: 12 in 05:00-06:00 on 11-20
			}
			ce.hits("shop", "/checkout", n, at, "Mozilla/5.0")
		}
	}
	stop := base.Add(2*time.Hour + 3*time.Minute)
	traffic(base.Add(-day), stop)
	for ce.now = base.Add(time.Hour); ce.now.Before(stop); ce.now = ce.now.Add(5 * time.Minute) {
		ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
		ce.sweep()
	}
	// c1 stopped by SIGTERM at 02:03: its records released, as
	// ownership.releaseAll writes them.
	ce.now = stop
	rows := [][]any{
		{uint64(1), "shop", "c1", "web-c1", log, ce.since, ce.now, uint8(1), ce.now.Add(-time.Minute)},
		{sink.SiteRecordID("shop"), "shop", "c1", "web-c1", "/var/log/nginx/*.log", ce.since, ce.now, uint8(1), ce.now},
	}
	if err := ce.store.InsertRows(context.Background(), ce.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	// c2, the same file, a new id, from 02:10: ships everything, caught up
	// at every round.
	// The traffic goes on every 10 minutes from 02:10 (the last line c1
	// shipped was at 02:00), each line shipped by the round after it.
	next := base.Add(2*time.Hour + 10*time.Minute)
	for ce.now = base.Add(2*time.Hour + 10*time.Minute); !ce.now.After(base.Add(8 * time.Hour)); ce.now = ce.now.Add(5 * time.Minute) {
		if next.Before(ce.now) {
			traffic(next, ce.now)
			for next.Before(ce.now) {
				next = next.Add(10 * time.Minute)
			}
		}
		ce.record("shop", "c2", 1, log, ce.now.Add(-time.Minute))
		ce.sweep()
	}
	got := ce.crossings()
	want := "below checkout-low shop/checkout 11-20 05:00 sent"
	if strings.Join(got, "\n") != want {
		t.Errorf("c1 replaced by c2 (a new id) at 02:10, c2 caught up since; at 08:00 the crossings are:\n%s\nwant only:\n%s",
			strings.Join(got, "\n"), want)
	}
}
