package config

import (
	"strings"
	"time"
)

// Report periods (Rule.Report).
const (
	ReportWeekly  = "weekly"
	ReportMonthly = "monthly"
)

// defaultReportTop is how many pages a report lists when top is not given.
const defaultReportTop = 10

// maxReportTop bounds top: a report is an email, not an export.
const maxReportTop = 100

// validateReport checks and defaults a report rule's options (report,
// top, week_start), and refuses them on other rules.
func (d *doc) validateReport(r *Rule, field string) {
	if r.Kind != KindReport {
		for _, o := range []string{"top", "week_start"} {
			if d.present[field+"."+o] && r.Kind != "" {
				d.addf(field+"."+o, "only report rules take %s", o)
			}
		}
		return
	}
	switch r.Report {
	case ReportWeekly, ReportMonthly:
	default:
		d.addf(field+".report", "must be weekly or monthly, got %q", r.Report)
	}
	if p := r.Match.ExcludeBots.Pattern(); p != "" {
		// A report reads the rollups, which keep the built-in mark only;
		// from hits it would read a week or a month of lines.
		d.addf(field+".match.exclude_bots", "a report rule counts from the rollups, which know only the built-in bot pattern: use exclude_bots: true, not a pattern of its own")
	}
	switch {
	case !d.present[field+".top"]:
		r.Top = defaultReportTop
	case r.Top < 1 || r.Top > maxReportTop:
		d.addf(field+".top", "must be 1 to %d pages, got %d", maxReportTop, r.Top)
	}
	r.WeekDay = time.Monday
	if d.present[field+".week_start"] {
		if r.Report == ReportMonthly {
			d.addf(field+".week_start", "only a weekly report takes week_start")
		}
		day, ok := weekDay(r.WeekStart)
		if !ok {
			d.addf(field+".week_start", "must be a day of the week such as monday or sunday, got %q", r.WeekStart)
		}
		r.WeekDay = day
	}
}

// weekDay reads a day of the week by its English name, in any case.
func weekDay(s string) (time.Weekday, bool) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, d.String()) {
			return d, true
		}
	}
	return 0, false
}
