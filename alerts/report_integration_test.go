package alerts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Weekly and monthly reports (issue 19), on both stores with a real SMTP
// server and the sweeper's clock moved by the test (newClockEnv).

func berlinAt(t *testing.T, s string) time.Time {
	t.Helper()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const reportYAML = `
sources: [{path: /x, site: shop}, {path: /y, site: other}]
rules:
  - {name: weekly, match: {site: shop}, report: weekly, timezone: Europe/Berlin, top: 3, to: [boss@example.com, ops@example.com]}
`

// writeCrossing records a sent crossing of another rule, first recorded at
// at, as a sweeper would have.
func writeCrossing(t *testing.T, ce *clockEnv, site, path string, window, at time.Time) {
	t.Helper()
	row := alerts.Row{
		Crossing: alerts.Crossing{Rule: "checkout-low", Subject: alerts.PageSubject(site, path), WindowStart: window, Threshold: 50},
		Kind:     "below", Site: site, Path: path, Count: 3, State: alerts.StateSent, Owner: "test", Updated: at,
	}
	if err := alerts.NewStore(ce.store, ce.db).Write(context.Background(), []alerts.Row{row}); err != nil {
		t.Fatal(err)
	}
}

// A weekly report is sent exactly once, after the week has ended in the
// rule's zone (Monday 00:00 Europe/Berlin), sweep.lateness has passed and
// the site's collector has committed past the end; hits in the hour
// between local midnight and UTC midnight count in the week they belong
// to in Berlin; a line logged late, inside the lateness, is counted; the
// crossings recorded for the site in the week are listed, those before,
// after or of another site not. The dry run before says what it would
// send and what the report holds. Sweeping again sends nothing more.
func TestWeeklyReportOncePerWeek(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testWeeklyReportOncePerWeek)
}

