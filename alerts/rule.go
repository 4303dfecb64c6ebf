package alerts

import (
	"fmt"
	htmltemplate "html/template"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hitcount/hitcount/config"
)

// Rule is a configured rule, compiled.
type Rule struct {
	Name     string
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
	To         []string
	Subject    *texttemplate.Template
	Text       *texttemplate.Template
	HTML       *htmltemplate.Template

	pathMatch func(string) bool
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
)

// CompileRules turns validated configuration rules into Rules. Each
// template is executed on sample crossings too (see checkTemplates): the
// ones that fail are returned together as TemplateErrors.
func CompileRules(rules []config.Rule) ([]*Rule, error) {
	out := make([]*Rule, 0, len(rules))
	var failing TemplateErrors
	for i, cr := range rules {
		r := &Rule{
			Name: cr.Name, Site: cr.Match.Site, Host: cr.Match.Host, Method: cr.Match.Method,
			ExcludeBots: cr.Match.ExcludeBots.Exclude(), BotPattern: cr.Match.ExcludeBots.Pattern(), To: cr.To,
			Window: Window{Size: cr.WindowDur, Loc: cr.Location}, WindowName: cr.Window,
		}
		if cr.Threshold > 0 {
			r.Thresholds = []int64{cr.Threshold}
		} else {
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
		case strings.HasPrefix(p, "~"):
			re, err := regexp.Compile(p[1:])
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", cr.Name, err)
			}
			r.pathMatch = re.MatchString
		case strings.ContainsAny(p, "*?["):
			r.pathMatch = func(path string) bool { ok, _ := doublestar.Match(p, path); return ok }
		default:
			r.pathMatch = func(path string) bool { return path == p }
		}
		var err error
		// Page text comes from logs: every value printed into the subject
		// or the plain-text body is escaped (parseText); the HTML part is
		// escaped by html/template.
		if r.Subject, err = parseText("subject", orDefault(cr.Subject, defaultSubject)); err != nil {
			return nil, fmt.Errorf("rule %s: subject: %w", cr.Name, err)
		}
		if r.Text, err = parseText("text", orDefault(cr.Text, defaultText)); err != nil {
			return nil, fmt.Errorf("rule %s: text: %w", cr.Name, err)
		}
		if r.HTML, err = htmltemplate.New("html").Parse(orDefault(cr.HTML, defaultHTML)); err != nil {
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

// Matches reports whether the rule counts hits of this page.
func (r *Rule) Matches(site, path string) bool {
	return (r.Site == "" || r.Site == site) && r.pathMatch(path)
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
