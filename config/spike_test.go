package config

import (
	"strings"
	"testing"
	"time"
)

// Spike and drop rules: their options, the baseline's defaults, and every
// misuse said at its field.
func TestSpikeAndDropRules(t *testing.T) {
	const head = "sources: [{path: /x, site: shop}]\nrules:\n"
	cases := []struct {
		name  string
		rule  string
		kind  string
		every time.Duration
		k     int64
		minK  int64
		errs  []string // each must appear; none means valid
	}{
		{name: "spike, defaults", rule: `{name: a, match: {site: shop, path: /checkout}, spike: {factor: 3, min: 100}, window: 1h, timezone: Europe/Berlin, to: [a@b.c]}`,
			kind: KindSpike, every: 24 * time.Hour, k: 7, minK: 4},
		{name: "drop, the previous windows", rule: `{name: a, match: {site: shop}, drop: {factor: 4, min_baseline: 200}, window: 1h, baseline: {periods: 6, every: 1h}, to: [a@b.c]}`,
			kind: KindDrop, every: time.Hour, k: 6, minK: 4},
		{name: "drop of a glob, same weekday", rule: `{name: a, match: {site: shop, path: "/p/*"}, drop: {factor: 2, min_baseline: 10}, window: 1d, baseline: {periods: 4, every: 7d, min_periods: 1}, active_within: 14d, to: [a@b.c]}`,
			kind: KindDrop, every: 7 * 24 * time.Hour, k: 4, minK: 1},
		{name: "weekly windows", rule: `{name: a, match: {site: shop}, spike: {factor: 2, min: 1}, window: 7d, to: [a@b.c]}`,
			kind: KindSpike, every: 7 * 24 * time.Hour, k: 7, minK: 4},
		{name: "spike factor 1", rule: `{name: a, match: {site: shop}, spike: {factor: 1, min: 5}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].spike.factor: must be a whole number, at least 2"}},
		{name: "spike factor of a fraction", rule: `{name: a, match: {site: shop}, spike: {factor: 1.5, min: 5}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].spike.factor: must be a whole number"}},
		{name: "spike without min", rule: `{name: a, match: {site: shop}, spike: {factor: 3}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].spike.min: required"}},
		{name: "drop without min_baseline", rule: `{name: a, match: {site: shop}, drop: {factor: 3}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].drop.min_baseline: required"}},
		{name: "drop with min", rule: `{name: a, match: {site: shop}, drop: {factor: 3, min: 5, min_baseline: 9}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].drop.min"}},
		{name: "spike and drop", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, drop: {factor: 3, min_baseline: 5}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].drop: give one of"}},
		{name: "spike over a lifetime", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, window: lifetime, to: [a@b.c]}`,
			errs: []string{"rules[0].window: a spike rule needs a tumbling window"}},
		{name: "spike without a site", rule: `{name: a, match: {path: /p}, spike: {factor: 3, min: 5}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].match.site: required by a spike rule"}},
		{name: "every of hours", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, window: 1h, baseline: {every: 12h}, to: [a@b.c]}`,
			errs: []string{"rules[0].baseline.every: must be the window (1h: the previous windows) or whole days"}},
		{name: "every shorter than the window", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, window: 7d, baseline: {every: 1d}, to: [a@b.c]}`,
			errs: []string{"rules[0].baseline.every: must be the window"}},
		{name: "periods 0", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, window: 1h, baseline: {periods: 0}, to: [a@b.c]}`,
			errs: []string{"rules[0].baseline.periods: must be 1 to 60, got 0"}},
		{name: "min_periods above periods", rule: `{name: a, match: {site: shop}, spike: {factor: 3, min: 5}, window: 1h, baseline: {periods: 3, min_periods: 4}, to: [a@b.c]}`,
			errs: []string{"rules[0].baseline.min_periods: must be 1 to periods (3), got 4"}},
		{name: "baseline on a below rule", rule: `{name: a, match: {site: shop}, below: 3, window: 1h, baseline: {periods: 3}, to: [a@b.c]}`,
			errs: []string{"rules[0].baseline: only spike and drop rules take a baseline"}},
		{name: "a spike with a bot pattern of its own", rule: `{name: a, match: {site: shop, exclude_bots: "~(?i)crawler"}, spike: {factor: 3, min: 5}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].match.exclude_bots: a spike rule counts from the rollups"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("hitcount.yaml", []byte(head+"  - "+c.rule+"\n"))
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				r := cfg.Rules[0]
				if r.Kind != c.kind || r.Baseline.Every.Duration != c.every || r.Baseline.Periods != c.k || r.Baseline.MinPeriods != c.minK {
					t.Errorf("kind %q, every %v, periods %d, min_periods %d; want %q, %v, %d, %d",
						r.Kind, r.Baseline.Every.Duration, r.Baseline.Periods, r.Baseline.MinPeriods, c.kind, c.every, c.k, c.minK)
				}
				if r.NoDataAfter.Duration != time.Hour {
					t.Errorf("no_data_after %v, want the default 1h", r.NoDataAfter.Duration)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range c.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("errors %q lack %q", err, want)
				}
			}
		})
	}
}
