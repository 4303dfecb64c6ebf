package alerts_test

// Adversarial reproductions against the sweeper's guarantee (README,
// "Guarantees" and "Running the sweeper"): every crossing is recorded once
// and emailed once; the only duplicate is the one re-send after a fault that
// hid the server's acceptance (the sender died before recording it, or no
// reply came), sent with the same Message-ID (a digest as the same digest),
// never a third time; no crossing is lost.
//
// Each test drives the sweeper in-process on the embedded engine with a
// scripted transport (scriptSender: an SMTP server whose every answer the
// test chooses, keeping what it accepted) and checks the invariant over
// every message the server accepted (checkCopies). Each failed on the
// protocol before its fix and says what it broke.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// advEnv is a fresh database on the embedded engine (one backend keeps the
// reproductions cheap; the protocol is the same on both), or on the backend
// HITCOUNT_ADVERSARY_BACKEND names ("server": ClickHouse 18.16).
func advEnv(t *testing.T) *env {
	t.Helper()
	b := os.Getenv("HITCOUNT_ADVERSARY_BACKEND")
	if b == "" {
		b = "embedded"
	}
	return newEnv(t, testenv.NewDatabase(t, b))
}

// outcome is how the scripted server answers one message.
type outcome int

const (
	accept     outcome = iota // 250: stored, nil
	acceptLost                // stored, then no reply: ErrMaybeSent (late reply, dropped connection)
	tempFail                  // 451 before acceptance: not stored, retryable
)

// scriptSender is an SMTP server whose answers follow a script (then accept
// for ever), keeping every message it stored: the recipients' mailbox.
type scriptSender struct {
	mu     sync.Mutex
	only   string // when set, the script answers only messages carrying this page
	script []outcome
	stored []*alerts.Message
	calls  int
}

func (s *scriptSender) Send(_ context.Context, m *alerts.Message) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	o := accept
	if len(s.script) > 0 && (s.only == "" || contains(pages(m), s.only)) {
		o, s.script = s.script[0], s.script[1:]
	}
	switch o {
	case acceptLost:
		s.stored = append(s.stored, m)
		return true, fmt.Errorf("smtp: %w: read tcp: i/o timeout", alerts.ErrMaybeSent)
	case tempFail:
		return true, errors.New("smtp: 451 4.3.0 try again later")
	}
	s.stored = append(s.stored, m)
	return false, nil
}

func (s *scriptSender) set(script ...outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = script
}

func (s *scriptSender) messages() []*alerts.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*alerts.Message(nil), s.stored...)
}

var pageInText = regexp.MustCompile(`www\.example\.com(/p/\d+) `)

// pages lists the pages a message announces (one, or a digest's).
func pages(m *alerts.Message) []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range pageInText.FindAllStringSubmatch(m.Text, -1) {
		if !seen[g[1]] {
			seen[g[1]] = true
			out = append(out, g[1])
		}
	}
	sort.Strings(out)
	return out
}

// checkCopies checks the guarantee over the messages a server stored:
// every crossing (page) arrives at most maxCopies times, always under one
// Message-ID; and a Message-ID is never reused for a message that carries
// a crossing the first message of that ID did not (a receiver that drops
// the copy by its Message-ID, as the README invites, would never see it).
// It returns the violations, one line each.
func checkCopies(msgs []*alerts.Message, maxCopies int) []string {
	if os.Getenv("HITCOUNT_ADVERSARY_SHOW") != "" {
		fmt.Print(describe(msgs))
	}
	var bad []string
	ids := map[string][]string{}   // page -> Message-IDs of its copies
	first := map[string][]string{} // Message-ID -> pages of its first message
	for i, m := range msgs {
		ps := pages(m)
		if prev, ok := first[m.ID]; ok {
			for _, p := range ps {
				if !contains(prev, p) {
					bad = append(bad, fmt.Sprintf("message %d reuses Message-ID %s (first sent for %v) to carry %s: a receiver dropping duplicates by Message-ID never sees it", i+1, m.ID, prev, p))
				}
			}
		} else {
			first[m.ID] = ps
		}
		for _, p := range ps {
			ids[p] = append(ids[p], m.ID)
		}
	}
	var ps []string
	for p := range ids {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	for _, p := range ps {
		l := ids[p]
		if len(l) > maxCopies {
			bad = append(bad, fmt.Sprintf("%s arrived %d times (at most %d allowed): %v", p, len(l), maxCopies, l))
		}
		for _, id := range l[1:] {
			if id != l[0] {
				bad = append(bad, fmt.Sprintf("%s arrived under different Message-IDs: %v", p, l))
				break
			}
		}
	}
	return bad
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func describe(msgs []*alerts.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "  %d. %s %v\n", i+1, m.ID, pages(m))
	}
	return b.String()
}

