package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The store's side of reports: the hits of a site's pages in two adjacent
// periods, and the crossings recorded for it in one. The hits come from
// the daily rollup for the store's days wholly inside a period, and from
// the per-minute rollup for the day at each end: a report reads two
// periods' days plus four days of minutes of the site's pages, whatever
// the number of hits stored.

// rangeSQL is a UNION ALL member list selecting (path, hits, cur) of the
// site's rows in [from, to), cur being tag. Which rollup holds a minute is
// decided in SQL by the store's own day of it (toDate), which is how
// hits_1d's day was cut: the daily rows of the days strictly between the
// day of from and the day of to's last second, the minutes of those two
// days. Every minute of [from, to) is in exactly one of them, whatever the
// store's time zone.
func (s *Store) rangeSQL(r *Rule, site, path string, from, to time.Time, tag uint8) (string, []any) {
	f, fargs := filters(r)
	page, pargs := "", []any(nil)
	if path != "" {
		page, pargs = " AND path = ?", []any{path}
	}
	last := to.Add(-time.Second).Unix()
	mid := "SELECT path, hits, toUInt8(?) AS cur FROM " + s.dbName + ".hits_1d WHERE site = ?" + page +
		" AND day > toDate(toDateTime(?)) AND day < toDate(toDateTime(?))" + f
	edge := "SELECT path, hits, toUInt8(?) AS cur FROM " + s.dbName + ".hits_1m WHERE site = ?" + page +
		" AND minute >= toDateTime(?) AND minute < toDateTime(?) AND (toDate(minute) = toDate(toDateTime(?)) OR toDate(minute) = toDate(toDateTime(?)))" + f
	var args []any
	args = append(args, tag, site)
	args = append(args, pargs...)
	args = append(args, from.Unix(), last)
	args = append(args, fargs...)
	args = append(args, tag, site)
	args = append(args, pargs...)
	args = append(args, from.Unix(), to.Unix(), from.Unix(), last)
	args = append(args, fargs...)
	return mid + " UNION ALL " + edge, args
}

// ReportPages calls fn with each page of site (or only path, when given)
// with hits in [prev, start) or [start, until): its hits in each (Hits the
// later). Rows are streamed: memory holds what fn keeps. Paths longer
// than maxPath come cut to their first 256 bytes.
func (s *Store) ReportPages(ctx context.Context, r *Rule, site, path string, prev, start, until time.Time, fn func(ReportPage)) error {
	var parts []string
	var args []any
	if start.After(prev) {
		q, a := s.rangeSQL(r, site, path, prev, start, 0)
		parts, args = append(parts, q), append(args, a...)
	}
	if until.After(start) {
		q, a := s.rangeSQL(r, site, path, start, until, 1)
		parts, args = append(parts, q), append(args, a...)
	}
	if len(parts) == 0 {
		return nil
	}
	q := "SELECT if(length(path) <= ?, path, substring(path, 1, 256)), sumIf(hits, cur = 1), sumIf(hits, cur = 0) FROM (" +
		strings.Join(parts, " UNION ALL ") + ") GROUP BY path"
	args = append([]any{uint64(maxPath)}, args...)
	err := s.db.Select(ctx, q, args, func(scan func(...any) error) error {
		var p string
		var cur, before uint64
		if err := scan(&p, &cur, &before); err != nil {
			return err
		}
		fn(ReportPage{Path: p, Hits: int64(cur), Prev: int64(before)})
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the pages of %s for rule %s: %w", site, r.Name, err)
	}
	return nil
}

// ReportCrossings returns the crossings of site first recorded in [from,
// to), reports left out, oldest first: at most limit of them, and how many
// more there are. It reads the crossings table's rows of the site (a row
// per state change of each crossing), not hits.
func (s *Store) ReportCrossings(ctx context.Context, site string, from, to time.Time, limit int) ([]Row, int, error) {
	q := "SELECT argMax(kind, version), argMax(rule, version), argMax(path, version), argMax(window_start, version), argMax(threshold, version), " +
		"argMax(count, version), argMax(state, version), argMax(note, version), min(updated) AS first FROM " + s.dbName +
		".crossings WHERE site = ? AND kind != ? GROUP BY key HAVING first >= toDateTime(?) AND first < toDateTime(?) ORDER BY first, key"
	var out []Row
	more := 0
	err := s.db.Select(ctx, q, []any{site, KindReport, from.Unix(), to.Unix()}, func(scan func(...any) error) error {
		var r Row
		var threshold, count uint64
		if err := scan(&r.Kind, &r.Rule, &r.Path, &r.WindowStart, &threshold, &count, &r.State, &r.Note, &r.Updated); err != nil {
			return err
		}
		if len(out) >= limit {
			more++
			return nil
		}
		r.Site, r.Threshold, r.Count = site, int64(threshold), int64(count)
		r.Subject = subjectOf(r.Kind, r.Site, r.Path)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read the crossings of %s: %w", site, err)
	}
	return out, more, nil
}
