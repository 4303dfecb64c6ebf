package alerts

import (
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/config"
)

// The baseline of a window: the same wall-clock window K days back in the
// rule's zone (daylight-saving days neither shift nor drop a window; a
// skipped time is a gap, a repeated one its first occurrence), or the K
// windows before it.
func TestBaselineOf(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04 -0700", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name          string
		window, every time.Duration
		periods       int
		start         string
		want          []string // "2006-01-02 15:04 MST" in Berlin, or "gap 2006-01-02 15:04"
	}{
		{name: "same hour on the 3 days before", window: time.Hour, every: day, periods: 3, start: "2026-11-20 14:00 +0100",
			want: []string{"2026-11-19 14:00 CET", "2026-11-18 14:00 CET", "2026-11-17 14:00 CET"}},
		{name: "after the 25-hour day: the wall clock, not 24 hours", window: time.Hour, every: day, periods: 2, start: "2026-10-26 14:00 +0100",
			want: []string{"2026-10-25 14:00 CET", "2026-10-24 14:00 CEST"}},
		{name: "the 25-hour day's first 02:00", window: time.Hour, every: day, periods: 1, start: "2026-10-25 02:00 +0200",
			want: []string{"2026-10-24 02:00 CEST"}},
		{name: "the 25-hour day's second 02:00", window: time.Hour, every: day, periods: 1, start: "2026-10-25 02:00 +0100",
			want: []string{"2026-10-24 02:00 CEST"}},
		{name: "the day after: the repeated 02:00 at its first", window: time.Hour, every: day, periods: 2, start: "2026-10-26 02:00 +0100",
			want: []string{"2026-10-25 02:00 CEST", "2026-10-24 02:00 CEST"}},
		{name: "the day after the 23-hour day: no 02:00 on it", window: time.Hour, every: day, periods: 2, start: "2026-03-30 02:00 +0200",
			want: []string{"gap 2026-03-29 02:00", "2026-03-28 02:00 CET"}},
		{name: "the 23-hour day's 03:00", window: time.Hour, every: day, periods: 1, start: "2026-03-29 03:00 +0200",
			want: []string{"2026-03-28 03:00 CET"}},
		{name: "15m windows, a week apart", window: 15 * time.Minute, every: 7 * day, periods: 2, start: "2026-11-20 09:45 +0100",
			want: []string{"2026-11-13 09:45 CET", "2026-11-06 09:45 CET"}},
		{name: "the previous windows, across the repeated hour", window: time.Hour, every: time.Hour, periods: 3, start: "2026-10-25 03:00 +0100",
			want: []string{"2026-10-25 02:00 CET", "2026-10-25 02:00 CEST", "2026-10-25 01:00 CEST"}},
		{name: "days, the 23-hour day among them", window: day, every: day, periods: 2, start: "2026-03-30 00:00 +0200",
			want: []string{"2026-03-29 00:00 CET", "2026-03-28 00:00 CET"}},
		{name: "weeks", window: 7 * day, every: 7 * day, periods: 1, start: "2026-11-16 00:00 +0100",
			want: []string{"2026-11-09 00:00 CET"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Rule{Window: Window{Size: c.window, Loc: berlin}, Every: c.every, Periods: c.periods}
			start := at(c.start)
			if got := r.Window.Start(start); !got.Equal(start) {
				t.Fatalf("%s is not a window start (%s is)", start, got)
			}
			var got []string
			for _, p := range r.baselineOf(start) {
				if p.Start.IsZero() {
					got = append(got, "gap "+p.Wall)
				} else {
					got = append(got, p.Start.In(berlin).Format("2006-01-02 15:04 MST"))
				}
			}
			if strings.Join(got, ", ") != strings.Join(c.want, ", ") {
				t.Errorf("baseline %v, want %v", got, c.want)
			}
		})
	}
}

