package alerts

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Weekly and monthly reports (issue 19). A report rule sends, per period,
// one email to its recipients: the period's hits against the period
// before, the top pages, the largest changes up and down, and the
// crossings (of any kind) recorded for its site in the period. Everything
// is read from the rollups (hits_1d for the days wholly inside a period,
// hits_1m for the day at each end: a period's bounds are local midnights
// in the rule's zone, which are not the store's days) and from the
// crossings table, never from hits.
//
// A report is a crossing: kind "report", key (rule, the site's report
// subject, period start), so it goes through the same record, claim,
// re-check, fence, send and mark as every alert, and a replica that finds
// it again finds it recorded. It is detected when the period has ended in
// the rule's zone, sweep.lateness has passed, and the site's collectors
// have committed their logs past the period's end (complete.go): a
// collector behind holds the report (hitcount_sweeper_rules_held{rule} is
// 1), and the report found once it caught up says it was held back. A
// report held for reportHoldCap after it was due goes anyway, saying which
// collector was behind and until when its numbers are complete: a weekly
// email that never comes because one web server of ten is gone would be
// worse than one that says it lacks that server's last hours.
//
// Only the last ended period is reported: a sweeper down for a whole
// period, or a rule added in the middle of one, reports the period that
// ended last, not every one before it. A period before the site's first
// hit is not reported.
//
// The content is read when the message is built (at send), not when the
// report is recorded: the period is complete by then, so a re-send after
// a crash reads the same numbers, under the same Message-ID. A report is
// always a message of its own, never a line of a digest (plan).

// KindReport is the kind of a report rule's crossings (config.KindReport).
const KindReport = config.KindReport

// reportHoldCap is how long after it was due (the period's end plus
// sweep.lateness) a report waits for its site's collectors before it is
// sent with what is complete, saying so.
const reportHoldCap = 24 * time.Hour

// reportCrossingsListed bounds the crossings a report lists one by one;
// the rest are counted.
const reportCrossingsListed = 50

// ReportSubject is the Subject of a report on a site: apart from every
// PageSubject and SiteSubject, so a report never shares a key with another
// crossing of the same rule.
func ReportSubject(site string) string { return "\x00report:" + site }

// reportPeriod is a report rule's period in its zone: calendar weeks starting on
// weekDay, or calendar months. A week across a daylight-saving change is
// still seven calendar days (167 or 169 hours); a month is the calendar
// month.
type reportPeriod struct {
	monthly bool
	weekDay time.Weekday
	loc     *time.Location
}

func (r *Rule) period() reportPeriod {
	return reportPeriod{monthly: r.Report == config.ReportMonthly, weekDay: r.WeekStart, loc: r.Window.loc()}
}

// start is the start of the period holding t.
func (p reportPeriod) start(t time.Time) time.Time {
	t = t.In(p.loc)
	y, m, d := t.Date()
	if p.monthly {
		return time.Date(y, m, 1, 0, 0, 0, 0, p.loc)
	}
	back := (int(t.Weekday()) - int(p.weekDay) + 7) % 7
	return time.Date(y, m, d-back, 0, 0, 0, 0, p.loc)
}

// end is the end (exclusive) of the period starting at start.
func (p reportPeriod) end(start time.Time) time.Time {
	y, m, d := start.In(p.loc).Date()
	if p.monthly {
		return time.Date(y, m+1, 1, 0, 0, 0, 0, p.loc)
	}
	return time.Date(y, m, d+7, 0, 0, 0, 0, p.loc)
}

// prev is the start of the period before the one starting at start.
func (p reportPeriod) prev(start time.Time) time.Time {
	y, m, d := start.In(p.loc).Date()
	if p.monthly {
		return time.Date(y, m-1, 1, 0, 0, 0, 0, p.loc)
	}
	return time.Date(y, m, d-7, 0, 0, 0, 0, p.loc)
}

