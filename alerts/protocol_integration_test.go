package alerts_test

// The claim protocol's steps, each under the fault that broke it (issue 15):
// a replica's record made between another's pending list and its claim; a
// replica whose clock runs an hour ahead; a stop between the server's
// acceptance and the mark; a digest re-sent after its sender died; a
// template that fails on one crossing; a watermark left in the future.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// lifetimeYAML: one crossing per page at 10 hits, to one recipient.
const lifetimeYAML = `
sources: [{path: /x, site: www.example.com}]
rules:
  - name: ten
    match: {path: /p/*}
    milestones: [10]
    window: lifetime
    to: [ops@example.com]
`

// mailbox is a Sender that keeps what it is given.
type mailbox struct {
	mu  sync.Mutex
	got []*alerts.Message
}

func (m *mailbox) Send(_ context.Context, msg *alerts.Message) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, msg)
	return false, nil
}

func (m *mailbox) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, msg := range m.got {
		out = append(out, msg.ID)
	}
	return out
}

// aheadClock is the store's clock moved ahead by *ahead: how a test makes a
// retry due without waiting for it (decisions read the store's clock).
func aheadClock(store *alerts.Store, ahead *time.Duration) func(context.Context) (time.Time, error) {
	return func(ctx context.Context) (time.Time, error) {
		now, err := store.Now(ctx)
		return now.Add(*ahead), err
	}
}

func (e *env) localClaims() *alerts.LocalClaims {
	e.t.Helper()
	c, err := alerts.OpenLocalClaims(e.t.TempDir(), time.Now)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// crashing runs one sweep that dies (its goroutine ends, as a process would,
// with nothing after the step run) at step.
func crashing(t *testing.T, sw func(fault func(string)) *alerts.Sweeper, step string) {
	t.Helper()
	done := make(chan struct{})
	crashed := false
	go func() {
		defer close(done)
		s := sw(func(at string) {
			if at == step {
				crashed = true
				runtime.Goexit()
			}
		})
		s.Sweep(context.Background())
	}()
	<-done
	if !crashed {
		t.Fatalf("the sweep never reached %s", step)
	}
}

// otherReplica is a Claimer whose first claim on a key lets another
// replica send that crossing and record it sent, between this replica's
// pending list and its claim.
type otherReplica struct {
	alerts.Claimer
	store *alerts.Store
	once  map[string]bool
}

func (o *otherReplica) Claim(ctx context.Context, key string, lease time.Duration) (alerts.Claim, bool, error) {
	if !o.once[key] {
		o.once[key] = true
		rows, err := o.store.Latest(ctx, []string{key})
		if err != nil {
			return alerts.Claim{}, false, err
		}
		r := rows[key]
		r.State, r.Owner, r.Updated, r.Version = alerts.StateSent, "other", time.Now(), uint64(time.Now().UnixNano())
		if err := o.store.Write(ctx, []alerts.Row{r}); err != nil {
			return alerts.Claim{}, false, err
		}
	}
	return o.Claimer.Claim(ctx, key, lease)
}

// A crossing another replica sent after this one listed it as pending is
// not sent again: the state is read under the claim, before anything is
// written, and sent outranks whatever this replica would write.
func TestRecheckSeesAnotherReplicasSend(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		for i := range 5 {
			e.hits("www.example.com", fmt.Sprintf("/p/%d", i), 10, time.Now(), "Mozilla/5.0")
		}
		store := alerts.NewStore(e.store, e.db)
		box := &mailbox{}
		claims := &otherReplica{Claimer: e.localClaims(), store: store, once: map[string]bool{}}
		sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), claims, box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "this"})
		for range 2 {
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(box.ids()); n != 0 {
			t.Fatalf("%d crossings sent again after another replica sent them", n)
		}
		if st := e.states(); st["sent"] != 5 || len(st) != 1 {
			t.Fatalf("states %v, want 5 sent", st)
		}
	})
}

