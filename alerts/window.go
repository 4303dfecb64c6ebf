// Package alerts decides which threshold crossings exist and how each is
// announced: the crossing's identity, the window it belongs to, and the
// Message-ID that lets a mail system drop a duplicate.
package alerts

import "time"

// Window is a rule's counting window: tumbling windows of Size in the zone Loc,
// or the whole lifetime when Size is 0.
//
// Windows shorter than a day divide it and are laid from local midnight by
// elapsed time, so on a daylight-saving day the windows stay Size long and the
// last one ends at the next local midnight (a 23-hour day has 23 one-hour
// windows, a 25-hour day 25). Windows of whole days start at local midnight;
// 7d windows start on Mondays, other multiples count days from Monday
// 1970-01-05.
type Window struct {
	Size time.Duration
	Loc  *time.Location
}

const day = 24 * time.Hour

// lifetimeStart is the start of the lifetime window: every crossing of a
// lifetime rule shares it.
var lifetimeStart = time.Unix(0, 0).UTC()

func (w Window) loc() *time.Location {
	if w.Loc == nil {
		return time.UTC
	}
	return w.Loc
}

// midnight is the start of t's local day.
func midnight(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, t.Location())
}

// Start returns the start of the window holding t.
func (w Window) Start(t time.Time) time.Time {
	if w.Size <= 0 {
		return lifetimeStart
	}
	t = t.In(w.loc())
	m := midnight(t)
	if w.Size < day {
		return m.Add(t.Sub(m) / w.Size * w.Size)
	}
	days := int64(w.Size / day)
	// Civil day number counted from Monday 1970-01-05, independent of DST.
	civil := time.Date(m.Year(), m.Month(), m.Day(), 0, 0, 0, 0, time.UTC)
	n := int64(civil.Sub(time.Date(1970, 1, 5, 0, 0, 0, 0, time.UTC)) / day)
	back := n % days
	if back < 0 {
		back += days
	}
	y, mo, d := m.Date()
	return time.Date(y, mo, d-int(back), 0, 0, 0, 0, w.loc())
}

// End returns the end of the window that starts at start (exclusive).
func (w Window) End(start time.Time) time.Time {
	if w.Size <= 0 {
		return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	}
	start = start.In(w.loc())
	if w.Size < day {
		end := start.Add(w.Size)
		if next := midnight(start).AddDate(0, 0, 1); end.After(next) {
			return next
		}
		return end
	}
	y, m, d := start.Date()
	return time.Date(y, m, d+int(w.Size/day), 0, 0, 0, 0, w.loc())
}
