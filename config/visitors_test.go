package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// count: visitors on every kind where it makes sense, refused at its field
// where it does not; anonymize_clients needs the visitor hash's key.
func TestCountAndVisitors(t *testing.T) {
	const head = "sources: [{path: /x, site: shop}]\n"
	cases := []struct {
		name, yaml string
		count      string
		errs       []string
	}{
		{name: "default hits", yaml: head + "rules: [{name: a, match: {path: /p}, threshold: 5, window: 1h, to: [a@b.c]}]", count: CountHits},
		{name: "threshold", yaml: head + "rules: [{name: a, match: {path: /p}, count: visitors, threshold: 5, window: 1h, to: [a@b.c]}]", count: CountVisitors},
		{name: "windowed milestones", yaml: head + "rules: [{name: a, match: {path: /p}, count: visitors, milestones: [10, 100], window: 1d, to: [a@b.c]}]", count: CountVisitors},
		{name: "below", yaml: head + "rules: [{name: a, match: {site: shop}, count: visitors, below: 5, window: 1h, to: [a@b.c]}]", count: CountVisitors},
		{name: "spike", yaml: head + "rules: [{name: a, match: {site: shop}, count: visitors, spike: {factor: 3, min: 100}, window: 1h, to: [a@b.c]}]", count: CountVisitors},
		{name: "drop", yaml: head + "rules: [{name: a, match: {site: shop, path: /p}, count: visitors, drop: {factor: 4, min_baseline: 200}, window: 1h, to: [a@b.c]}]", count: CountVisitors},
		{name: "report", yaml: head + "rules: [{name: a, match: {site: shop}, count: visitors, report: weekly, to: [a@b.c]}]",
			errs: []string{"rules[0].count: a report counts hits"}},
		{name: "no_traffic", yaml: head + "rules: [{name: a, match: {site: shop}, count: visitors, no_traffic: 1h, to: [a@b.c]}]",
			errs: []string{"rules[0].count: a no_traffic rule fires on a silence"}},
		{name: "lifetime", yaml: head + "rules: [{name: a, match: {path: /p}, count: visitors, milestones: [10], window: lifetime, to: [a@b.c]}]",
			errs: []string{"rules[0].count: visitors are counted in a window"}},
		{name: "unknown", yaml: head + "rules: [{name: a, match: {path: /p}, count: users, threshold: 5, window: 1h, to: [a@b.c]}]",
			errs: []string{`rules[0].count: must be hits or visitors`}},
		{name: "anonymize with a key", yaml: "sources: [{path: /x, site: shop, anonymize_clients: true}]\nvisitors: {key_env: HITCOUNT_VISITOR_KEY}\n"},
		{name: "anonymize without a key", yaml: "sources: [{path: /x, site: shop, anonymize_clients: true}]\n",
			errs: []string{"sources[0].anonymize_clients: needs visitors.key_env or visitors.key_file"}},
		{name: "a key pasted", yaml: head + "visitors: {key_env: \"s3cr3t!\"}\n",
			errs: []string{"visitors.key_env: must be the name of an environment variable"}},
		{name: "two keys", yaml: head + "visitors: {key_env: K, key_file: k.txt}\n",
			errs: []string{"visitors.key_file: give key_env or key_file, not both"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("hitcount.yaml", []byte(c.yaml))
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.count != "" && cfg.Rules[0].Count != c.count {
					t.Errorf("count %q, want %q", cfg.Rules[0].Count, c.count)
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

// The key is read from the file or the variable when asked, never shown.
func TestVisitorKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.txt"), []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HITCOUNT_TEST_VISITOR_KEY", "from the environment")
	for _, c := range []struct{ yaml, want, err string }{
		{"visitors: {key_file: key.txt}\n", "from a file", ""},
		{"visitors: {key_env: HITCOUNT_TEST_VISITOR_KEY}\n", "from the environment", ""},
		{"visitors: {key_env: HITCOUNT_TEST_UNSET_KEY}\n", "", "visitors.key_env: environment variable HITCOUNT_TEST_UNSET_KEY is not set"},
		{"{}\n", "", ""},
	} {
		cfg, err := Parse(filepath.Join(dir, "hitcount.yaml"), []byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		k, err := cfg.VisitorKey()
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: error %v, want %s", c.yaml, err, c.err)
			}
			continue
		}
		if err != nil || k.Reveal() != c.want || k.String() != "[redacted]" {
			t.Errorf("%s: key %q (%v), want %q", c.yaml, k.Reveal(), err, c.want)
		}
	}
}