// A replica whose clock runs an hour ahead dies between the server's
// acceptance and its mark; another sends the crossing again (the
// documented window) and marks it sent. The skewed replica's claim must not
// outrank that: no third copy, however often either sweeps.
func TestClockAheadDoesNotOutrankSent(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		store := alerts.NewStore(e.store, e.db)
		box := &mailbox{}
		ahead := func() time.Time { return time.Now().Add(time.Hour) }
		// Recorded by a replica on time, which dies before claiming it.
		crashing(t, func(fault func(string)) *alerts.Sweeper {
			return alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box,
				alerts.Options{From: "hitcount <alerts@example.com>", Owner: "normal", Fault: fault})
		}, "recorded")
		crashing(t, func(fault func(string)) *alerts.Sweeper {
			return alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box,
				alerts.Options{From: "hitcount <alerts@example.com>", Owner: "ahead", Now: ahead, Fault: fault})
		}, "sent")
		normal := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "normal"})
		skewed := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "ahead", Now: ahead})
		for _, sw := range []*alerts.Sweeper{normal, skewed, normal, skewed} {
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		ids := box.ids()
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Fatalf("messages %v: want the one re-send of the documented window, same Message-ID", ids)
		}
		if st := e.states(); st["sent"] != 1 || len(st) != 1 {
			t.Fatalf("states %v, want sent", st)
		}
	})
}

// A sweep cancelled (SIGTERM) after the server accepted still records the
// crossing sent: the next sweep sends nothing.
func TestCancelAfterAcceptStillMarksSent(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		store := alerts.NewStore(e.store, e.db)
		smtp := testenv.SMTP(t)
		sender := alerts.NewSMTP(alerts.SMTPOptions{Host: "127.0.0.1", Port: smtp.Port(), TLS: "none", Timeout: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		claims := e.localClaims()
		sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), claims, sender, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t",
			Fault: func(step string) {
				if step == "sent" {
					cancel()
				}
			}})
		res, _ := sw.Sweep(ctx)
		if res.Sent != 1 {
			t.Fatalf("sent %d, want 1", res.Sent)
		}
		if st := e.states(); st["sent"] != 1 {
			t.Fatalf("states %v after a cancel between acceptance and mark, want sent", st)
		}
		again := alerts.NewSweeper(store, e.rules(lifetimeYAML), claims, sender, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t"})
		if _, err := again.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(smtp.Messages(t)); n != 1 {
			t.Fatalf("%d messages delivered, want 1", n)
		}
	})
}

// A digest whose sender died after the server accepted it is sent again as
// the same message (same Message-ID, so the receiving side drops it), even
// when other crossings became pending meanwhile and would make a different
// set.
func TestDigestResentWithItsMessageID(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		for i := range 3 {
			e.hits("www.example.com", fmt.Sprintf("/p/%d", i), 10, time.Now(), "Mozilla/5.0")
		}
		store := alerts.NewStore(e.store, e.db)
		box := &mailbox{}
		opts := alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t", DigestAfter: 1}
		crashing(t, func(fault func(string)) *alerts.Sweeper {
			o := opts
			o.Fault = fault
			return alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, o)
		}, "sent")
		first := box.ids()
		if len(first) != 1 || !strings.HasPrefix(first[0], "<hitcount.digest.") {
			t.Fatalf("first send %v, want one digest", first)
		}
		for i := 3; i < 5; i++ {
			e.hits("www.example.com", fmt.Sprintf("/p/%d", i), 10, time.Now(), "Mozilla/5.0")
		}
		sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, opts)
		for range 2 {
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		box.mu.Lock()
		defer box.mu.Unlock()
		var resent, other int
		for _, m := range box.got[1:] {
			switch {
			case m.ID == first[0]:
				resent++
				if !strings.Contains(m.Text, "3 pages") {
					t.Errorf("the re-sent digest is not the same set:\n%s", m.Text)
				}
			default:
				other++
				if strings.Contains(m.Text, "/p/0") || strings.Contains(m.Text, "/p/1") || strings.Contains(m.Text, "/p/2") {
					t.Errorf("a crossing of the first digest went out in another message %s:\n%s", m.ID, m.Text)
				}
			}
		}
		if resent != 1 || other != 1 {
			t.Fatalf("after the restart: %d re-sends of the digest, %d other messages; want 1 and 1 (the two new crossings)", resent, other)
		}
		if st := e.states(); st["sent"] != 5 || len(st) != 1 {
			t.Fatalf("states %v, want 5 sent", st)
		}
	})
}