func testWeeklyReportOncePerWeek(t *testing.T, d *testenv.Database) {
	at := func(s string) time.Time { return berlinAt(t, s) }
	ce := newClockEnv(t, d, reportYAML, at("2026-11-22 12:00"), alerts.Options{})
	// The week before (Mon 11-09 to Mon 11-16): /a 100, /b 50+3, /c 10.
	ce.hits("shop", "/a", 500, at("2026-11-08 23:00"), "Mozilla/5.0") // the week before that
	ce.hits("shop", "/b", 3, at("2026-11-09 00:15"), "Mozilla/5.0")   // Sunday 23:15 UTC
	ce.hits("shop", "/a", 100, at("2026-11-10 12:00"), "Mozilla/5.0")
	ce.hits("shop", "/b", 50, at("2026-11-11 12:00"), "Mozilla/5.0")
	ce.hits("shop", "/c", 10, at("2026-11-12 12:00"), "Mozilla/5.0")
	// The week (Mon 11-16 to Mon 11-23): /a 150+5, /b 20, /c 7, /d 30.
	ce.hits("shop", "/a", 5, at("2026-11-16 00:30"), "Mozilla/5.0") // Sunday 23:30 UTC
	ce.hits("shop", "/a", 150, at("2026-11-18 12:00"), "Mozilla/5.0")
	ce.hits("shop", "/b", 20, at("2026-11-19 12:00"), "Mozilla/5.0")
	ce.hits("shop", "/d", 30, at("2026-11-20 12:00"), "Mozilla/5.0")
	ce.hits("other", "/a", 1000, at("2026-11-18 12:00"), "Mozilla/5.0")                        // another site
	writeCrossing(t, ce, "shop", "/checkout", at("2026-11-10 09:00"), at("2026-11-10 10:05"))  // recorded the week before
	writeCrossing(t, ce, "shop", "/checkout", at("2026-11-18 09:00"), at("2026-11-18 10:05"))  // in the week
	writeCrossing(t, ce, "other", "/checkout", at("2026-11-18 09:00"), at("2026-11-18 10:05")) // another site

	// Sunday noon: the rule, new, sends the report of the last week that
	// ended (11-09 to 11-16), at once.
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	if res := ce.sweep(); len(res.Detected) != 1 || res.Sent != 1 {
		t.Fatalf("recorded %d, sent %d; want the report of the week before", len(res.Detected), res.Sent)
	}
	before := ce.body("weekly report, week of Mon 2026-11-09")
	if !strings.Contains(before, "Hits: 163 on 3 pages; the week before: 500 (-67.4%).") {
		t.Errorf("the report of the week before:\n%s", before)
	}
	// Monday 00:05: the week has ended, its lateness not passed yet; the
	// web server still buffers a line of Sunday 23:58.
	ce.now = at("2026-11-23 00:05")
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	if res := ce.sweep(); len(res.Detected) != 0 {
		t.Fatalf("a report before the week's lateness passed: %v", res.Detected)
	}
	ce.hits("shop", "/c", 7, at("2026-11-22 23:58"), "Mozilla/5.0")
	ce.hits("shop", "/a", 1000, at("2026-11-23 00:10"), "Mozilla/5.0")                        // the next week, same UTC day
	writeCrossing(t, ce, "shop", "/checkout", at("2026-11-22 22:00"), at("2026-11-23 00:08")) // recorded the next week

	// 00:11: due. The dry run says what it would send, and its content.
	ce.now = at("2026-11-23 00:11")
	ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
	dry := alerts.NewSweeper(alerts.NewStore(ce.store, ce.db), ce.rules(reportYAML), nil, nil,
		alerts.Options{DryRun: true, Clock: func(context.Context) (time.Time, error) { return ce.now, nil }})
	res, err := dry.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Detected) != 1 {
		t.Fatalf("dry run: %d reports, want 1", len(res.Detected))
	}
	desc := dry.Describe(res.Detected[0])
	notes := strings.Join(res.Notes, "\n")
	for _, s := range []string{
		"would send: rule weekly: the weekly report of shop for the week of Mon 2026-11-16, 2026-11-16 00:00 CET to 2026-11-23 00:00 CET, to boss@example.com, ops@example.com",
	} {
		if !strings.Contains(desc, s) {
			t.Errorf("dry run's line lacks %q:\n%s", s, desc)
		}
	}
	for _, s := range []string{
		"the report of the week of Mon 2026-11-16 (2026-11-16 00:00 CET to 2026-11-23 00:00 CET) is due: 212 hits on 4 pages (163 the week before, +30.1%)",
		"top: /a 155, /d 30, /b 20", "up: /a 100->155, /d 0->30", "down: /b 53->20, /c 10->7", "1 alert(s) recorded",
		"next: the report of the week of Mon 2026-11-23, due from 2026-11-30 00:10 CET; so far: 1000 hits on 1 pages",
	} {
		if !strings.Contains(notes, s) {
			t.Errorf("dry run's notes lack %q:\n%s", s, notes)
		}
	}
	if got := ce.crossings(); len(got) != 5 {
		t.Fatalf("the dry run changed the crossings: %v", got)
	}

	res = ce.sweep()
	if len(res.Detected) != 1 || res.Sent != 1 {
		t.Fatalf("recorded %d, sent %d; want the one report", len(res.Detected), res.Sent)
	}
	for _, now := range []string{"2026-11-23 00:11", "2026-11-23 00:30", "2026-11-23 06:00", "2026-11-29 23:00"} {
		ce.now = at(now)
		ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
		if res := ce.sweep(); len(res.Detected) != 0 || res.Sent != 0 {
			t.Fatalf("at %s: recorded %d, sent %d after the report", now, len(res.Detected), res.Sent)
		}
	}
	msgs := ce.smtp.Messages(t)
	if len(msgs) != 2 {
		t.Fatalf("%d emails, want the two reports", len(msgs))
	}
	m := msgs[0]
	if !strings.Contains(m.Header.Get("Subject"), "2026-11-16") {
		m = msgs[1]
	}
	want := alerts.Crossing{Rule: "weekly", Subject: alerts.ReportSubject("shop"), WindowStart: at("2026-11-16 00:00").UTC()}.MessageID("example.com")
	if got := m.Header.Get("Message-Id"); got != want {
		t.Errorf("Message-ID %s, want the report's crossing's %s", got, want)
	}
	if to := m.Header.Get("To"); !strings.Contains(to, "boss@example.com") || !strings.Contains(to, "ops@example.com") {
		t.Errorf("To: %s", to)
	}
	subject := ce.mails()[1]
	if want := "[hitcount] shop: weekly report, week of Mon 2026-11-16: 212 hits (+30.1%)"; subject != want {
		t.Errorf("subject %q, want %q", subject, want)
	}
	body := ce.body("weekly report, week of Mon 2026-11-16")
	for _, s := range []string{
		"weekly report of shop, rule weekly: the week of Mon 2026-11-16, Mon 2026-11-16 00:00 to Mon 2026-11-23 00:00 CET.",
		"Hits: 212 on 4 pages; the week before: 163 (+30.1%).",
		"155  /a\n", "100 -> 155 (+55.0%)  /a", " 0 -> 30 (new)  /d",
		"53 -> 20 (-62.3%)  /b", "10 -> 7 (-30.0%)  /c",
		// The crossing's rule is not configured here: its window in UTC.
		"2026-11-18 10:05  [sent] shop/checkout: 3 hits in the window from 2026-11-18 08:00 UTC, below 50 (rule checkout-low)",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the report lacks %q:\n%s", s, body)
		}
	}
	if i, j, k := strings.Index(body, "155  /a"), strings.Index(body, "30  /d"), strings.Index(body, "20  /b"); !(i < j && j < k) || strings.Contains(body, "  /c\n\nLargest increases") {
		t.Errorf("top pages not /a, /d, /b in that order (top 3):\n%s", body)
	}
	if strings.Count(body, "checkout-low") != 1 || strings.Contains(body, "Held back") || strings.Contains(body, "incomplete") {
		t.Errorf("the report lists other crossings, or says it was held:\n%s", body)
	}
}

