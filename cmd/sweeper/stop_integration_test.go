package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
)

// A service stopped (SIGTERM, as a rolling restart does) after the SMTP
// server accepted a message and before the sweeper recorded it: the sweeper
// records it sent before it exits, exits 0, and the next run sends nothing.
// Before, the mark ran on the cancelled context and failed, the crossing
// stayed claimed, and every rolling restart could send it again.
func TestSIGTERMBetweenAcceptAndMark(t *testing.T) {
	t.Parallel()
	h := newRaceHarness(t)
	ch := testenv.ClickHouse(t)
	h.serverStore(ch)
	h.p.n = 1
	h.seed(0)
	cfg := h.config("stop", "clickhouse: {addr: ["+`"`+ch.Addr()+`"`+"], database: "+h.db+"}", "local", "state", "1h", "")

	svc := exec.Command(h.bin, "-config", cfg, "-log-level", "info")
	svc.Env = append(os.Environ(), pauseAtEnv+"=sent:4s")
	stderr := &syncBuffer{}
	svc.Stderr = stderr
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(h.smtp.Messages(t)) == 0 {
		if time.Now().After(deadline) {
			svc.Process.Kill()
			t.Fatalf("no message within 60s; sweeper stderr:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The server has it; the sweeper sleeps before its mark.
	svc.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- svc.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the sweeper stopped with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		svc.Process.Kill()
		t.Fatalf("the sweeper did not stop within 60s of SIGTERM; stderr:\n%s", stderr.String())
	}
	key := raceKey(h.pages[0])
	if st := h.states()[key]; st != "sent" {
		t.Fatalf("after SIGTERM between acceptance and mark the crossing is %q, want sent; stderr:\n%s", st, stderr.String())
	}
	once := exec.Command(h.bin, "-config", cfg, "-once")
	once.Dir = filepath.Dir(cfg)
	if out, err := once.CombinedOutput(); err != nil {
		t.Fatalf("sweeper -once: %v\n%s", err, out)
	}
	if n := len(h.smtp.Messages(t)); n != 1 {
		t.Fatalf("%d messages after a restart, want 1", n)
	}
}