// sweeperKit builds sweepers on one store, with a store clock the test can
// move ahead (retries are due by it).
type sweeperKit struct {
	t     *testing.T
	e     *env
	store *alerts.Store
	ahead time.Duration
	opts  alerts.Options
	// optimize merges the crossings table (OPTIMIZE ... FINAL) before each
	// sweep of settle: a merge keeps one row per key, the state.
	optimize bool
}

func (k *sweeperKit) merge() {
	k.t.Helper()
	// The 18.16 driver ends a statement without a result set with EOF.
	err := k.e.store.Select(context.Background(), "OPTIMIZE TABLE "+k.e.db+".crossings FINAL", nil, func(func(...any) error) error { return nil })
	if err != nil && !errors.Is(err, io.EOF) {
		k.t.Fatal(err)
	}
}

func newKit(t *testing.T, e *env, digestAfter int) *sweeperKit {
	k := &sweeperKit{t: t, e: e, store: alerts.NewStore(e.store, e.db)}
	k.opts = alerts.Options{From: "hitcount <alerts@example.com>", Owner: "t", DigestAfter: digestAfter,
		Clock: aheadClock(k.store, &k.ahead)}
	return k
}

// sweeper is a fresh process's sweeper (its own local claims).
func (k *sweeperKit) sweeper(sender alerts.Sender, claims alerts.Claimer, fault func(string)) *alerts.Sweeper {
	o := k.opts
	o.Fault = fault
	if claims == nil {
		claims = k.e.localClaims()
	}
	return alerts.NewSweeper(k.store, k.e.rules(lifetimeYAML), claims, sender, o)
}

// settle sweeps once on the store's clock as it is, then with every retry
// due (the clock moved ahead: only once a watermark exists, or the scan of
// hits_touched would start after the hits) until nothing is pending.
func (k *sweeperKit) settle(sw *alerts.Sweeper) {
	k.t.Helper()
	for i := range 8 {
		if i > 0 {
			k.ahead += 2 * time.Hour
		}
		if k.optimize {
			k.merge()
		}
		if _, err := sw.Sweep(context.Background()); err != nil {
			k.t.Fatal(err)
		}
	}
	if st := k.e.states(); st["detected"]+st["claimed"]+st["unconfirmed"] != 0 {
		k.t.Fatalf("still pending after settling: %v", st)
	}
}

func (k *sweeperKit) page(i int) {
	k.e.hits("www.example.com", fmt.Sprintf("/p/%d", i), 10, time.Now(), "Mozilla/5.0")
}

