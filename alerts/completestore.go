package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The store's side of below and no_traffic rules: reads of the per-minute
// and per-day rollups whose cost follows the pages a rule watches and the
// windows it evaluates, never the hits stored (hits_1m and hits_1d are
// ordered by site, path and time).

// activePage is a page with hits in a rule's active_within.
type activePage struct {
	Path              string
	FirstDay, LastDay time.Time // UTC days with hits, within the range read
}

// ActivePages lists the pages of site with a hit matching r's filters on
// or after the day of since (hits_1d: UTC days), with their first and last
// such day. Paths longer than maxPath come back cut, flagged by their
// length, and are left out: the sweeper does not count them (see maxPath).
func (s *Store) ActivePages(ctx context.Context, r *Rule, site string, since time.Time) ([]activePage, error) {
	f, fargs := filters(r)
	q := "SELECT if(length(path) <= ?, path, substring(path, 1, 256)), length(path), min(day), max(day) FROM " + s.dbName +
		".hits_1d WHERE site = ? AND day >= toDate(?)" + f + " GROUP BY path ORDER BY path"
	args := append([]any{uint64(maxPath), site, since.UTC().Format("2006-01-02")}, fargs...)
	var out []activePage
	long := 0
	err := s.db.Select(ctx, q, args, func(scan func(...any) error) error {
		var p activePage
		var n uint64
		if err := scan(&p.Path, &n, &p.FirstDay, &p.LastDay); err != nil {
			return err
		}
		if n > maxPath {
			long++
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the active pages of %s for rule %s: %w", site, r.Name, err)
	}
	return out, nil
}

// windowGroup is SQL that numbers the minutes of some of a rule's windows
// by window: idx is the 1-based index (among all the windows asked for) of
// the window holding minute, 0 outside them; where (" AND (...)") keeps
// only their minutes. Its text is numbers the sweeper computed, not data.
type windowGroup struct {
	idx, where string
}

// size is the group's SQL text in bytes, taken from the budget of a
// query's bound literals (maxBound).
func (g windowGroup) size() int { return len(g.idx) + len(g.where) }

// windowRun is n consecutive windows of one length (step seconds) from
// first (Unix seconds), the first of them window base (1-based).
type windowRun struct {
	first, step int64
	n, base     int
}

// windowRuns cuts starts (sorted, windows of w that are equal or apart)
// into runs of consecutive windows of one length: the index of a minute
// in a run is arithmetic, so a query's text grows with the runs, not with
// the windows (a 1m window with a baseline of 30 days is 44,640 windows
// but one run; daylight saving, a day not a multiple of the window and
// baseline periods apart start new runs).
func windowRuns(w Window, starts []time.Time) []windowRun {
	var runs []windowRun
	for i, t := range starts {
		s, e := t.Unix(), w.End(t).Unix()
		if k := len(runs) - 1; k >= 0 {
			r := &runs[k]
			if e-s == r.step && s == r.first+int64(r.n)*r.step {
				r.n++
				continue
			}
		}
		runs = append(runs, windowRun{first: s, step: e - s, n: 1, base: i + 1})
	}
	return runs
}

// windowGroups is SQL numbering the minutes of w's windows starting at
// starts, cut into groups of at most budget bytes each (one query per
// group): whatever the windows, every query stays under max_query_size.
func windowGroups(w Window, starts []time.Time, budget int) []windowGroup {
	const m = "toInt64(toUInt32(minute))"
	var out []windowGroup
	var idx, where strings.Builder
	flush := func() {
		if idx.Len() == 0 {
			return
		}
		out = append(out, windowGroup{
			idx:   "toUInt64(multiIf(" + idx.String() + "0))",
			where: " AND (" + where.String() + ")",
		})
		idx.Reset()
		where.Reset()
	}
	for _, r := range windowRuns(w, starts) {
		end := r.first + int64(r.n)*r.step
		i := fmt.Sprintf("%s >= %d AND %s < %d, %d + intDiv(%s - %d, %d), ", m, r.first, m, end, r.base, m, r.first, r.step)
		c := fmt.Sprintf("(minute >= toDateTime(%d) AND minute < toDateTime(%d))", r.first, end)
		if idx.Len() > 0 && idx.Len()+where.Len()+len(i)+len(c)+64 > budget {
			flush()
		}
		idx.WriteString(i)
		if where.Len() > 0 {
			where.WriteString(" OR ")
		}
		where.WriteString(c)
	}
	flush()
	return out
}

// windowCount is one page's count in one window.
type windowCount struct {
	Hits  int64
	First time.Time // the first minute with hits in the window
}

// WindowCounts returns, for each path (or, whole, the site's total under
// ""), the hits in each of the consecutive windows starting at starts and
// ending at end, by window index (0-based); windows without hits are left
// out.
func (s *Store) WindowCounts(ctx context.Context, r *Rule, site string, paths []string, whole bool, starts []time.Time, end time.Time) (map[string]map[int]windowCount, error) {
	out := map[string]map[int]windowCount{}
	if len(starts) == 0 {
		return out, nil
	}
	// The bound of [starts[0], end) stays: the groups' ranges cut it (the
	// windows are consecutive), and the table's order wants one range.
	err := s.countByWindow(ctx, r, site, paths, whole, starts, "windows", ", min(minute)",
		" AND minute >= toDateTime(?) AND minute < toDateTime(?)", []any{starts[0].Unix(), end.Unix()},
		func(scan func(...any) error) error {
			var p string
			var w, n uint64
			var first time.Time
			if err := scan(&p, &w, &n, &first); err != nil {
				return err
			}
			if w < 1 || int(w) > len(starts) {
				return nil
			}
			if out[p] == nil {
				out[p] = map[int]windowCount{}
			}
			out[p][int(w)-1] = windowCount{Hits: int64(n), First: first}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countByWindow counts r's metric by window over the windows starting at
// starts, for each path (or, whole, the site under ""): one query per group
// of windows (windowGroups, each under half the budget of bound text) and,
// for pages, per chunk of paths that fits in the rest, so that a rule of 1m
// windows with a baseline of 60 days is a few queries, not one over
// max_query_size. Each row is (path or "", the window's 1-based index, the
// count, then cols); bound is more of the WHERE clause, with its args; what
// names the windows in an error.
func (s *Store) countByWindow(ctx context.Context, r *Rule, site string, paths []string, whole bool, starts []time.Time,
	what, cols, bound string, boundArgs []any, row func(scan func(...any) error) error) error {
	f, fargs := filters(r)
	m := r.metric()
	run := func(q string, args ...any) error {
		return s.db.Select(ctx, q, append(append(args, boundArgs...), fargs...), row)
	}
	for _, g := range windowGroups(r.Window, starts, maxBound/2) {
		if whole {
			q := "SELECT '' AS p, " + g.idx + " AS w, " + m.agg + cols + " FROM " + s.dbName + "." + m.rollup +
				" WHERE site = ?" + bound + g.where + f + " GROUP BY p, w"
			if err := run(q, site); err != nil {
				return fmt.Errorf("count the %s of %s for rule %s: %w", what, site, r.Name, err)
			}
			continue
		}
		for _, part := range chunks(paths, maxBound-g.size()) {
			q := "SELECT path, " + g.idx + " AS w, " + m.agg + cols + " FROM " + s.dbName + "." + m.rollup +
				" WHERE site = ? AND path IN ?" + bound + g.where + f + " GROUP BY path, w"
			if err := run(q, site, inSet(part)); err != nil {
				return fmt.Errorf("count the %s of %d pages for rule %s: %w", what, len(part), r.Name, err)
			}
		}
	}
	return nil
}

// LastHits returns, for each path (or, whole, the site under ""), the last
// minute with a hit in [from, to).
func (s *Store) LastHits(ctx context.Context, r *Rule, site string, paths []string, whole bool, from, to time.Time) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	f, fargs := filters(r)
	run := func(q string, args []any) error {
		return s.db.Select(ctx, q, append(args, fargs...), func(scan func(...any) error) error {
			var p string
			var last time.Time
			var n uint64
			if err := scan(&p, &last, &n); err != nil {
				return err
			}
			if n > 0 {
				out[p] = last
			}
			return nil
		})
	}
	if whole {
		q := "SELECT '' AS p, max(minute), count() FROM " + s.dbName + ".hits_1m WHERE site = ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY p"
		if err := run(q, []any{site, from.Unix(), to.Unix()}); err != nil {
			return nil, fmt.Errorf("read the last hit of %s for rule %s: %w", site, r.Name, err)
		}
		return out, nil
	}
	for _, part := range chunks(paths, maxBound) {
		q := "SELECT path, max(minute), count() FROM " + s.dbName + ".hits_1m WHERE site = ? AND path IN ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY path"
		if err := run(q, []any{site, inSet(part), from.Unix(), to.Unix()}); err != nil {
			return nil, fmt.Errorf("read the last hits of %d pages for rule %s: %w", len(part), r.Name, err)
		}
	}
	return out, nil
}

// hitSpan is the first and last minute with a hit in a bucket of time.
type hitSpan struct {
	First, Last time.Time
}

// HitSpans returns, for each path (or, whole, the site under ""), the
// first and last minute with a hit of each bucket of size (aligned on the
// epoch) in [from, to) that has one, in order: a silence of size or more
// lies between two of them, never inside one. Rows: the paths times the
// buckets of the range, whatever the hits.
func (s *Store) HitSpans(ctx context.Context, r *Rule, site string, paths []string, whole bool, from, to time.Time, size time.Duration) (map[string][]hitSpan, error) {
	out := map[string][]hitSpan{}
	f, fargs := filters(r)
	bucket := uint64(max(size, time.Minute) / time.Second)
	run := func(q string, args []any) error {
		return s.db.Select(ctx, q, append(args, fargs...), func(scan func(...any) error) error {
			var p string
			var b uint64
			var span hitSpan
			if err := scan(&p, &b, &span.First, &span.Last); err != nil {
				return err
			}
			out[p] = append(out[p], span)
			return nil
		})
	}
	if whole {
		q := "SELECT '' AS p, toUInt64(intDiv(toUInt32(minute), ?)) AS b, min(minute), max(minute) FROM " + s.dbName +
			".hits_1m WHERE site = ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY p, b ORDER BY p, b"
		if err := run(q, []any{bucket, site, from.Unix(), to.Unix()}); err != nil {
			return nil, fmt.Errorf("read the hits of %s for rule %s: %w", site, r.Name, err)
		}
		return out, nil
	}
	for _, part := range chunks(paths, maxBound) {
		q := "SELECT path, toUInt64(intDiv(toUInt32(minute), ?)) AS b, min(minute), max(minute) FROM " + s.dbName +
			".hits_1m WHERE site = ? AND path IN ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY path, b ORDER BY path, b"
		if err := run(q, []any{bucket, site, inSet(part), from.Unix(), to.Unix()}); err != nil {
			return nil, fmt.Errorf("read the hits of %d pages for rule %s: %w", len(part), r.Name, err)
		}
	}
	return out, nil
}

// LastHitDays returns, for each path (or, whole, the site under ""), the
// last UTC day before the day of before with a hit: where to look for the
// last hit of a page silent for longer than the minutes read.
func (s *Store) LastHitDays(ctx context.Context, r *Rule, site string, paths []string, whole bool, before time.Time) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	f, fargs := filters(r)
	day := before.UTC().Format("2006-01-02")
	run := func(q string, args []any) error {
		return s.db.Select(ctx, q, append(args, fargs...), func(scan func(...any) error) error {
			var p string
			var last time.Time
			var n uint64
			if err := scan(&p, &last, &n); err != nil {
				return err
			}
			if n > 0 {
				out[p] = last
			}
			return nil
		})
	}
	if whole {
		q := "SELECT '' AS p, max(day), count() FROM " + s.dbName + ".hits_1d WHERE site = ? AND day <= toDate(?)" + f + " GROUP BY p"
		if err := run(q, []any{site, day}); err != nil {
			return nil, fmt.Errorf("read the last day with hits of %s for rule %s: %w", site, r.Name, err)
		}
		return out, nil
	}
	for _, part := range chunks(paths, maxBound) {
		q := "SELECT path, max(day), count() FROM " + s.dbName + ".hits_1d WHERE site = ? AND path IN ? AND day <= toDate(?)" + f + " GROUP BY path"
		if err := run(q, []any{site, inSet(part), day}); err != nil {
			return nil, fmt.Errorf("read the last days with hits of %d pages for rule %s: %w", len(part), r.Name, err)
		}
	}
	return out, nil
}

// DataSince says when site's data begins, as far as a sweep reading back to
// lo cares: some is false when the site has no hit at all; since is zero when
// it has hits from before the (UTC) day of lo, else its first minute with a
// hit. Cheap: the first query stops at the first older row, the second
// reads the site's minutes since that day.
//
// A rule counting visitors reads hits_visitors_1m, which begins when the
// store was migrated to it: hits from before an upgrade are in hits_1m and
// hits_1d but not there, and a window among them would read 0 visitors (a
// false below; a baseline of 0 and a false spike). Its data begins where
// both rollups have it.
func (s *Store) DataSince(ctx context.Context, site string, lo time.Time, m metric) (since time.Time, some bool, err error) {
	since, some, err = s.dataSince(ctx, site, lo, "hits_1d", "day", "toDate", hitsMetric.rollup)
	if err != nil || !some || m.rollup == hitsMetric.rollup {
		return since, some, err
	}
	vsince, vsome, err := s.dataSince(ctx, site, lo, m.rollup, "minute", "toDateTime", m.rollup)
	if err != nil || !vsome {
		return time.Time{}, false, err
	}
	if vsince.After(since) {
		since = vsince
	}
	return since, true, nil
}

// dataSince is DataSince on one rollup: any row in older (its time column
// col, of the type conv makes) before lo's day, else the first minute of
// minutes (a per-minute rollup) since that day.
func (s *Store) dataSince(ctx context.Context, site string, lo time.Time, older, col, conv, minutes string) (since time.Time, some bool, err error) {
	day := lo.UTC().Truncate(24 * time.Hour)
	bound := any(day.Format("2006-01-02"))
	if conv == "toDateTime" {
		bound = day.Unix()
	}
	var n uint64
	err = s.db.Select(ctx, "SELECT count() FROM (SELECT 1 FROM "+s.dbName+"."+older+" WHERE site = ? AND "+col+" < "+conv+"(?) LIMIT 1)", []any{site, bound},
		func(scan func(...any) error) error { return scan(&n) })
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read when the data of %s begins in %s: %w", site, older, err)
	}
	if n > 0 {
		return time.Time{}, true, nil
	}
	err = s.db.Select(ctx, "SELECT count(), min(minute) FROM "+s.dbName+"."+minutes+" WHERE site = ? AND minute >= toDateTime(?)", []any{site, day.Unix()},
		func(scan func(...any) error) error { return scan(&n, &since) })
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read when the data of %s begins in %s: %w", site, minutes, err)
	}
	if n == 0 {
		return time.Time{}, false, nil
	}
	return since, true, nil
}

// FirstDay is the site's first (UTC) day with a hit: where the silence of
// a page that never had one begins. It reads the site's whole daily
// rollup, so it is asked only for such a page.
func (s *Store) FirstDay(ctx context.Context, site string) (time.Time, error) {
	var first time.Time
	var n uint64
	err := s.db.Select(ctx, "SELECT count(), min(day) FROM "+s.dbName+".hits_1d WHERE site = ?", []any{site},
		func(scan func(...any) error) error { return scan(&n, &first) })
	if err != nil {
		return time.Time{}, fmt.Errorf("read the first day of %s: %w", site, err)
	}
	return first, nil
}

// LastSweep is when the last sweep finished (the store's clock), zero when
// none did.
func (s *Store) LastSweep(ctx context.Context) (time.Time, error) {
	var n uint64
	var t time.Time
	if err := s.db.Select(ctx, "SELECT count(), max(finished) FROM "+s.dbName+".sweeps", nil, func(scan func(...any) error) error {
		return scan(&n, &t)
	}); err != nil {
		return time.Time{}, fmt.Errorf("read the last sweep: %w", err)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return t, nil
}
