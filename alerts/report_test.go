package alerts

import (
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Report periods in the rule's zone: a week is seven calendar days from
// local midnight of its first day (167 or 169 hours across a
// daylight-saving change), a month the calendar month; the last ended
// period and the one before it.
func TestReportPeriods(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	ny := mustLoc(t, "America/New_York")
	at := func(loc *time.Location, s string) time.Time { return clockIn(t, loc)(s) }
	cases := []struct {
		name             string
		p                reportPeriod
		t                string
		start, end, prev string
		hours            int
	}{
		{"ISO week, Berlin", reportPeriod{weekDay: time.Monday, loc: berlin}, "2026-11-18 15:00", "2026-11-16 00:00", "2026-11-23 00:00", "2026-11-09 00:00", 168},
		{"on its first minute", reportPeriod{weekDay: time.Monday, loc: berlin}, "2026-11-16 00:00", "2026-11-16 00:00", "2026-11-23 00:00", "2026-11-09 00:00", 168},
		{"its last minute", reportPeriod{weekDay: time.Monday, loc: berlin}, "2026-11-22 23:59", "2026-11-16 00:00", "2026-11-23 00:00", "2026-11-09 00:00", 168},
		{"week with the autumn change", reportPeriod{weekDay: time.Monday, loc: berlin}, "2026-10-25 12:00", "2026-10-19 00:00", "2026-10-26 00:00", "2026-10-12 00:00", 169},
		{"week with the spring change", reportPeriod{weekDay: time.Monday, loc: berlin}, "2026-03-29 12:00", "2026-03-23 00:00", "2026-03-30 00:00", "2026-03-16 00:00", 167},
		{"week from Sunday", reportPeriod{weekDay: time.Sunday, loc: ny}, "2026-11-18 15:00", "2026-11-15 00:00", "2026-11-22 00:00", "2026-11-08 00:00", 168},
		{"week from Sunday, on a Sunday", reportPeriod{weekDay: time.Sunday, loc: ny}, "2026-11-01 00:30", "2026-11-01 00:00", "2026-11-08 00:00", "2026-10-25 00:00", 169},
		{"month", reportPeriod{monthly: true, loc: berlin}, "2026-10-31 23:59", "2026-10-01 00:00", "2026-11-01 00:00", "2026-09-01 00:00", 31*24 + 1},
		{"month, first minute", reportPeriod{monthly: true, loc: berlin}, "2026-11-01 00:00", "2026-11-01 00:00", "2026-12-01 00:00", "2026-10-01 00:00", 30 * 24},
		{"February", reportPeriod{monthly: true, loc: berlin}, "2028-02-29 12:00", "2028-02-01 00:00", "2028-03-01 00:00", "2028-01-01 00:00", 29 * 24},
		{"January, the year before", reportPeriod{monthly: true, loc: ny}, "2027-01-15 12:00", "2027-01-01 00:00", "2027-02-01 00:00", "2026-12-01 00:00", 31 * 24},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc := c.p.loc
			s := c.p.start(at(loc, c.t))
			if want := at(loc, c.start); !s.Equal(want) {
				t.Fatalf("start %v, want %v", s, want)
			}
			e := c.p.end(s)
			if want := at(loc, c.end); !e.Equal(want) {
				t.Errorf("end %v, want %v", e, want)
			}
			if got := int(e.Sub(s) / time.Hour); got != c.hours {
				t.Errorf("%d hours, want %d", got, c.hours)
			}
			if p := c.p.prev(s); !p.Equal(at(loc, c.prev)) || !c.p.end(p).Equal(s) {
				t.Errorf("prev %v (ending %v), want %v ending at the start", p, c.p.end(p), at(loc, c.prev))
			}
			// Any instant from UTC maps to the same period.
			if got := c.p.start(at(loc, c.t).UTC()); !got.Equal(s) {
				t.Errorf("from UTC: start %v", got)
			}
		})
	}
}

// keepTop keeps the n largest by its order, ties by path, whatever the
// order pages come in.
func TestKeepTop(t *testing.T) {
	less := func(a, b ReportPage) bool { return a.Hits > b.Hits || a.Hits == b.Hits && a.Path < b.Path }
	var list []ReportPage
	for i, h := range []int64{5, 9, 1, 9, 7, 3, 8} {
		list = keepTop(list, ReportPage{Path: string(rune('a' + i)), Hits: h}, 3, less)
	}
	var got []string
	for _, p := range list {
		got = append(got, p.Path)
	}
	if strings.Join(got, ",") != "b,d,g" {
		t.Errorf("kept %v, want b,d,g (9, 9, 8)", got)
	}
}

// -check-config's line for a report rule.
func TestExplainReport(t *testing.T) {
	cfg, err := config.Parse("hitcount.yaml", []byte(`sources: [{path: /x, site: shop.example.com}]
rules:
  - {name: w, match: {site: shop.example.com}, report: weekly, timezone: Europe/Berlin, to: [a@b.c]}
  - {name: m, match: {site: shop.example.com, path: "/blog/*", exclude_bots: true}, report: monthly, top: 5, to: [a@b.c]}
  - {name: s, match: {site: shop.example.com, path: /checkout}, report: weekly, week_start: sunday, timezone: America/New_York, to: [a@b.c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"sends a weekly report every Monday 00:00 Europe/Berlin for shop.example.com: hits, top 10 pages, largest changes and the alerts of the week; once its collectors have committed the week (held 1d at most)",
		"sends a monthly report on the 1st of every month 00:00 UTC for pages matching /blog/* on shop.example.com: hits (bots excluded), top 5 pages, largest changes and the alerts of the month; once its collectors have committed the month (held 1d at most)",
		"sends a weekly report every Sunday 00:00 America/New_York for /checkout on shop.example.com: hits, top 10 pages, largest changes and the alerts of the week; once its collectors have committed the week (held 1d at most)",
	}
	for i, r := range cfg.Rules {
		if got := Explain(r); got != want[i] {
			t.Errorf("rule %s:\n got %s\nwant %s", r.Name, got, want[i])
		}
	}
	if _, err := CompileRules(cfg.Rules); err != nil {
		t.Errorf("the built-in report templates fail on the samples: %v", err)
	}
}
