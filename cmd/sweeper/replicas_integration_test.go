package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Three sweeper services with keeper claims over the same hits, against real
// ClickHouse, ZooKeeper and SMTP servers; replicas are kill -9ed and restarted
// at random moments, ZooKeeper is restarted once, and the SMTP server answers
// 451, hangs, and answers 550 for a while. At the end every crossing is sent
// (in the mailbox) or failed (by the 550s, not in the mailbox), the state
// table agrees with the mailbox, and a Message-ID arrives twice only through
// the documented window (a sender killed after the SMTP server accepted): never
// more than twice, never more duplicates than kills.
func TestReplicasSendEachCrossingOnce(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	zk := testenv.ZooKeeper(t)
	smtp := testenv.StartFaultySMTP(t)
	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "replicas"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sweeper")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/hitcount/hitcount/cmd/sweeper").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: replicas}
sources: [{path: /var/log/x.log, site: www}]
http: {listen: ""}
sweep: {every: 1s, claims: keeper, digest_after: 1000}
keeper: {addr: [%q], root: /hitcount/replicas, session_timeout: 4s}
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "hitcount <alerts@example.com>", timeout: 2s}
rules:
  - {name: pages, match: {path: "/p/*"}, milestones: [10, 20, 30], window: lifetime, to: [ops@example.com]}
`, ch.Addr(), zk.Addr(), smtp.Port())), 0o644)
	replicas := make([]*exec.Cmd, 3)
	start := func(i int) {
		cmd := exec.Command(bin, "-config", cfg, "-log-level", "warn")
		cmd.Stderr = testWriter{t, i}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		replicas[i] = cmd
	}
	for i := range replicas {
		start(i)
	}
	defer func() {
		for _, r := range replicas {
			r.Process.Signal(syscall.SIGKILL)
			r.Wait()
		}
	}()
	var off int64
	insert := func(page string, n int) {
		b := sink.NewBatch(n)
		b.Reset("www", 1)
		h := parser.Hit{Unix: time.Now().Unix(), Method: []byte("GET"), Path: []byte(page), Status: 200}
		for range n {
			b.Add(&h, off, off+1)
			off++
		}
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	const pages = 12
	kills := 0
	faults := []string{"451", "hang", "550"}
	for round := 0; round < 3; round++ { // each round crosses one milestone on every page
		smtp.Set(t, faults[round])
		for p := range pages {
			insert(fmt.Sprintf("/p/%d", p), 10)
			time.Sleep(time.Duration(rand.IntN(150)) * time.Millisecond)
		}
		for range 2 {
			i := rand.IntN(3)
			replicas[i].Process.Signal(syscall.SIGKILL)
			replicas[i].Wait()
			kills++
			time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
			start(i)
		}
		if round == 1 {
			zk.Stop()
			time.Sleep(2 * time.Second)
			zk.Start()
		}
		smtp.Set(t, "ok")
		time.Sleep(time.Second)
	}
	want := pages * 3
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) && terminal(t, s) < want {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // anything still to arrive arrives now
	states := finalStates(t, s)
	if len(states) != want {
		t.Fatalf("%d crossings recorded, want %d", len(states), want)
	}
	perKey := map[string]int{}
	perID := map[string]int{}
	for _, m := range smtp.Messages(t) {
		perKey[m.Header.Get("X-Hitcount-Crossing")]++
		perID[m.Header.Get("Message-Id")]++
	}
	dups, sent, failed := 0, 0, 0
	for key, st := range states {
		n := perKey[key]
		switch st {
		case "sent":
			sent++
			if n < 1 || n > 2 {
				t.Errorf("crossing %s is sent and arrived %d times", key, n)
			}
			dups += max(0, n-1)
		case "failed":
			failed++
			if n != 0 {
				t.Errorf("crossing %s is marked failed but arrived %d times", key, n)
			}
		default:
			t.Errorf("crossing %s ended %s", key, st)
		}
	}
	for id, n := range perID {
		if n > 2 {
			t.Errorf("Message-ID %s delivered %d times", id, n)
		}
	}
	if dups > kills {
		t.Fatalf("%d duplicates with only %d kills", dups, kills)
	}
	if sent == 0 {
		t.Fatal("nothing was sent")
	}
	t.Logf("%d crossings: %d sent (each in the mailbox), %d failed on 550 (none in the mailbox); %d replica kills, 1 ZooKeeper restart, 451 and hang phases retried; %d duplicate(s) through the documented window",
		want, sent, failed, kills, dups)
}

// finalStates is each crossing's current state.
func finalStates(t *testing.T, s *sink.Sink) map[string]string {
	rows, err := s.Conn().Query(context.Background(), "SELECT key, argMax(state, version) FROM replicas.crossings GROUP BY key")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, st string
		if err := rows.Scan(&k, &st); err != nil {
			t.Fatal(err)
		}
		out[k] = st
	}
	return out
}

// terminal counts crossings sent or failed.
func terminal(t *testing.T, s *sink.Sink) int {
	n := 0
	for _, st := range finalStates(t, s) {
		if st == "sent" || st == "failed" {
			n++
		}
	}
	return n
}

type testWriter struct {
	t *testing.T
	i int
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("replica %d: %s", w.i, strings.TrimSpace(string(p)))
	return len(p), nil
}
