package docs

import (
	"errors"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// TestConfigBlocks loads every yaml block of the pages with the real config
// loader, as the commands do: a block that holds sources must suit the
// collector, one that holds rules the sweeper. A block marked "yaml invalid"
// must fail, and the text block after it is exactly what the loader prints.
func TestConfigBlocks(t *testing.T) {
	n := 0
	for _, p := range pages(t) {
		bs, _ := split(p.text)
		for i, b := range bs {
			if b.lang() != "yaml" {
				continue
			}
			n++
			where := p.path + ":" + strconv.Itoa(b.line)
			// The name the messages show; relative paths resolve beside it.
			file := "hitcount.yaml"
			if !strings.Contains(b.info, "invalid") {
				file = filepath.Join(t.TempDir(), "hitcount.yaml")
			}
			cfg, err := config.Parse(file, []byte(b.body))
			if strings.Contains(b.info, "invalid") {
				if err == nil {
					t.Errorf("%s: the invalid example loads", where)
					continue
				}
				if i+1 >= len(bs) || bs[i+1].lang() != "text" {
					t.Errorf("%s: the invalid example is not followed by a text block of its errors", where)
					continue
				}
				if got, want := err.Error()+"\n", bs[i+1].body; got != want {
					t.Errorf("%s: the loader prints\n%s\nthe page shows\n%s", where, got, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: does not load:\n%v", where, err)
				continue
			}
			if len(cfg.Sources) > 0 {
				if err := cfg.CheckCollector(); err != nil {
					t.Errorf("%s: not enough for the collector:\n%v", where, err)
				}
			}
			if len(cfg.Rules) > 0 {
				if err := errors.Join(cfg.CheckSweeper(), alerts.CheckRules(cfg)); err != nil {
					t.Errorf("%s: not enough for the sweeper:\n%v", where, err)
				}
			}
		}
	}
	if n < 3 {
		t.Errorf("%d yaml blocks, want at least the complete example, the invalid one and the cluster's", n)
	}
}

// configKeys lists every key of the config file as the reference names it:
// "clickhouse.tls.enabled", "sources.path", "rules.match.site", "state_dir".
func configKeys(t reflect.Type, prefix string, out map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		leaf := ft == reflect.TypeFor[config.Duration]() || ft == reflect.TypeFor[config.Size]()
		if ft.Kind() == reflect.Struct && !leaf {
			configKeys(ft, prefix+name+".", out)
			continue
		}
		out[prefix+name] = true
	}
}

var (
	sectionHeading = regexp.MustCompile("^## (?:`([a-z_]+)`|Top-level paths)")
	tableRow       = regexp.MustCompile("^\\| *(`[^|]*?) *\\|")
	backticked     = regexp.MustCompile("`([^`]+)`")
)

// TestConfigReference holds docs/configuration.md's tables against the
// config's types: every key the loader knows is documented in its section,
// and every documented key is one the loader knows.
func TestConfigReference(t *testing.T) {
	want := map[string]bool{}
	configKeys(reflect.TypeFor[config.Config](), "", want)
	_, prose := split(pageNamed(t, "docs/configuration.md").text)
	got := map[string]bool{}
	section, inSection := "", false
	for _, l := range strings.Split(prose, "\n") {
		if strings.HasPrefix(l, "## ") {
			m := sectionHeading.FindStringSubmatch(l)
			inSection = m != nil
			if m != nil {
				section = m[1]
			}
			continue
		}
		m := tableRow.FindStringSubmatch(l)
		if !inSection || m == nil {
			continue
		}
		for _, k := range backticked.FindAllStringSubmatch(m[1], -1) {
			key := k[1]
			if section != "" {
				key = section + "." + key
			}
			got[key] = true
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("docs/configuration.md does not document %s", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("docs/configuration.md documents %s, which the config does not have", k)
		}
	}
	if len(want) < 50 {
		t.Errorf("found %d config keys; the walk of config.Config misses some", len(want))
	}
}

// TestBotPatternDocumented: what exclude_bots leaves out is the pattern the
// schema's views use (in a Markdown table, its | written \|).
func TestBotPatternDocumented(t *testing.T) {
	text := pageNamed(t, "docs/configuration.md").text
	if !strings.Contains(text, "`"+strings.ReplaceAll(sink.BotPattern, "|", `\|`)+"`") {
		t.Errorf("docs/configuration.md does not show the bot pattern the views use:\n%s", sink.BotPattern)
	}
}

// TestFormatsDocumented: every named format of the parser has its row in
// docs/formats.md, and every named row is a format the parser knows.
func TestFormatsDocumented(t *testing.T) {
	_, prose := split(pageNamed(t, "docs/formats.md").text)
	var rows []string
	for _, l := range strings.Split(prose, "\n") {
		if m := formatRow.FindStringSubmatch(l); m != nil && m[1] != "auto" {
			rows = append(rows, m[1])
		}
	}
	want := parser.Formats()
	sort.Strings(rows)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(rows, sorted) {
		t.Errorf("docs/formats.md names the formats %v; the parser has %v", rows, sorted)
	}
}

var (
	fqName     = regexp.MustCompile(`fqName: "([^"]+)"`)
	metricName = regexp.MustCompile(`\bhitcount_[a-z_]+[a-z]`)
	formatRow  = regexp.MustCompile("^\\| `([a-z0-9_]+)` \\|")
)

// TestMetricsDocumented: every series the collector and the sweeper register
// is in docs/operations.md, and every hitcount_ series the page names exists.
func TestMetricsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	collector.NewMetrics(reg)
	alerts.NewMetrics(reg)
	descs := make(chan *prometheus.Desc, 256)
	reg.Describe(descs)
	close(descs)
	real := map[string]bool{
		// backend.replicaCollector's, registered only with a server
		// connection (cluster mode).
		"hitcount_replica_missing_parts": true,
	}
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		real[m[1]] = true
	}
	text := pageNamed(t, "docs/operations.md").text
	named := map[string]bool{}
	for _, m := range metricName.FindAllString(text, -1) {
		named[m] = true
	}
	for name := range real {
		if !named[name] {
			t.Errorf("docs/operations.md does not list the metric %s", name)
		}
	}
	for name := range named {
		if !real[name] {
			t.Errorf("docs/operations.md names %s, which nothing registers", name)
		}
	}
	if len(real) < 20 {
		t.Errorf("%d metrics registered; want the collector's and the sweeper's", len(real))
	}
}
