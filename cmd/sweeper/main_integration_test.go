package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// The sweeper command as operators run it, against a real server: -dry-run
// changes nothing, -once records and writes the outbox, the scheduled service
// sweeps on its own and stops cleanly.
func TestSweeperCommand(t *testing.T) {
	ch := testenv.ClickHouse(t)
	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "sweeptest"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	insert := func(path string, n int) {
		b := sink.NewBatch(n)
		b.Reset("www.example.com", uint64(len(path)))
		h := parser.Hit{Unix: time.Now().Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200}
		for i := range n {
			b.Add(&h, int64(i*100), int64(i*100+100))
		}
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	insert("/pricing", 150)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hitcount.yaml")
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	listen := ln.Addr().String()
	ln.Close()
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: sweeptest}
sources: [{path: /var/log/x.log, site: www.example.com}]
http: {listen: %q}
state_dir: state
outbox: outbox
sweep: {every: 1h, max_crossings: 1}
rules:
  - {name: pricing, match: {path: /pricing}, threshold: 100, window: 1h, to: [ops@example.com]}
  - {name: docs, match: {path: "/docs/*"}, milestones: [10, 20, 30], window: lifetime, to: [docs@example.com]}
`, ch.Addr(), listen)), 0o644)
	outbox := filepath.Join(dir, "outbox")
	emls := func() int { f, _ := filepath.Glob(filepath.Join(outbox, "*.eml")); return len(f) }

	var out, errb bytes.Buffer
	if code := run(ctx, []string{"-config", cfg, "-once", "-dry-run"}, &out, &errb); code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "would record: rule pricing page www.example.com/pricing threshold 100") || emls() != 0 {
		t.Fatalf("dry run printed %q and wrote %d files", out.String(), emls())
	}
	if code := run(ctx, []string{"-config", cfg, "-once"}, &out, &errb); code != 0 || emls() != 1 {
		t.Fatalf("-once: exit %d, %d outbox files; stderr %s", code, emls(), errb.String())
	}

	// Three crossings at once with max_crossings 1: the service sends them
	// all in its first run, pass after pass, instead of one per interval.
	insert("/docs/a", 35)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	go func() { done <- run(sctx, []string{"-config", cfg}, &out, &errb) }()
	deadline := time.Now().Add(20 * time.Second)
	for emls() < 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `hitcount_sweeper_emails_total{result="sent"} 3`) {
		t.Errorf("/metrics lacks the 3 emails sent:\n%s", body)
	}
	// The outbox is written a moment before the pass records its end.
	ready := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + listen + "/readyz"); err == nil {
			resp.Body.Close()
			if ready = resp.StatusCode; ready == 200 {
				break
			}
		}
	}
	if ready != 200 {
		t.Errorf("/readyz = %d after a good sweep", ready)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("service exit %d: %s", code, errb.String())
	}
	if n := emls(); n != 4 {
		t.Fatalf("%d outbox files, want 4 (pricing, docs 10, 20, 30)", n)
	}

	// A second sweeper with local claims against the same database, from
	// another state directory (another machine), is refused loudly.
	other := filepath.Join(dir, "other.yaml")
	data, _ := os.ReadFile(cfg)
	os.WriteFile(other, []byte(strings.Replace(string(data), "state_dir: state", "state_dir: state2", 1)), 0o644)
	errb.Reset()
	if code := run(ctx, []string{"-config", other, "-once"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "another sweeper is active") {
		t.Fatalf("second sweeper: exit %d, stderr %s", code, errb.String())
	}

	// keepermap claims on an 18.16 server: refused at start, saying why.
	km := filepath.Join(dir, "km.yaml")
	os.WriteFile(km, []byte(strings.Replace(string(data), "sweep: {every: 1h, max_crossings: 1}", "sweep: {every: 1h, max_crossings: 1, claims: keepermap}", 1)), 0o644)
	errb.Reset()
	if code := run(ctx, []string{"-config", km, "-once"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "keepermap needs ClickHouse >= 23") {
		t.Fatalf("keepermap on 18.16: exit %d, stderr %s", code, errb.String())
	}
}

// A login the server refuses at start-up (here: a password for the default
// user, who has none) ends the sweeper at once with exit 78 and a message
// naming it, instead of waiting for the server for ever.
func TestLoginRefusedAtStart(t *testing.T) {
	ch := testenv.ClickHouse(t)
	cfg := filepath.Join(t.TempDir(), "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: sweeptest, password_env: HITCOUNT_TEST_CH_PW}
http: {listen: ""}
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]
`, ch.Addr())), 0o644)
	t.Setenv("HITCOUNT_TEST_CH_PW", "not-the-password")
	for _, args := range [][]string{{"-config", cfg}, {"-config", cfg, "-once"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		cancel()
		want := fmt.Sprintf(`sweeper: clickhouse at [%s] refused the login of user "default" (WRONG_PASSWORD, code 193: Wrong password for user default): check clickhouse.username (default) and the password in $HITCOUNT_TEST_CH_PW`, ch.Addr())
		if code != backend.ExitLoginRefused || !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", args, code, stderr.String(), backend.ExitLoginRefused, want)
		}
	}
}
