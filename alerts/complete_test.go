package alerts

import (
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// The site's completeness from its collectors' records: the smallest of
// what counts (a source: the largest caught_up any collector wrote; a
// collector's site record), records not written for forgetAfter and
// finished sources left out, complete nowhere when nothing counts.
func TestSiteStateOf(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	src := func(id uint64, collector string, started, seen, caught time.Time) ownerRecord {
		return ownerRecord{Site: "shop", Source: id, Collector: collector, Host: "h-" + collector, Path: "/var/log/a.log", Started: started, Seen: seen, CaughtUp: caught}
	}
	site := func(collector string, seen time.Time) ownerRecord {
		return ownerRecord{Site: "shop", Source: sink.SiteRecordID("shop"), Collector: collector, Host: "h-" + collector, Started: seen, Seen: seen, CaughtUp: seen}
	}
	epoch := time.Unix(0, 0).UTC()
	cases := []struct {
		name   string
		recs   []ownerRecord
		until  time.Time // zero: complete nowhere
		behind string    // collector of Behind
		silent time.Time
	}{
		{name: "no record: nowhere"},
		{
			name:  "one file caught up a minute ago",
			recs:  []ownerRecord{src(1, "a", ago(48*time.Hour), ago(time.Minute), ago(time.Minute))},
			until: ago(time.Minute), behind: "a", silent: ago(time.Minute),
		},
		{
			name: "the collector that ships it decides, not the one waiting",
			recs: []ownerRecord{
				src(1, "a", ago(3*time.Hour), ago(time.Minute), ago(time.Minute)),
				src(1, "b", ago(2*time.Hour), ago(time.Minute), epoch),
			},
			until: ago(time.Minute), behind: "a", silent: ago(time.Minute),
		},
		{
			name: "two files: the one behind decides",
			recs: []ownerRecord{
				src(1, "a", ago(3*time.Hour), ago(time.Minute), ago(time.Minute)),
				src(2, "b", ago(3*time.Hour), ago(time.Minute), ago(70*time.Minute)),
			},
			until: ago(70 * time.Minute), behind: "b", silent: ago(70 * time.Minute),
		},
		{
			name: "a collector stopped an hour ago holds the site",
			recs: []ownerRecord{
				src(1, "a", ago(3*time.Hour), ago(time.Minute), ago(time.Minute)),
				src(2, "b", ago(3*time.Hour), ago(time.Hour), ago(time.Hour)),
				site("b", ago(time.Hour)),
			},
			until: ago(time.Hour), behind: "b", silent: ago(time.Hour),
		},
		{
			name: "a finished file is caught up for ever",
			recs: []ownerRecord{
				src(1, "a", ago(3*time.Hour), ago(2*time.Hour), sink.CaughtUpForever),
				src(2, "a", ago(2*time.Hour), ago(time.Minute), ago(2*time.Minute)),
			},
			until: ago(2 * time.Minute), behind: "a", silent: ago(2 * time.Minute),
		},
		{
			name: "a collector with no file holding a line yet: its site record",
			recs: []ownerRecord{
				src(1, "a", ago(30*time.Hour), ago(2*time.Hour), sink.CaughtUpForever),
				site("a", ago(time.Minute)),
			},
			until: ago(time.Minute), behind: "a", silent: ago(time.Minute),
		},
		{
			name: "a file being read for the first time: nowhere, silent since it began",
			recs: []ownerRecord{
				src(1, "a", ago(10*time.Minute), ago(time.Minute), epoch),
				site("a", ago(time.Minute)),
			},
			behind: "a", silent: ago(10 * time.Minute),
		},
		{
			name: "after an outage the old file still holds the silence's start",
			recs: []ownerRecord{
				src(1, "a", ago(5*time.Hour), ago(time.Minute), ago(2*time.Hour)),
				src(2, "a", ago(5*time.Minute), ago(time.Minute), epoch),
			},
			behind: "a", silent: ago(2 * time.Hour),
		},
		{
			name: "forgotten after a day: nowhere, silent since its last caught_up",
			recs: []ownerRecord{
				src(1, "a", ago(50*time.Hour), ago(25*time.Hour), ago(26*time.Hour)),
				site("a", ago(25*time.Hour)),
			},
			behind: "a", silent: ago(25 * time.Hour),
		},
		{
			name: "forgotten collector, another left: the site is judged by it",
			recs: []ownerRecord{
				src(1, "a", ago(50*time.Hour), ago(25*time.Hour), ago(26*time.Hour)),
				src(2, "b", ago(50*time.Hour), ago(time.Minute), ago(time.Minute)),
			},
			until: ago(time.Minute), behind: "b", silent: ago(time.Minute),
		},
		{
			name: "another site's records do not count",
			recs: []ownerRecord{{Site: "blog", Source: 9, Collector: "z", Started: ago(time.Hour), Seen: ago(time.Minute), CaughtUp: ago(time.Minute)}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := siteStateOf("shop", c.recs, now)
			if !st.CompleteUntil.Equal(c.until) {
				t.Errorf("complete until %v, want %v", st.CompleteUntil, c.until)
			}
			if st.Behind.Collector != c.behind {
				t.Errorf("behind: collector %q, want %q", st.Behind.Collector, c.behind)
			}
			if !st.Silent.Equal(c.silent) {
				t.Errorf("silent since %v, want %v", st.Silent, c.silent)
			}
		})
	}
}

// A window is complete when the store's now and the site's complete-until
// are both at least its end plus lateness, and it does not start before the
// site's first hit.
func TestWindowComplete(t *testing.T) {
	end := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	start := end.Add(-time.Hour)
	const late = 10 * time.Minute
	cases := []struct {
		name       string
		until, now time.Time
		since      time.Time
		want       bool
	}{
		{"caught up past end + lateness", end.Add(11 * time.Minute), end.Add(12 * time.Minute), start.Add(-day), true},
		{"exactly at end + lateness", end.Add(late), end.Add(late), start.Add(-day), true},
		{"caught up past the end, not the lateness (late log writes)", end.Add(5 * time.Minute), end.Add(30 * time.Minute), start.Add(-day), false},
		{"collector behind", end.Add(-time.Minute), end.Add(time.Hour), start.Add(-day), false},
		{"complete nowhere", time.Time{}, end.Add(time.Hour), start.Add(-day), false},
		{"now before end + lateness (a caught_up ahead of the sweeper's clock)", end.Add(time.Hour), end.Add(9 * time.Minute), start.Add(-day), false},
		{"the site's first hit inside the window", end.Add(time.Hour), end.Add(time.Hour), start.Add(time.Minute), false},
		{"the site's first hit at its start", end.Add(time.Hour), end.Add(time.Hour), start, true},
		{"older hits: no bound", end.Add(time.Hour), end.Add(time.Hour), time.Time{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := siteState{Site: "shop", CompleteUntil: c.until, DataSince: c.since}
			if got := st.complete(start, end, c.now, late); got != c.want {
				t.Errorf("complete = %v, want %v", got, c.want)
			}
		})
	}
}

// windowsIn lists the windows wholly inside a range, each starting where
// the one before ends, on daylight-saving days too.
func TestWindowsIn(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name     string
		size     time.Duration
		from, to time.Time
		n        int
		first    time.Time
	}{
		{"1h, an ordinary day", time.Hour, at("2026-11-22 00:00"), at("2026-11-23 00:00"), 24, at("2026-11-22 00:00")},
		{"1h, 23-hour day (spring forward)", time.Hour, at("2026-03-29 00:00"), at("2026-03-30 00:00"), 23, at("2026-03-29 00:00")},
		{"1h, 25-hour day (fall back)", time.Hour, at("2026-10-25 00:00"), at("2026-10-26 00:00"), 25, at("2026-10-25 00:00")},
		{"6h, 23-hour day: the last is 5h", 6 * time.Hour, at("2026-03-29 00:00"), at("2026-03-30 00:00"), 4, at("2026-03-29 00:00")},
		{"1h from mid-window: the partial one left out", time.Hour, at("2026-11-22 10:30"), at("2026-11-22 13:10"), 2, at("2026-11-22 11:00")},
		{"1d over a week", day, at("2026-11-16 05:00"), at("2026-11-23 00:00"), 6, at("2026-11-17 00:00")},
		{"nothing ended", time.Hour, at("2026-11-22 10:30"), at("2026-11-22 11:20"), 0, time.Time{}},
		{"lifetime has no windows", 0, at("2026-11-22 00:00"), at("2026-11-23 00:00"), 0, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := Window{Size: c.size, Loc: berlin}
			got := w.windowsIn(c.from, c.to)
			if len(got) != c.n {
				t.Fatalf("%d windows, want %d: %v", len(got), c.n, got)
			}
			if c.n == 0 {
				return
			}
			if !got[0].Equal(c.first) {
				t.Errorf("first window %v, want %v", got[0], c.first)
			}
			for i := 1; i < len(got); i++ {
				if !w.End(got[i-1]).Equal(got[i]) {
					t.Errorf("window %d starts at %v, the one before ends at %v", i, got[i], w.End(got[i-1]))
				}
			}
			if last := w.End(got[len(got)-1]); last.After(c.to) {
				t.Errorf("the last window ends at %v, after %v", last, c.to)
			}
		})
	}
}

