package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// A file full of mistakes reports every one of them at once, each with
// file:line:column and the field (testdata/mistakes.golden).
func TestEveryMistakeReportedAtOnce(t *testing.T) {
	_, err := Load("testdata/mistakes.yaml")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v, want Errors", err)
	}
	got := err.Error() + "\n"
	if strings.Contains(got, "hunter2") {
		t.Fatal("an error message contains the literal password")
	}
	if *update {
		os.WriteFile("testdata/mistakes.golden", []byte(got), 0o644)
	}
	want, err := os.ReadFile("testdata/mistakes.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("errors differ from testdata/mistakes.golden (run with -update and review):\n%s", got)
	}
	for _, e := range es {
		if e.Line == 0 || e.Field == "" {
			t.Errorf("error without a line or field: %v", e)
		}
	}
}

func TestExampleLoadsWithDefaults(t *testing.T) {
	c, err := Load("../deploy/hitcount.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"clickhouse.database", c.ClickHouse.Database, "hitcount"},
		{"clickhouse.insert_timeout", c.ClickHouse.InsertTimeout.Duration, 30 * time.Second},
		{"clickhouse.dial_timeout (default)", c.ClickHouse.DialTimeout.Duration, 5 * time.Second},
		{"clickhouse.compression (default)", c.ClickHouse.Compression, "none"},
		{"sources[0].format", c.Sources[0].Format, "combined"},
		{"sources[0].max_line (default)", c.Sources[0].MaxLine.Bytes, 1 << 20},
		{"batch.rows", c.Batch.Rows, 50000},
		{"batch.max_pending (default)", c.Batch.MaxPending, 2},
		{"http.listen", *c.HTTP.Listen, "127.0.0.1:9464"},
		{"sweep.every", c.Sweep.Every.Duration, 5 * time.Minute},
		{"sweep.lease (default)", c.Sweep.Lease.Duration, 2 * time.Minute},
		{"smtp.port", c.SMTP.Port, 587},
		{"rules[0].window", c.Rules[0].WindowDur, time.Hour},
		{"rules[0].timezone", c.Rules[0].Location.String(), "Europe/Berlin"},
		{"rules[1].window", c.Rules[1].WindowDur, time.Duration(0)},
		{"rules[1].timezone (default)", c.Rules[1].Timezone, "UTC"},
	}
	for _, ck := range checks {
		if fmt.Sprint(ck.got) != fmt.Sprint(ck.want) {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
	if err := c.CheckCollector(); err != nil {
		t.Error(err)
	}
	if err := c.CheckSweeper(); err != nil {
		t.Error(err)
	}
}

func TestMinimalDefaults(t *testing.T) {
	c, err := Parse("min.yaml", []byte("sources:\n  - {path: /var/log/a.log, site: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.ClickHouse != nil || c.Embedded.Path != "./data" || c.Sources[0].StartAt != "end" || c.SMTP != nil || c.Outbox != "./outbox" {
		t.Errorf("defaults: %+v", c)
	}
	if err := c.CheckSweeper(); err == nil || !strings.Contains(err.Error(), "rules") {
		t.Errorf("CheckSweeper without rules: %v", err)
	}
	if _, err := Parse("empty.yaml", nil); err != nil {
		t.Errorf("an empty file is valid (all defaults): %v", err)
	}
	if c, _ := Parse("x.yaml", []byte("http: {listen: \"\"}\n")); c == nil || *c.HTTP.Listen != "" {
		t.Error(`listen: "" must disable the endpoint, not take the default`)
	}
}

func TestSyntaxErrorHasPosition(t *testing.T) {
	_, err := Parse("bad.yaml", []byte("sources:\n  - path: [unclosed\n"))
	var es Errors
	if !errors.As(err, &es) || es[0].Line == 0 {
		t.Fatalf("err = %v, want a positioned error", err)
	}
}

func TestParseDuration(t *testing.T) {
	cases := map[string]time.Duration{"90s": 90 * time.Second, "5m": 5 * time.Minute, "1d": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour}
	for in, want := range cases {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "5 minutes", "xd", "1dx"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// A secret never prints its value, however it is printed or logged.
func TestSecretNeverPrinted(t *testing.T) {
	t.Setenv("HC_TEST_PW", "s3cr3t")
	ch := &ClickHouse{PasswordEnv: "HC_TEST_PW"}
	s, err := ch.ResolvePassword()
	if err != nil || s.Reveal() != "s3cr3t" {
		t.Fatalf("ResolvePassword = %v, %v", s.Reveal(), err)
	}
	js, _ := json.Marshal(struct{ P Secret }{s})
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "password", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q", s, s, s, s, s), string(js), logged.String()} {
		if strings.Contains(out, "s3cr3t") {
			t.Errorf("secret printed: %s", out)
		}
	}
	file := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(file, []byte("fromfile\n"), 0o600)
	if s, err := (&SMTP{PasswordFile: file}).ResolvePassword(); err != nil || s.Reveal() != "fromfile" {
		t.Errorf("password_file: %q %v", s.Reveal(), err)
	}
	if _, err := (&Keeper{PasswordEnv: "HC_TEST_UNSET_VAR"}).ResolvePassword(); err == nil || !strings.Contains(err.Error(), "HC_TEST_UNSET_VAR") {
		t.Errorf("missing env var: %v", err)
	}
}
