package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// A template that parses but fails when executed ({{.Hits}}: the view has
// no such field) is refused by -check-config, with its place in the file,
// the rule and the template, and the sweeper does not start with it (before
// it opens a store: the address here answers nothing).
func TestCheckConfigRefusesFailingTemplate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	yaml := `clickhouse: {addr: [127.0.0.1:1], dial_timeout: 1s}
rules:
  - name: fine
    match: {path: /}
    threshold: 1
    window: 1h
    to: [a@b.c]
  - name: pricing-hot
    match: {path: /pricing}
    threshold: 100
    window: lifetime
    to: [a@b.c]
    subject: '{{.Site}}{{.Path}}: {{.Hits}} hits'
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	want := path + `:13:14: rules[1].subject: rule pricing-hot: fails on a sample crossing (lifetime, path /pricing): template: subject:1:22: executing "subject" at <.Hits>: can't evaluate field Hits in type alerts.view`
	for _, args := range [][]string{{"-check-config", "-config", path}, {"-once", "-dry-run", "-config", path}} {
		// Bounded: a sweeper that started would wait for the store.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		cancel()
		if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stdout.String(), "ok") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 with %q", args, code, stdout.String(), stderr.String(), want)
		}
	}
}

// A taken http.listen port fails start-up before the store is even tried
// (here one that never answers, which start-up would otherwise wait for),
// naming the key and its place in the file.
func TestPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	yaml := fmt.Sprintf("clickhouse: {addr: [127.0.0.1:1]}\nrules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\nhttp: {listen: %q}\n", taken.Addr())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-config", path}, &stdout, &stderr)
	want := fmt.Sprintf("sweeper: %s:3:16: http.listen: %s is in use by another process", path, taken.Addr())
	if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "clickhouse") {
		t.Errorf("exit %d, stderr %q; want exit 1 with %q before any word of clickhouse", code, stderr.String(), want)
	}
}
