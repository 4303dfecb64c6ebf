package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// The -check-log report quotes paths and rejected lines from the log: what a
// terminal would act on (ESC, DEL, C1 controls) is escaped, and the report is
// still JSON that reads back to the same text.
func TestCheckLogTerminalSafe(t *testing.T) {
	log := filepath.Join(t.TempDir(), "access.log")
	const ok = `127.0.0.1 - - [24/Nov/2026:10:00:00 +0000] "GET /a\x1B]0;pwned\x07\xC2\x9B2J\x7F HTTP/1.1" 200 5 "-" "curl"` + "\n"
	bad := "garbage \x1b[2J\xc2\x9b\x7f line\n"
	if err := os.WriteFile(log, []byte(ok+bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-check-log", log}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, c := range []string{"\x1b", "\x7f", "\u009b", "\x07"} {
		if strings.Contains(out, c) {
			t.Errorf("report carries %q raw:\n%q", c, out)
		}
	}
	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if !strings.Contains(fmt.Sprint(rep["top_paths"]), "/a\x1b]0;pwned\x07\u009b2J\x7f") {
		t.Errorf("the path does not read back from the report: %q", rep["top_paths"])
	}
}

// -check-config says when a source's path matches no file (a typo would
// otherwise pass as ok and ship nothing), and still exits 0.
func TestCheckConfigWarnsOfSourceMatchingNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hitcount.yaml")
	if err := os.WriteFile(path, []byte("embedded: {path: ./data}\nsources: [{path: ./logs/acess.log, site: s}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-check-config", "-config", path}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "ok") {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if want := "warning: " + path + `:2:18: sources[0].path: "./logs/acess.log" matches no file now`; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// -check-log says on stderr, besides the report, when most lines are
// rejected and which format accepts them, with the flag to try; and
// refuses a machine-dependent -timezone.
func TestCheckLogSaysWhichFormatAccepts(t *testing.T) {
	dir := t.TempDir()
	json := filepath.Join(dir, "json.log")
	line := `{"time":"2026-11-22T10:00:00Z","request":"GET / HTTP/1.1","status":200}` + "\n"
	if err := os.WriteFile(json, []byte(strings.Repeat(line, 30)), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.log")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("garbage\n", 30)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		args       []string
		code       int
		wantStderr string // "" : nothing said
	}{
		{"wrong format", []string{"-check-log", json, "-format", "combined"}, 0,
			"collector: 30 of 30 lines are rejected with format combined; json accepts 30 of 30 of them: try -format json\n"},
		{"detected", []string{"-check-log", json}, 0, ""},
		{"nothing parses", []string{"-check-log", garbage}, 0, "collector: no known format parses this log"},
		{"timezone Local", []string{"-check-log", json, "-timezone", "Local"}, 2, `collector: -timezone "Local": want an IANA zone`},
		{"timezone", []string{"-check-log", json, "-timezone", "Europe/Berlin"}, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr.String())
			}
			if (c.wantStderr == "") != (stderr.Len() == 0) || !strings.HasPrefix(stderr.String(), c.wantStderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), c.wantStderr)
			}
		})
	}
	if got := shellQuote(`$remote_addr 'x'`); got != `'$remote_addr '\''x'\'''` {
		t.Errorf("shellQuote: %s", got)
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
	yaml := fmt.Sprintf("clickhouse: {addr: [127.0.0.1:1]}\nsources: [{path: /nonexistent/access.log, site: www}]\nhttp: {listen: %q}\n", taken.Addr())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-config", path}, &stdout, &stderr)
	want := fmt.Sprintf("collector: %s:3:16: http.listen: %s is in use by another process", path, taken.Addr())
	if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "clickhouse") {
		t.Errorf("exit %d, stderr %q; want exit 1 with %q before any word of clickhouse", code, stderr.String(), want)
	}
}
