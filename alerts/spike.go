package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Spike and drop rules (issue 19): a complete window's count (complete as
// for below, complete.go) against its baseline, the same window in each of
// the previous K periods, read from the per-minute rollup.
//
//   - The same window. every: the window (1h, every: 1h): the K windows
//     before it. every: whole days (1d, 7d): the window holding the same
//     wall-clock time of the rule's zone K*every days back, so "the same
//     hour yesterday" on a daylight-saving day is the same hour on the
//     clock, and every window of a 23- or 25-hour day has its baseline. A
//     wall-clock time that did not exist that day (the hour skipped when
//     clocks go forward) has no window there: that period is left out of
//     the baseline, as one unknown. A time that existed twice (the hour
//     repeated when clocks go back) is taken at its first occurrence, in
//     summer time; both windows of the repeated hour, when they are the
//     window judged, compare with the one hour of the other days.
//   - The baseline is the median of the known windows' counts, not the
//     mean: one earlier period that was itself odd (an outage at 0, or a
//     crawler's burst at 20x) moves a mean by 1/K of its size, enough to
//     hide the spike it resembles or to fake a drop; it moves the median
//     by one rank. With an even number of windows known, the mean of the
//     two middle ones.
//   - A window of the baseline that begins before the site's first hit
//     (its collection had not begun, or it began inside it: a part of a
//     window) is unknown, not 0. The window is judged only when at least
//     min_periods (default K/2+1, a majority) are known: the median of a
//     majority is a count at least half the known periods reached, so a
//     new site is judged from its (K/2+1)-th period on and not on its first
//     day or two, often partial. Within the site's collection a page
//     without hits had 0 hits, a real count: a new page with min hits is a
//     spike.
//   - spike: count >= factor * baseline and count >= min. drop: count <=
//     baseline / factor and baseline >= min_baseline.
//   - The crossing: (rule, page, window start, factor), like below's; its
//     note keeps the baseline and the K windows' counts for the email.

// baselined reports whether the rule compares windows with a baseline.
func (r *Rule) baselined() bool { return r.Kind == config.KindSpike || r.Kind == config.KindDrop }

// period is one of the K windows of a window's baseline.
type period struct {
	Start time.Time // zero: the wall-clock time did not exist that day
	Wall  string    // the wall-clock time looked for, when Start is zero
}

// baselineOf returns the K windows of the baseline of the window starting
// at w, most recent first.
func (r *Rule) baselineOf(w time.Time) []period {
	loc := r.Window.loc()
	w = w.In(loc)
	out := make([]period, 0, r.Periods)
	if r.Every == r.Window.Size || r.Every%day != 0 {
		b := w
		for range r.Periods {
			b = r.Window.Start(b.Add(-time.Nanosecond))
			out = append(out, period{Start: b})
		}
		return out
	}
	days := int(r.Every / day)
	y, m, d := w.Date()
	hh, mm, _ := w.Clock()
	for k := 1; k <= r.Periods; k++ {
		if r.Window.Size >= day {
			// Whole days: the window holding noon of that day (midnight
			// itself may not exist in some zones).
			out = append(out, period{Start: r.Window.Start(time.Date(y, m, d-k*days, 12, 0, 0, 0, loc))})
			continue
		}
		t, ok := wallTime(y, m, d-k*days, hh, mm, loc)
		if !ok {
			out = append(out, period{Wall: time.Date(y, m, d-k*days, hh, mm, 0, 0, time.UTC).Format("2006-01-02 15:04")})
			continue
		}
		out = append(out, period{Start: r.Window.Start(t)})
	}
	return out
}

// wallTime is the instant the clocks of loc showed y-m-d hh:mm, its first
// when they showed it twice; ok is false when they never showed it (the
// hour skipped when they go forward). Go's time.Date picks one of two
// instants and moves a skipped time on: both are checked.
func wallTime(y int, m time.Month, d, hh, mm int, loc *time.Location) (time.Time, bool) {
	t := time.Date(y, m, d, hh, mm, 0, 0, loc)
	same := func(u time.Time) bool {
		uy, um, ud := u.Date()
		uh, umm, _ := u.Clock()
		ny, nm, nd := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Date()
		return uy == ny && um == nm && ud == nd && uh == hh && umm == mm
	}
	if !same(t) {
		return time.Time{}, false
	}
	// Offsets change by at most a few hours: an earlier instant with the
	// same wall clock is the first occurrence.
	for _, back := range []time.Duration{3 * time.Hour, 2 * time.Hour, time.Hour, 30 * time.Minute} {
		if u := t.Add(-back).In(loc); same(u) {
			return u, true
		}
	}
	return t, true
}