// When a spike or a drop fires, against a median.
func TestChangeFires(t *testing.T) {
	spike := &Rule{Kind: config.KindSpike, Factor: 3, Min: 100}
	drop := &Rule{Kind: config.KindDrop, Factor: 4, MinBaseline: 200}
	cases := []struct {
		name   string
		r      *Rule
		count  int64
		counts []int64
		fires  bool
	}{
		{"spike: 3x and above min", spike, 360, []int64{100, 120, 130}, true},
		{"spike: under 3x the median", spike, 359, []int64{100, 120, 130}, false},
		{"spike: 3x but under min", spike, 99, []int64{10, 20, 30}, false},
		{"spike: one odd period does not mask it (a mean would be 1035)", spike, 400, []int64{100, 120, 130, 3000, 110, 120, 125}, true},
		{"spike: a baseline of 0", spike, 100, []int64{0, 0, 0}, true},
		{"spike: even count, the mean of the middle two", spike, 345, []int64{100, 110, 120, 500}, true},
		{"drop: a quarter", drop, 100, []int64{400, 410, 390}, true},
		{"drop: above a quarter", drop, 101, []int64{400, 410, 390}, false},
		{"drop: baseline under min_baseline", drop, 0, []int64{150, 199, 190}, false},
		{"drop: one outage in the baseline does not hide it", drop, 50, []int64{400, 0, 410, 390, 420}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.r.changeFires(c.count, median(append([]int64(nil), c.counts...))); got != c.fires {
				t.Errorf("fires %v, want %v", got, c.fires)
			}
		})
	}
}

// The note keeps the baseline for the email, through the store's string.
func TestChangeNoteRoundTrip(t *testing.T) {
	n := changeNote{Baseline: 120.5, Windows: []baselineWindow{{Start: 1, Hits: 3}, {Wall: "2026-03-29 02:00", State: "gap"}}, Held: "Held back"}
	got, ok := decodeChangeNote(n.encode())
	if !ok || got.Baseline != n.Baseline || len(got.Windows) != 2 || got.Windows[1] != n.Windows[1] || got.Held != n.Held {
		t.Errorf("decoded %+v, %v from %s", got, ok, n.encode())
	}
	if _, ok := decodeChangeNote("Held back from 10:00"); ok {
		t.Error("a plain note decoded as a baseline")
	}
}

// -check-config's line for spike and drop rules.
func TestExplainChange(t *testing.T) {
	cfg, err := config.Parse("hitcount.yaml", []byte(`sources: [{path: /x, site: shop}]
rules:
  - {name: a, match: {site: shop, path: /checkout}, spike: {factor: 3, min: 100}, window: 1h, timezone: Europe/Berlin, no_data_after: 0, to: [a@b.c]}
  - {name: b, match: {site: shop}, drop: {factor: 4, min_baseline: 200}, window: 1h, baseline: {periods: 6, every: 1h, min_periods: 6}, to: [a@b.c]}
  - {name: c, match: {site: shop, path: "/p/*"}, drop: {factor: 2, min_baseline: 50}, window: 1d, baseline: {periods: 4, every: 7d}, no_data_after: 0, to: [a@b.c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fires when /checkout on shop has at least 3x the median of the same 1h window on the previous 7 days (and at least 100 hits) in a complete window, Europe/Berlin; judged when at least 4 of the 7 are after the site's first hit",
		"fires when site shop has at most 1/4 of the median of the previous 6 1h windows (when that is at least 200 hits) in a complete window, UTC; judged when at least 6 of the 6 are after the site's first hit; a notice if its collectors have not caught up for 1h",
		"fires when a page matching /p/* (with a hit in the last 7d) on shop has at most 1/2 of the median of the same 1d window on the same weekday of the previous 4 weeks (when that is at least 50 hits) in a complete window, UTC; judged when at least 3 of the 4 are after the site's first hit",
	}
	for i, r := range cfg.Rules {
		if got := Explain(r); got != want[i] {
			t.Errorf("rule %s:\n got %s\nwant %s", r.Name, got, want[i])
		}
	}
}
