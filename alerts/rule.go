package alerts

import (
	"fmt"
	htmltemplate "html/template"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hitcount/hitcount/config"
)

// Rule is a configured rule, compiled.
type Rule struct {
	Name string
	// Kind is what the rule fires on: config.KindThreshold,
	// KindMilestones, KindBelow or KindNoTraffic.
	Kind     string
	Site     string
	Host     string
	Method   string
	StatusLo uint16 // 0: any status
	StatusHi uint16
	// ExcludeBots leaves out the user agents the schema marks as bots
	// (sink.BotPattern, the rollups' bot column), or with BotPattern those
	// it matches (counted from hits: the rollups keep no user agent).
	ExcludeBots bool
	BotPattern  string
	// Thresholds are the counts that make a crossing: the threshold, or every
	// milestone, ascending.
	Thresholds []int64
	Window     Window
	WindowName string // as configured: "1h", "lifetime"
	// Below rules: the floor (also Thresholds[0]). NoTraffic rules: the
	// silence. Both: pages of a pattern are watched while they had a hit
	// within ActiveWithin; a no-data notice after NoDataAfter (0: none).
	Below        int64
	NoTraffic    time.Duration
	ActiveWithin time.Duration
	NoDataAfter  time.Duration
	// Spike and drop rules (spike.go): Factor (also Thresholds[0]), the
	// spike's Min or the drop's MinBaseline, and the baseline: Periods
	// windows, one per Every, judged when MinPeriods are known.
	Factor, Min, MinBaseline int64
	Periods, MinPeriods      int
	Every                    time.Duration
	// Count is what the rule counts: config.CountHits or CountVisitors
	// (read through metric, visitors.go).
	Count string
	// Path is the path as configured: "" (below and no_traffic rules) is
	// the site's total.
	Path string
	// Report rules: weekly or monthly, how many pages to list, and the
	// first day of a week (report.go).
	Report    string
	Top       int
	WeekStart time.Weekday
	To        []string
	Subject   *texttemplate.Template
	Text      *texttemplate.Template
	HTML      *htmltemplate.Template

	pathMatch func(string) bool
	scope     scope
}

// scope is what a rule's crossings are about.
type scope int

const (
	scopePage    scope = iota // one exact path
	scopePattern              // every page a glob or regex matches
	scopeSite                 // the site's total (below and no_traffic rules without a path)
)

// completeness reports whether the rule is evaluated on complete windows
// only (below, no_traffic).
func (r *Rule) completeness() bool {
	return r.Kind == config.KindBelow || r.Kind == config.KindNoTraffic || r.baselined()
}

