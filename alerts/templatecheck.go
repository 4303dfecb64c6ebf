package alerts

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hitcount/hitcount/config"
)

// A rule's template can parse and still fail when it is executed: a field
// the view does not have ({{.Hits}}), an index past the end of the series
// ({{index .Series 5}}), a function that errs ({{slice .Path 1 40}} on "/"),
// html/template's escaping of a context it cannot follow (<a href={{.Path}}).
// At send time each would fail the crossing, every time. So CompileRules
// executes every template on sample crossings of each shape the sweeper
// gives the rule's crossings (message builds the real view), with page paths
// short, long and hostile, and refuses the rule: -check-config says so, with
// the file's line (CheckRules), and the sweeper does not start.
//
// A template that reads the series only where the crossing has one
// ({{if .Windowed}}, {{if .Series}}, {{range .Series}}) passes: a lifetime
// crossing has no series, and a missing series is an empty slice, which
// range, len and if take. A field the view lacks fails whatever the sample.

// TemplateError is a rule's template that fails on a sample crossing.
type TemplateError struct {
	Rule     string // the rule's name
	Index    int    // the rule's place in the rules given to CompileRules
	Template string // subject, text or html
	Sample   string // the sample crossing it failed on
	Err      error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("rule %s: %s: %s", e.Rule, e.Template, e.problem())
}

// problem says what failed, without the rule and the template.
func (e *TemplateError) problem() string {
	// Go's message may quote the sample's values; keep it one short line.
	return fmt.Sprintf("fails on a sample crossing (%s): %s", e.Sample, clipTo(textSafe(e.Err.Error()), 1000))
}

func (e *TemplateError) Unwrap() error { return e.Err }

// TemplateErrors is every template of the rules that fails, in rule order.
type TemplateErrors []*TemplateError

