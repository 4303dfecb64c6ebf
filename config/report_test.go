package config

import (
	"strings"
	"testing"
	"time"
)

// A report rule: weekly or monthly for a site (a path optional), with top
// [10] and week_start [monday]; every misuse said at its field.
func TestReportRules(t *testing.T) {
	const head = "sources: [{path: /x, site: shop}]\nrules:\n"
	cases := []struct {
		name string
		rule string
		top  int
		day  time.Weekday
		errs []string
	}{
		{name: "weekly", rule: `{name: a, match: {site: shop}, report: weekly, timezone: Europe/Berlin, to: [a@b.c]}`, top: 10, day: time.Monday},
		{name: "monthly of a glob", rule: `{name: a, match: {site: shop, path: "/blog/*", exclude_bots: true}, report: monthly, top: 25, to: [a@b.c]}`, top: 25, day: time.Monday},
		{name: "week from Sunday", rule: `{name: a, match: {site: shop}, report: weekly, week_start: Sunday, to: [a@b.c]}`, top: 10, day: time.Sunday},
		{name: "daily", rule: `{name: a, match: {site: shop}, report: daily, to: [a@b.c]}`, errs: []string{`rules[0].report: must be weekly or monthly, got "daily"`}},
		{name: "no site", rule: `{name: a, match: {path: /p}, report: weekly, to: [a@b.c]}`, errs: []string{"rules[0].match.site: required by a report rule"}},
		{name: "a window", rule: `{name: a, match: {site: shop}, report: weekly, window: 7d, to: [a@b.c]}`, errs: []string{"rules[0].window: a report rule has no window"}},
		{name: "and a threshold", rule: `{name: a, match: {site: shop, path: /p}, report: weekly, threshold: 3, to: [a@b.c]}`, errs: []string{"rules[0].report: give one of"}},
		{name: "top 0", rule: `{name: a, match: {site: shop}, report: weekly, top: 0, to: [a@b.c]}`, errs: []string{"rules[0].top: must be 1 to 100 pages, got 0"}},
		{name: "bad day", rule: `{name: a, match: {site: shop}, report: weekly, week_start: mon, to: [a@b.c]}`, errs: []string{`rules[0].week_start: must be a day of the week`}},
		{name: "week_start of a month", rule: `{name: a, match: {site: shop}, report: monthly, week_start: sunday, to: [a@b.c]}`, errs: []string{"rules[0].week_start: only a weekly report"}},
		{name: "a bot pattern", rule: `{name: a, match: {site: shop, exclude_bots: "~crawler"}, report: weekly, to: [a@b.c]}`, errs: []string{"rules[0].match.exclude_bots: a report rule counts from the rollups"}},
		{name: "top on a threshold", rule: `{name: a, match: {path: /p}, threshold: 3, window: 1h, top: 5, to: [a@b.c]}`, errs: []string{"rules[0].top: only report rules take top"}},
		{name: "no_data_after on a report", rule: `{name: a, match: {site: shop}, report: weekly, no_data_after: 1h, to: [a@b.c]}`, errs: []string{"rules[0].no_data_after: only below and no_traffic rules"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("hitcount.yaml", []byte(head+"  - "+c.rule+"\n"))
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				r := cfg.Rules[0]
				if r.Kind != KindReport || r.Top != c.top || r.WeekDay != c.day {
					t.Errorf("kind %q, top %d, week day %v; want report, %d, %v", r.Kind, r.Top, r.WeekDay, c.top, c.day)
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