// median is the median of xs (not empty): with an even number, the mean of
// the two middle values. xs is sorted in place.
func median(xs []int64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return float64(xs[n/2])
	}
	return (float64(xs[n/2-1]) + float64(xs[n/2])) / 2
}

// baselineLo bounds the data a spike or drop rule reads back to at now:
// before the first baseline window of the first window of the lookback.
func (r *Rule) baselineLo(now time.Time) time.Time {
	return now.Add(-lookback(r.Window) - time.Duration(r.Periods)*r.Every - r.Window.Size - day)
}

// changeFires reports whether count fires r against baseline.
func (r *Rule) changeFires(count int64, baseline float64) bool {
	f := float64(r.Factor)
	if r.Kind == config.KindSpike {
		return count >= r.Min && float64(count) >= f*baseline
	}
	return baseline >= float64(r.MinBaseline) && float64(count)*f <= baseline
}

// baselineWindow is one of the K windows as the crossing's note keeps it.
type baselineWindow struct {
	Start int64  `json:"start,omitempty"` // Unix seconds; 0 when State is "gap"
	Wall  string `json:"wall,omitempty"`  // the wall-clock time of a gap
	Hits  int64  `json:"hits"`
	// State: "" counted; "before": before the site's collection began;
	// "gap": the time did not exist that day.
	State string `json:"state,omitempty"`
}

// changeNote is a spike or drop crossing's note: its baseline, for the
// email (written once, when the crossing is found).
type changeNote struct {
	Baseline float64          `json:"baseline"`
	Windows  []baselineWindow `json:"windows"`
	Held     string           `json:"held,omitempty"` // as heldNote
}

func (n changeNote) encode() string {
	b, _ := json.Marshal(n) // plain fields: cannot fail
	return string(b)
}

func decodeChangeNote(s string) (changeNote, bool) {
	var n changeNote
	if err := json.Unmarshal([]byte(s), &n); err != nil || !strings.HasPrefix(s, "{") {
		return changeNote{}, false
	}
	return n, true
}

// completeWindows lists the ended windows of r's lookback at now, as below
// does: those complete (ending at or before the site's horizon), and
// whether some that ended are not (held), with a note saying so.
func (s *Sweeper) completeWindows(r *Rule, st siteState, now time.Time) (starts []time.Time, held bool, note string) {
	loc := r.Window.loc()
	ended := r.Window.windowsIn(lookbackFrom(r, st, now), now.Add(-s.o.Lateness))
	h := st.horizon(now, s.o.Lateness)
	for _, w := range ended {
		if end := r.Window.End(w); !h.IsZero() && !end.After(h) {
			starts = append(starts, w)
		} else {
			held = true
		}
	}
	switch {
	case held:
		note = fmt.Sprintf("%s: %d window(s) wait, from %s", st.untilText(loc), len(ended)-len(starts), stamp(ended[len(starts)], loc))
	case len(starts) == 0:
		note = fmt.Sprintf("%s: no window has ended since collecting began", st.untilText(loc))
	}
	return starts, held, note
}

// lookbackFrom is where r's windows are evaluated from at now: the
// lookback, and no window before the site's first hit.
func lookbackFrom(r *Rule, st siteState, now time.Time) time.Time {
	lo := now.Add(-lookback(r.Window))
	if st.DataSince.After(lo) {
		lo = st.DataSince
	}
	return lo
}

