package alerts

import (
	"strings"

	"github.com/hitcount/hitcount/config"
)

// What a rule counts (issue 19: count: visitors). Every count a rule's
// evaluation makes, whatever its kind, goes through Rule.metric: the
// rollup it reads and the aggregate over its rows. Hits are summed from
// hits_1m; visitors, distinct (client address, user agent) pairs, are
// merged from the uniqExact states of hits_visitors_1m (sink/schema.go), so
// a window of any size counts each visitor once, from rows whose number
// follows the pages and minutes read, never the hits stored. A rule whose
// own bot pattern needs the user agents counts from hits with the raw
// aggregate instead.
//
// Spike and drop rules compare a window's visitors with the median of the
// same window's visitors in earlier periods (WindowSetCounts).
//
// Thresholds and windowed milestones count visitors as they count hits:
// the touched pages of hits_touched say which pages to count, the count
// itself comes from the visitors rollup. Below rules count a complete
// window's visitors. Not supported, refused by config: no_traffic (a
// silence has no visitors), report rules (a report's totals and changes
// are of hits) and a lifetime window (distinct visitors do not
// add up across days: a lifetime count would merge a page's whole history
// at every sweep).

// metric is what a rule counts, as SQL.
type metric struct {
	// unit is the word for it in messages: hits or visitors.
	unit string
	// rollup is the per-minute table, keyed like hits_1m (site, path,
	// minute, host, method, status, bot), read with agg over its rows.
	rollup, agg string
	// raw is the aggregate over rows of hits.
	raw string
}

var (
	hitsMetric     = metric{unit: "hits", rollup: "hits_1m", agg: "sum(hits)", raw: "count()"}
	visitorsMetric = metric{unit: "visitors", rollup: "hits_visitors_1m", agg: "uniqExactMerge(visitors)", raw: "uniqExact(visitor)"}
)

// metric is what r counts: the one place its evaluation reads it from.
func (r *Rule) metric() metric {
	if r.Count == config.CountVisitors {
		return visitorsMetric
	}
	return hitsMetric
}

// The built-in templates of rules that count visitors. A visitor is one
// (client address, user agent) pair; the series under a message counts
// each step's visitors, so a visitor seen in several steps is in each.
const (
	visitorsSubject = `[hitcount] {{.Site}}{{.Path}} passed {{.Threshold}} visitors{{if .Windowed}} in {{.WindowName}}{{end}}`
	visitorsText    = `{{.Site}}{{.Path}} reached {{.Count}} visitors, passing the threshold of {{.Threshold}} of rule {{.Rule}}.
A visitor is a distinct client address and user agent.
{{if .Windowed}}Window: {{.WindowStart.Format "2006-01-02 15:04 MST"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}).
{{end}}{{if .Series}}
Visitors per {{.SeriesStep}} (one seen in several steps counts in each):
{{range .Series}}  {{.Time.Format "2006-01-02 15:04"}}  {{.Hits}}
{{end}}{{end}}
-- hitcount, rule {{.Rule}}
`
	visitorsHTML = `<p><b>{{.Site}}{{.Path}}</b> reached <b>{{.Count}}</b> visitors, passing the threshold of {{.Threshold}} of rule <code>{{.Rule}}</code>.</p>
<p>A visitor is a distinct client address and user agent.</p>
{{if .Windowed}}<p>Window: {{.WindowStart.Format "2006-01-02 15:04 MST"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}).</p>{{end}}
{{if .Series}}<table><tr><th>{{.SeriesStep}}</th><th>visitors</th></tr>{{range .Series}}<tr><td>{{.Time.Format "2006-01-02 15:04"}}</td><td>{{.Hits}}</td></tr>{{end}}</table>{{end}}`

	belowVisitorsSubject = `[hitcount] {{.Site}}{{.Path}}: {{.Count}} visitors in {{.WindowName}}, below {{.Threshold}}`
	belowVisitorsText    = `{{.Site}}{{.Path}} had {{.Count}} visitors from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}), fewer than the {{.Threshold}} of rule {{.Rule}}.
A visitor is a distinct client address and user agent.
The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.
{{if .Note}}
{{.Note}}
{{end}}{{if .Series}}
Visitors per {{.SeriesStep}} (steps without visitors left out; one seen in several steps counts in each):
{{range .Series}}  {{.Time.Format "2006-01-02 15:04"}}  {{.Hits}}
{{end}}{{end}}
-- hitcount, rule {{.Rule}}
`
	belowVisitorsHTML = `<p><b>{{.Site}}{{.Path}}</b> had <b>{{.Count}}</b> visitors from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}), fewer than the {{.Threshold}} of rule <code>{{.Rule}}</code>.</p>
<p>A visitor is a distinct client address and user agent. The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.</p>
{{if .Note}}<p>{{.Note}}</p>{{end}}
{{if .Series}}<table><tr><th>{{.SeriesStep}}</th><th>visitors</th></tr>{{range .Series}}<tr><td>{{.Time.Format "2006-01-02 15:04"}}</td><td>{{.Hits}}</td></tr>{{end}}</table>{{end}}`
)

// visitorTemplates are the built-in subject, text and HTML of a kind of
// rule counting visitors; a kind without its own wording for visitors
// keeps the one for hits.
func visitorTemplates(kind string) (subject, text, html string) {
	switch kind {
	case config.KindBelow:
		return belowVisitorsSubject, belowVisitorsText, belowVisitorsHTML
	case config.KindThreshold, config.KindMilestones, "":
		return visitorsSubject, visitorsText, visitorsHTML
	case config.KindSpike, config.KindDrop:
		s, t, h := changeTemplates(kind)
		return visitorWording.Replace(s), visitorWording.Replace(t), visitorWording.Replace(h)
	}
	return defaultTemplates(kind)
}

// visitorWording turns the hits wording of a kind's built-in templates
// (spike and drop) into visitors'.
var visitorWording = strings.NewReplacer(" hits", " visitors", "Hits per", "Visitors per", ">hits<", ">visitors<")

// unit is the word for what the rule named counts: hits when it is gone
// from the configuration.
func (s *Sweeper) unit(rule string) string {
	if r := s.rule(rule); r != nil {
		return r.metric().unit
	}
	return hitsMetric.unit
}

// hitsOnly reports whether every row's rule counts hits (the threshold
// digest's table says hits).
func (s *Sweeper) hitsOnly(rows []Row) bool {
	for _, r := range rows {
		if s.unit(r.Rule) != hitsMetric.unit {
			return false
		}
	}
	return true
}
