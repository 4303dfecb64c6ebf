package alerts

import (
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// clockIn reads "2006-01-02 15:04" as a time in loc.
func clockIn(t *testing.T, loc *time.Location) func(string) time.Time {
	t.Helper()
	return func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestWindowStartEnd(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	at := clockIn(t, berlin)
	cases := []struct {
		name       string
		size       time.Duration
		t          time.Time
		start, end time.Time
	}{
		{"5m", 5 * time.Minute, at("2026-11-22 10:07"), at("2026-11-22 10:05"), at("2026-11-22 10:10")},
		{"1h", time.Hour, at("2026-11-22 23:59"), at("2026-11-22 23:00"), at("2026-11-23 00:00")},
		{"1d local midnight", day, at("2026-11-22 00:30"), at("2026-11-22 00:00"), at("2026-11-23 00:00")},
		{"7d starts Monday", 7 * day, at("2026-11-22 12:00"), at("2026-11-16 00:00"), at("2026-11-23 00:00")},
		// 2026-03-29: clocks jump 02:00 -> 03:00; the day has 23 hours.
		{"1h after spring forward", time.Hour, at("2026-03-29 03:30"), at("2026-03-29 03:00"), at("2026-03-29 04:00")},
		{"6h on a 23h day", 6 * time.Hour, at("2026-03-29 23:30"), at("2026-03-29 19:00"), at("2026-03-30 00:00")},
		{"1d on a 23h day", day, at("2026-03-29 12:00"), at("2026-03-29 00:00"), at("2026-03-30 00:00")},
		// 2026-10-25: clocks fall back 03:00 -> 02:00; the day has 25 hours.
		{"1d on a 25h day", day, at("2026-10-25 23:59"), at("2026-10-25 00:00"), at("2026-10-26 00:00")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := Window{Size: c.size, Loc: berlin}
			start := w.Start(c.t)
			if !start.Equal(c.start) {
				t.Fatalf("Start(%v) = %v, want %v", c.t, start, c.start)
			}
			if end := w.End(start); !end.Equal(c.end) {
				t.Fatalf("End(%v) = %v, want %v", start, end, c.end)
			}
			if c.t.Before(start) || !c.t.Before(w.End(start)) {
				t.Fatalf("%v not inside [%v, %v)", c.t, start, w.End(start))
			}
		})
	}
}

// Over a year of minutes in a DST zone, windows tile time: every instant lies
// in exactly the window Start gives, and consecutive windows touch.
func TestWindowsTileTime(t *testing.T) {
	loc := mustLoc(t, "America/New_York")
	for _, size := range []time.Duration{15 * time.Minute, time.Hour, 6 * time.Hour, day, 7 * day} {
		w := Window{Size: size, Loc: loc}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		start := w.Start(t0)
		for ts := t0; ts.Before(t0.AddDate(1, 0, 0)); ts = ts.Add(7 * time.Minute) {
			s := w.Start(ts)
			if !s.Equal(start) {
				if !s.Equal(w.End(start)) {
					t.Fatalf("size %v: window after %v starts at %v, previous ended %v", size, start, s, w.End(start))
				}
				start = s
			}
			if ts.Before(s) || !ts.Before(w.End(s)) {
				t.Fatalf("size %v: %v outside its window [%v, %v)", size, ts, s, w.End(s))
			}
		}
	}
}

func TestLifetimeWindow(t *testing.T) {
	w := Window{}
	if a, b := w.Start(time.Now()), w.Start(time.Unix(1e9, 0)); !a.Equal(b) {
		t.Fatal("lifetime windows differ")
	}
}

func TestCrossingIdentity(t *testing.T) {
	base := Crossing{Rule: "pricing-hot", Subject: "www.example.com/pricing", WindowStart: time.Unix(1795870800, 0), Threshold: 1000}
	same := base
	same.WindowStart = base.WindowStart.In(time.FixedZone("x", 3600)) // same instant, other zone
	if base.Key() != same.Key() || base.MessageID("example.com") != same.MessageID("example.com") {
		t.Fatal("the same crossing has two identities")
	}
	for _, other := range []Crossing{
		{Rule: "pricing-ho", Subject: "twww.example.com/pricing", WindowStart: base.WindowStart, Threshold: 1000},
		{Rule: base.Rule, Subject: base.Subject, WindowStart: base.WindowStart.Add(time.Hour), Threshold: 1000},
		{Rule: base.Rule, Subject: base.Subject, WindowStart: base.WindowStart, Threshold: 10000},
	} {
		if other.Key() == base.Key() {
			t.Errorf("%+v shares the key of %+v", other, base)
		}
	}
	if id := base.MessageID("example.com"); id[0] != '<' || id[len(id)-1] != '>' {
		t.Errorf("Message-ID %q is not in angle brackets", id)
	}
}