// change evaluates a spike or drop rule: every complete window of the
// lookback against its baseline.
func (s *Sweeper) change(ctx context.Context, r *Rule, st siteState, now, last time.Time) (evaluation, error) {
	var ev evaluation
	loc := r.Window.loc()
	starts, held, note := s.completeWindows(r, st, now)
	ev.held, ev.note = held, note
	if len(starts) == 0 {
		return ev, nil
	}
	// The windows to count: the complete ones and their baselines' known
	// windows, all windows of one grid (equal or apart).
	known := func(t time.Time) bool { return !t.IsZero() && !t.Before(st.DataSince) }
	bases := make([][]period, len(starts))
	set := map[int64]time.Time{}
	for i, w := range starts {
		set[w.Unix()] = w
		bases[i] = r.baselineOf(w)
		for _, p := range bases[i] {
			if known(p.Start) {
				set[p.Start.Unix()] = p.Start
			}
		}
	}
	all := make([]time.Time, 0, len(set))
	for _, t := range set {
		all = append(all, t)
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })

	var paths []string
	switch r.scope {
	case scopePage:
		paths = []string{r.Path}
	case scopePattern:
		active, err := retry(ctx, func() ([]activePage, error) { return s.store.ActivePages(ctx, r, r.Site, now.Add(-r.ActiveWithin)) })
		if err != nil {
			return ev, err
		}
		for _, p := range active {
			if r.pathMatch(p.Path) {
				paths = append(paths, p.Path)
			}
		}
	}
	whole := r.scope == scopeSite
	counts, err := retry(ctx, func() (map[string]map[int64]int64, error) {
		return s.store.WindowSetCounts(ctx, r, r.Site, paths, whole, all)
	})
	if err != nil {
		return ev, err
	}
	if whole {
		paths = []string{""}
	}
	fired, short := 0, 0
	for _, p := range paths {
		byStart := counts[p]
		for i, w := range starts {
			ws := make([]baselineWindow, len(bases[i]))
			var vals []int64
			for j, b := range bases[i] {
				switch {
				case b.Start.IsZero():
					ws[j] = baselineWindow{Wall: b.Wall, State: "gap"}
				case !known(b.Start):
					ws[j] = baselineWindow{Start: b.Start.Unix(), State: "before"}
				default:
					n := byStart[b.Start.Unix()]
					ws[j] = baselineWindow{Start: b.Start.Unix(), Hits: n}
					vals = append(vals, n)
				}
			}
			if len(vals) < r.MinPeriods {
				short++
				continue
			}
			base := median(vals)
			n := byStart[w.Unix()]
			if !r.changeFires(n, base) {
				continue
			}
			fired++
			ev.rows = append(ev.rows, Row{
				Crossing: Crossing{Rule: r.Name, Subject: PageSubject(r.Site, p), WindowStart: w.UTC(), Threshold: r.Factor},
				Kind:     r.Kind, Site: r.Site, Path: p, Count: n,
				Note: changeNote{Baseline: base, Windows: ws, Held: heldNote(r.Window.End(w).Add(s.o.Lateness), now, last, st, loc)}.encode(),
			})
		}
	}
	summary := fmt.Sprintf("%d complete window(s) from %s to %s of %d page(s) evaluated against %s, %d %s(s)",
		len(starts), stamp(starts[0], loc), stamp(r.Window.End(starts[len(starts)-1]), loc), len(paths), r.baselineText(), fired, r.Kind)
	if short > 0 {
		summary += fmt.Sprintf("; %d not judged: fewer than %d of the %d baseline windows after the site's first hit", short, r.MinPeriods, r.Periods)
	}
	if ev.note != "" {
		ev.note += "; " + summary
	} else {
		ev.note = fmt.Sprintf("site %s complete until %s; %s", r.Site, stamp(st.CompleteUntil, loc), summary)
	}
	return ev, nil
}

// baselineText names a rule's baseline: "the median of the same 1h window
// on the previous 7 days".
func (r *Rule) baselineText() string {
	return baselineText(r.WindowName, r.Window.Size, r.Every, r.Periods)
}

func baselineText(windowName string, window, every time.Duration, periods int) string {
	switch {
	case every == window || every%day != 0:
		return fmt.Sprintf("the median of the previous %d %s windows", periods, windowName)
	case every == day:
		return fmt.Sprintf("the median of the same %s window on the previous %d days", windowName, periods)
	case every == 7*day:
		return fmt.Sprintf("the median of the same %s window on the same weekday of the previous %d weeks", windowName, periods)
	}
	return fmt.Sprintf("the median of the same %s window in the previous %d periods of %s", windowName, periods, durationText(every))
}

// explainChange is Explain's line for a spike or drop rule.
func explainChange(r config.Rule, what, hits, zone, noData string) string {
	base := baselineText(r.Window, r.WindowDur, r.Baseline.Every.Duration, int(r.Baseline.Periods))
	known := fmt.Sprintf("; judged when at least %d of the %d are after the site's first hit", r.Baseline.MinPeriods, r.Baseline.Periods)
	if r.Kind == config.KindSpike {
		return fmt.Sprintf("fires when %s has at least %dx %s (and at least %d %s) in a complete window%s%s%s",
			what, r.Spike.Factor, base, r.Spike.Min, hits, zone, known, noData)
	}
	return fmt.Sprintf("fires when %s has at most 1/%d of %s (when that is at least %d %s) in a complete window%s%s%s",
		what, r.Drop.Factor, base, r.Drop.MinBaseline, hits, zone, known, noData)
}

