package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// A file full of mistakes reports every one of them at once, each with
// file:line:column and the field, sorted by line (testdata/mistakes.golden).
func TestEveryMistakeReportedAtOnce(t *testing.T) {
	_, err := Load("testdata/mistakes.yaml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v, want Errors", err)
	}
	got := err.Error() + "\n"
	if strings.Contains(got, "hunter") {
		t.Error("an error message contains a literal password")
	}
	golden := filepath.Join("testdata", "mistakes.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("errors differ from %s (run go test ./config -run TestEveryMistake -update and review the diff):\n%s", golden, got)
	}
	for i, e := range es {
		if e.Line == 0 || e.Column == 0 || e.Field == "" {
			t.Errorf("error without a position or field: %v", e)
		}
		if i > 0 && (e.Line < es[i-1].Line || e.Line == es[i-1].Line && e.Column < es[i-1].Column) {
			t.Errorf("not sorted: %v after %v", e, es[i-1])
		}
	}
	// Each kind of mistake the file holds is in the list.
	for _, want := range []string{
		"sourcs: unknown key", "clickhouse.compresion: unknown key", "sources[0].fromat: unknown key",
		"rules[1].match.colour: unknown key", "keeper.session_timout: unknown key",
		"sources[0].format: unknown format", "rules[0].match.path: bad regex", "rules[0].timezone: unknown time zone",
		"rules[0].to: required", "rules[0].milestones: give threshold or milestones, not both",
		"smtp.tls: none sends mail", "clickhouse.password: a password is not kept", "keeper.password: a password is not kept",
		"rules[0].subject: bad template", "rules[2].html: bad template", "batch.delay: bad duration",
		"sources[0].site: required", "batch.rows: must be a whole number", "sweep.lease: must be a duration",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
}

// Every key set to a value other than its default comes out typed.
func TestFullFile(t *testing.T) {
	c, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ch, src, r := c.ClickHouse, c.Sources, c.Rules
	checks := []struct {
		field     string
		got, want any
	}{
		{"clickhouse.addr", ch.Addr, []string{"ch1.example.com:9440", "ch2.example.com:9440"}},
		{"clickhouse.database", ch.Database, "hits_prod"},
		{"clickhouse.username", ch.Username, "collector"},
		{"clickhouse.password_file", ch.PasswordFile, "secrets/clickhouse"},
		{"clickhouse.tls", ch.TLS, TLS{Enabled: true, CAFile: "/etc/ssl/ch-ca.pem", ServerName: "ch.example.com"}},
		{"clickhouse.compression", ch.Compression, "lz4"},
		{"clickhouse.dial_timeout", ch.DialTimeout.Duration, 2 * time.Second},
		{"clickhouse.insert_timeout", ch.InsertTimeout.Duration, time.Minute},
		{"clickhouse.cluster", ch.Cluster, "prod"},
		{"clickhouse.insert_quorum", ch.InsertQuorum, 2},
		{"clickhouse.insert_quorum_timeout", ch.InsertQuorumTimeout.Duration, 5 * time.Minute},
		{"embedded.path", c.Embedded.Path, "/var/lib/hitcount/chdb"},
		{"sources[0]", src[0], Source{Path: "/var/log/nginx/**/access*.log", Format: "json", Timezone: "UTC", Site: "www.example.com", StartAt: "beginning", MaxLine: Size{64 << 10}, Location: time.UTC}},
		{"sources[1].timezone", src[1].Location.String(), "Europe/Berlin"},
		{"sources[1].format", strings.HasPrefix(src[1].Format, "$remote_addr - "), true},
		{"sources[1].start_at (default)", src[1].StartAt, "end"},
		{"sources[1].max_line", src[1].MaxLine.Bytes, 2 << 20},
		{"sources[1].path resolved", c.Resolve(src[1].Path), filepath.Join("testdata", "logs", "shop.log")},
		{"batch", c.Batch, Batch{Rows: 100000, Delay: Duration{500 * time.Millisecond}, MaxPending: 4}},
		{"http.listen", *c.HTTP.Listen, "[::1]:9500"},
		{"state_dir", c.StateDir, "/var/lib/hitcount/state"},
		{"sweep", c.Sweep, Sweep{Every: Duration{time.Minute}, Claims: "keeper", Lateness: Duration{time.Hour}, Lease: Duration{30 * time.Second}, MaxCrossings: 50, DigestAfter: 3}},
		{"keeper.addr", c.Keeper.Addr, []string{"zk1:2181", "zk2:2181", "zk3:2181"}},
		{"keeper.root", c.Keeper.Root, "/hitcount/prod"},
		{"keeper.session_timeout", c.Keeper.SessionTimeout.Duration, 20 * time.Second},
		{"keeper.username", c.Keeper.Username, "sweeper"},
		{"keeper.password_env", c.Keeper.PasswordEnv, "KEEPER_PASSWORD"},
		{"smtp.host", c.SMTP.Host, "mail.example.com"},
		{"smtp.port (default for tls)", c.SMTP.Port, 465},
		{"smtp.tls", c.SMTP.TLS, "tls"},
		{"smtp.from", c.SMTP.From, "hitcount <alerts@example.com>"},
		{"smtp.timeout", c.SMTP.Timeout.Duration, 10 * time.Second},
		{"outbox", c.Outbox, "spool/outbox"},
		{"rules[0].match", r[0].Match, Match{Site: "www.example.com", Host: "www.example.com", Path: "/pricing", Method: "GET", Status: "2xx", ExcludeBots: "true"}},
		{"rules[0].threshold", r[0].Threshold, int64(1000)},
		{"rules[0].window", r[0].WindowDur, 24 * time.Hour},
		{"rules[0].timezone", r[0].Location.String(), "Europe/Berlin"},
		{"rules[0].to", r[0].To, []string{"ops@example.com", "Sales <sales@example.com>"}},
		{"rules[0].subject", r[0].Subject, "{{.Path}} is hot"},
		{"rules[0].text", r[0].Text, "{{.Path}} reached {{.Count}} hits.\n"},
		{"rules[0].html", r[0].HTML, "<p>{{.Path}}</p>"},
		{"rules[1].name", r[1].Name, "docs.milestones_2"},
		{"rules[1].match.path", r[1].Match.Path, "~^/docs/.+$"},
		{"rules[1].match.status", r[1].Match.Status, "404"},
		{"rules[1].milestones", r[1].Milestones, []int64{100, 1000, 10000}},
		{"rules[1].window", r[1].WindowDur, time.Duration(0)},
		{"rules[1].timezone (default)", r[1].Location, time.UTC},
		{"rules[2].window", r[2].WindowDur, 15 * time.Minute},
		{"rules[2].timezone", r[2].Location.String(), "America/New_York"},
	}
	for _, ck := range checks {
		if fmt.Sprintf("%#v", ck.got) != fmt.Sprintf("%#v", ck.want) {
			t.Errorf("%s = %#v, want %#v", ck.field, ck.got, ck.want)
		}
	}
	if err := c.CheckCollector(); err != nil {
		t.Error(err)
	}
	if err := c.CheckSweeper(); err != nil {
		t.Error(err)
	}
}

