package alerts

import (
	"testing"

	"github.com/hitcount/hitcount/config"
)

// -check-config's one line per rule.
func TestExplain(t *testing.T) {
	cfg, err := config.Parse("hitcount.yaml", []byte(`sources: [{path: /x, site: shop}]
rules:
  - {name: a, match: {site: shop, path: /checkout}, below: 50, window: 1h, timezone: Europe/Berlin, to: [a@b.c]}
  - {name: b, match: {site: shop}, below: 1000, window: 1d, no_data_after: 0, to: [a@b.c]}
  - {name: c, match: {site: shop, path: "/p/*", exclude_bots: true}, below: 1, window: 1d, to: [a@b.c]}
  - {name: d, match: {site: shop, path: /checkout}, no_traffic: 2h, no_data_after: 30m, to: [a@b.c]}
  - {name: e, match: {path: /pricing}, threshold: 1000, window: 1h, to: [a@b.c]}
  - {name: f, match: {path: "/blog/*"}, milestones: [100, 1000], window: lifetime, to: [a@b.c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fires when /checkout on shop has fewer than 50 hits in a complete 1h window, Europe/Berlin; a notice if its collectors have not caught up for 1h",
		"fires when site shop has fewer than 1000 hits in a complete 1d window, UTC",
		"fires when a page matching /p/* (with a hit in the last 7d) on shop has fewer than 1 hits (bots excluded) in a complete 1d window, UTC; a notice if its collectors have not caught up for 1h",
		"fires once per silence when /checkout on shop has had no hits for 2h, on complete logs; a notice if its collectors have not caught up for 30m",
		"fires when /pricing reaches 1000 hits in a 1h window, UTC",
		"fires when a page matching /blog/* passes each of 100, 1000 hits in its lifetime, UTC",
	}
	for i, r := range cfg.Rules {
		if got := Explain(r); got != want[i] {
			t.Errorf("rule %s:\n got %s\nwant %s", r.Name, got, want[i])
		}
	}
}