// A template that fails on one crossing's data marks that crossing failed,
// with the reason; the others are sent and the sweep finishes (watermark
// recorded, no error).
func TestTemplateErrorFailsOnlyItsCrossing(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/boom", 10, time.Now(), "Mozilla/5.0")
		e.hits("www.example.com", "/p/fine", 10, time.Now(), "Mozilla/5.0")
		yaml := lifetimeYAML + `    subject: '{{if eq .Path "/p/boom"}}{{.Nope}}{{end}}hot: {{.Path}}'` + "\n"
		store := alerts.NewStore(e.store, e.db)
		box := &mailbox{}
		sw := alerts.NewSweeper(store, e.rules(yaml), e.localClaims(), box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t"})
		res, err := sw.Sweep(context.Background())
		if err != nil {
			t.Fatalf("the sweep failed on one crossing's template: %v", err)
		}
		if res.Sent != 1 || res.Failed != 1 || len(box.ids()) != 1 {
			t.Fatalf("sent %d, failed %d, %d messages; want 1, 1, 1", res.Sent, res.Failed, len(box.ids()))
		}
		if _, ok, err := store.Watermark(context.Background()); err != nil || !ok {
			t.Fatalf("no watermark recorded (%v)", err)
		}
		var reason string
		e.store.Select(context.Background(), "SELECT argMax(error, version) FROM "+e.db+".crossings WHERE path = '/p/boom'", nil,
			func(scan func(...any) error) error { return scan(&reason) })
		if !strings.Contains(reason, "Nope") {
			t.Fatalf("the failed crossing's recorded reason %q does not name the template's error", reason)
		}
	})
}

// A watermark in the future (written by a sweeper whose clock ran ahead)
// does not hide new hits.
func TestFutureWatermarkDoesNotHideHits(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		store := alerts.NewStore(e.store, e.db)
		if err := store.Finish(context.Background(), time.Now().Add(time.Hour), "ahead", 0, 0); err != nil {
			t.Fatal(err)
		}
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		box := &mailbox{}
		sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t"})
		res, err := sw.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Detected) != 1 || res.Sent != 1 {
			t.Fatalf("detected %d, sent %d after a future watermark; want 1, 1", len(res.Detected), res.Sent)
		}
	})
}

// A server that accepts the message and answers after smtp.timeout: the
// outcome is unknown, so the crossing is sent once more with the same
// Message-ID, and no more (RFC 5321 gives the server 10 minutes for that
// reply; retrying it as unsent delivered it up to five times).
func TestLateReplyAfterDataSentOnceMore(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	srv := testenv.StartFaultySMTP(t)
	for _, then := range []string{"ok", "late 3"} {
		t.Run("then "+then, func(t *testing.T) {
			e := newEnv(t, testenv.ServerDatabase(ch))
			e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
			before := len(srv.Messages(t))
			store := alerts.NewStore(e.store, e.db)
			var ahead time.Duration
			clock := aheadClock(store, &ahead)
			sender := alerts.NewSMTP(alerts.SMTPOptions{Host: "127.0.0.1", Port: srv.Port(), TLS: "none", Timeout: time.Second})
			sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), sender,
				alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t", Clock: clock})
			srv.Set(t, "late 3")
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := e.states(); st["unconfirmed"] != 1 {
				t.Fatalf("states %v after a late reply, want unconfirmed", st)
			}
			srv.Set(t, then)
			for i := range 6 {
				ahead = time.Duration(i+1) * time.Hour // every retry due
				if _, err := sw.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			msgs := srv.Messages(t)[before:]
			if len(msgs) != 2 || msgs[0].Header.Get("Message-Id") != msgs[1].Header.Get("Message-Id") {
				t.Fatalf("%d messages delivered, want 2 with one Message-ID", len(msgs))
			}
			want := map[string]string{"ok": "sent", "late 3": "failed"}[then]
			if st := e.states(); st[want] != 1 || len(st) != 1 {
				t.Fatalf("states %v, want %s", st, want)
			}
		})
	}
}