// The shipped example loads as it is, for the collector and the sweeper.
func TestDeployExampleLoads(t *testing.T) {
	c, err := Load(filepath.Join("..", "deploy", "hitcount.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckCollector(); err != nil {
		t.Error(err)
	}
	if err := c.CheckSweeper(); err != nil {
		t.Error(err)
	}
	if c.ClickHouse == nil || c.SMTP == nil || len(c.Sources) != 1 || len(c.Rules) != 2 {
		t.Errorf("example: clickhouse %v, smtp %v, %d sources, %d rules", c.ClickHouse != nil, c.SMTP != nil, len(c.Sources), len(c.Rules))
	}
}

// Absent keys take their defaults; an empty file is all defaults.
func TestDefaults(t *testing.T) {
	c, err := Parse("min.yaml", []byte(`
clickhouse: {addr: [127.0.0.1:9000]}
sources: [{path: /var/log/a.log, site: a}]
keeper: {addr: [127.0.0.1:2181]}
smtp: {host: localhost, tls: none, from: a@localhost}
rules: [{name: r, match: {path: /}, threshold: 1, window: 5m, to: [a@b.c]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"clickhouse.database", c.ClickHouse.Database, "hitcount"},
		{"clickhouse.username", c.ClickHouse.Username, "default"},
		{"clickhouse.compression", c.ClickHouse.Compression, "none"},
		{"clickhouse.dial_timeout", c.ClickHouse.DialTimeout.Duration, 5 * time.Second},
		{"clickhouse.insert_timeout", c.ClickHouse.InsertTimeout.Duration, 30 * time.Second},
		{"clickhouse.tls", c.ClickHouse.TLS, TLS{}},
		{"embedded.path", c.Embedded.Path, "./data"},
		{"sources[0].format", c.Sources[0].Format, "auto"},
		{"sources[0].timezone", c.Sources[0].Timezone, "UTC"},
		{"sources[0].location", c.Sources[0].Location, time.UTC},
		{"sources[0].start_at", c.Sources[0].StartAt, "end"},
		{"sources[0].max_line", c.Sources[0].MaxLine.Bytes, 1 << 20},
		{"batch.rows", c.Batch.Rows, 50000},
		{"batch.delay", c.Batch.Delay.Duration, time.Second},
		{"batch.max_pending", c.Batch.MaxPending, 2},
		{"http.listen", *c.HTTP.Listen, "127.0.0.1:9464"},
		{"state_dir", c.StateDir, "./state"},
		{"sweep.every", c.Sweep.Every.Duration, 5 * time.Minute},
		{"sweep.claims", c.Sweep.Claims, "local"},
		{"sweep.lateness", c.Sweep.Lateness.Duration, 10 * time.Minute},
		{"sweep.lease", c.Sweep.Lease.Duration, 2 * time.Minute},
		{"sweep.max_crossings", c.Sweep.MaxCrossings, 1000},
		{"sweep.digest_after", c.Sweep.DigestAfter, 10},
		{"keeper.root", c.Keeper.Root, "/hitcount"},
		{"keeper.session_timeout", c.Keeper.SessionTimeout.Duration, 10 * time.Second},
		{"smtp.port (tls none)", c.SMTP.Port, 25},
		{"smtp.timeout", c.SMTP.Timeout.Duration, 30 * time.Second},
		{"outbox", c.Outbox, "./outbox"},
		{"rules[0].timezone", c.Rules[0].Timezone, "UTC"},
		{"rules[0].location", c.Rules[0].Location, time.UTC},
	}
	for _, ck := range checks {
		if fmt.Sprintf("%#v", ck.got) != fmt.Sprintf("%#v", ck.want) {
			t.Errorf("%s = %#v, want %#v", ck.field, ck.got, ck.want)
		}
	}

	for _, tc := range []struct {
		name, yaml string
		check      func(*Config) bool
	}{
		{"empty file", "", func(c *Config) bool {
			return c.ClickHouse == nil && *c.HTTP.Listen == "127.0.0.1:9464" && c.Batch.Rows == 50000
		}},
		{"comments only", "# nothing\n", func(c *Config) bool { return c.Outbox == "./outbox" }},
		{"null sections", "clickhouse:\nsmtp:\nbatch:\n", func(c *Config) bool { return c.ClickHouse == nil && c.SMTP == nil && c.Batch.Rows == 50000 }},
		{`listen: "" disables`, "http: {listen: \"\"}\n", func(c *Config) bool { return *c.HTTP.Listen == "" }},
		{"listen: null is the default", "http: {listen: ~}\n", func(c *Config) bool { return *c.HTTP.Listen == "127.0.0.1:9464" }},
		{"smtp port for starttls", "smtp: {host: h, from: a@b.c}\n", func(c *Config) bool { return c.SMTP.Port == 587 && c.SMTP.TLS == "starttls" }},
		{"lateness: null is the default", "sweep: {lateness: ~}\n", func(c *Config) bool { return c.Sweep.Lateness.Duration == 10*time.Minute }},
		{"lateness of a minute", "sweep: {lateness: 1m}\n", func(c *Config) bool { return c.Sweep.Lateness.Duration == time.Minute }},
		{"a quoted number", "batch: {rows: \"1000\"}\n", func(c *Config) bool { return c.Batch.Rows == 1000 }},
		{"max_line plain bytes", "sources: [{path: a, site: s, max_line: 4096}]\n", func(c *Config) bool { return c.Sources[0].MaxLine.Bytes == 4096 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected result: %+v", c)
			}
		})
	}
}

func TestMergeKeys(t *testing.T) {
	c, err := Parse("t.yaml", []byte(`
sources:
  - &www {path: /a.log, site: www, format: common}
  - <<: *www
    path: /b.log
  - {<<: *www, path: /c.log, site: other}
rules:
  - name: r
    match: {path: /}
    threshold: 1
    window: 1h
    to: &ops [ops@example.com]
  - {name: s, match: {path: /x}, threshold: 2, window: 1d, to: *ops}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Sources[1].Path, c.Sources[1].Site, c.Sources[1].Format, c.Sources[2].Site, c.Rules[1].To)
	if want := "/b.logwwwcommonother[ops@example.com]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// Each case: a file and exactly the problems it must report.
func TestProblems(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"syntax error", "sources:\n  - path: [unclosed\n", []string{
			"t.yaml:2:11: YAML syntax: sequence end token ']' not found"}},
		{"duplicate key", "batch:\n  rows: 1\n  rows: 2\n", []string{
			`t.yaml:3:3: YAML syntax: mapping key "rows" already defined at [2:3]`}},
		{"tab indentation", "batch:\n\trows: 1\n", []string{
			"t.yaml:2:1: YAML syntax: found character '\t' that cannot start any token"}},
		{"a string where a number goes", "batch:\n  rows: lots\n  delay: 2s\n", []string{
			`t.yaml:2:9: batch.rows: must be a whole number, got "lots"`}},
		{"a fraction where a whole number goes", "rules: [{name: r, match: {path: /}, threshold: 1.5, window: 1h, to: [a@b.c]}]\n", []string{
			`t.yaml:1:48: rules[0].threshold: must be a whole number, got "1.5"`}},
		{"a list where a string goes", "sources:\n  - path: [a, b]\n    site: s\n", []string{
			`t.yaml:2:11: sources[0].path: must be a string, got a list`}},
		{"a string where a list goes", "clickhouse: {addr: 127.0.0.1:9000}\n", []string{
			`t.yaml:1:20: clickhouse.addr: must be a list ([a, b] or one "- item" per line), got "127.0.0.1:9000"`}},
		{"a scalar where a section goes", "smtp: yes\n", []string{
			`t.yaml:1:7: smtp: must be a mapping (key: value lines or {key: value}), got "yes"`}},
		{"bad duration", "sweep:\n  every: 5 minutes\n", []string{
			`t.yaml:2:10: sweep.every: bad duration "5 minutes" (use 90s, 5m, 1h, 1d)`}},
		{"explicit zero is not the default", "batch: {rows: 0, max_pending: 0}\n", []string{
			"t.yaml:1:15: batch.rows: must be between 1 and 1000000, got 0",
			"t.yaml:1:31: batch.max_pending: must be between 1 and 64, got 0"}},
		{"batch.delay over a minute", "batch: {delay: 2m}\n", []string{
			"t.yaml:1:16: batch.delay: must be between 1ms and 1m0s, got 2m0s"}},
		{"missing site at the item", "sources:\n  - path: /a.log\n    format: common\n", []string{
			"t.yaml:2:5: sources[0].site: required: the site name hits are counted under"}},
		{"missing host at the section", "outbox: x\nsmtp:\n  from: a@b.c\n", []string{
			"t.yaml:2:1: smtp.host: required (or remove the smtp section to write .eml files to outbox)"}},
		{"root is a list", "- a\n- b\n", []string{
			"t.yaml:1:1: the file must be a mapping of sections (clickhouse:, sources:, rules:, ...), got a list"}},
		{"second document", "outbox: x\n---\noutbox: y\n", []string{
			"t.yaml:3:1: a second YAML document: the config is one document (remove the ---)"}},
		{"unknown alias", "outbox: *nowhere\n", []string{
			"t.yaml:1:9: outbox: unknown alias *nowhere"}},
		{"unknown keys do not stop other checks", "sourcs: []\nbatch: {rowz: 1, rows: -1}\n", []string{
			`t.yaml:1:1: sourcs: unknown key (did you mean "sources"?)`,
			`t.yaml:2:9: batch.rowz: unknown key (did you mean "rows"?)`,
			"t.yaml:2:24: batch.rows: must be between 1 and 1000000, got -1"}},
		{"anchor under an unknown key", "x-defaults: &d {site: w}\nsources: [{<<: *d, path: /a}]\n", []string{
			"t.yaml:1:1: x-defaults: unknown key"}},
		{"literal passwords, value never shown", "clickhouse:\n  addr: [h:1]\n  password: s3cret\nsmtp:\n  host: localhost\n  tls: none\n  from: a@b.c\n  password: {x: s3cret}\n", []string{
			"t.yaml:3:3: clickhouse.password: a password is not kept in the config file: use password_env (the name of an environment variable) or password_file",
			"t.yaml:8:3: smtp.password: a password is not kept in the config file: use password_env (the name of an environment variable) or password_file"}},
		{"password_env holding a password", "clickhouse: {addr: [h:1], password_env: \"s3cret!\"}\n", []string{
			"t.yaml:1:41: clickhouse.password_env: must be the name of an environment variable (letters, digits, _), not the password itself"}},
		{"both password sources", "keeper: {addr: [h:1], username: u, password_env: P, password_file: /p}\n", []string{
			"t.yaml:1:68: keeper.password_file: give password_env or password_file, not both"}},
		{"keeper username without password", "keeper: {addr: [h:1], username: u}\n", []string{
			"t.yaml:1:33: keeper.username: a username needs password_env or password_file"}},
		{"keeper password without username", "keeper: {addr: [h:1], password_file: /p}\n", []string{
			"t.yaml:1:38: keeper.password_file: a password needs keeper.username (digest auth is user:password); without both, claim nodes are world-writable"}},
		{"keeper credentials misspelt", "keeper: {addr: [h:1], usernme: u, password_env: P}\n", []string{
			`t.yaml:1:23: keeper.usernme: unknown key (did you mean "username"?)`,
			"t.yaml:1:49: keeper.password_env: a password needs keeper.username (digest auth is user:password); without both, claim nodes are world-writable"}},
		{"keeper credentials", "keeper: {addr: [h:1], username: u, password_env: P}\n", nil},
		{"smtp username without password", "smtp: {host: h, username: u, from: a@b.c}\n", []string{
			"t.yaml:1:27: smtp.username: a username needs password_env or password_file"}},
		{"smtp tls none to loopback", "smtp: {host: 127.0.0.1, tls: none, from: a@b.c}\n", nil},
		{"smtp tls none to ::1", "smtp: {host: \"::1\", tls: none, from: a@b.c}\n", nil},
		{"smtp tls none elsewhere", "smtp: {host: mail.example.com, tls: none, from: a@b.c}\n", []string{
			`t.yaml:1:37: smtp.tls: none sends mail and passwords in clear text: allowed only to a loopback host (localhost, 127.0.0.1, ::1), not "mail.example.com"`}},
		{"tls settings while disabled", "clickhouse: {addr: [h:1], tls: {ca_file: /ca.pem}}\n", []string{
			"t.yaml:1:27: clickhouse.tls.enabled: TLS settings are given but enabled is false: the connection would be plain text; set enabled: true or remove them"}},
		{"clickhouse section without addr", "clickhouse: {database: x}\n", []string{
			"t.yaml:1:1: clickhouse.addr: required: at least one host:port"}},
		{"bad log_format string", "sources: [{path: /a, site: s, format: '$remote_addr $status'}]\n", []string{
			`t.yaml:1:39: sources[0].format: bad format string: format "$remote_addr $status": no time field ($time_local, $time_iso8601, $msec; Apache %t, %{...}t)`}},
		{"format name with a typo", "sources: [{path: /a, site: s, format: combine}]\n", []string{
			`t.yaml:1:39: sources[0].format: unknown format "combine"; did you mean "combined"?`}},
		{"nginx log_format pasted from nginx.conf", "sources:\n  - path: /a\n    site: s\n    format: |\n      log_format main '$remote_addr - $remote_user [$time_local] \"$request\" '\n                      '$status $body_bytes_sent';\n", nil},
		{"Apache LogFormat pasted from apache2.conf", `sources: [{path: /a, site: s, format: 'LogFormat "%h %l %u %t \"%r\" %>s %O" common'}]` + "\n", nil},
		{"same path twice", "sources: [{path: /a, site: s}, {path: /a, site: t}]\n", []string{
			`t.yaml:1:39: sources[1].path: "/a" is also sources[0].path: a file read twice is shipped twice`}},
		{"max_line too small", "sources: [{path: /a, site: s, max_line: 10}]\n", []string{
			"t.yaml:1:41: sources[0].max_line: must be between 1KiB and 64MiB, got 10 bytes"}},
		{"windows", `rules:
  - {name: a, match: {path: /}, threshold: 1, to: [a@b.c], window: 30s}
  - {name: b, match: {path: /}, threshold: 1, to: [a@b.c], window: 36h}
  - {name: c, match: {path: /}, threshold: 1, to: [a@b.c], window: 7d}
  - {name: d, match: {path: /}, threshold: 1, to: [a@b.c], window: 20m}
  - {name: e, match: {path: /}, threshold: 1, to: [a@b.c], window: Lifetime}
  - {name: f, match: {path: /}, threshold: 1, to: [a@b.c]}
`, []string{
			"t.yaml:2:68: rules[0].window: must be lifetime, whole minutes dividing a day evenly (5m, 15m, 1h, 6h), or whole days (1d, 7d); got 30s",
			"t.yaml:3:68: rules[1].window: must be lifetime, whole minutes dividing a day evenly (5m, 15m, 1h, 6h), or whole days (1d, 7d); got 36h",
			`t.yaml:6:68: rules[4].window: bad duration "Lifetime" (use 90s, 5m, 1h, 1d)`,
			"t.yaml:7:5: rules[5].window: required: lifetime, or a window such as 5m, 1h, 1d"}},
		{"match.site unchecked without sources", "rules: [{name: a, match: {site: x, path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\n", nil},
		{"a source's timezone: Local refused with the reason, a typo", "sources: [{path: /a, site: s, timezone: Local}, {path: /b, site: s, timezone: Europe/Berlinn}]\n", []string{
			`t.yaml:1:41: sources[0].timezone: "Local" is refused: it is whatever zone the machine running the collector has (TZ, /etc/localtime), which need not be the one the web server writes its times in (a container runs in UTC; the collector may read the log on another host), and the same line would be stored at another time; name the zone (an IANA name such as Europe/Berlin, or UTC)`,
			`t.yaml:1:79: sources[1].timezone: unknown time zone "Europe/Berlinn" (use an IANA name such as Europe/Berlin, or UTC)`}},
		{"format auto and a source's zone", "sources: [{path: /a, site: s, format: auto, timezone: America/New_York}]\n", nil},
		{"exclude_bots: true, false or ~regex", `rules:
  - {name: a, match: {path: /, exclude_bots: yes}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: b, match: {path: /, exclude_bots: "~(bot"}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: c, match: {path: /, exclude_bots: "~"}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: d, match: {path: /, exclude_bots: "~(?i)spider"}, threshold: 1, window: lifetime, to: [a@b.c]}
  - {name: e, match: {path: /, exclude_bots: "~(?i)spider"}, threshold: 1, window: 1h, to: [a@b.c]}
  - {name: f, match: {path: /, exclude_bots: false}, threshold: 1, window: lifetime, to: [a@b.c]}
  - {name: g, match: {path: /, exclude_bots: [x]}, threshold: 1, window: 1h, to: [a@b.c]}
`, []string{
			`t.yaml:2:46: rules[0].match.exclude_bots: must be true, false, or ~ and a regular expression of user agents to leave out (~(?i)bot|spider), got "yes"`,
			"t.yaml:3:46: rules[1].match.exclude_bots: bad regex: error parsing regexp: missing closing ): `(bot`",
			`t.yaml:4:46: rules[2].match.exclude_bots: ~ needs a regular expression after it (~(?i)bot|spider); true leaves out the built-in pattern`,
			`t.yaml:5:46: rules[3].match.exclude_bots: a pattern of its own needs a window (5m, 1h, 1d, ...): a lifetime rule counts from the daily rollup, which knows only the built-in bot pattern (exclude_bots: true)`,
			`t.yaml:8:46: rules[6].match.exclude_bots: must be true, false, or ~ and a regular expression of user agents to leave out, got a list`}},
		{"smtp.ca_file without TLS", "smtp: {host: 127.0.0.1, tls: none, from: a@b.c, ca_file: ca.pem}\n", []string{
			"t.yaml:1:58: smtp.ca_file: goes with tls: starttls or tls (tls is none)"}},
		{"timezone Local is machine-dependent", "rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, timezone: Local, to: [a@b.c]}]\n", []string{
			`t.yaml:1:73: rules[0].timezone: "Local" is refused: it is whatever zone the machine running the sweeper has (TZ, /etc/localtime), so two sweepers, or one moved to another host, would align the windows differently and record the same crossing under another window start; name the zone (an IANA name such as Europe/Berlin, or UTC)`}},
		{"timezone local, any case", "rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, timezone: local, to: [a@b.c]}]\n", []string{
			`t.yaml:1:73: rules[0].timezone: "local" is refused: it is whatever zone the machine running the sweeper has (TZ, /etc/localtime), so two sweepers, or one moved to another host, would align the windows differently and record the same crossing under another window start; name the zone (an IANA name such as Europe/Berlin, or UTC)`}},
		{"milestones not increasing, text template", "rules: [{name: a, match: {path: /}, milestones: [1, 1], window: 1h, to: [a@b.c], text: '{{end}}'}]\n", []string{
			"t.yaml:1:53: rules[0].milestones[1]: milestones must be positive and strictly increasing, got 1",
			"t.yaml:1:88: rules[0].text: bad template: template: text:1: unexpected {{end}}"}},
		{"a bad milestone says nothing more", "rules: [{name: a, match: {path: /}, milestones: [x], window: 1h, to: [a@b.c]}]\n", []string{
			`t.yaml:1:50: rules[0].milestones[0]: must be a whole number, got "x"`}},
		{"keeper addresses", "keeper: {addr: [\"zk1\", \":2181\", \"zk:abc\", \"zk:2181\"]}\n", []string{
			`t.yaml:1:17: keeper.addr[0]: must be host:port, got "zk1"`,
			`t.yaml:1:24: keeper.addr[1]: must be host:port, got ":2181"`,
			`t.yaml:1:33: keeper.addr[2]: must be host:port, got "zk:abc"`}},
		{"host:port inside a flow mapping", "keeper: {addr: [zk1:2181, 127.0.0.1:2181, 10:2181]}\nclickhouse: {addr: [ch:9000, h: 1]}\n", []string{
			`t.yaml:2:30: clickhouse.addr[1]: must be a string, got a mapping`}},
		{"bad source glob", "sources: [{path: '/var/log/[a', site: s}]\n", []string{
			`t.yaml:1:18: sources[0].path: bad glob "/var/log/[a"`}},
		{"lateness under a minute", "sweep: {lateness: 59s}\n", []string{
			"t.yaml:1:19: sweep.lateness: must be at least 1m, got 59s: hits_touched.ingested is truncated to the minute, so a sweep looking back less than a minute skips pages touched in the minute the last sweep ended in (leave lateness out for the default, 10m)"}},
		{"explicit zero lateness is not the default", "sweep:\n  lateness: 0\n", []string{
			"t.yaml:2:13: sweep.lateness: must be at least 1m, got 0s: hits_touched.ingested is truncated to the minute, so a sweep looking back less than a minute skips pages touched in the minute the last sweep ended in (leave lateness out for the default, 10m)"}},
		{"keepermap lease shorter than a delivery", "sweep: {claims: keepermap, lease: 89s}\nsmtp: {host: h, from: a@b.c, timeout: 20s}\n", []string{
			"t.yaml:1:35: sweep.lease: with claims: keepermap must be at least 3 x smtp.timeout + 30s (1m30s with smtp.timeout 20s), got 1m29s: a lease shorter than one delivery (connect, DATA and the reply, each up to smtp.timeout, then the mark) lets another replica claim the crossing and send it again while the first still sends"}},
		{"keepermap default lease, smtp.timeout raised", "sweep:\n  claims: keepermap\nsmtp: {host: h, from: a@b.c, timeout: 1m}\n", []string{
			"t.yaml:1:1: sweep.lease: with claims: keepermap must be at least 3 x smtp.timeout + 30s (3m30s with smtp.timeout 1m0s), got 2m0s: a lease shorter than one delivery (connect, DATA and the reply, each up to smtp.timeout, then the mark) lets another replica claim the crossing and send it again while the first still sends"}},
		{"keepermap lease exactly a delivery", "sweep: {claims: keepermap, lease: 90s}\nsmtp: {host: h, from: a@b.c, timeout: 20s}\n", nil},
		{"keepermap defaults", "sweep: {claims: keepermap}\nsmtp: {host: h, from: a@b.c}\n", nil},
		{"keepermap without smtp writes files", "sweep: {claims: keepermap, lease: 1s}\n", nil},
		{"keepermap with a bad smtp.timeout says only that", "sweep: {claims: keepermap, lease: 1s}\nsmtp: {host: h, from: a@b.c, timeout: soon}\n", []string{
			`t.yaml:2:39: smtp.timeout: bad duration "soon" (use 90s, 5m, 1h, 1d)`}},
		{"keeper and local claims do not use the lease", "sweep: {claims: keeper, lease: 1s}\nkeeper: {addr: [zk:2181], username: u, password_env: P}\nsmtp: {host: h, from: a@b.c}\n", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			var got []string
			if err != nil {
				var es Errors
				if !errors.As(err, &es) {
					t.Fatalf("err %T, want Errors", err)
				}
				got = strings.Split(err.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if strings.Contains(strings.Join(got, ""), "s3cret") {
				t.Error("a secret appears in an error")
			}
		})
	}
}

func TestCheckCollectorAndSweeper(t *testing.T) {
	cases := []struct {
		name, yaml         string
		collector, sweeper string // "" means no error
	}{
		{"empty", "", "t.yaml: sources: at least one source is required to collect", "t.yaml: rules: at least one rule is required to sweep"},
		{"keeper claims without keeper", "sources: [{path: /a, site: s}]\nsweep:\n  claims: keeper\nrules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\n",
			"", "t.yaml:3:11: sweep.claims: keeper claims need a keeper section (keeper: {addr: [host:port]})"},
		{"keeper claims with keeper", "sweep: {claims: keeper}\nkeeper: {addr: [zk:2181]}\nrules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\n",
			"t.yaml: sources: at least one source is required to collect", ""},
		{"sources: [] is located", "sources: []\n", "t.yaml:1:10: sources: at least one source is required to collect", "t.yaml: rules: at least one rule is required to sweep"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []struct {
				what string
				err  error
				want string
			}{{"CheckCollector", c.CheckCollector(), tc.collector}, {"CheckSweeper", c.CheckSweeper(), tc.sweeper}} {
				got := ""
				if x.err != nil {
					got = x.err.Error()
					var es Errors
					if !errors.As(x.err, &es) {
						t.Errorf("%s: %T, want Errors", x.what, x.err)
					}
				}
				if got != x.want {
					t.Errorf("%s = %q, want %q", x.what, got, x.want)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/nonexistent.yaml")
	var es Errors
	if !errors.As(err, &es) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %#v, want Errors wrapping fs.ErrNotExist", err)
	}
	if want := "testdata/nonexistent.yaml: no such file or directory"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"90s", 90 * time.Second}, {"5m", 5 * time.Minute}, {"1h30m", 90 * time.Minute}, {"500ms", 500 * time.Millisecond},
		{"1d", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}, {"1d12h", 36 * time.Hour}, {"0s", 0}, {"-1d", -24 * time.Hour},
	}
	for _, tc := range good {
		if got, err := ParseDuration(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "5", "5 minutes", "d", "xd", "1dx", "1h1d", "1.5d", "1d-1h", "99999999d"} {
		if got, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int
	}{{"1048576", 1 << 20}, {"1MiB", 1 << 20}, {"64 KiB", 64 << 10}, {"2GiB", 2 << 30}, {"1MB", 1e6}, {"512B", 512}}
	for _, tc := range good {
		if got, err := ParseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "lots", "1.5MiB", "-1", "1TiB", "2000GiB"} {
		if got, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %v, want an error", bad, got)
		}
	}
}

// A secret never prints its value, however it is printed, encoded or logged.
func TestSecretNeverPrinted(t *testing.T) {
	const pw = "s3cr3t-value"
	s := Secret{pw}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("connect", "password", s, "group", slog.GroupValue(slog.Any("pw", s)))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("connect", "password", s, "cfg", struct{ P Secret }{s})
	jsonOut, err := json.Marshal(map[string]any{"p": s, "ptr": &s, "in": struct{ P Secret }{s}})
	if err != nil {
		t.Fatal(err)
	}
	outs := map[string]string{
		"%v": fmt.Sprintf("%v", s), "%+v": fmt.Sprintf("%+v", s), "%#v": fmt.Sprintf("%#v", s),
		"%s": fmt.Sprintf("%s", s), "%q": fmt.Sprintf("%q", s), "%x": fmt.Sprintf("%x", s), "%d": fmt.Sprintf("%d", s),
		"%v pointer": fmt.Sprintf("%v", &s), "%+v in struct": fmt.Sprintf("%+v", struct{ P Secret }{s}),
		"%#v in struct": fmt.Sprintf("%#v", struct{ P Secret }{s}), "Sprint": fmt.Sprint(s), "Println": fmt.Sprintln(s),
		"json": string(jsonOut), "slog text": text.String(), "slog json": js.String(),
	}
	for how, out := range outs {
		if strings.Contains(out, pw) || !strings.Contains(out, "[redacted]") {
			t.Errorf("%s: %s", how, out)
		}
	}
	if s.Reveal() != pw {
		t.Errorf("Reveal = %q", s.Reveal())
	}
}

func TestPassword(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("pw", "from-file\n")
	write("pw-crlf", "crlf\r\n")
	write("pw-two", "two\n\n")
	t.Setenv("HC_TEST_PW", "from-env")
	// A relative password_file is resolved against the config file's directory.
	write("hitcount.yaml", `
clickhouse: {addr: [h:1], password_file: pw}
smtp: {host: h, from: a@b.c, username: u, password_env: HC_TEST_PW}
keeper: {addr: [h:1], username: u, password_file: pw-crlf}
`)
	c, err := Load(filepath.Join(dir, "hitcount.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		get     func() (Secret, error)
		want    string
		wantErr string
	}{
		{"clickhouse relative file", c.ClickHouse.Password, "from-file", ""},
		{"smtp env", c.SMTP.Password, "from-env", ""},
		{"keeper file with CRLF", c.Keeper.Password, "crlf", ""},
		{"one newline only", (&SMTP{PasswordFile: filepath.Join(dir, "pw-two")}).Password, "two\n", ""},
		{"none configured", (&ClickHouse{}).Password, "", ""},
		{"empty env var", func() (Secret, error) {
			t.Setenv("HC_TEST_EMPTY", "")
			return (&Keeper{PasswordEnv: "HC_TEST_EMPTY"}).Password()
		}, "", ""},
		{"missing env var", (&ClickHouse{PasswordEnv: "HC_TEST_UNSET_VAR"}).Password, "", "clickhouse.password_env: environment variable HC_TEST_UNSET_VAR is not set"},
		{"missing file", (&Keeper{PasswordFile: filepath.Join(dir, "nope")}).Password, "", "keeper.password_file: open " + filepath.Join(dir, "nope") + ": no such file or directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.get()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if s.Reveal() != tc.want || gotErr != tc.wantErr {
				t.Errorf("got %q, %q; want %q, %q", s.Reveal(), gotErr, tc.want, tc.wantErr)
			}
		})
	}
}

// Parse never panics, and every problem it reports has a message.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/mistakes.yaml", "testdata/full.yaml", "../deploy/hitcount.example.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &x {<<: *x}\nsources: [{<<: [*x, *x]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse("f.yaml", data)
		if err == nil {
			return
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("err %T %v, want a non-empty Errors", err, err)
		}
		for _, e := range es {
			if e.Msg == "" {
				t.Errorf("empty message: %#v", e)
			}
		}
	})
}

