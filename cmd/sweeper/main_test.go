package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckConfig(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-check-config", "-config", "../../deploy/hitcount.example.yaml"}, 0, "ok (2 rules)"},
		{[]string{"-check-config", "-config", "../../config/testdata/mistakes.yaml"}, 1, "rules[0].timezone: unknown time zone"},
		{[]string{"-config", "../../deploy/hitcount.example.yaml", "-dry-run"}, 2, "-dry-run goes with -once"},
		{nil, 2, "give -config FILE"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", c.args, code, stdout.String()+stderr.String(), c.code, c.out)
		}
	}
}

// -check-config accepts, and warns about, a ClickHouse password in clear
// text to a remote host and keeper claims without credentials.
func TestCheckConfigWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	yaml := `clickhouse: {addr: [clickhouse:9000], username: sweeper, password_env: CH_PW}
sweep: {claims: keeper}
keeper: {addr: [clickhouse:9181]}
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-check-config", "-config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{
		"warning: " + path + ":1:21: clickhouse.addr[0]: \"clickhouse:9000\" is not a loopback address and clickhouse.tls is off",
		"warning: " + path + ":3:1: keeper: no username: claim nodes are world-writable",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q, want %q", stderr.String(), want)
		}
	}
}
