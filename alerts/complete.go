package alerts

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// Completeness: the collectors' word, not the data's (issue 19). A window
// of a site with few hits looks the same as a collector that is down or
// behind, so below and no_traffic rules are evaluated only on what the
// site's collectors say they have committed (source_owners.caught_up, see
// sink/owners.go):
//
//   - A source counts while a collector wrote its record within forgetAfter
//     and it is not finished (a rotated file read to its end, a file gone:
//     caught up for ever). Its caught_up is the largest any collector wrote:
//     "every line written before T is committed" stays true.
//   - Each collector's record of the site as a whole counts the same way:
//     a collector there for the site with no file holding a line yet;
//     except when its latest write releases it (a collector stopped
//     cleanly): its files' records, merged with those of whichever
//     collector takes them over, hold what it may have left unread, and
//     its site record would otherwise pin the site at its stop for
//     forgetAfter, however far its replacement (a new id: a new state_dir,
//     a recreated container) has caught up. A collector killed, not
//     released, keeps holding through its site record.
//   - The site is complete until the smallest caught_up of what counts; a
//     site where nothing counts is complete nowhere (its collectors are gone
//     or forgotten, or none ever reported).
//   - A window [s, e) is complete when the store's now and the site's
//     complete-until are both at least e + lateness (the web server's
//     buffered log writes, the collector's wait for new lines and its record's
//     refresh). Windows before the site's first hit are not evaluated at all
//     (DataSince: a new install is not "below" for the day before it).
//
// A collector that stops, or is killed, holds its sites' windows until it
// is back; after forgetAfter without a record it is forgotten (a collector
// removed for good), and the site is judged by the others.

// forgetAfter is how long a record not rewritten still holds its site.
const forgetAfter = 24 * time.Hour

// ownerRecord is what source_owners says of a source (or of a site, a
// collector's site record) by one collector, every version of it merged.
type ownerRecord struct {
	Site      string
	Source    uint64
	Collector string
	Host      string
	Path      string
	Started   time.Time // the earliest claim
	Seen      time.Time // the latest write
	CaughtUp  time.Time // the largest caught_up written
	// Released: the latest write gave the record up (a collector stopping
	// cleanly); a release at the same second as a refresh wins, as in
	// sink.OwnersQuery.
	Released bool
}

// siteRecord reports whether r is a collector's record of its site.
func (r ownerRecord) siteRecord() bool { return r.Source == sink.SiteRecordID(r.Site) }

// describe names the record for operators: collector, host and file.
func (r ownerRecord) describe() string {
	what := "file " + r.Path
	if r.siteRecord() {
		what = "sources " + r.Path
	}
	if r.Collector == "" {
		return "no collector has reported"
	}
	if r.Released {
		what += " (released: the collector stopped)"
	}
	return fmt.Sprintf("collector %s on %s, %s", r.Collector, r.Host, what)
}

// known reports whether t is a caught_up time (not zero, not the epoch a
// record that was never caught up holds).
func known(t time.Time) bool { return t.Unix() > 0 }

// siteState is what the collectors say of a site at one moment.
type siteState struct {
	Site string
	// DataSince bounds the windows evaluated: the site's first hit when
	// that is within the rule's lookback; zero when the site has older
	// hits (no bound). Set by the sweeper (Store.DataSince), not by the
	// records.
	DataSince time.Time
	// CompleteUntil: every line of the site written before it is
	// committed; zero when the site is complete nowhere.
	CompleteUntil time.Time
	// Behind is the record that sets CompleteUntil (or, complete nowhere,
	// the last one heard of).
	Behind ownerRecord
	// Silent is when the site's data stopped being complete, the no-data
	// notice's key: CompleteUntil, except that a file a collector has just
	// begun reading counts from when it began, so that a collector catching
	// up after an outage does not start a second silence, and that records
	// forgotten (forgetAfter) while the silence lasts still count, so that
	// forgetting does not move the key and send a second notice for one
	// silence (see silentSince).
	Silent time.Time
}