// 1. A crossing sent alone whose sender died after the server accepted it
// (the documented window) is re-sent inside a new digest, under the
// digest's Message-ID: the copy carries a different Message-ID from the
// first, so the receiving side cannot drop it.
//
// Mechanism: plan sends "again as it was" only rows whose Message-ID is a
// digest's; a claimed (or unconfirmed) row with its own Message-ID joins the
// crossings grouped by recipients, and when more than digest_after wait for
// the same recipients it is cut into a fresh digest whose id is derived from
// the keys (digest: rows[0] is not a digest re-send).
func TestAdversaryResentSingleJoinsNewDigest(t *testing.T) {
	t.Parallel()
	for _, fault := range []string{"killed after acceptance", "no reply after the message"} {
		t.Run(fault, func(t *testing.T) {
			e := advEnv(t)
			k := newKit(t, e, 2)
			srv := &scriptSender{}
			k.page(0)
			if fault == "killed after acceptance" {
				crashing(t, func(f func(string)) *alerts.Sweeper { return k.sweeper(srv, nil, f) }, "sent")
			} else {
				srv.set(acceptLost)
				if _, err := k.sweeper(srv, nil, nil).Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			// Meanwhile three more pages cross for the same recipients
			// (more than digest_after = 2 with the one waiting).
			for i := 1; i <= 3; i++ {
				k.page(i)
			}
			if fault != "killed after acceptance" {
				k.ahead = time.Hour // the unconfirmed re-send is due
			}
			k.settle(k.sweeper(srv, nil, nil))
			msgs := srv.messages()
			if bad := checkCopies(msgs, 2); len(bad) > 0 {
				t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
			}
		})
	}
}

// 2. A digest whose sender died after the server accepted it is re-sent as
// the same digest (TestDigestResentWithItsMessageID); if that re-send meets
// a 4xx, the crossings go back to detected with their own Message-IDs and
// are sent again as single messages (or a new digest): a second copy of
// each under another Message-ID.
//
// Mechanism: deliver treats a claimed row left by a dead sender like a
// fresh claim: its failure branch resets MsgID to the crossing's own
// unless wasUnconfirmed (Error holds ErrMaybeSent), and a dead sender
// never wrote that. The row's claimed state already says "may have gone
// out" (the same gap that lets a claimed row's re-send be unconfirmed and
// sent a third time: test 3).
func TestAdversaryResentDigestTempFailRegroups(t *testing.T) {
	t.Parallel()
	e := advEnv(t)
	k := newKit(t, e, 1)
	srv := &scriptSender{}
	for i := range 3 {
		k.page(i)
	}
	crashing(t, func(f func(string)) *alerts.Sweeper { return k.sweeper(srv, nil, f) }, "sent")
	srv.set(tempFail) // the re-send meets a 451
	sw := k.sweeper(srv, nil, nil)
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another page crosses before the retry: the three regroup with it (the
	// same three alone would make the same digest id by chance: it is a
	// hash of the keys).
	k.page(3)
	k.ahead = time.Hour
	k.settle(sw)
	msgs := srv.messages()
	if bad := checkCopies(msgs, 2); len(bad) > 0 {
		t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
	}
}

// 3. Known from the chaos harness (seeds 2 and 3), here deterministic: a
// sender killed after acceptance leaves claimed(0); the re-send (the one
// allowed duplicate) gets no reply, so it is recorded unconfirmed and sent
// once more: three copies. Also with a 451 between the two (claimed ->
// detected(1) -> no reply -> unconfirmed -> a third copy).
func TestAdversaryKilledThenUnconfirmedThirdCopy(t *testing.T) {
	t.Parallel()
	for name, script := range map[string][]outcome{
		"no reply":           {acceptLost},
		"451, then no reply": {tempFail, acceptLost},
	} {
		t.Run(name, func(t *testing.T) {
			e := advEnv(t)
			k := newKit(t, e, 10)
			srv := &scriptSender{}
			k.page(0)
			crashing(t, func(f func(string)) *alerts.Sweeper { return k.sweeper(srv, nil, f) }, "sent")
			srv.set(script...)
			k.settle(k.sweeper(srv, nil, nil))
			msgs := srv.messages()
			if bad := checkCopies(msgs, 2); len(bad) > 0 {
				t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
			}
		})
	}
}

// failingMark is the store failing once, transiently, on the write that
// records a send's outcome (a ClickHouse restart, a network blip, too many
// parts): the sweeper itself does not die.
type failingMark struct {
	alerts.DB
	mu     sync.Mutex
	failed bool
}

func (f *failingMark) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	f.mu.Lock()
	fail := !f.failed && strings.HasSuffix(table, ".crossings") && len(rows) > 0 && rows[0][7] == alerts.StateSent
	if fail {
		f.failed = true
	}
	f.mu.Unlock()
	if fail {
		return errors.New("clickhouse: connection reset by peer (injected once)")
	}
	return f.DB.InsertRows(ctx, table, columns, rows)
}

// 4. The server accepted the message and the sweeper stays alive, but one
// write of the sent mark fails (a transient store error): the mark is not
// retried, the claim is released, the crossing stays claimed and the next
// sweep sends it again. The README allows a re-send only when the sweeper
// died before recording (or the reply never came); MarkTimeout (30 s) is
// there to record the outcome, yet a single failed insert gives up on it.
func TestAdversaryMarkWriteFailsOnceResends(t *testing.T) {
	t.Parallel()
	e := advEnv(t)
	k := newKit(t, e, 10)
	k.store = alerts.NewStore(&failingMark{DB: e.store}, e.db)
	srv := &scriptSender{}
	k.page(0)
	sw := k.sweeper(srv, nil, nil)
	if _, err := sw.Sweep(context.Background()); err == nil {
		t.Log("the sweep hid the failed mark")
	}
	k.settle(sw)
	if n := len(srv.messages()); n != 1 {
		t.Fatalf("%d messages stored after one failed write of the sent mark (no crash, a reply came), want 1:\n%s", n, describe(srv.messages()))
	}
}

// deadReplica is another replica, R1, racing this one (R2): between R2's
// pending list and its first claim, R1 (whose pending list was older, before
// the last page crossed) claims the crossings of pages, sends them as one
// digest, the server accepts it, and R1 is killed before recording it; its
// claims lapse (keeper session, keepermap lease). What R1 left is exactly
// what deliver writes before sending: claimed rows carrying the digest's
// Message-ID.
type deadReplica struct {
	alerts.Claimer
	store *alerts.Store
	srv   *scriptSender
	pages []string
	done  bool
}

func (d *deadReplica) Claim(ctx context.Context, key string, lease time.Duration) (alerts.Claim, bool, error) {
	if !d.done {
		d.done = true
		if err := d.die(ctx); err != nil {
			return alerts.Claim{}, false, err
		}
	}
	return d.Claimer.Claim(ctx, key, lease)
}

func (d *deadReplica) die(ctx context.Context) error {
	pending, err := d.store.Pending(ctx)
	if err != nil {
		return err
	}
	var rows []alerts.Row
	var keys []string
	for _, r := range pending {
		if contains(d.pages, r.Path) {
			rows = append(rows, r)
			keys = append(keys, r.Key())
		}
	}
	if len(rows) != len(d.pages) {
		return fmt.Errorf("dead replica: %d of %v pending", len(rows), d.pages)
	}
	sort.Strings(keys)
	id := "<hitcount.digest." + alerts.Crossing{Rule: "digest", Subject: strings.Join(keys, ",")}.Key() + "@example.com>"
	var text strings.Builder
	for i := range rows {
		rows[i].State, rows[i].Owner, rows[i].Fencing, rows[i].MsgID, rows[i].Updated = alerts.StateClaimed, "r1", 1, id, time.Now()
		fmt.Fprintf(&text, "  %s%s  %d hits\n", rows[i].Site, rows[i].Path, rows[i].Count)
	}
	if err := d.store.Write(ctx, rows); err != nil {
		return err
	}
	d.srv.mu.Lock()
	d.srv.stored = append(d.srv.stored, &alerts.Message{ID: id, Key: "digest", Text: text.String()})
	d.srv.mu.Unlock()
	return nil
}

// 5. Replicas: R2 groups a digest from a pending list read before R1 claimed
// three of its crossings, sent them as digest D and was killed (the
// documented window: they may be sent once more, as D). R2's claims then
// succeed, the re-read under the claims sees three rows claimed under D and
// one detected, and deliver sends the four as ONE message whose Message-ID
// is rows[0]'s choice: D (then the fourth crossing goes out only inside a
// copy of D, which receivers drop as a duplicate: lost) or a new digest id
// (then the three arrive twice under two Message-IDs).
//
// Mechanism: plan sorts rows into "again" groups by the state of its own
// pending list; deliver re-reads under the claims but keeps the group,
// and digest() picks the id from rows[0] alone.
//
// "new id": the four crossed together; the engine's order of equal ranks
// put the detected one first (observed: a new digest id).
// "reused id": the fourth had a 451 before (detected(1) outranks the
// others' detected(0), so it is listed last): rows[0] is claimed under D,
// and the fourth crossing is sent only inside a copy of D.
func TestAdversaryStaleGroupMixesResentDigest(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{"new id", "reused id"} {
		t.Run(variant, func(t *testing.T) {
			e := advEnv(t)
			k := newKit(t, e, 1)
			srv := &scriptSender{}
			if variant == "reused id" {
				k.page(3)
				srv.set(tempFail)
				if _, err := k.sweeper(srv, nil, nil).Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
				k.ahead = time.Hour // its retry is due
			}
			for i := range 4 {
				if i < 3 || variant == "new id" {
					k.page(i)
				}
			}
			claims := &deadReplica{Claimer: e.localClaims(), store: k.store, srv: srv, pages: []string{"/p/0", "/p/1", "/p/2"}}
			k.settle(k.sweeper(srv, claims, nil))
			msgs := srv.messages()
			if bad := checkCopies(msgs, 2); len(bad) > 0 {
				t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
			}
		})
	}
}

// Held: the chain the README promises for a single crossing, run through
// the scripted server: no reply, a 451 on the re-send, then accepted: two
// copies, one Message-ID, sent; and a second silence fails it. The same
// with the table merged (OPTIMIZE FINAL) before every sweep: the merge
// keeps the state row, which carries what wasUnconfirmed reads.
func TestAdversaryUnconfirmedChainHolds(t *testing.T) {
	t.Parallel()
	for _, merged := range []bool{false, true} {
		t.Run(map[bool]string{false: "unmerged", true: "optimize final"}[merged], func(t *testing.T) {
			testUnconfirmedChain(t, merged)
		})
	}
}

func testUnconfirmedChain(t *testing.T, merged bool) {
	for name, c := range map[string]struct {
		script []outcome
		copies int
		state  string
	}{
		"no reply, 451, accepted":   {[]outcome{acceptLost, tempFail, tempFail}, 2, "sent"},
		"no reply, 451, no reply":   {[]outcome{acceptLost, tempFail, acceptLost}, 2, "failed"},
		"digest: no reply, 451, ok": {[]outcome{acceptLost, tempFail}, 2, "sent"},
	} {
		t.Run(name, func(t *testing.T) {
			e := advEnv(t)
			n, digestAfter := 1, 10
			if strings.HasPrefix(name, "digest") {
				n, digestAfter = 3, 1
			}
			k := newKit(t, e, digestAfter)
			k.optimize = merged
			srv := &scriptSender{only: "/p/0"}
			srv.set(c.script...)
			for i := range n {
				k.page(i)
			}
			sw := k.sweeper(srv, nil, nil)
			if _, err := sw.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			k.page(7) // a newcomer for the same recipients must not join the re-send
			k.settle(sw)
			msgs := srv.messages()
			if bad := checkCopies(msgs, c.copies); len(bad) > 0 {
				t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
			}
			if merged {
				k.merge()
				var rows, keys uint64
				if err := e.store.Select(context.Background(), "SELECT count(), uniqExact(key) FROM "+e.db+".crossings", nil,
					func(scan func(...any) error) error { return scan(&rows, &keys) }); err != nil {
					t.Fatal(err)
				}
				if rows != keys {
					t.Fatalf("OPTIMIZE FINAL left %d rows for %d keys", rows, keys)
				}
			}
			if st := e.states(); st[c.state] < n || st["sent"]+st["failed"] != n+1 {
				t.Fatalf("states %v, want %d %s and the newcomer sent", st, n, c.state)
			}
		})
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	cur time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.cur = c.cur.Add(d)
	c.mu.Unlock()
}

// 6. keepermap-style leases: deliver checks that each claim is still valid
// before sending, but not that the lease has the send's time left, although
// its comment says so ("the claims must still be ours, with time left for
// the send (whose every step smtp.timeout bounds)") and -check-config sizes
// sweep.lease >= 3 x smtp.timeout + 30 s for one delivery from the check on.
// Time spent between the first claim and the check (claiming up to
// max_crossings keys one by one, the re-read, which in cluster mode first
// runs SYSTEM SYNC REPLICA, the claimed write, a slow store) comes off the
// lease: a claim checked with 1 s left is then sent for up to 3 x
// smtp.timeout, and another replica takes the lapsed claim and sends too.
// No pause, no crash, no lost reply: the two replicas each got a 250.
//
// Model: two sweepers share one lease-based claim store (LocalClaims on a
// clock the test moves: a claim is taken over once its lease has passed,
// as in KeeperMapClaims); lease 90 s (smtp.timeout 20 s). R1 spends 89 s
// between its claim and its check, then its send takes 60 s (3 x 20 s,
// within the bound); R2 sweeps while it sends.
func TestAdversaryLeaseCheckedWithTimeLeft(t *testing.T) {
	t.Parallel()
	e := advEnv(t)
	k := newKit(t, e, 10)
	k.page(0)
	clock := &fakeClock{cur: time.Now()}
	claims, err := alerts.OpenLocalClaims(t.TempDir(), clock.now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	srv := &scriptSender{}
	opts := k.opts
	opts.Lease = 90 * time.Second
	// As the service sets it for keepermap claims: 3 x smtp.timeout + 10 s;
	// the claims' Expires and the check read the replica's clock.
	opts.SendBudget = 3*20*time.Second + 10*time.Second
	opts.Now = clock.now
	r2 := alerts.NewSweeper(k.store, e.rules(lifetimeYAML), claims, srv, func() alerts.Options { o := opts; o.Owner = "r2"; return o }())
	var r2err error
	slowSend := alerts.SenderFunc(func(ctx context.Context, m *alerts.Message) (bool, error) {
		clock.advance(30 * time.Second)
		_, r2err = r2.Sweep(ctx) // R2's scheduled sweep, while R1's DATA is in flight
		clock.advance(30 * time.Second)
		return srv.Send(ctx, m)
	})
	o1 := opts
	o1.Owner = "r1"
	slow := true
	o1.Fault = func(step string) {
		if step == "reread" && slow {
			slow = false
			clock.advance(89 * time.Second) // claimed, checked 89 s after the claim
		}
	}
	r1 := alerts.NewSweeper(k.store, e.rules(lifetimeYAML), claims, slowSend, o1)
	if _, err := r1.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.messages()); n != 0 {
		t.Fatalf("sent %d messages on a claim with 1 s of its lease left, want it left for the next pass", n)
	}
	// Nothing says a message may have gone: no claimed row was left.
	if st := e.states(); st["detected"] != 1 || len(st) != 1 {
		t.Fatalf("states %v after a send put off, want detected", st)
	}
	// The next pass claims it afresh, with the whole lease for the send.
	if _, err := r1.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r2err != nil {
		t.Fatal(r2err)
	}
	msgs := srv.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages for one crossing: the claim was checked with 1 s of a 90 s lease left and the send then took 60 s (within 3 x smtp.timeout); R2 took the lapsed claim and sent too:\n%s", len(msgs), describe(msgs))
	}
}