const stoppedReportYAML = `
sources: [{path: /x, site: shop}]
rules:
  - {name: weekly, match: {site: shop}, report: weekly, timezone: Europe/Berlin, to: [ops@example.com]}
`

// A collector stopped across the week's end holds the report (the rule's
// held gauge 1, nothing recorded) until it is back and has caught up: the
// report then counts what it shipped late and says it was held back, and
// since when. One that does not come back holds it for a day after it was
// due; then it goes, saying which collector was behind and until when its
// numbers are complete. Either way, once.
func TestReportHeldByAStoppedCollector(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testReportHeldByAStoppedCollector)
}

func testReportHeldByAStoppedCollector(t *testing.T, d *testenv.Database) {
	at := func(s string) time.Time { return berlinAt(t, s) }
	for _, back := range []bool{true, false} {
		name := map[bool]string{true: "back", false: "gone"}[back]
		t.Run(name, func(t *testing.T) {
			db := d
			if name == "gone" {
				db = d.Fresh(t)
			}
			ce := newClockEnv(t, db, stoppedReportYAML, at("2026-11-16 00:00"), alerts.Options{})
			const log = "/var/log/nginx/access.log"
			ce.hits("shop", "/a", 10, at("2026-11-10 12:00"), "Mozilla/5.0")
			ce.hits("shop", "/a", 20, at("2026-11-18 12:00"), "Mozilla/5.0")
			// Caught up at Sunday 20:00, then stopped.
			ce.now = at("2026-11-22 20:01")
			ce.record("shop", "c1", 1, log, at("2026-11-22 20:00"))
			for _, now := range []string{"2026-11-23 00:11", "2026-11-23 06:00", "2026-11-23 12:00"} {
				ce.now = at(now)
				if res := ce.sweep(); len(res.Detected) != 0 {
					t.Fatalf("at %s: a report with the collector behind: %v", now, res.Detected)
				}
				if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("weekly")); v != 1 {
					t.Errorf("at %s: rules_held{weekly} = %v, want 1", now, v)
				}
			}
			if back {
				// Back at 13:00: it ships Sunday evening's lines, and
				// catches up.
				ce.hits("shop", "/a", 5, at("2026-11-22 22:00"), "Mozilla/5.0")
				ce.now = at("2026-11-23 13:00")
				ce.record("shop", "c1", 1, log, ce.now.Add(-time.Minute))
			} else {
				ce.now = at("2026-11-24 00:09")
				if res := ce.sweep(); len(res.Detected) != 0 {
					t.Fatalf("a report before the day's hold ended: %v", res.Detected)
				}
				ce.now = at("2026-11-24 00:10")
			}
			if res := ce.sweep(); len(res.Detected) != 1 || res.Sent != 1 {
				t.Fatalf("recorded %d, sent %d; want the report", len(res.Detected), res.Sent)
			}
			if v := testutil.ToFloat64(ce.met.RulesHeld.WithLabelValues("weekly")); v != 0 {
				t.Errorf("rules_held{weekly} = %v once sent, want 0", v)
			}
			ce.now = ce.now.Add(time.Hour)
			ce.sweep()
			if mails := ce.mails(); len(mails) != 1 {
				t.Fatalf("emails %v, want the one report", mails)
			}
			body := ce.body("weekly report")
			want := []string{"Hits: 25 on 1 pages; the week before: 10 (+150.0%).",
				"Held back from 2026-11-23 00:10 CET until 2026-11-23 13:00 CET: until then the collectors of shop had not committed their logs past its end."}
			if !back {
				// The collector's record is a day old: forgotten, the site
				// complete nowhere; the note names the last one heard of.
				want = []string{"Hits: 20 on 1 pages; the week before: 10 (+100.0%).",
					"Sent incomplete, 1d after it was due: site shop has no complete data: no collector has reported for it within 24h0m0s (last: collector c1 on web-c1",
					"Hits logged after that are missing from these numbers."}
			}
			for _, s := range want {
				if !strings.Contains(body, s) {
					t.Errorf("the report lacks %q:\n%s", s, body)
				}
			}
		})
	}
}

