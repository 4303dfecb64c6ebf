package alerts

import (
	"errors"
	"strings"
	"testing"

	"github.com/hitcount/hitcount/config"
)

// parseRules reads a configuration whose rules are given as YAML lines.
func parseRules(t *testing.T, rules string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("hitcount.yaml", []byte("rules:\n"+rules))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// A template that parses but fails when executed is refused when the rules
// are compiled (the sweeper's start, -check-config), saying the rule, the
// template and the sample it failed on; templates that hold whatever the
// crossing, the built-in ones included, pass.
func TestTemplatesExecutedOnSamples(t *testing.T) {
	const lifetime = "  - {name: r, match: {path: /p}, threshold: 5, window: lifetime, to: [a@b.c], "
	const hourly = "  - {name: r, match: {path: /p}, threshold: 5, window: 1h, timezone: Europe/Berlin, to: [a@b.c], "
	cases := []struct {
		name string
		rule string
		want []string // in the error, in order; none: the rule compiles
	}{
		{"unknown field", lifetime + `subject: '{{.Hits}} hits'}`,
			[]string{"rule r: subject: fails on a sample crossing (lifetime, path /pricing)", `can't evaluate field Hits in type alerts.view`}},
		{"unknown field in html", hourly + `html: '<p>{{.Page}}</p>'}`,
			[]string{"rule r: html: fails on a sample crossing (window 1h, series of 12 steps, path /pricing)", "can't evaluate field Page"}},
		{"index past a lifetime crossing's series", lifetime + `text: '{{index .Series 5}}'}`,
			[]string{"rule r: text: fails on a sample crossing (lifetime, path /pricing)", "index out of range: 5"}},
		// The series holds only the steps with hits: one, at least.
		{"index past a short series", hourly + `text: '{{(index .Series 5).Hits}}'}`,
			[]string{"rule r: text: fails on a sample crossing (window 1h, series of one step, path /pricing)", "index out of range"}},
		{"first point of a series that may be missing", hourly + `text: '{{(index .Series 0).Hits}}'}`,
			[]string{"rule r: text: fails on a sample crossing (window 1h, no series, path /pricing)", "index out of range"}},
		{"function error on a short path", lifetime + `subject: '{{slice .Path 1 40}}'}`,
			[]string{"rule r: subject: fails on a sample crossing (lifetime, path /pricing)", "error calling slice"}},
		{"function error on the shortest path", lifetime + `subject: '{{slice .Path 1 5}}'}`,
			[]string{"rule r: subject: fails on a sample crossing (lifetime, path /)", "error calling slice"}},
		{"call of a non-function", lifetime + `text: '{{call .Rule}}'}`,
			[]string{"rule r: text: ", "error calling call"}},
		{"template not defined", lifetime + `text: '{{template "page" .}}'}`,
			[]string{"rule r: text: ", `template "page" not defined`}},
		{"html that escaping cannot follow", lifetime + `html: '<a href={{.Path}}'}`,
			[]string{"rule r: html: ", "ends in a non-text context"}},
		{"every failing template of the rule", lifetime + `subject: '{{.Hits}}', text: '{{.Hits}}', html: '{{.Hits}}'}`,
			[]string{"rule r: subject: ", "\nrule r: text: ", "\nrule r: html: "}},

		{"built-in templates, lifetime", lifetime + `}`, nil},
		{"built-in templates, windowed", hourly + `}`, nil},
		{"built-in templates, milestones in 5m windows", "  - {name: r, match: {path: '~^/'}, milestones: [10, 100], window: 5m, to: [a@b.c]}", nil},
		{"built-in templates, 7d windows", "  - {name: r, match: {path: '/blog/*'}, threshold: 1, window: 7d, timezone: America/New_York, to: [a@b.c]}", nil},
		{"series read only where there is one, lifetime", lifetime +
			`subject: '{{.Rule}} {{.Site}}{{.Path}} {{.Count}}/{{.Threshold}}{{if .Windowed}} {{(index .Series 0).Hits}}{{end}}', ` +
			`text: '{{range .Series}}{{.Time.Format "15:04"}} {{.Hits}}{{end}} {{len .Series}} {{.Series}} {{printf "%q" .Path}}', ` +
			`html: '<a href="https://{{.Site}}{{.Path}}" title="{{.Path}}">{{.Path}}</a><script>var p = {{.Path}};</script>'}`, nil},
		{"series read only where there is one, windowed", hourly +
			`subject: '{{.WindowName}} {{.WindowStart.Format "2006-01-02 15:04 MST"}}{{if .Series}} {{(index .Series 0).Hits}}{{end}}', ` +
			`text: '{{with .Series}}{{(index . 0).Hits}}{{end}}{{range $i, $p := .Series}}{{$i}}={{$p.Hits}} {{end}}', ` +
			`html: '{{.SeriesStep}}{{range .Series}}<td>{{.Time}}</td>{{end}}'}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := parseRules(t, c.rule+"\n")
			rules, err := CompileRules(cfg.Rules)
			if c.want == nil {
				if err != nil || len(rules) != 1 {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("compiled; want an error with %q", c.want)
			}
			msg, rest := err.Error(), err.Error()
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q; want %q (in order)", msg, c.want)
				}
				rest = rest[i+len(w):]
			}
			var tes TemplateErrors
			if !errors.As(err, &tes) || tes[0].Rule != "r" || tes[0].Index != 0 {
				t.Errorf("error %#v; want TemplateErrors of rule r", err)
			}
		})
	}
}

// CheckRules (-check-config) places each failing template in the file, as
// the file's other problems are, and reports every one, not the first.
func TestTemplateErrorsPlacedInTheFile(t *testing.T) {
	cfg := parseRules(t, `  - name: fine
    match: {path: /}
    threshold: 1
    window: 1h
    to: [a@b.c]
  - name: hot
    match: {path: /pricing}
    threshold: 1
    window: lifetime
    to: [a@b.c]
    subject: '{{.Hits}} hits'
    html: |
      <p>{{index .Series 2}}</p>
`)
	err := CheckRules(cfg)
	var es config.Errors
	if !errors.As(err, &es) || len(es) != 2 {
		t.Fatalf("error %v; want two config.Errors", err)
	}
	want := []string{
		`hitcount.yaml:12:14: rules[1].subject: rule hot: fails on a sample crossing (lifetime, path /pricing): template: subject:1:2: executing "subject" at <.Hits>: can't evaluate field Hits in type alerts.view`,
		`hitcount.yaml:13:11: rules[1].html: rule hot: fails on a sample crossing (lifetime, path /pricing): template: html:1:5: executing "html" at <index .Series 2>: error calling index: index out of range: 2`,
	}
	for i, w := range want {
		if es[i].Error() != w {
			t.Errorf("error %d:\n%s\nwant\n%s", i, es[i].Error(), w)
		}
	}
	if err := CheckRules(parseRules(t, "  - {name: fine, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}\n")); err != nil {
		t.Errorf("built-in templates: %v", err)
	}
}

// The hostile sample path really is: what a request may carry, at the
// longest length counted.
func TestTemplateSamplePaths(t *testing.T) {
	var long string
	for _, p := range samplePaths {
		if len(p.path) > len(long) {
			long = p.path
		}
	}
	for _, w := range []string{`"`, "'", "<script>", "\r\n", "\xff"} {
		if !strings.Contains(long, w) {
			t.Errorf("longest sample path lacks %q", w)
		}
	}
	if len(long) != maxPath {
		t.Errorf("longest sample path: %d bytes, want %d", len(long), maxPath)
	}
}