func (es TemplateErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (es TemplateErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// CheckRules compiles cfg's rules as the sweeper does at start, templates
// executed on sample crossings included, and returns what fails as
// config.Errors, each template's problem at its place in cfg.File
// (rules[i].subject, .text, .html), as -check-config prints the file's other
// problems.
func CheckRules(cfg *config.Config) error {
	_, err := CompileRules(cfg.Rules)
	var tes TemplateErrors
	if !errors.As(err, &tes) {
		return err
	}
	es := make(config.Errors, len(tes))
	for i, te := range tes {
		es[i] = cfg.Problem(fmt.Sprintf("rules[%d].%s", te.Index, te.Template), "rule "+te.Rule+": "+te.problem())
	}
	return es
}

// checkTemplates executes r's templates on sample crossings and returns, for
// each template that fails, the first failure. index is r's place in the
// configuration's rules.
func (r *Rule) checkTemplates(index int) []*TemplateError {
	type executor interface {
		Execute(io.Writer, any) error
	}
	samples := r.samples()
	var out []*TemplateError
	for _, t := range []struct {
		name string
		tmpl executor
	}{{"subject", r.Subject}, {"text", r.Text}, {"html", r.HTML}} {
		for _, s := range samples {
			if err := t.tmpl.Execute(io.Discard, s.v); err != nil {
				out = append(out, &TemplateError{Rule: r.Name, Index: index, Template: t.name, Sample: s.name, Err: err})
				break
			}
		}
	}
	return out
}

type sample struct {
	name string
	v    view
}

// sampleTime is when the sample crossings happen: a Sunday when daylight
// saving time starts in Europe, so a window in such a zone is an odd one.
var sampleTime = time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)

// samplePaths are the page paths of the sample crossings: usual, the
// shortest, and the longest counted, made of what a request may hold
// (quotes, markup, CR/LF and a forged header, template delimiters, bytes
// that are not UTF-8, line separators).
var samplePaths = func() []struct{ name, path string } {
	hostile := "/a\"b'c`<script>alert(1)</script>&amp;\r\nBcc: x@example.com\r\n\r\n{{.Path}}%s\xff\xfe\xc3\u2028\u0085\x00\t\x7f"
	long := "/" + strings.Repeat(hostile[1:]+"/é", maxPath/len(hostile)+1)
	long = long[:maxPath]
	return []struct{ name, path string }{
		{"path /pricing", "/pricing"},
		{"path /", "/"},
		{"hostile path", hostile},
		{fmt.Sprintf("hostile path of %d bytes", len(long)), long},
	}
}()

// samples returns views of every shape message gives r's crossings, each
// with every sample path: for a lifetime rule no window and no series; for
// a windowed rule the window with a full series, with a series of one step
// (the series holds only the steps with hits), and with none (its query
// refused for good: the message is sent without it).
func (r *Rule) samples() []sample {
	if r.Kind == config.KindReport {
		return r.reportSamples()
	}
	threshold := int64(1000)
	if len(r.Thresholds) > 0 {
		threshold = r.Thresholds[len(r.Thresholds)-1]
	}
	base := view{Rule: r.Name, Site: r.Site, Count: threshold + 7, Threshold: threshold, Kind: r.Kind, Unit: r.metric().unit}
	if base.Site == "" {
		base.Site = "www.example.com"
	}
	if r.Kind == config.KindBelow {
		base.Count = threshold / 2
	}
	var shapes []sample
	switch {
	case r.Kind == config.KindNoTraffic:
		base.Since = sampleTime.In(r.Window.loc())
		base.SinceText = stamp(sampleTime, r.Window.loc())
		base.Silence = durationText(r.NoTraffic)
		held := base
		held.Note = heldNote(sampleTime, sampleTime.Add(time.Hour), sampleTime.Add(30*time.Minute), sampleSite(), r.Window.loc())
		shapes = append(shapes, sample{"silence", base}, sample{"silence held back", held})
	case r.Window.Size <= 0:
		shapes = append(shapes, sample{"lifetime", base})
	default:
		w := base
		loc := r.Window.loc()
		w.Windowed = true
		w.WindowName = r.WindowName
		w.WindowStart = r.Window.Start(sampleTime).In(loc)
		w.WindowEnd = r.Window.End(w.WindowStart)
		step := max(time.Minute, (r.Window.Size / 12).Truncate(time.Minute)) // as message has it
		w.SeriesStep = step.String()
		full := make([]Point, 12)
		for i := range full {
			full[i] = Point{Time: w.WindowStart.Add(time.Duration(i) * step).In(loc), Hits: int64(i*i + 1)}
		}
		if r.baselined() {
			r.changeView(&w, r.sampleChangeRow(w.WindowStart))
		}
		one, none := w, w
		w.Series = full
		one.Series = []Point{{Time: w.WindowStart, Hits: threshold + 7}}
		shapes = append(shapes,
			sample{fmt.Sprintf("window %s, series of %d steps", r.WindowName, len(full)), w},
			sample{fmt.Sprintf("window %s, series of one step", r.WindowName), one},
			sample{fmt.Sprintf("window %s, no series", r.WindowName), none})
		if r.Kind == config.KindBelow || r.baselined() {
			held := w
			held.Note = heldNote(w.WindowEnd, w.WindowEnd.Add(time.Hour), w.WindowEnd.Add(30*time.Minute), sampleSite(), loc)
			shapes = append(shapes, sample{fmt.Sprintf("window %s, held back", r.WindowName), held})
		}
	}
	paths := samplePaths
	if r.scope == scopeSite {
		paths = append([]struct{ name, path string }{{"the whole site", ""}}, paths...)
	}
	var out []sample
	for _, s := range shapes {
		for _, p := range paths {
			v := s.v
			v.Path = p.path
			out = append(out, sample{s.name + ", " + p.name, v})
		}
	}
	return out
}

// sampleSite is a site as the collectors may report it: a host name and a
// file name made of what they may hold.
func sampleSite() siteState {
	hostile := samplePaths[2].path
	return siteState{Site: "www.example.com", CompleteUntil: sampleTime,
		Behind: ownerRecord{Site: "www.example.com", Collector: "0123456789abcdef", Host: "web-1" + hostile, Path: "/var/log/nginx" + hostile, CaughtUp: sampleTime}}
}