// A week across a daylight-saving change (Berlin, 2026-10-25) is seven
// calendar days, 169 hours: the hour after Monday 00:00 CEST (Sunday
// 22:00 UTC) is in it, the hour after the next Monday 00:00 CET (Sunday
// 23:00 UTC) is not. A month is the calendar month in the zone: the hour
// after 1 October 00:00 CEST is October's, the hour after 1 November
// 00:00 CET is not.
func TestReportPeriodBoundaries(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testReportPeriodBoundaries)
}

func testReportPeriodBoundaries(t *testing.T, d *testenv.Database) {
	at := func(s string) time.Time { return berlinAt(t, s) }
	const yaml = `
sources: [{path: /x, site: shop}]
rules:
  - {name: weekly, match: {site: shop}, report: weekly, timezone: Europe/Berlin, to: [week@example.com]}
  - {name: monthly, match: {site: shop, path: "/m/*"}, report: monthly, timezone: Europe/Berlin, to: [month@example.com]}
`
	ce := newClockEnv(t, d, yaml, at("2026-10-19 00:00"), alerts.Options{})
	for _, h := range []struct {
		path string
		n    int
		at   string
	}{
		{"/w", 1, "2026-10-18 23:30"},   // the week before
		{"/w", 2, "2026-10-19 00:30"},   // Sunday 22:30 UTC: the week's first hour
		{"/w", 4, "2026-10-25 02:30"},   // the repeated hour, CEST
		{"/w", 8, "2026-10-25 23:30"},   // Sunday 22:30 UTC: its last hour
		{"/w", 16, "2026-10-26 00:30"},  // Sunday 23:30 UTC: the next week
		{"/m/x", 1, "2026-09-30 23:30"}, // September
		{"/m/x", 2, "2026-10-01 00:30"}, // 30 September 22:30 UTC: October
		{"/m/x", 4, "2026-10-31 23:30"}, // 31 October 22:30 UTC
		{"/m/y", 8, "2026-11-01 00:30"}, // 31 October 23:30 UTC: November
	} {
		ce.hits("shop", h.path, h.n, at(h.at), "Mozilla/5.0")
	}
	// The repeated 02:30 of 10-25 in CET too.
	ce.hits("shop", "/w", 32, at("2026-10-25 02:30").Add(time.Hour), "Mozilla/5.0")
	for _, now := range []string{"2026-10-26 00:11", "2026-10-26 01:00", "2026-11-01 00:11", "2026-11-01 00:12"} {
		ce.now = at(now)
		ce.record("shop", "c1", 1, "/var/log/nginx/access.log", ce.now.Add(-time.Minute))
		ce.sweep()
	}
	// September's report too, at the first sweep: the last month ended
	// then, and the site had hits in it.
	want := []string{
		"report monthly shop/m/* 08-31 22:00 sent",
		"report monthly shop/m/* 09-30 22:00 sent",
		"report weekly shop 10-18 22:00 sent",
	}
	if got := ce.crossings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("crossings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	week := ce.body("weekly report")
	for _, s := range []string{"Mon 2026-10-19 00:00 to Mon 2026-10-26 00:00 CET", "Hits: 46 on 1 pages; the week before: 1 (+4500.0%)."} {
		if !strings.Contains(week, s) {
			t.Errorf("the weekly report lacks %q:\n%s", s, week)
		}
	}
	month := ce.body("monthly report, month of October")
	for _, s := range []string{"monthly report of pages matching /m/* on shop, rule monthly: the month of October 2026, Thu 2026-10-01 00:00 to Sun 2026-11-01 00:00 CET.",
		"Hits: 6 on 1 pages; the month before: 1 (+500.0%)."} {
		if !strings.Contains(month, s) {
			t.Errorf("the monthly report lacks %q:\n%s", s, month)
		}
	}
}