// A rule removed from this replica's config: its pending crossings are left
// pending (a replica still on the old config may send them), counted and
// never failed; the replica with the rule sends them.
func TestRemovedRuleLeavesItsCrossingsPending(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		store := alerts.NewStore(e.store, e.db)
		box := &mailbox{}
		crashing(t, func(fault func(string)) *alerts.Sweeper {
			return alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box,
				alerts.Options{From: "hitcount <alerts@example.com>", Owner: "old", Fault: fault})
		}, "recorded")
		reg := prometheus.NewRegistry()
		m := alerts.NewMetrics(reg)
		other := strings.NewReplacer("name: ten", "name: other", "/p/*", "/q/*").Replace(lifetimeYAML)
		renamed := alerts.NewSweeper(store, e.rules(other), e.localClaims(), box,
			alerts.Options{From: "hitcount <alerts@example.com>", Owner: "new", Metrics: m})
		if _, err := renamed.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(m.Orphaned); n != 1 {
			t.Fatalf("hitcount_sweeper_crossings_orphaned = %v, want 1", n)
		}
		if st := e.states(); st["detected"] != 1 || len(box.ids()) != 0 {
			t.Fatalf("states %v, %d sent by the replica without the rule; want it left detected", st, len(box.ids()))
		}
		old := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), box, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "old"})
		if _, err := old.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := e.states(); st["sent"] != 1 || len(box.ids()) != 1 {
			t.Fatalf("states %v, %d messages; want it sent once by the replica with the rule", st, len(box.ids()))
		}
	})
}

// lapsing is a Claimer whose claims all read as lost once lapse is set (a
// replica paused past its lease while it sent).
type lapsing struct {
	alerts.Claimer
	lapse bool
}

func (l *lapsing) Valid(ctx context.Context, key string, c alerts.Claim) (bool, error) {
	if l.lapse {
		return false, nil
	}
	return l.Claimer.Valid(ctx, key, c)
}

// A re-send that gets no reply either is recorded (failed: it may have
// arrived) even when the claim lapsed during the send; left claimed, the
// crossing went out a third time (the sweeper chaos run, seed 20261125).
func TestUnansweredResendRecordedWithoutItsClaim(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		store := alerts.NewStore(e.store, e.db)
		var ahead time.Duration
		clock := aheadClock(store, &ahead)
		claims := &lapsing{Claimer: e.localClaims()}
		var sends int
		unanswered := alerts.SenderFunc(func(context.Context, *alerts.Message) (bool, error) {
			sends++
			if sends == 2 {
				claims.lapse = true
			}
			return true, fmt.Errorf("smtp: %w: read: i/o timeout", alerts.ErrMaybeSent)
		})
		sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), claims, unanswered, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t", Clock: clock})
		for i := range 4 {
			ahead = time.Duration(i) * time.Hour
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			claims.lapse = false
		}
		if sends != 2 {
			t.Fatalf("%d sends without a reply, want 2 (one re-send)", sends)
		}
		if st := e.states(); st["failed"] != 1 || len(st) != 1 {
			t.Fatalf("states %v, want failed", st)
		}
	})
}

// The one re-send after no reply is in flight when its sender dies (the
// server stored it): the crossing is not sent a third time; it fails, "it
// may have arrived" (the sweeper chaos run, CHAOS_SEED=11: no reply, a
// re-send killed, a 451, then a third copy).
func TestResendAfterNoReplyKilledIsTheLast(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		e := newEnv(t, d)
		e.hits("www.example.com", "/p/1", 10, time.Now(), "Mozilla/5.0")
		store := alerts.NewStore(e.store, e.db)
		var ahead time.Duration
		clock := aheadClock(store, &ahead)
		box := &mailbox{}
		var calls int
		sender := alerts.SenderFunc(func(ctx context.Context, m *alerts.Message) (bool, error) {
			calls++
			box.Send(ctx, m) // the server stores every one
			switch calls {
			case 1:
				return true, fmt.Errorf("smtp: %w: read: connection reset", alerts.ErrMaybeSent)
			case 2:
				runtime.Goexit() // killed while waiting for the reply
			}
			return true, errors.New("smtp: 451 4.3.0 try again later")
		})
		sweep := func() {
			done := make(chan struct{})
			go func() {
				defer close(done)
				sw := alerts.NewSweeper(store, e.rules(lifetimeYAML), e.localClaims(), sender, alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t", Clock: clock})
				sw.Sweep(context.Background())
			}()
			<-done
			ahead += time.Hour
		}
		for range 5 {
			sweep()
		}
		if ids := box.ids(); len(ids) != 2 || ids[0] != ids[1] {
			t.Fatalf("copies %v, want 2 with one Message-ID", ids)
		}
		if st := e.states(); st["failed"] != 1 || len(st) != 1 {
			t.Fatalf("states %v, want failed", st)
		}
	})
}
