package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// The -check-log report for the parser's golden combined log, timing fields
// zeroed, against testdata/check-log.golden.
func TestCheckLogGolden(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-check-log", "../../parser/testdata/golden/combined.log"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, k := range []string{"lines", "parsed", "rejected", "first_rejects", "top_paths", "lines_per_sec"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
	rep["seconds"], rep["lines_per_sec"] = 0, 0
	got, _ := json.MarshalIndent(rep, "", "  ")
	got = append(got, '\n')
	const golden = "testdata/check-log.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("report differs from %s (run with -update and read the diff):\n%s", golden, got)
	}
}

func TestCheckConfigAcceptsTheExample(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-check-config", "-config", "../../deploy/hitcount.example.yaml"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "ok") {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}

// -check-config accepts a file that sends the ClickHouse password in clear
// text to a remote host, and says so.
func TestCheckConfigWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	if err := os.WriteFile(path, []byte("clickhouse: {addr: [clickhouse:9000], username: collector, password_env: CH_PW}\nsources: [{path: /var/log/nginx/access.log, site: s}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-check-config", "-config", path}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "ok") {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if want := "warning: " + path + ":1:21: clickhouse.addr[0]: \"clickhouse:9000\" is not a loopback address and clickhouse.tls is off"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "give -config FILE"},
		{[]string{"-check-config", "-config", "../../config/testdata/mistakes.yaml"}, 1, "mistakes.yaml:9:13: sources[0].format:"},
		{[]string{"-check-config", "-config", "/nonexistent.yaml"}, 1, "no such file"},
		{[]string{"-check-log", "/nonexistent/access.log"}, 1, "no such file"},
		{[]string{"-check-log", "../../parser/testdata/golden/combined.log", "-format", "nope"}, 1, "not one of"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr.String(), c.code, c.msg)
		}
	}
}