// name is how a report names the period starting at start: "week of Mon
// 2026-11-16", "month of November 2026".
func (p reportPeriod) name(start time.Time) string {
	if p.monthly {
		return "month of " + start.In(p.loc).Format("January 2006")
	}
	return "week of " + start.In(p.loc).Format("Mon 2006-01-02")
}

// unit is "week" or "month".
func (p reportPeriod) unit() string {
	if p.monthly {
		return "month"
	}
	return "week"
}

// Report is what a report's templates see as .Report.
type Report struct {
	Period string // weekly | monthly
	Unit   string // week | month
	Name   string // week of Mon 2026-11-16 | month of November 2026
	// Scope: the site, or the pages of it the rule's path matches.
	Scope string
	// Start and End (exclusive) bound the period, PrevStart the one
	// before (which ends at Start); in the rule's zone.
	Start, End, PrevStart time.Time
	Hits, PrevHits        int64
	Change                string // +12.5%, -3.0%, new, or "" (no hits in either)
	Pages                 int    // pages with hits in the period
	Top                   []ReportPage
	// Up and Down: the largest increases and decreases against the period
	// before, largest first.
	Up, Down []ReportPage
	// Crossings: the alerts recorded for the site in the period, oldest
	// first, at most reportCrossingsListed; MoreCrossings are not listed.
	Crossings     []ReportCrossing
	MoreCrossings int
}

// ReportPage is one page of a report.
type ReportPage struct {
	Path       string
	Hits, Prev int64 // in the period, in the one before
	Diff       int64
	Change     string
}

// ReportCrossing is one alert recorded in a report's period.
type ReportCrossing struct {
	At          time.Time // when it was recorded, in the rule's zone
	Rule, Kind  string
	Text, State string
}

