package config

import (
	"strings"
	"testing"
	"time"
)

// A rule fires on one of threshold, milestones, below or no_traffic; below
// and no_traffic rules name their site, may leave the path out (the site's
// total), take active_within (a glob or regex only) and no_data_after, with
// their defaults; every misuse is said at its field.
func TestRuleKinds(t *testing.T) {
	const head = "sources: [{path: /x, site: shop}]\nrules:\n"
	cases := []struct {
		name string
		rule string
		kind string
		errs []string // each must appear; none means valid
	}{
		{name: "threshold", rule: `{name: a, match: {path: /p}, threshold: 5, window: 1h, to: [a@b.c]}`, kind: KindThreshold},
		{name: "milestones", rule: `{name: a, match: {path: /p}, milestones: [1, 2], window: lifetime, to: [a@b.c]}`, kind: KindMilestones},
		{name: "below a page", rule: `{name: a, match: {site: shop, path: /checkout}, below: 50, window: 1h, timezone: Europe/Berlin, to: [a@b.c]}`, kind: KindBelow},
		{name: "below the site", rule: `{name: a, match: {site: shop}, below: 50, window: 1h, to: [a@b.c]}`, kind: KindBelow},
		{name: "below a glob, active_within", rule: `{name: a, match: {site: shop, path: "/p/*"}, below: 1, window: 1d, active_within: 14d, no_data_after: 0, to: [a@b.c]}`, kind: KindBelow},
		{name: "no_traffic", rule: `{name: a, match: {site: shop, path: /checkout}, no_traffic: 2h, to: [a@b.c]}`, kind: KindNoTraffic},
		{name: "nothing to fire on", rule: `{name: a, match: {path: /p}, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].threshold: required: a threshold, a list of milestones, below (fires under a count), no_traffic (fires after a silence), spike or drop"}},
		{name: "two kinds", rule: `{name: a, match: {site: shop, path: /p}, threshold: 5, below: 3, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].below: give one of threshold, milestones, below, no_traffic, spike, drop and report, not threshold and below"}},
		{name: "below without a site", rule: `{name: a, match: {path: /p}, below: 3, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].match.site: required by a below rule"}},
		{name: "below 0", rule: `{name: a, match: {site: shop}, below: 0, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].below: must be positive, got 0"}},
		{name: "below over a lifetime", rule: `{name: a, match: {site: shop}, below: 3, window: lifetime, to: [a@b.c]}`,
			errs: []string{"rules[0].window: a below rule needs a tumbling window"}},
		{name: "below without a window", rule: `{name: a, match: {site: shop}, below: 3, to: [a@b.c]}`,
			errs: []string{"rules[0].window: required"}},
		{name: "no_traffic with a window", rule: `{name: a, match: {site: shop}, no_traffic: 1h, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].window: a no_traffic rule has no window"}},
		{name: "no_traffic of seconds", rule: `{name: a, match: {site: shop}, no_traffic: 90s, to: [a@b.c]}`,
			errs: []string{"rules[0].no_traffic: must be whole minutes, at least 1m"}},
		{name: "active_within on an exact page", rule: `{name: a, match: {site: shop, path: /p}, below: 3, window: 1h, active_within: 7d, to: [a@b.c]}`,
			errs: []string{"rules[0].active_within: only a rule whose path is a glob or a regex"}},
		{name: "active_within of hours", rule: `{name: a, match: {site: shop, path: "/p/*"}, below: 3, window: 1h, active_within: 36h, to: [a@b.c]}`,
			errs: []string{"rules[0].active_within: must be whole days"}},
		{name: "no_data_after on a threshold", rule: `{name: a, match: {path: /p}, threshold: 3, window: 1h, no_data_after: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].no_data_after: only below and no_traffic rules take no_data_after"}},
		{name: "no_data_after of seconds", rule: `{name: a, match: {site: shop}, below: 3, window: 1h, no_data_after: 30s, to: [a@b.c]}`,
			errs: []string{"rules[0].no_data_after: must be 0 (no notice) or at least 1m"}},
		{name: "below with a bot pattern of its own", rule: `{name: a, match: {site: shop, exclude_bots: "~(?i)crawler"}, below: 3, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].match.exclude_bots: a below rule counts from the rollups"}},
		{name: "a threshold rule still needs a path", rule: `{name: a, match: {site: shop}, threshold: 3, window: 1h, to: [a@b.c]}`,
			errs: []string{"rules[0].match.path: required"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("hitcount.yaml", []byte(head+"  - "+c.rule+"\n"))
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := cfg.Rules[0].Kind; got != c.kind {
					t.Errorf("kind %q, want %q", got, c.kind)
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

// The completeness options' defaults: active_within 7d, no_data_after 1h;
// an explicit 0 turns the notice off.
func TestCompletenessDefaults(t *testing.T) {
	cfg, err := Parse("hitcount.yaml", []byte(`sources: [{path: /x, site: shop}]
rules:
  - {name: a, match: {site: shop, path: "/p/*"}, below: 3, window: 1h, to: [a@b.c]}
  - {name: b, match: {site: shop}, no_traffic: 2h, no_data_after: 0, to: [a@b.c]}
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Rules[0], cfg.Rules[1]
	if a.ActiveWithin.Duration != 7*24*time.Hour || a.NoDataAfter.Duration != time.Hour {
		t.Errorf("defaults: active_within %v, no_data_after %v", a.ActiveWithin.Duration, a.NoDataAfter.Duration)
	}
	if b.NoDataAfter.Duration != 0 || b.NoTraffic.Duration != 2*time.Hour {
		t.Errorf("no_traffic %v, no_data_after %v", b.NoTraffic.Duration, b.NoDataAfter.Duration)
	}
}