const (
	defaultSubject = `[hitcount] {{.Site}}{{.Path}} passed {{.Threshold}} hits{{if .Windowed}} in {{.WindowName}}{{end}}`
	defaultText    = `{{.Site}}{{.Path}} reached {{.Count}} hits, passing the threshold of {{.Threshold}} of rule {{.Rule}}.
{{if .Windowed}}Window: {{.WindowStart.Format "2006-01-02 15:04 MST"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}).
{{end}}{{if .Series}}
Hits per {{.SeriesStep}}:
{{range .Series}}  {{.Time.Format "2006-01-02 15:04"}}  {{.Hits}}
{{end}}{{end}}
-- hitcount, rule {{.Rule}}
`
	defaultHTML = `<p><b>{{.Site}}{{.Path}}</b> reached <b>{{.Count}}</b> hits, passing the threshold of {{.Threshold}} of rule <code>{{.Rule}}</code>.</p>
{{if .Windowed}}<p>Window: {{.WindowStart.Format "2006-01-02 15:04 MST"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}).</p>{{end}}
{{if .Series}}<table><tr><th>{{.SeriesStep}}</th><th>hits</th></tr>{{range .Series}}<tr><td>{{.Time.Format "2006-01-02 15:04"}}</td><td>{{.Hits}}</td></tr>{{end}}</table>{{end}}`

	belowSubject = `[hitcount] {{.Site}}{{.Path}}: {{.Count}} hits in {{.WindowName}}, below {{.Threshold}}`
	belowText    = `{{.Site}}{{.Path}} had {{.Count}} hits from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}), fewer than the {{.Threshold}} of rule {{.Rule}}.
The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.
{{if .Note}}
{{.Note}}
{{end}}{{if .Series}}
Hits per {{.SeriesStep}} (steps without hits left out):
{{range .Series}}  {{.Time.Format "2006-01-02 15:04"}}  {{.Hits}}
{{end}}{{end}}
-- hitcount, rule {{.Rule}}
`
	belowHTML = `<p><b>{{.Site}}{{.Path}}</b> had <b>{{.Count}}</b> hits from {{.WindowStart.Format "2006-01-02 15:04"}} to {{.WindowEnd.Format "2006-01-02 15:04 MST"}} ({{.WindowName}}), fewer than the {{.Threshold}} of rule <code>{{.Rule}}</code>.</p>
<p>The collectors of {{.Site}} had committed their logs past the end of this window: the count is complete.</p>
{{if .Note}}<p>{{.Note}}</p>{{end}}
{{if .Series}}<table><tr><th>{{.SeriesStep}}</th><th>hits</th></tr>{{range .Series}}<tr><td>{{.Time.Format "2006-01-02 15:04"}}</td><td>{{.Hits}}</td></tr>{{end}}</table>{{end}}`

	noTrafficSubject = `[hitcount] no hits on {{.Site}}{{.Path}} for {{.Silence}}`
	noTrafficText    = `{{.Site}}{{.Path}} has had no hit since {{.Since.Format "2006-01-02 15:04 MST"}}: {{.Silence}} without traffic, by rule {{.Rule}}, on logs its collectors had committed.
{{if .Note}}
{{.Note}}
{{end}}
Sent once for this silence; the next hit ends it.
-- hitcount, rule {{.Rule}}
`
	noTrafficHTML = `<p><b>{{.Site}}{{.Path}}</b> has had no hit since {{.Since.Format "2006-01-02 15:04 MST"}}: {{.Silence}} without traffic, by rule <code>{{.Rule}}</code>, on logs its collectors had committed.</p>
{{if .Note}}<p>{{.Note}}</p>{{end}}
<p>Sent once for this silence; the next hit ends it.</p>`

	noDataSubject = `[hitcount] no data from site {{.Site}} since {{.SinceText}}`
	noDataText    = `The collectors of site {{.Site}} have not committed their logs past {{.SinceText}}.
{{.Note}}

Rule {{.Rule}} is held meanwhile: no alert of it says anything about this time. Once the collectors catch up, its windows are evaluated and fire only if really below.
Sent once for this silence.
-- hitcount, rule {{.Rule}}
`
	noDataHTML = `<p>The collectors of site <b>{{.Site}}</b> have not committed their logs past {{.SinceText}}.</p>
<p>{{.Note}}</p>
<p>Rule <code>{{.Rule}}</code> is held meanwhile: no alert of it says anything about this time. Once the collectors catch up, its windows are evaluated and fire only if really below.</p>
<p>Sent once for this silence.</p>`
)

// The no-data notice's templates: built in, the same for every rule (a
// rule's own templates describe its crossings).
var (
	noDataSubjectT = must(parseText("subject", noDataSubject))
	noDataTextT    = must(parseText("text", noDataText))
	noDataHTMLT    = htmltemplate.Must(htmltemplate.New("html").Parse(noDataHTML))
)

func must(t *texttemplate.Template, err error) *texttemplate.Template {
	if err != nil {
		panic(err)
	}
	return t
}

// defaultTemplates are the built-in subject, text and HTML of a kind.
func defaultTemplates(kind string) (subject, text, html string) {
	switch kind {
	case config.KindBelow:
		return belowSubject, belowText, belowHTML
	case config.KindNoTraffic:
		return noTrafficSubject, noTrafficText, noTrafficHTML
	case config.KindSpike, config.KindDrop:
		return changeTemplates(kind)
	case config.KindReport:
		return reportSubject, reportText, reportHTML
	}
	return defaultSubject, defaultText, defaultHTML
}

