package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Below and no_traffic rules, and the no-data notice (issue 19). They are
// not fired by hits arriving, as thresholds are (detect.go): they fire on
// what did not arrive, so each sweep evaluates them from the rollups, on
// the windows the site's collectors say are complete (complete.go). A
// crossing has the same identity, claim, fencing, outbox and digest rules
// as a threshold's; its key makes evaluating a window again free of
// duplicates.
//
//   - below N, window W: each complete window of the last lookback (a day,
//     or two windows) whose count is under N is a crossing (rule, page,
//     window start, N). Scope: the exact page; the site's total (no path);
//     or each page of a glob or regex with a hit within active_within (from
//     the daily rollup; pages quiet longer are forgotten), from the window
//     in which it first had a hit if that is within the lookback (a new
//     page is not "below" before it existed).
//   - no_traffic D: sliding, one crossing per silence: when the data is
//     complete up to at least the last hit + D with no hit after it, the
//     crossing is (rule, page, the minute after the last hit, D in
//     seconds). An outage of two hours sends one email, not one per window,
//     and the next hit ends the silence; tumbling windows would cut a
//     silence across two windows into none or several. A page with no hit
//     since its site's collection began is silent from then.
//   - no_data_after T: when the site's data has not been complete for T,
//     one notice (rule, site, when the data stopped being complete), not
//     repeated while the silence lasts; a later silence is a new notice.
//
// A rule whose ended windows (end + lateness passed) are not complete is
// held: the gauge hitcount_sweeper_rules_held{rule} is 1, a log line names
// the site and the collector and file behind; the crossing found once they
// catch up says in its email that it was held back, and since when.

// heldGrace: a window whose crossing is found later than this after the
// sweep that could first have found it is said to have been held back.
const heldGrace = 2 * time.Minute

// evaluation is what one completeness rule found in a sweep.
type evaluation struct {
	rows []Row
	// held: a window (or a silence) has ended but the site's data is not
	// complete past it.
	held bool
	note string // for the dry run: what was evaluated, or why held
}