// Nested merges of aliases are bounded (an "alias bomb" fails fast).
func TestMergeBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 {site: s}\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "a%d: &a%d {<<: [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]}\n")
	}
	b.WriteString("sources: [{<<: *a8, path: /x}]\n")
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "<< merges more than") {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// Warnings are what a file may say but leaves exposed: a ClickHouse password
// sent in clear text to a host that is not loopback (allowed: compose and
// Kubernetes reach ClickHouse by service name on private networks), and
// keeper claims without credentials.
func TestWarnings(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"password in clear to a remote host", "clickhouse:\n  addr: [127.0.0.1:9000, ch.internal:9000]\n  password_env: CH_PW\n", []string{
			`t.yaml:2:26: clickhouse.addr[1]: "ch.internal:9000" is not a loopback address and clickhouse.tls is off: the password (password_env) crosses the network in clear text; set clickhouse.tls.enabled: true unless the network is private`}},
		{"password file in clear to a service name", "clickhouse: {addr: [clickhouse:9000], password_file: /run/secrets/ch}\n", []string{
			`t.yaml:1:21: clickhouse.addr[0]: "clickhouse:9000" is not a loopback address and clickhouse.tls is off: the password (password_file) crosses the network in clear text; set clickhouse.tls.enabled: true unless the network is private`}},
		{"loopback only", "clickhouse: {addr: [\"127.0.0.1:9000\", \"localhost:9000\", \"[::1]:9000\"], password_env: CH_PW}\n", nil},
		{"tls on", "clickhouse: {addr: [ch.example.com:9440], password_env: CH_PW, tls: {enabled: true}}\n", nil},
		{"no password", "clickhouse: {addr: [ch.example.com:9000]}\n", nil},
		{"embedded store", "embedded: {path: ./data}\n", nil},
		{"keeper claims without credentials", "sweep: {claims: keeper}\nkeeper: {addr: [zk:2181]}\n", []string{
			"t.yaml:2:1: keeper: no username: claim nodes are world-writable, so anyone who reaches the ensemble can delete or forge claims (duplicate or lost alerts); set keeper.username and keeper.password_env or password_file"}},
		{"keeper claims with credentials", "sweep: {claims: keeper}\nkeeper: {addr: [zk:2181], username: u, password_env: P}\n", nil},
		{"keeper section unused", "keeper: {addr: [zk:2181]}\n", nil},
		{"keeper session defaults: the session outlives any send (heartbeats, not the SMTP call, keep it)", "sweep: {claims: keeper}\nkeeper: {addr: [zk:2181], username: u, password_env: P}\nsmtp: {host: h, from: a@b.c}\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range cfg.Warnings() {
				got = append(got, w.Error())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// A source whose path matches no file (a typo) is said at -check-config,
// with its place; a glob that matches, relative to the config file, is not.
func TestSourceWarnings(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "logs", "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "logs", "a", "access.log"), nil, 0o644)
	yaml := "sources:\n  - {path: logs/**/access*.log, site: a}\n  - {path: logs/acess.log, site: b}\n"
	cfg, err := Parse(filepath.Join(dir, "t.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.SourceWarnings() {
		got = append(got, w.Error())
	}
	want := filepath.Join(dir, "t.yaml") + `:3:12: sources[1].path: "logs/acess.log" matches no file now: a typo, or a log the web server has not written yet (the collector keeps looking and logs when it appears)`
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// match.exclude_bots: false, true (the built-in pattern) or ~REGEX (one of
// the rule's own), as the sweeper reads it.
func TestExcludeBots(t *testing.T) {
	cases := []struct {
		value   string
		exclude bool
		pattern string
	}{
		{"", false, ""},
		{"false", false, ""},
		{"true", true, ""},
		{`"~(?i)(bot|spider)"`, true, "(?i)(bot|spider)"},
		{`'~^Mozilla/5\.0 \(compatible; \w+bot'`, true, `^Mozilla/5\.0 \(compatible; \w+bot`},
	}
	for _, c := range cases {
		yaml := "rules: [{name: a, match: {path: /, exclude_bots: " + c.value + "}, threshold: 1, window: 1h, to: [a@b.c]}]\n"
		if c.value == "" {
			yaml = "rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\n"
		}
		cfg, err := Parse("t.yaml", []byte(yaml))
		if err != nil {
			t.Errorf("%s: %v", c.value, err)
			continue
		}
		if f := cfg.Rules[0].Match.ExcludeBots; f.Exclude() != c.exclude || f.Pattern() != c.pattern {
			t.Errorf("exclude_bots: %s = %q: exclude %v, pattern %q; want %v, %q", c.value, f, f.Exclude(), f.Pattern(), c.exclude, c.pattern)
		}
	}
}
