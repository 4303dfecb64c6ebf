package alerts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Explain says in one line when a validated rule fires, for -check-config:
// "fires when /checkout on shop has fewer than 50 hits in a complete 1h
// window, Europe/Berlin".
func Explain(r config.Rule) string {
	var what string
	switch p := r.Match.Path; {
	case p == "":
		what = "site " + r.Match.Site
	case strings.HasPrefix(p, "~") || strings.ContainsAny(p, "*?[{"):
		what = "a page matching " + p
		if r.Kind == config.KindBelow || r.Kind == config.KindNoTraffic || r.Kind == config.KindSpike || r.Kind == config.KindDrop {
			what += " (with a hit in the last " + durationText(r.ActiveWithin.Duration) + ")"
		}
	default:
		what = p
	}
	if r.Match.Site != "" && r.Match.Path != "" {
		what += " on " + r.Match.Site
	}
	var cond []string
	if m := r.Match; m.Host != "" || m.Method != "" || m.Status != "" || m.ExcludeBots.Exclude() {
		if m.Host != "" {
			cond = append(cond, "host "+m.Host)
		}
		if m.Method != "" {
			cond = append(cond, m.Method)
		}
		if m.Status != "" {
			cond = append(cond, "status "+m.Status)
		}
		if p := m.ExcludeBots.Pattern(); p != "" {
			cond = append(cond, "user agents matching "+p+" excluded")
		} else if m.ExcludeBots.Exclude() {
			cond = append(cond, "bots excluded")
		}
	}
	hits := "hits"
	if r.Count == config.CountVisitors {
		hits = "visitors"
		cond = append([]string{"distinct client address and user agent"}, cond...)
	}
	if len(cond) > 0 {
		hits += " (" + strings.Join(cond, ", ") + ")"
	}
	window := "its lifetime"
	if r.WindowDur > 0 {
		window = "a " + r.Window + " window"
	}
	zone := ""
	if r.Location != nil {
		zone = ", " + r.Location.String()
	}
	noData := ""
	if r.NoDataAfter.Duration > 0 {
		noData = fmt.Sprintf("; a notice if its collectors have not caught up for %s", durationText(r.NoDataAfter.Duration))
	}
	switch r.Kind {
	case config.KindReport:
		return explainReport(r, hits)
	case config.KindBelow:
		return fmt.Sprintf("fires when %s has fewer than %d %s in a complete %s window%s%s", what, r.Below, hits, r.Window, zone, noData)
	case config.KindNoTraffic:
		return fmt.Sprintf("fires once per silence when %s has had no %s for %s, on complete logs%s", what, hits, durationText(r.NoTraffic.Duration), noData)
	case config.KindSpike, config.KindDrop:
		return explainChange(r, what, hits, zone, noData)
	case config.KindMilestones:
		ms := make([]string, len(r.Milestones))
		for i, m := range r.Milestones {
			ms[i] = strconv.FormatInt(m, 10)
		}
		return fmt.Sprintf("fires when %s passes each of %s %s in %s%s", what, strings.Join(ms, ", "), hits, window, zone)
	}
	return fmt.Sprintf("fires when %s reaches %d %s in %s%s", what, r.Threshold, hits, window, zone)
}

// Describe says what a detected crossing is and why it fires, for the dry
// run.
func (s *Sweeper) Describe(row Row) string {
	r := s.rule(row.Rule)
	loc := time.UTC
	if r != nil {
		loc = r.Window.loc()
	}
	page := textSafe(row.Site + row.Path)
	held := ""
	if row.Note != "" {
		held = " (" + textSafe(row.Note) + ")"
	}
	switch row.Kind {
	case config.KindBelow:
		end := row.WindowStart
		if r != nil {
			end = r.Window.End(row.WindowStart.In(loc))
		}
		return fmt.Sprintf("would fire: rule %s: %s had %d %s in the complete window %s to %s, below %d%s",
			row.Rule, page, row.Count, s.unit(row.Rule), stamp(row.WindowStart, loc), stamp(end, loc), row.Threshold, held)
	case config.KindNoTraffic:
		return fmt.Sprintf("would fire: rule %s: %s has had no hit since %s (%s or more, on complete logs)%s",
			row.Rule, page, stamp(row.WindowStart, loc), durationText(time.Duration(row.Threshold)*time.Second), held)
	case config.KindSpike, config.KindDrop:
		return s.describeChange(row, r)
	case KindReport:
		return s.describeReport(row)
	case KindNoData:
		return fmt.Sprintf("would notify: rule %s: no data from site %s since %s: %s", row.Rule, textSafe(row.Site), stamp(row.WindowStart, loc), textSafe(row.Note))
	}
	unit := ""
	if u := s.unit(row.Rule); u != hitsMetric.unit {
		unit = " " + u
	}
	return fmt.Sprintf("would record: rule %s page %s threshold %d window %s count %d%s",
		row.Rule, page, row.Threshold, row.WindowStart.Format(time.RFC3339), row.Count, unit)
}