// BaselineWindow is one of the K windows of a spike or drop email.
type BaselineWindow struct {
	Start time.Time // in the rule's zone; zero when the time did not exist
	// Text is the window's start as the email prints it, and for a window
	// not counted why: "2026-03-29 02:00 (no such time: clocks went
	// forward)".
	Text  string
	Hits  int64
	Known bool // counted in the baseline
}

// changeView fills the view of a spike or drop crossing from its note.
func (r *Rule) changeView(v *view, row Row) {
	loc := r.Window.loc()
	v.Factor = row.Threshold
	v.Min, v.MinBaseline = r.Min, r.MinBaseline
	v.BaselineOf = r.baselineText()
	n, ok := decodeChangeNote(row.Note)
	if !ok {
		return // written by another version: the email says what it can
	}
	v.Note = n.Held
	v.Baseline = formatCount(n.Baseline)
	for _, w := range n.Windows {
		bw := BaselineWindow{Hits: w.Hits, Known: w.State == ""}
		switch w.State {
		case "gap":
			bw.Text = w.Wall + " (no such time that day: clocks went forward)"
		case "before":
			bw.Start = time.Unix(w.Start, 0).In(loc)
			bw.Text = stamp(bw.Start, loc) + " (before the site's first hit: not counted)"
		default:
			bw.Start = time.Unix(w.Start, 0).In(loc)
			bw.Text = stamp(bw.Start, loc)
		}
		v.BaselineWindows = append(v.BaselineWindows, bw)
		if bw.Known {
			v.Known++
		}
	}
}