// The SQL index of a minute's window matches windowsIn's list.
func TestWindowIndexSQL(t *testing.T) {
	starts := []time.Time{time.Unix(3600, 0), time.Unix(7200, 0)}
	if got, want := windowIndex(starts), "toUInt64(arrayCount(x -> x <= toUInt32(minute), [3600,7200]))"; got != want {
		t.Errorf("windowIndex = %s, want %s", got, want)
	}
}

func TestDurationText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * time.Minute: "1h30m", 2 * time.Hour: "2h", 7 * day: "7d", day + time.Hour: "1d1h", 30 * time.Second: "30s", 0: "0s",
	} {
		if got := durationText(d); got != want {
			t.Errorf("durationText(%v) = %s, want %s", d, got, want)
		}
	}
}

// Held notes: only when a sweep ran after the crossing was due.
func TestHeldNote(t *testing.T) {
	due := time.Date(2026, 11, 25, 12, 10, 0, 0, time.UTC)
	st := siteState{Site: "shop", CompleteUntil: due.Add(time.Hour), Behind: ownerRecord{Collector: "a", Host: "web-1", Path: "/var/log/nginx/access.log"}}
	if n := heldNote(due, due.Add(5*time.Minute), due.Add(-time.Minute), st, time.UTC); n != "" {
		t.Errorf("no sweep after it was due, yet a note: %q", n)
	}
	n := heldNote(due, due.Add(time.Hour), due.Add(30*time.Minute), st, time.UTC)
	if !strings.Contains(n, "Held back from 2026-11-25 12:10 UTC until 2026-11-25 13:10 UTC") {
		t.Errorf("note %q", n)
	}
}