// detectComplete evaluates every below and no_traffic rule at now (the
// store's clock). Reading the collectors' records or a rule's counts may
// fail for good (a column missing: the schema not migrated; a query the
// store refuses): the rule is then held and recorded as failing, the
// others go on; an error that may pass fails the pass.
func (s *Sweeper) detectComplete(ctx context.Context, now time.Time) ([]Row, []string, error) {
	var rules []*Rule
	var sites []string
	seen := map[string]bool{}
	for _, r := range s.rules {
		if !r.completeness() {
			continue
		}
		rules = append(rules, r)
		if !seen[r.Site] {
			seen[r.Site] = true
			sites = append(sites, r.Site)
		}
	}
	if len(rules) == 0 {
		return nil, nil, nil
	}
	recs, err := retry(ctx, func() ([]ownerRecord, error) { return s.store.Records(ctx, sites) })
	if err != nil && !permanent(err) {
		return nil, nil, err
	}
	if err != nil {
		s.o.Logger.Error("cannot read how far the collectors have committed (source_owners): below and no_traffic rules are held; run `collector -migrate` as an administrator", "err", clipErr(err))
		var notes []string
		for _, r := range rules {
			s.o.Metrics.ruleError(r.Name)
			s.o.Metrics.held(r.Name, true)
			notes = append(notes, fmt.Sprintf("held: rule %s: cannot read source_owners: %s", r.Name, clipErr(err)))
		}
		return nil, notes, nil
	}
	last, err := s.store.LastSweep(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []Row
	var notes []string
	for _, r := range rules {
		st := siteStateOf(r.Site, recs, now)
		var ev evaluation
		lo := now.Add(-lookback(r.Window))
		if r.Kind == config.KindNoTraffic {
			lo = now.Add(-silenceLookback(r.NoTraffic))
		}
		if r.baselined() {
			lo = r.baselineLo(now)
		}
		since, some, err := retry2(ctx, func() (time.Time, bool, error) { return s.store.DataSince(ctx, r.Site, lo, r.metric()) })
		st.DataSince = since
		switch {
		case err != nil:
		case !some:
			ev.note = fmt.Sprintf("site %s has no hit recorded yet: nothing to evaluate", r.Site)
		case r.Kind == config.KindBelow:
			ev, err = s.below(ctx, r, st, now, last)
		case r.baselined():
			ev, err = s.change(ctx, r, st, now, last)
		default:
			ev, err = s.silence(ctx, r, st, now, last)
		}
		if err != nil && !permanent(err) {
			return nil, nil, err
		}
		if err != nil {
			s.o.Logger.Error("the rule's queries fail for good: rule skipped in this pass", "rule", r.Name, "err", clipErr(err))
			s.o.Metrics.ruleError(r.Name)
			ev = evaluation{held: true, note: "cannot evaluate: " + clipErr(err)}
		}
		if n, ok := s.noData(r, st, now); ok {
			ev.rows = append(ev.rows, n)
		}
		s.o.Metrics.held(r.Name, ev.held)
		if ev.held {
			s.o.Logger.Warn("rule held: its site's logs are not complete past a window that has ended", "rule", r.Name, "site", r.Site,
				"complete_until", stamp(st.CompleteUntil, r.Window.loc()), "collector", st.Behind.Collector, "host", st.Behind.Host,
				"path", clip(st.Behind.Path), "why", ev.note)
			notes = append(notes, fmt.Sprintf("held: rule %s: %s", r.Name, ev.note))
		} else {
			notes = append(notes, fmt.Sprintf("rule %s: %s", r.Name, ev.note))
		}
		out = append(out, ev.rows...)
	}
	return out, notes, nil
}

// retry2 is retry for a query of two results.
func retry2[A, B any](ctx context.Context, q func() (A, B, error)) (A, B, error) {
	type pair struct {
		a A
		b B
	}
	p, err := retry(ctx, func() (pair, error) { a, b, err := q(); return pair{a, b}, err })
	return p.a, p.b, err
}

// heldNote says that a crossing due at due (its window's end, or its
// silence's, plus lateness) was found only now, when a sweep after due
// (last) did not find it: the site's data was not complete then.
func heldNote(due, now, last time.Time, st siteState, loc *time.Location) string {
	if !last.After(due.Add(heldGrace)) {
		return ""
	}
	return fmt.Sprintf("Held back from %s until %s: until then the collectors of %s had not committed their logs past its end.",
		stamp(due, loc), stamp(now, loc), st.Site)
}

// below evaluates a below rule: every complete window of the lookback.
func (s *Sweeper) below(ctx context.Context, r *Rule, st siteState, now, last time.Time) (evaluation, error) {
	var ev evaluation
	loc := r.Window.loc()
	lo := lookbackFrom(r, st, now)
	var starts []time.Time
	starts, ev.held, ev.note = s.completeWindows(r, st, now)
	if len(starts) == 0 {
		return ev, nil
	}
	end := r.Window.End(starts[len(starts)-1])
	var paths []string
	newPages := map[string]bool{}
	switch r.scope {
	case scopePage:
		paths = []string{r.Path}
	case scopePattern:
		active, err := retry(ctx, func() ([]activePage, error) { return s.store.ActivePages(ctx, r, r.Site, now.Add(-r.ActiveWithin)) })
		if err != nil {
			return ev, err
		}
		loDay := time.Date(lo.UTC().Year(), lo.UTC().Month(), lo.UTC().Day(), 0, 0, 0, 0, time.UTC)
		for _, p := range active {
			if !r.pathMatch(p.Path) {
				continue
			}
			paths = append(paths, p.Path)
			if !p.FirstDay.Before(loDay) {
				newPages[p.Path] = true
			}
		}
	}
	counts, err := retry(ctx, func() (map[string]map[int]windowCount, error) {
		return s.store.WindowCounts(ctx, r, r.Site, paths, r.scope == scopeSite, starts, end)
	})
	if err != nil {
		return ev, err
	}
	if r.scope == scopeSite {
		paths = []string{""}
	}
	below := 0
	for _, p := range paths {
		byWindow := counts[p]
		var born time.Time
		if newPages[p] {
			// A page first seen within the lookback: windows before its
			// first hit are not below, it did not exist.
			born = end
			for _, c := range byWindow {
				if c.First.Before(born) {
					born = c.First
				}
			}
		}
		for i, w := range starts {
			if w.Before(born) {
				continue
			}
			n := byWindow[i].Hits
			if n >= r.Below {
				continue
			}
			below++
			wEnd := r.Window.End(w)
			ev.rows = append(ev.rows, Row{
				Crossing: Crossing{Rule: r.Name, Subject: PageSubject(r.Site, p), WindowStart: w.UTC(), Threshold: r.Below},
				Kind:     config.KindBelow, Site: r.Site, Path: p, Count: n,
				Note: heldNote(wEnd.Add(s.o.Lateness), now, last, st, loc),
			})
		}
	}
	summary := fmt.Sprintf("%d complete window(s) from %s to %s of %d page(s) evaluated, %d below %d", len(starts), stamp(starts[0], loc), stamp(end, loc), len(paths), below, r.Below)
	if ev.note != "" {
		ev.note += "; " + summary
	} else {
		ev.note = fmt.Sprintf("site %s complete until %s; %s", r.Site, stamp(st.CompleteUntil, loc), summary)
	}
	return ev, nil
}

// silence evaluates a no_traffic rule: every silence of D or more of each
// page (or of the site) that ends within the lookback, or lasts until the
// end of the site's complete data. Read per bucket of D (its first and last
// hit): a gap of D or more between two hits is never inside one bucket, so
// it lies between two buckets with hits, exactly. A silence that ended
// while the site was held (a collector down) is found once it is complete.
func (s *Sweeper) silence(ctx context.Context, r *Rule, st siteState, now, last time.Time) (evaluation, error) {
	var ev evaluation
	loc := r.Window.loc()
	h := st.horizon(now, s.o.Lateness)
	if h.IsZero() {
		ev.held = true
		ev.note = st.untilText(loc)
		return ev, nil
	}
	lo := h.Add(-silenceLookback(r.NoTraffic))
	var paths []string
	lastDay := map[string]time.Time{}
	whole := r.scope == scopeSite
	switch r.scope {
	case scopePage:
		paths = []string{r.Path}
	case scopePattern:
		active, err := retry(ctx, func() ([]activePage, error) { return s.store.ActivePages(ctx, r, r.Site, h.Add(-r.ActiveWithin)) })
		if err != nil {
			return ev, err
		}
		for _, p := range active {
			if r.pathMatch(p.Path) {
				paths = append(paths, p.Path)
				lastDay[p.Path] = p.LastDay
			}
		}
	default:
		paths = []string{""}
	}
	buckets, err := retry(ctx, func() (map[string][]hitSpan, error) {
		return s.store.HitSpans(ctx, r, r.Site, paths, whole, lo, h, r.NoTraffic)
	})
	if err != nil {
		return ev, err
	}
	// Silent over all the minutes read: the last hit is further back.
	lastHit := map[string]time.Time{}
	var older []string
	for _, p := range paths {
		if len(buckets[p]) == 0 {
			older = append(older, p)
		}
	}
	if len(older) > 0 {
		days := lastDay
		if r.scope != scopePattern {
			days, err = retry(ctx, func() (map[string]time.Time, error) { return s.store.LastHitDays(ctx, r, r.Site, older, whole, lo) })
			if err != nil {
				return ev, err
			}
		}
		from := lo
		var withDay []string
		for _, p := range older {
			if d, ok := days[p]; ok && d.Before(lo) {
				withDay = append(withDay, p)
				from = minTime(from, d)
			}
		}
		if len(withDay) > 0 {
			more, err := retry(ctx, func() (map[string]time.Time, error) {
				return s.store.LastHits(ctx, r, r.Site, withDay, whole, from, lo)
			})
			if err != nil {
				return ev, err
			}
			for p, t := range more {
				lastHit[p] = t
			}
		}
	}
	silent, waiting := 0, 0
	fire := func(p string, start time.Time) {
		silent++
		ev.rows = append(ev.rows, Row{
			Crossing: Crossing{Rule: r.Name, Subject: PageSubject(r.Site, p), WindowStart: start.UTC(), Threshold: int64(r.NoTraffic / time.Second)},
			Kind:     config.KindNoTraffic, Site: r.Site, Path: p,
			Note: heldNote(start.Add(r.NoTraffic+s.o.Lateness), now, last, st, loc),
		})
	}
	for _, p := range paths {
		spans := buckets[p]
		var start time.Time
		if len(spans) > 0 {
			// Silences that ended within the lookback.
			for i := 1; i < len(spans); i++ {
				if gap := spans[i-1].Last.Add(time.Minute); !gap.Add(r.NoTraffic).After(spans[i].First) {
					fire(p, gap)
				}
			}
			start = spans[len(spans)-1].Last.Add(time.Minute) // the minute after the last hit
		} else if t, ok := lastHit[p]; ok {
			start = t.Add(time.Minute)
		} else if r.scope == scopePattern {
			continue // active, yet no hit before the horizon: its hits are after it
		} else {
			// Never a hit: silent since the site's data began.
			start = st.DataSince
			if start.IsZero() {
				first, err := retry(ctx, func() (time.Time, error) { return s.store.FirstDay(ctx, r.Site) })
				if err != nil {
					return ev, err
				}
				start = first
			}
		}
		// The silence going on at the horizon.
		if until := start.Add(r.NoTraffic); until.After(h) {
			if !until.Add(s.o.Lateness).After(now) {
				waiting++
			}
			continue
		}
		fire(p, start)
	}
	ev.held = waiting > 0
	ev.note = fmt.Sprintf("site %s complete until %s; %d page(s) watched, %d silence(s) of %s or more", r.Site, stamp(st.CompleteUntil, loc), len(paths), silent, durationText(r.NoTraffic))
	if ev.held {
		ev.note = fmt.Sprintf("%s: %d page(s) would be silent for %s if their logs were complete; %s", st.untilText(loc), waiting, durationText(r.NoTraffic), ev.note)
	}
	return ev, nil
}

// noData is the rule's no-data notice, when its site's data has not been
// complete for no_data_after.
func (s *Sweeper) noData(r *Rule, st siteState, now time.Time) (Row, bool) {
	if r.NoDataAfter <= 0 {
		return Row{}, false
	}
	if !st.CompleteUntil.IsZero() && now.Sub(st.CompleteUntil) <= r.NoDataAfter {
		return Row{}, false
	}
	since := st.Silent
	if known(since) && now.Sub(since) <= r.NoDataAfter {
		return Row{}, false
	}
	if !known(since) {
		since = time.Unix(0, 0)
	}
	loc := r.Window.loc()
	var note string
	switch {
	case st.Behind.Collector == "":
		note = "No collector has ever reported for this site (collectors older than this sweeper do not report how far they have committed: upgrade them)."
	case st.CompleteUntil.IsZero():
		note = fmt.Sprintf("No collector has reported for this site within %v. The last: %s, caught up until %s, last heard of at %s.",
			forgetAfter, st.Behind.describe(), stamp(st.Behind.CaughtUp, loc), stamp(st.Behind.Seen, loc))
	default:
		note = fmt.Sprintf("Behind: %s, caught up until %s, last heard of at %s.", st.Behind.describe(), stamp(st.Behind.CaughtUp, loc), stamp(st.Behind.Seen, loc))
	}
	return Row{
		Crossing: Crossing{Rule: r.Name, Subject: SiteSubject(r.Site), WindowStart: since.UTC()},
		Kind:     KindNoData, Site: r.Site, Note: note,
	}, true
}

// durationText writes a duration as an operator would: 90m, 2h, 1d, 1h30m.
func durationText(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	if days := d / day; days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * day
	}
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
		d -= m * time.Minute
	}
	if d > 0 {
		fmt.Fprintf(&b, "%ds", d/time.Second)
	}
	return b.String()
}
