package alerts

import (
	"strings"
	"testing"

	"github.com/hitcount/hitcount/config"
)

// What a rule counts is read in one place (metric), and said by
// -check-config.
func TestVisitorsMetricAndExplain(t *testing.T) {
	cfg, err := config.Parse("hitcount.yaml", []byte(`sources: [{path: /x, site: shop}]
rules:
  - {name: a, match: {site: shop, path: /launch}, count: visitors, threshold: 500, window: 1h, timezone: Europe/Berlin, to: [a@b.c]}
  - {name: b, match: {site: shop, path: /checkout}, count: visitors, below: 20, window: 1h, no_data_after: 0, to: [a@b.c]}
  - {name: c, match: {path: "/blog/*", exclude_bots: true}, count: visitors, milestones: [100, 1000], window: 1d, to: [a@b.c]}
  - {name: d, match: {path: /pricing}, threshold: 1000, window: 1h, to: [a@b.c]}
  - {name: e, match: {site: shop}, count: visitors, spike: {factor: 3, min: 100}, window: 1h, to: [a@b.c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		explain string
		metric  metric
	}{
		{"fires when /launch on shop reaches 500 visitors (distinct client address and user agent) in a 1h window, Europe/Berlin", visitorsMetric},
		{"fires when /checkout on shop has fewer than 20 visitors (distinct client address and user agent) in a complete 1h window, UTC", visitorsMetric},
		{"fires when a page matching /blog/* passes each of 100, 1000 visitors (distinct client address and user agent, bots excluded) in a 1d window, UTC", visitorsMetric},
		{"fires when /pricing reaches 1000 hits in a 1h window, UTC", hitsMetric},
		{"", visitorsMetric},
	}
	rules, err := CompileRules(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cfg.Rules {
		if got := Explain(r); cases[i].explain != "" && got != cases[i].explain || !strings.Contains(got, "visitors") != (cases[i].metric == hitsMetric) {
			t.Errorf("rule %s:\n got %s\nwant %s", r.Name, got, cases[i].explain)
		}
		if got := rules[i].metric(); got != cases[i].metric {
			t.Errorf("rule %s counts %+v, want %+v", r.Name, got, cases[i].metric)
		}
	}
}

// A spike or drop rule counting visitors says visitors in its built-in
// templates, where the hits one says hits.
func TestVisitorTemplatesOfChangeRules(t *testing.T) {
	for _, kind := range []string{config.KindSpike, config.KindDrop} {
		subject, text, html := visitorTemplates(kind)
		for _, s := range []string{subject, text, html} {
			if strings.Contains(s, " hits") || !strings.Contains(s, "visitors") {
				t.Errorf("%s: %s", kind, s)
			}
		}
	}
}
