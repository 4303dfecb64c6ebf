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
	released := func(r ownerRecord) ownerRecord { r.Released = true; return r }
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
			name: "forgotten after a day: nowhere, silent since it was when live (one key per silence)",
			recs: []ownerRecord{
				src(1, "a", ago(50*time.Hour), ago(25*time.Hour), ago(26*time.Hour)),
				site("a", ago(25*time.Hour)),
			},
			behind: "a", silent: ago(26 * time.Hour),
		},
		{
			name: "two collectors stopped 3h apart, the first forgotten: the silence still began at the first",
			recs: []ownerRecord{
				src(1, "a", ago(50*time.Hour), ago(25*time.Hour), ago(25*time.Hour+time.Minute)),
				site("a", ago(25*time.Hour)),
				src(2, "b", ago(50*time.Hour), ago(22*time.Hour), ago(22*time.Hour+time.Minute)),
				site("b", ago(22*time.Hour)),
			},
			until: ago(22*time.Hour + time.Minute), behind: "b", silent: ago(25*time.Hour + time.Minute),
		},
		{
			name: "both forgotten: the same",
			recs: []ownerRecord{
				src(1, "a", ago(80*time.Hour), ago(50*time.Hour), ago(50*time.Hour+time.Minute)),
				site("a", ago(50*time.Hour)),
				src(2, "b", ago(80*time.Hour), ago(47*time.Hour), ago(47*time.Hour+time.Minute)),
				site("b", ago(47*time.Hour)),
			},
			behind: "b", silent: ago(50*time.Hour + time.Minute),
		},
		{
			name: "a collector forgotten before the other stopped: not part of its silence",
			recs: []ownerRecord{
				src(1, "a", ago(80*time.Hour), ago(50*time.Hour), ago(50*time.Hour+time.Minute)),
				site("a", ago(50*time.Hour)),
				src(2, "b", ago(80*time.Hour), ago(3*time.Hour), ago(3*time.Hour+time.Minute)),
				site("b", ago(3*time.Hour)),
			},
			until: ago(3*time.Hour + time.Minute), behind: "b", silent: ago(3*time.Hour + time.Minute),
		},
		{
			name: "a collector stopped cleanly, its file taken over by another: its site record does not hold",
			recs: []ownerRecord{
				released(src(1, "a", ago(6*time.Hour), ago(5*time.Hour), ago(5*time.Hour+time.Minute))),
				released(site("a", ago(5*time.Hour))),
				src(1, "b", ago(5*time.Hour), ago(time.Minute), ago(2*time.Minute)),
				site("b", ago(time.Minute)),
			},
			until: ago(2 * time.Minute), behind: "b", silent: ago(2 * time.Minute),
		},
		{
			name: "a collector stopped cleanly, its file taken over by nobody: the file holds",
			recs: []ownerRecord{
				released(src(1, "a", ago(6*time.Hour), ago(5*time.Hour), ago(5*time.Hour+time.Minute))),
				released(site("a", ago(5*time.Hour))),
				src(2, "b", ago(5*time.Hour), ago(time.Minute), ago(2*time.Minute)),
				site("b", ago(time.Minute)),
			},
			until: ago(5*time.Hour + time.Minute), behind: "a", silent: ago(5*time.Hour + time.Minute),
		},
		{
			name: "a collector killed (not released) holds through its site record",
			recs: []ownerRecord{
				src(1, "a", ago(6*time.Hour), ago(5*time.Hour), sink.CaughtUpForever),
				site("a", ago(5*time.Hour)),
				src(2, "b", ago(5*time.Hour), ago(time.Minute), ago(2*time.Minute)),
				site("b", ago(time.Minute)),
			},
			until: ago(5 * time.Hour), behind: "a", silent: ago(5 * time.Hour),
		},
		{
			name: "the only collector stopped cleanly with no file: nowhere",
			recs: []ownerRecord{
				released(site("a", ago(5*time.Hour))),
			},
			behind: "a", silent: ago(5 * time.Hour),
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
	at := clockIn(t, berlin)
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

// Window runs: consecutive windows of one length share a run, so the SQL
// numbering them grows with the runs, not the windows.
func TestWindowRuns(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	at := clockIn(t, berlin)
	minute := Window{Size: time.Minute, Loc: berlin}
	hour := Window{Size: time.Hour, Loc: berlin}
	sixHours := Window{Size: 6 * time.Hour, Loc: berlin}
	// A day of 1m windows and the same minutes on 30 days before: 31
	// consecutive days, one run (no daylight-saving change among them: a
	// change starts a new run).
	var baselined []time.Time
	for d := 30; d >= 0; d-- {
		from := at("2026-12-19 12:00").AddDate(0, 0, -d)
		baselined = append(baselined, minute.windowsIn(from, from.Add(day))...)
	}
	// Two hours of 1h windows, a week apart: two runs.
	weekly := append(hour.windowsIn(at("2026-11-13 10:00"), at("2026-11-13 12:00")), hour.windowsIn(at("2026-11-20 10:00"), at("2026-11-20 12:00"))...)
	cases := []struct {
		name   string
		w      Window
		starts []time.Time
		want   []windowRun
	}{
		{"none", hour, nil, nil},
		{"1m, 31 days: one run", minute, dedup(baselined), []windowRun{{first: at("2026-11-19 12:00").Unix(), step: 60, n: 31 * 1440, base: 1}}},
		{"1h a week apart", hour, weekly, []windowRun{
			{first: at("2026-11-13 10:00").Unix(), step: 3600, n: 2, base: 1},
			{first: at("2026-11-20 10:00").Unix(), step: 3600, n: 2, base: 3},
		}},
		{"6h on a 23-hour day: the last is 5h, a run of its own", sixHours, sixHours.windowsIn(at("2026-03-29 00:00"), at("2026-03-30 00:00")), []windowRun{
			{first: at("2026-03-29 00:00").Unix(), step: 6 * 3600, n: 3, base: 1},
			{first: at("2026-03-29 19:00").Unix(), step: 5 * 3600, n: 1, base: 4},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := windowRuns(c.w, c.starts)
			if len(got) != len(c.want) {
				t.Fatalf("runs %+v, want %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("run %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

func dedup(ts []time.Time) []time.Time {
	seen := map[int64]bool{}
	var out []time.Time
	for _, t := range ts {
		if !seen[t.Unix()] {
			seen[t.Unix()] = true
			out = append(out, t)
		}
	}
	return out
}

// The SQL of window groups stays under its budget however many runs, and
// numbers every window once.
func TestWindowGroups(t *testing.T) {
	w := Window{Size: time.Hour}
	one := windowGroups(w, []time.Time{time.Unix(3600, 0), time.Unix(7200, 0)}, maxBound/2)
	if len(one) != 1 {
		t.Fatalf("%d groups, want 1", len(one))
	}
	const m = "toInt64(toUInt32(minute))"
	if want := "toUInt64(multiIf(" + m + " >= 3600 AND " + m + " < 10800, 1 + intDiv(" + m + " - 3600, 3600), 0))"; one[0].idx != want {
		t.Errorf("idx %s, want %s", one[0].idx, want)
	}
	if want := " AND ((minute >= toDateTime(3600) AND minute < toDateTime(10800)))"; one[0].where != want {
		t.Errorf("where %s, want %s", one[0].where, want)
	}
	// 2,000 windows a day apart: 2,000 runs.
	var starts []time.Time
	for i := range 2000 {
		starts = append(starts, time.Unix(int64(i)*86400, 0))
	}
	groups := windowGroups(w, starts, maxBound/2)
	if len(groups) < 2 {
		t.Fatalf("%d groups for 2,000 runs, want several", len(groups))
	}
	n := 0
	for _, g := range groups {
		if g.size() > maxBound/2 {
			t.Errorf("a group of %d bytes, over its budget %d", g.size(), maxBound/2)
		}
		n += strings.Count(g.idx, "intDiv")
	}
	if n != 2000 {
		t.Errorf("%d runs numbered, want 2000", n)
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