// CompileRules turns validated configuration rules into Rules. Each
// template is executed on sample crossings too (see checkTemplates): the
// ones that fail are returned together as TemplateErrors.
func CompileRules(rules []config.Rule) ([]*Rule, error) {
	out := make([]*Rule, 0, len(rules))
	var failing TemplateErrors
	for i, cr := range rules {
		r := &Rule{
			Name: cr.Name, Kind: cr.Kind, Site: cr.Match.Site, Host: cr.Match.Host, Method: cr.Match.Method,
			ExcludeBots: cr.Match.ExcludeBots.Exclude(), BotPattern: cr.Match.ExcludeBots.Pattern(), To: cr.To,
			Window: Window{Size: cr.WindowDur, Loc: cr.Location}, WindowName: cr.Window,
			Below: cr.Below, NoTraffic: cr.NoTraffic.Duration, ActiveWithin: cr.ActiveWithin.Duration,
			NoDataAfter: cr.NoDataAfter.Duration, Path: cr.Match.Path, Count: cr.Count,
			Report: cr.Report, Top: cr.Top, WeekStart: cr.WeekDay,
		}
		if r.Count == "" {
			r.Count = config.CountHits // a Rule made by hand, not validated
		}
		if r.Kind == "" {
			r.Kind = config.KindThreshold // a Rule made by hand, not validated
			if len(cr.Milestones) > 0 {
				r.Kind = config.KindMilestones
			}
		}
		switch {
		case r.Kind == config.KindBelow:
			r.Thresholds = []int64{cr.Below}
		case r.Kind == config.KindNoTraffic:
		case r.baselined():
			r.compileChange(cr)
		case cr.Threshold > 0:
			r.Thresholds = []int64{cr.Threshold}
		default:
			r.Thresholds = append([]int64(nil), cr.Milestones...)
		}
		if st := cr.Match.Status; st != "" {
			if strings.HasSuffix(st, "xx") {
				c, _ := strconv.Atoi(st[:1])
				r.StatusLo, r.StatusHi = uint16(c*100), uint16(c*100+99)
			} else {
				n, _ := strconv.Atoi(st)
				r.StatusLo, r.StatusHi = uint16(n), uint16(n)
			}
		}
		switch p := cr.Match.Path; {
		case p == "":
			r.scope = scopeSite
			r.pathMatch = func(string) bool { return true }
		case strings.HasPrefix(p, "~"):
			re, err := regexp.Compile(p[1:])
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", cr.Name, err)
			}
			r.scope, r.pathMatch = scopePattern, re.MatchString
		case strings.ContainsAny(p, "*?["):
			r.scope = scopePattern
			r.pathMatch = func(path string) bool { ok, _ := doublestar.Match(p, path); return ok }
		default:
			r.pathMatch = func(path string) bool { return path == p }
		}
		var err error
		subject, text, html := defaultTemplates(r.Kind)
		if r.Count == config.CountVisitors {
			subject, text, html = visitorTemplates(r.Kind)
		}
		// Page text comes from logs: every value printed into the subject
		// or the plain-text body is escaped (parseText); the HTML part is
		// escaped by html/template.
		if r.Subject, err = parseText("subject", orDefault(cr.Subject, subject)); err != nil {
			return nil, fmt.Errorf("rule %s: subject: %w", cr.Name, err)
		}
		if r.Text, err = parseText("text", orDefault(cr.Text, text)); err != nil {
			return nil, fmt.Errorf("rule %s: text: %w", cr.Name, err)
		}
		if r.HTML, err = htmltemplate.New("html").Parse(orDefault(cr.HTML, html)); err != nil {
			return nil, fmt.Errorf("rule %s: html: %w", cr.Name, err)
		}
		failing = append(failing, r.checkTemplates(i)...)
		out = append(out, r)
	}
	if len(failing) > 0 {
		return nil, failing
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Matches reports whether the rule counts hits of this page. Below,
// no_traffic and report rules match none: they are not fired by hits (see
// below.go, report.go).
func (r *Rule) Matches(site, path string) bool {
	return !r.completeness() && r.Kind != config.KindReport && (r.Site == "" || r.Site == site) && r.pathMatch(path)
}

// crossed returns the thresholds that count reaches.
func (r *Rule) crossed(count int64) []int64 {
	var out []int64
	for _, t := range r.Thresholds {
		if count >= t {
			out = append(out, t)
		}
	}
	return out
}
