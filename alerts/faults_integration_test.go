package alerts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Child mode: a sweeper process that crashes (exit 3) at a chosen step.
func TestMain(m *testing.M) {
	if os.Getenv("HITCOUNT_CHILD_SWEEPER") != "" {
		os.Exit(childSweeper())
	}
	if os.Getenv("HITCOUNT_CHILD_KEEPERMAP") != "" {
		os.Exit(childKeeperMap())
	}
	os.Exit(m.Run())
}

func childSweeper() int {
	ctx := context.Background()
	d := testenv.DatabaseFromEnv()
	s, err := d.OpenStore(ctx, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	port, _ := strconv.Atoi(os.Getenv("HC_SMTP_PORT"))
	claims, err := alerts.OpenLocalClaims(os.Getenv("HC_STATE"), time.Now)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rules, err := compileRules(rulesYAML)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crashAt := os.Getenv("HC_CRASH_AT")
	sw := alerts.NewSweeper(alerts.NewStore(s, d.Name), rules, claims,
		alerts.NewSMTP(alerts.SMTPOptions{Host: "127.0.0.1", Port: port, TLS: "none", Timeout: 5 * time.Second}),
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "child", Fault: func(step string) {
			if step == crashAt {
				os.Exit(3)
			}
		}})
	if _, err := sw.Sweep(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// Crashes at each step of sending, then a restart: every crossing is delivered
// exactly once, except a crash after the SMTP server accepted, which delivers
// it twice with the same Message-ID; the state table ends with all sent.
func TestCrashAtEachStepThenRestart(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testCrashAtEachStepThenRestart)
}

func testCrashAtEachStepThenRestart(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	for _, step := range []string{"recorded", "claimed", "sent", "marked"} {
		t.Run(step, func(t *testing.T) {
			d := *d
			if d.Backend == "embedded" {
				d.Data = t.TempDir()
			} else {
				d = *testenv.ServerDatabase(d.Server)
			}
			e := newEnv(t, &d)
			e.hits("www.example.com", "/pricing", 120, time.Now(), "Mozilla/5.0")
			// The sweeper runs in child processes; the embedded engine's
			// directory is open in one process at a time.
			e.store.Close()
			before := len(smtp.Messages(t))
			state := t.TempDir()
			run := func(crashAt string) int {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(append(os.Environ(), d.Env()...), "HITCOUNT_CHILD_SWEEPER=1",
					"HC_SMTP_PORT="+strconv.Itoa(smtp.Port()), "HC_STATE="+state, "HC_CRASH_AT="+crashAt)
				out, _ := cmd.CombinedOutput()
				if len(out) > 0 {
					t.Logf("child: %s", out)
				}
				return cmd.ProcessState.ExitCode()
			}
			if code := run(step); code != 3 {
				t.Fatalf("the sweeper did not crash at %s (exit %d)", step, code)
			}
			if code := run(""); code != 0 {
				t.Fatalf("the restarted sweeper exited %d", code)
			}
			if code := run(""); code != 0 {
				t.Fatalf("a third sweep exited %d", code)
			}
			msgs := smtp.Messages(t)[before:]
			want := 1
			if step == "sent" {
				want = 2 // the documented window: accepted, then the sender died before recording it
			}
			if len(msgs) != want {
				t.Fatalf("crash at %s: %d messages delivered, want %d", step, len(msgs), want)
			}
			if msgs[0].Header.Get("Message-Id") != msgs[len(msgs)-1].Header.Get("Message-Id") {
				t.Fatal("the re-sent message has another Message-ID")
			}
			e.store = d.Open(t)
			if st := e.states(); st["sent"] != 1 || len(st) != 1 {
				t.Fatalf("state table %v, want the crossing sent", st)
			}
		})
	}
}

// SMTP faults: refused connections, a server that never answers, 4xx: each
// retried on later sweeps and delivered once when the server recovers; 5xx:
// the crossing is marked failed after one attempt, never forgotten.
func TestSMTPFaults(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	srv := testenv.StartFaultySMTP(t)
	refusedPort := testenv.RefusedPort(t)
	for _, fault := range []string{"refused", "hang", "451", "550"} {
		t.Run(fault, func(t *testing.T) {
			e := newEnv(t, testenv.ServerDatabase(ch))
			e.hits("www.example.com", "/pricing", 120, time.Now(), "Mozilla/5.0")
			before := len(srv.Messages(t))
			port := srv.Port()
			switch fault {
			case "refused":
				port = refusedPort
			default:
				srv.Set(t, fault)
			}
			claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			defer claims.Close()
			target := port
			sender := alerts.SenderFunc(func(ctx context.Context, m *alerts.Message) (bool, error) {
				return alerts.NewSMTP(alerts.SMTPOptions{Host: "127.0.0.1", Port: target, TLS: "none", Timeout: 2 * time.Second}).Send(ctx, m)
			})
			// Retries are due by the store's clock: the test moves it ahead.
			store := alerts.NewStore(e.store, e.db)
			var ahead time.Duration
			clock := aheadClock(store, &ahead)
			sw := alerts.NewSweeper(store, mustCompile(t, rulesYAML), claims, sender,
				alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", Clock: clock})
			res, err := sw.Sweep(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 0 {
				t.Fatalf("sent %d through a %s fault", res.Sent, fault)
			}
			if fault == "550" {
				if res.Failed != 1 || e.states()["failed"] != 1 {
					t.Fatalf("a 5xx: failed %d, states %v; want the crossing marked failed", res.Failed, e.states())
				}
				return
			}
			// A server that never answers once it has the whole message may
			// have accepted it: sent once more, and no more (unconfirmed).
			want := map[bool]string{true: "unconfirmed", false: "detected"}[fault == "hang"]
			if st := e.states(); st[want] != 1 {
				t.Fatalf("after a %s fault the crossing is %v, want %s (to retry)", fault, st, want)
			}
			target = srv.Port()
			srv.Set(t, "ok")
			// A sweep right away backs off; one after the retry delay sends.
			if res, err := sw.Sweep(context.Background()); err != nil || res.Sent != 0 {
				t.Fatalf("retried at once, without backing off: sent %d (%v)", res.Sent, err)
			}
			ahead = time.Minute
			for range 2 {
				if _, err := sw.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got := len(srv.Messages(t)) - before; got != 1 {
				t.Fatalf("after recovering from %s: %d messages delivered, want 1", fault, got)
			}
			if st := e.states(); st["sent"] != 1 || len(st) != 1 {
				t.Fatalf("state table %v, want sent", st)
			}
		})
	}
}

func mustCompile(t *testing.T, yaml string) []*alerts.Rule {
	rules, err := compileRules(yaml)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TLS is mandatory by default: against a server without STARTTLS, nothing is
// sent in clear text and the crossing waits for a retry.
func TestStartTLSMandatoryByDefault(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	plain := testenv.SMTP(t) // offers no STARTTLS
	e := newEnv(t, testenv.ServerDatabase(ch))
	e.hits("www.example.com", "/pricing", 120, time.Now(), "Mozilla/5.0")
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), mustCompile(t, rulesYAML), claims,
		alerts.NewSMTP(alerts.SMTPOptions{Host: plain.Host(), Port: plain.Port(), TLS: "starttls", Timeout: 5 * time.Second}),
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test"})
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || len(plain.Messages(t)) != 0 {
		t.Fatalf("sent %d (mailbox %d) to a server without STARTTLS", res.Sent, len(plain.Messages(t)))
	}
	if st := e.states(); st["detected"] != 1 {
		t.Fatalf("state %v, want the crossing waiting for a retry", st)
	}
}