// siteStateOf reads a site's records at now.
func siteStateOf(site string, recs []ownerRecord, now time.Time) siteState {
	st := siteState{Site: site}
	type source struct {
		caught, seen, started time.Time
		rec                   ownerRecord // the record with the largest caught_up
	}
	sources := map[uint64]*source{}
	var order []uint64
	// parts: what counts while live, forgotten or not.
	var parts []part
	var last ownerRecord
	for _, r := range recs {
		if r.Site != site {
			continue
		}
		if r.CaughtUp.Before(sink.CaughtUpForever) && later(r, last) {
			last = r
		}
		if r.siteRecord() {
			if !r.Released {
				parts = append(parts, part{r.CaughtUp, r.CaughtUp, r.Seen, r})
			}
			continue
		}
		s := sources[r.Source]
		if s == nil {
			s = &source{rec: r, caught: r.CaughtUp, started: r.Started}
			sources[r.Source] = s
			order = append(order, r.Source)
		}
		if r.CaughtUp.After(s.caught) || r.CaughtUp.Equal(s.caught) && r.Seen.After(s.rec.Seen) {
			s.caught, s.rec = r.CaughtUp, r
		}
		if r.Seen.After(s.seen) {
			s.seen = r.Seen
		}
		if known(r.Started) && (!known(s.started) || r.Started.Before(s.started)) {
			s.started = r.Started
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, id := range order {
		s := sources[id]
		if !s.caught.Before(sink.CaughtUpForever) {
			continue
		}
		silent := s.caught
		if !known(silent) {
			silent = s.started
		}
		parts = append(parts, part{s.caught, silent, s.seen, s.rec})
	}
	var counted []part
	for _, p := range parts {
		if p.live(now) {
			counted = append(counted, p)
		}
	}
	if len(counted) == 0 {
		st.Behind = last
		switch {
		case len(parts) > 0:
			st.Silent = silentSince(parts, now)
		case known(last.CaughtUp):
			st.Silent = last.CaughtUp
		case last.Collector != "":
			st.Silent = last.Seen
		}
		return st
	}
	least := counted[0]
	for _, p := range counted[1:] {
		if p.caught.Before(least.caught) {
			least = p
		}
	}
	st.Silent = silentSince(parts, now)
	st.CompleteUntil, st.Behind = least.caught, least.rec
	if !known(st.CompleteUntil) {
		st.CompleteUntil = time.Time{}
	}
	return st
}

// part is a record that counts for a site's completeness while live: a
// source (its collectors' records merged) or a collector's site record.
type part struct {
	caught, silent time.Time
	seen           time.Time // the latest write: live until seen + forgetAfter
	rec            ownerRecord
}

func (p part) live(at time.Time) bool { return !p.seen.Before(at.Add(-forgetAfter)) }

// silentSince is when the site's current silence began, from every part,
// forgotten or not: the smallest silent of the parts live at now, then of
// any part still live (not forgotten) when that silence began, and so on:
// the parts that held the site incomplete one after another without a
// moment between when none did. It does not depend on now once the parts
// are forgotten (it starts from when the last of them was), so the key of
// one silence stays the same while its records are forgotten one by one:
// one notice per silence, also for two collectors stopped at different
// times. A part forgotten before a silence began (a collector removed for
// good before the others stopped) does not reach back into it.
func silentSince(parts []part, now time.Time) time.Time {
	var latest time.Time
	for _, p := range parts {
		if p.seen.After(latest) {
			latest = p.seen
		}
	}
	since := minTime(now, latest.Add(forgetAfter))
	for changed := true; changed; {
		changed = false
		for _, p := range parts {
			if p.live(since) && p.silent.Before(since) {
				since, changed = p.silent, true
			}
		}
	}
	return since
}

// later reports whether r says more recently than than how far its
// collector got: a later caught_up, or, neither ever caught up, a later
// write.
func later(r, than ownerRecord) bool {
	switch {
	case than.Collector == "":
		return true
	case known(r.CaughtUp) != known(than.CaughtUp):
		return known(r.CaughtUp)
	case known(r.CaughtUp):
		return r.CaughtUp.After(than.CaughtUp)
	}
	return r.Seen.After(than.Seen)
}

// horizon is the end of the site's complete data at now: windows ending at
// or before it are complete. Zero when nothing is.
func (st siteState) horizon(now time.Time, lateness time.Duration) time.Time {
	if st.CompleteUntil.IsZero() {
		return time.Time{}
	}
	return minTime(now, st.CompleteUntil).Add(-lateness)
}

// complete reports whether the window [start, end) of the site is complete
// at now.
func (st siteState) complete(start, end, now time.Time, lateness time.Duration) bool {
	h := st.horizon(now, lateness)
	return !h.IsZero() && !end.After(h) && !start.Before(st.DataSince)
}

// untilText says how far the site is complete, for logs and dry runs.
func (st siteState) untilText(loc *time.Location) string {
	if st.CompleteUntil.IsZero() {
		if st.Behind.Collector == "" {
			return fmt.Sprintf("site %s has no data: no collector has reported for it", st.Site)
		}
		return fmt.Sprintf("site %s has no complete data: no collector has reported for it within %v (last: %s, caught up until %s)",
			st.Site, forgetAfter, st.Behind.describe(), stamp(st.Behind.CaughtUp, loc))
	}
	return fmt.Sprintf("site %s complete only until %s (%s)", st.Site, stamp(st.CompleteUntil, loc), st.Behind.describe())
}

// stamp formats a time for messages, "never" for one never known.
func stamp(t time.Time, loc *time.Location) string {
	if !known(t) {
		return "never"
	}
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// windowsIn lists the starts of w's windows that lie wholly in [from, to),
// in order. Consecutive windows touch: each starts where the one before
// ends (End), so the list with the last one's end cuts [first, end) into
// the windows, daylight-saving days included.
func (w Window) windowsIn(from, to time.Time) []time.Time {
	if w.Size <= 0 {
		return nil
	}
	var out []time.Time
	s := w.Start(from)
	if s.Before(from) {
		s = w.End(s)
	}
	for e := w.End(s); !e.After(to); e = w.End(s) {
		out = append(out, s)
		s = e
	}
	return out
}

// lookback is how far back a below rule evaluates windows at each sweep:
// a window completes late when a collector catches up after an outage, and
// is still evaluated then. A day, or two windows when those are longer.
func lookback(w Window) time.Duration { return max(day, 2*w.Size) }

// silenceLookback is how far back a no_traffic rule looks for the last hit
// in the rollup of minutes before asking the daily one.
func silenceLookback(d time.Duration) time.Duration { return max(day, 2*d) }

// Records reads what source_owners says of the given sites: every record,
// each (source, collector)'s versions merged. Cheap: a record per file and
// collector, rewritten in place (ReplacingMergeTree).
func (s *Store) Records(ctx context.Context, sites []string) ([]ownerRecord, error) {
	if len(sites) == 0 {
		return nil, nil
	}
	var out []ownerRecord
	// released: no write of the record is later than its latest release
	// (maxIf of no row is the epoch, before any write).
	q := "SELECT site, source_id, collector, argMax(host, seen), argMax(path, seen), min(started), max(seen), max(caught_up), " +
		"toUInt8(maxIf(seen, released = 1) >= maxIf(seen, released = 0)) FROM " + s.dbName +
		".source_owners WHERE site IN ? GROUP BY site, source_id, collector"
	err := s.db.Select(ctx, q, []any{inSet(sites)}, func(scan func(...any) error) error {
		var r ownerRecord
		var released uint8
		if err := scan(&r.Site, &r.Source, &r.Collector, &r.Host, &r.Path, &r.Started, &r.Seen, &r.CaughtUp, &released); err != nil {
			return err
		}
		r.Released = released == 1
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read how far the collectors have committed (source_owners): %w", err)
	}
	return out, nil
}