// formatCount writes a baseline: whole, or with one decimal (a median of
// an even number of windows).
func formatCount(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// describeChange is the dry run's line for a spike or drop crossing.
func (s *Sweeper) describeChange(row Row, r *Rule) string {
	loc := time.UTC
	end := row.WindowStart
	what := "a baseline"
	if r != nil {
		loc = r.Window.loc()
		end = r.Window.End(row.WindowStart.In(loc))
		what = r.baselineText()
	}
	n, _ := decodeChangeNote(row.Note)
	var counts []string
	for _, w := range n.Windows {
		if w.State == "" {
			counts = append(counts, strconv.FormatInt(w.Hits, 10))
		} else {
			counts = append(counts, "-")
		}
	}
	cmp := fmt.Sprintf("at least %dx", row.Threshold)
	if row.Kind == config.KindDrop {
		cmp = fmt.Sprintf("at most 1/%d of", row.Threshold)
	}
	held := ""
	if n.Held != "" {
		held = " (" + textSafe(n.Held) + ")"
	}
	unit := hitsMetric.unit
	if r != nil {
		unit = r.metric().unit
	}
	return fmt.Sprintf("would fire: rule %s: %s had %d %s in the complete window %s to %s, %s its baseline %s (%s: %s)%s",
		row.Rule, textSafe(row.Site+row.Path), row.Count, unit, stamp(row.WindowStart, loc), stamp(end, loc), cmp, formatCount(n.Baseline), what, strings.Join(counts, ", "), held)
}

// changeLine is a digest's line for a spike or drop crossing.
func changeLine(row Row, r *Rule, loc *time.Location) string {
	n, _ := decodeChangeNote(row.Note)
	name, unit := "", hitsMetric.unit
	if r != nil {
		name, unit = " "+r.WindowName, r.metric().unit
	}
	if row.Kind == config.KindDrop {
		return fmt.Sprintf("%s: %d %s in the%s window from %s, at most 1/%d of its baseline %s (drop)", row.Site+row.Path, row.Count, unit, name, stamp(row.WindowStart, loc), row.Threshold, formatCount(n.Baseline))
	}
	return fmt.Sprintf("%s: %d %s in the%s window from %s, at least %dx its baseline %s (spike)", row.Site+row.Path, row.Count, unit, name, stamp(row.WindowStart, loc), row.Threshold, formatCount(n.Baseline))
}

// WindowSetCounts returns, for each path (or, whole, the site's total under
// ""), the hits in each window starting at starts (sorted, of one rule's
// grid: two windows are equal or apart), by the window's start in Unix
// seconds; windows without hits are left out. It reads the per-minute
// rollup over the windows only, consecutive ones of one length merged into
// one range (windowRuns).
func (s *Store) WindowSetCounts(ctx context.Context, r *Rule, site string, paths []string, whole bool, starts []time.Time) (map[string]map[int64]int64, error) {
	out := map[string]map[int64]int64{}
	if len(starts) == 0 {
		return out, nil
	}
	err := s.countByWindow(ctx, r, site, paths, whole, starts, "windows and baselines", "", "", nil,
		func(scan func(...any) error) error {
			var p string
			var w, n uint64
			if err := scan(&p, &w, &n); err != nil {
				return err
			}
			if w < 1 || int(w) > len(starts) {
				return nil
			}
			if out[p] == nil {
				out[p] = map[int64]int64{}
			}
			out[p][starts[w-1].Unix()] = int64(n)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// compileChange sets a spike or drop rule's fields from its validated
// configuration.
func (r *Rule) compileChange(cr config.Rule) {
	switch {
	case cr.Spike != nil:
		r.Factor, r.Min = cr.Spike.Factor, cr.Spike.Min
	case cr.Drop != nil:
		r.Factor, r.MinBaseline = cr.Drop.Factor, cr.Drop.MinBaseline
	}
	r.Thresholds = []int64{r.Factor}
	r.Periods, r.MinPeriods, r.Every = int(cr.Baseline.Periods), int(cr.Baseline.MinPeriods), cr.Baseline.Every.Duration
	if r.Periods <= 0 { // a Rule made by hand, not validated
		r.Periods = 7
	}
	if r.MinPeriods <= 0 {
		r.MinPeriods = r.Periods/2 + 1
	}
	if r.Every <= 0 {
		r.Every = max(day, r.Window.Size)
	}
}

const (
	spikeSubject = `[hitcount] spike on {{.Site}}{{.Path}}: {{.Count}} hits in {{.WindowName}}, baseline {{.Baseline}}`
	dropSubject  = `[hitcount] drop on {{.Site}}{{.Path}}: {{.Count}} hits in {{.WindowName}}, baseline {{.Baseline}}`
	changeText   = `{{.Site}}{{.Path}} had {{.Count}} hits from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}): {{if eq .Kind "spike"}}at least {{.Factor}}x its baseline of {{.Baseline}} hits (and at least {{.Min}}){{else}}at most 1/{{.Factor}} of its baseline of {{.Baseline}} hits (a baseline of at least {{.MinBaseline}}){{end}}, by rule {{.Rule}}.
The baseline is {{.BaselineOf}}, {{.Known}} of them counted:
{{range .BaselineWindows}}  {{.Text}}{{if .Known}}  {{.Hits}}{{end}}
{{end}}
The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.
{{if .Note}}
{{.Note}}
{{end}}{{if .Series}}
Hits per {{.SeriesStep}} (steps without hits left out):
{{range .Series}}  {{.Time.Format "2006-01-02 15:04"}}  {{.Hits}}
{{end}}{{end}}
-- hitcount, rule {{.Rule}}
`
	changeHTML = `<p><b>{{.Site}}{{.Path}}</b> had <b>{{.Count}}</b> hits from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}): {{if eq .Kind "spike"}}at least {{.Factor}}x its baseline of <b>{{.Baseline}}</b> hits (and at least {{.Min}}){{else}}at most 1/{{.Factor}} of its baseline of <b>{{.Baseline}}</b> hits (a baseline of at least {{.MinBaseline}}){{end}}, by rule <code>{{.Rule}}</code>.</p>
<p>The baseline is {{.BaselineOf}}, {{.Known}} of them counted:</p>
<table><tr><th>window</th><th>hits</th></tr>{{range .BaselineWindows}}<tr><td>{{.Text}}</td><td>{{if .Known}}{{.Hits}}{{end}}</td></tr>{{end}}</table>
<p>The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.</p>
{{if .Note}}<p>{{.Note}}</p>{{end}}
{{if .Series}}<table><tr><th>{{.SeriesStep}}</th><th>hits</th></tr>{{range .Series}}<tr><td>{{.Time.Format "2006-01-02 15:04"}}</td><td>{{.Hits}}</td></tr>{{end}}</table>{{end}}`
)

// changeTemplates are the built-in subject, text and HTML of spike and drop
// rules.
func changeTemplates(kind string) (subject, text, html string) {
	if kind == config.KindSpike {
		return spikeSubject, changeText, changeHTML
	}
	return dropSubject, changeText, changeHTML
}

// sampleChangeRow is a spike or drop crossing for the template check: its
// baseline has a counted window, one before the site's first hit and one
// that did not exist.
func (r *Rule) sampleChangeRow(w time.Time) Row {
	n := changeNote{Baseline: 120.5, Windows: []baselineWindow{
		{Start: w.Add(-day).Unix(), Hits: 118},
		{Wall: "2026-03-29 02:00", State: "gap"},
		{Start: w.Add(-3 * day).Unix(), State: "before"},
	}}
	return Row{Crossing: Crossing{Rule: r.Name, WindowStart: w, Threshold: r.Factor}, Kind: r.Kind, Count: 400, Note: n.encode()}
}