// change says how cur compares with prev, as a percentage.
func change(cur, prev int64) string {
	switch {
	case prev == 0 && cur == 0:
		return ""
	case prev == 0:
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", float64(cur-prev)*100/float64(prev))
}

// scopeText names what a report rule covers.
func (r *Rule) scopeText() string {
	switch r.scope {
	case scopeSite:
		return r.Site
	case scopePattern:
		return "pages matching " + r.Path + " on " + r.Site
	}
	return r.Path + " on " + r.Site
}

// reportRow is the crossing of r's report of the period starting at start.
func (r *Rule) reportRow(start time.Time) Row {
	return Row{
		Crossing: Crossing{Rule: r.Name, Subject: ReportSubject(r.Site), WindowStart: start.UTC()},
		Kind:     KindReport, Site: r.Site, Path: r.Path,
	}
}

// detectReports evaluates every report rule at now (the store's clock):
// the report of the last ended period, when it is due and not recorded
// yet. Errors are treated as detectComplete treats them.
func (s *Sweeper) detectReports(ctx context.Context, now time.Time) ([]Row, []string, error) {
	var rules []*Rule
	var sites []string
	seen := map[string]bool{}
	for _, r := range s.rules {
		if r.Kind != KindReport {
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
		s.o.Logger.Error("cannot read how far the collectors have committed (source_owners): report rules are held; run `collector -migrate` as an administrator", "err", clipErr(err))
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
		ev, err := s.report(ctx, r, st, now, last)
		if err != nil && !permanent(err) {
			return nil, nil, err
		}
		if err != nil {
			s.o.Logger.Error("the rule's queries fail for good: rule skipped in this pass", "rule", r.Name, "err", clipErr(err))
			s.o.Metrics.ruleError(r.Name)
			ev = evaluation{held: true, note: "cannot evaluate: " + clipErr(err)}
		}
		s.o.Metrics.held(r.Name, ev.held)
		if ev.held {
			s.o.Logger.Warn("report held: its site's logs are not complete past the end of the period", "rule", r.Name, "site", r.Site,
				"complete_until", stamp(st.CompleteUntil, r.Window.loc()), "collector", st.Behind.Collector, "host", st.Behind.Host,
				"path", clip(st.Behind.Path))
			notes = append(notes, fmt.Sprintf("held: rule %s: %s", r.Name, ev.note))
		} else {
			notes = append(notes, fmt.Sprintf("rule %s: %s", r.Name, ev.note))
		}
		out = append(out, ev.rows...)
	}
	return out, notes, nil
}

// report evaluates one report rule: the period that ended last (its end
// plus lateness at or before now).
func (s *Sweeper) report(ctx context.Context, r *Rule, st siteState, now, last time.Time) (evaluation, error) {
	var ev evaluation
	p := r.period()
	loc := p.loc
	cur := p.start(now.Add(-s.o.Lateness))
	start, end := p.prev(cur), cur
	due := end.Add(s.o.Lateness)
	row := r.reportRow(start)
	next := fmt.Sprintf("next: the report of the %s, due from %s", p.name(cur), stamp(p.end(cur).Add(s.o.Lateness), loc))
	if s.o.DryRun {
		// What the next report holds so far, compared with the whole
		// period before.
		rep, err := retry(ctx, func() (*Report, error) { return s.reportOf(ctx, r, cur, now) })
		if err != nil {
			return ev, err
		}
		next += "; so far: " + rep.summary()
	}
	known, err := s.store.Latest(ctx, []string{row.Key()})
	if err != nil {
		return ev, err
	}
	if k, ok := known[row.Key()]; ok {
		ev.note = fmt.Sprintf("the report of the %s is recorded (%s); %s", p.name(start), k.State, next)
		return ev, nil
	}
	since, some, err := retry2(ctx, func() (time.Time, bool, error) { return s.store.DataSince(ctx, r.Site, start, r.metric()) })
	if err != nil {
		return ev, err
	}
	if !some || !since.IsZero() && !since.Before(end) {
		ev.note = fmt.Sprintf("site %s has no hit before %s: no report of the %s; %s", r.Site, stamp(end, loc), p.name(start), next)
		return ev, nil
	}
	h := st.horizon(now, s.o.Lateness)
	switch {
	case !h.IsZero() && !end.After(h):
		row.Note = heldNote(due, now, last, st, loc)
	case now.Sub(due) >= reportHoldCap:
		row.Note = fmt.Sprintf("Sent incomplete, %s after it was due: %s. Hits logged after that are missing from these numbers.",
			durationText(reportHoldCap), st.untilText(loc))
	default:
		ev.held = true
		ev.note = fmt.Sprintf("%s: the report of the %s waits (sent as it is from %s); %s",
			st.untilText(loc), p.name(start), stamp(due.Add(reportHoldCap), loc), next)
		return ev, nil
	}
	ev.rows = []Row{row}
	ev.note = fmt.Sprintf("the report of the %s (%s to %s) is due", p.name(start), stamp(start, loc), stamp(end, loc))
	if s.o.DryRun {
		rep, err := retry(ctx, func() (*Report, error) { return s.reportOf(ctx, r, start, end) })
		if err != nil {
			return ev, err
		}
		ev.note += ": " + rep.summary()
	}
	ev.note += "; " + next
	return ev, nil
}

// reportOf reads the report of r's period starting at start, up to until
// (the period's end; earlier for a dry run's report so far).
func (s *Sweeper) reportOf(ctx context.Context, r *Rule, start, until time.Time) (*Report, error) {
	p := r.period()
	end := p.end(start)
	prev := p.prev(start)
	rep := &Report{
		Period: r.Report, Unit: p.unit(), Name: p.name(start), Scope: r.scopeText(),
		Start: start.In(p.loc), End: end.In(p.loc), PrevStart: prev.In(p.loc),
	}
	exact := ""
	if r.scope == scopePage {
		exact = r.Path
	}
	n := r.Top
	if n <= 0 {
		n = 10
	}
	err := s.store.ReportPages(ctx, r, r.Site, exact, prev, start, minTime(until, end), func(pg ReportPage) {
		if r.scope == scopePattern && !r.pathMatch(pg.Path) {
			return
		}
		rep.Hits += pg.Hits
		rep.PrevHits += pg.Prev
		if pg.Hits > 0 {
			rep.Pages++
		}
		pg.Diff = pg.Hits - pg.Prev
		pg.Change = change(pg.Hits, pg.Prev)
		if pg.Hits > 0 {
			rep.Top = keepTop(rep.Top, pg, n, func(a, b ReportPage) bool { return a.Hits > b.Hits || a.Hits == b.Hits && a.Path < b.Path })
		}
		if pg.Diff > 0 {
			rep.Up = keepTop(rep.Up, pg, n, func(a, b ReportPage) bool { return a.Diff > b.Diff || a.Diff == b.Diff && a.Path < b.Path })
		}
		if pg.Diff < 0 {
			rep.Down = keepTop(rep.Down, pg, n, func(a, b ReportPage) bool { return a.Diff < b.Diff || a.Diff == b.Diff && a.Path < b.Path })
		}
	})
	if err != nil {
		return nil, err
	}
	rep.Change = change(rep.Hits, rep.PrevHits)
	rows, more, err := s.store.ReportCrossings(ctx, r.Site, start, minTime(until, end), reportCrossingsListed)
	if err != nil {
		return nil, err
	}
	rep.MoreCrossings = more
	for _, c := range rows {
		rep.Crossings = append(rep.Crossings, ReportCrossing{
			At: c.Updated.In(p.loc), Rule: c.Rule, Kind: orDefault(c.Kind, config.KindThreshold),
			Text: s.digestLine(c).Text, State: c.State,
		})
	}
	return rep, nil
}

// keepTop inserts p into list, kept sorted by less and at most n long.
func keepTop(list []ReportPage, p ReportPage, n int, less func(a, b ReportPage) bool) []ReportPage {
	i := sort.Search(len(list), func(i int) bool { return less(p, list[i]) })
	if i >= n {
		return list
	}
	list = append(list, ReportPage{})
	copy(list[i+1:], list[i:])
	list[i] = p
	if len(list) > n {
		list = list[:n]
	}
	return list
}

// summary is the report in a few lines, for the dry run (page text
// escaped).
func (rep *Report) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d hits on %d pages (%d the %s before", rep.Hits, rep.Pages, rep.PrevHits, rep.Unit)
	if rep.Change != "" {
		fmt.Fprintf(&b, ", %s", rep.Change)
	}
	b.WriteString(")")
	list := func(name string, pages []ReportPage, show func(ReportPage) string) {
		if len(pages) == 0 {
			return
		}
		parts := make([]string, len(pages))
		for i, pg := range pages {
			parts[i] = textSafe(clip(pg.Path)) + " " + show(pg)
		}
		fmt.Fprintf(&b, "; %s: %s", name, strings.Join(parts, ", "))
	}
	list("top", rep.Top, func(pg ReportPage) string { return fmt.Sprint(pg.Hits) })
	list("up", rep.Up, func(pg ReportPage) string { return fmt.Sprintf("%d->%d", pg.Prev, pg.Hits) })
	list("down", rep.Down, func(pg ReportPage) string { return fmt.Sprintf("%d->%d", pg.Prev, pg.Hits) })
	fmt.Fprintf(&b, "; %d alert(s) recorded", len(rep.Crossings)+rep.MoreCrossings)
	return b.String()
}

// reportMessage builds the message of a report crossing: its content read
// now from the rollups.
func (s *Sweeper) reportMessage(ctx context.Context, row Row, r *Rule) (*Message, error) {
	p := r.period()
	start := row.WindowStart.In(p.loc)
	rep, err := retry(ctx, func() (*Report, error) { return s.reportOf(ctx, r, start, p.end(start)) })
	if err != nil && permanent(err) {
		// No retry builds it: failed with the reason, as a template that
		// fails, instead of stopping every sweep.
		return nil, &templateError{r.Name, fmt.Errorf("report: %w", err)}
	}
	if err != nil {
		return nil, err
	}
	v := view{Rule: row.Rule, Site: row.Site, Path: row.Path, Kind: KindReport, Note: row.Note, Report: rep,
		WindowStart: rep.Start, WindowEnd: rep.End}
	return s.render(r, row, v, r.Subject, r.Text, r.HTML)
}

// Report templates, built in.
const (
	reportSubject = `[hitcount] {{.Report.Scope}}: {{.Report.Period}} report, {{.Report.Name}}: {{.Report.Hits}} hits{{if .Report.Change}} ({{.Report.Change}}){{end}}`
	reportText    = `{{.Report.Period}} report of {{.Report.Scope}}, rule {{.Rule}}: the {{.Report.Name}}, {{.Report.Start.Format "Mon 2006-01-02 15:04"}} to {{.Report.End.Format "Mon 2006-01-02 15:04 MST"}}.

Hits: {{.Report.Hits}} on {{.Report.Pages}} pages; the {{.Report.Unit}} before: {{.Report.PrevHits}}{{if .Report.Change}} ({{.Report.Change}}){{end}}.
{{if .Note}}
{{.Note}}
{{end}}
Top pages:
{{range .Report.Top}}  {{printf "%10d" .Hits}}  {{.Path}}
{{else}}  (no hits)
{{end}}
Largest increases ({{.Report.Unit}} before -> this {{.Report.Unit}}):
{{range .Report.Up}}  {{printf "%10d -> %d" .Prev .Hits}} ({{.Change}})  {{.Path}}
{{else}}  (none)
{{end}}
Largest decreases:
{{range .Report.Down}}  {{printf "%10d -> %d" .Prev .Hits}} ({{.Change}})  {{.Path}}
{{else}}  (none)
{{end}}
Alerts recorded for {{.Site}} in the {{.Report.Unit}}:
{{range .Report.Crossings}}  {{.At.Format "2006-01-02 15:04"}}  [{{.State}}] {{.Text}} (rule {{.Rule}})
{{else}}  (none)
{{end}}{{if .Report.MoreCrossings}}  ... and {{.Report.MoreCrossings}} more
{{end}}
-- hitcount, rule {{.Rule}}
`
	reportHTML = `<p><b>{{.Report.Period}} report</b> of <b>{{.Report.Scope}}</b>, rule <code>{{.Rule}}</code>: the {{.Report.Name}}, {{.Report.Start.Format "Mon 2006-01-02 15:04"}} to {{.Report.End.Format "Mon 2006-01-02 15:04 MST"}}.</p>
<p>Hits: <b>{{.Report.Hits}}</b> on {{.Report.Pages}} pages; the {{.Report.Unit}} before: {{.Report.PrevHits}}{{if .Report.Change}} ({{.Report.Change}}){{end}}.</p>
{{if .Note}}<p>{{.Note}}</p>{{end}}
<h3>Top pages</h3>
<table><tr><th>hits</th><th>page</th></tr>{{range .Report.Top}}<tr><td>{{.Hits}}</td><td>{{.Path}}</td></tr>{{end}}</table>
<h3>Largest changes</h3>
<table><tr><th>{{.Report.Unit}} before</th><th>this {{.Report.Unit}}</th><th>change</th><th>page</th></tr>
{{range .Report.Up}}<tr><td>{{.Prev}}</td><td>{{.Hits}}</td><td>{{.Change}}</td><td>{{.Path}}</td></tr>{{end}}
{{range .Report.Down}}<tr><td>{{.Prev}}</td><td>{{.Hits}}</td><td>{{.Change}}</td><td>{{.Path}}</td></tr>{{end}}</table>
<h3>Alerts recorded for {{.Site}}</h3>
<table><tr><th>recorded</th><th>state</th><th>alert</th><th>rule</th></tr>{{range .Report.Crossings}}<tr><td>{{.At.Format "2006-01-02 15:04"}}</td><td>{{.State}}</td><td>{{.Text}}</td><td>{{.Rule}}</td></tr>{{end}}</table>
{{if .Report.MoreCrossings}}<p>... and {{.Report.MoreCrossings}} more</p>{{end}}`
)

// explainReport is Explain of a report rule: "sends a weekly report every
// Monday 00:00 Europe/Berlin for shop.example.com".
func explainReport(r config.Rule, hits string) string {
	zone := "UTC"
	if r.Location != nil {
		zone = r.Location.String()
	}
	what := r.Match.Site
	switch p := r.Match.Path; {
	case p == "":
	case strings.HasPrefix(p, "~") || strings.ContainsAny(p, "*?[{"):
		what = "pages matching " + p + " on " + what
	default:
		what = p + " on " + what
	}
	when := fmt.Sprintf("a weekly report every %s 00:00 %s", r.WeekDay, zone)
	unit := "week"
	if r.Report == config.ReportMonthly {
		when, unit = "a monthly report on the 1st of every month 00:00 "+zone, "month"
	}
	return fmt.Sprintf("sends %s for %s: %s, top %d pages, largest changes and the alerts of the %s; once its collectors have committed the %s (held %s at most)",
		when, what, hits, r.Top, unit, unit, durationText(reportHoldCap))
}

// describeReport is Describe of a report crossing, for the dry run.
func (s *Sweeper) describeReport(row Row) string {
	r := s.rule(row.Rule)
	if r == nil {
		return fmt.Sprintf("would send: rule %s: a report of %s from %s", row.Rule, textSafe(row.Site), row.WindowStart.Format(time.RFC3339))
	}
	p := r.period()
	held := ""
	if row.Note != "" {
		held = " (" + textSafe(row.Note) + ")"
	}
	return fmt.Sprintf("would send: rule %s: the %s report of %s for the %s, %s to %s, to %s%s",
		row.Rule, r.Report, textSafe(r.scopeText()), p.name(row.WindowStart), stamp(row.WindowStart, p.loc), stamp(p.end(row.WindowStart), p.loc),
		strings.Join(r.To, ", "), held)
}

// reportSamples are the sample views of a report rule's messages (see
// samples): with pages of every sample path in each list, a note and
// crossings; an empty period; and one sent incomplete.
func (r *Rule) reportSamples() []sample {
	p := r.period()
	start := p.start(sampleTime)
	site := orDefault(r.Site, "www.example.com")
	base := Report{
		Period: orDefault(r.Report, config.ReportWeekly), Unit: p.unit(), Name: p.name(start), Scope: r.scopeText(),
		Start: start, End: p.end(start), PrevStart: p.prev(start),
	}
	full := base
	for i, sp := range samplePaths {
		pg := ReportPage{Path: sp.path, Hits: int64(100 - i), Prev: int64(50 + i)}
		pg.Diff, pg.Change = pg.Hits-pg.Prev, change(pg.Hits, pg.Prev)
		full.Top = append(full.Top, pg)
		full.Up = append(full.Up, pg)
		down := pg
		down.Hits, down.Diff, down.Change = 1, 1-pg.Prev, change(1, pg.Prev)
		full.Down = append(full.Down, down)
		full.Hits += pg.Hits
		full.PrevHits += pg.Prev
		full.Crossings = append(full.Crossings, ReportCrossing{At: sampleTime.In(p.loc), Rule: r.Name, Kind: config.KindBelow,
			Text: site + sp.path + ": 3 hits in the 1h window from " + stamp(sampleTime, p.loc) + ", below 50", State: StateSent})
	}
	full.Pages, full.Change, full.MoreCrossings = len(full.Top), change(full.Hits, full.PrevHits), 7
	note := fmt.Sprintf("Sent incomplete, %s after it was due: %s. Hits logged after that are missing from these numbers.",
		durationText(reportHoldCap), sampleSite().untilText(p.loc))
	v := func(rep Report, note string) view {
		return view{Rule: r.Name, Site: site, Path: r.Path, Kind: KindReport, Note: note, Report: &rep, WindowStart: rep.Start, WindowEnd: rep.End}
	}
	return []sample{
		{"report with pages of every sample path", v(full, "")},
		{"report held back, sent incomplete", v(full, note)},
		{"report of a period without hits", v(base, "")},
	}
}
