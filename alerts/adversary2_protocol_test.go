package alerts_test

// Second adversarial pass (after the fixes of adversary_protocol_test.go).
// Same helpers (scriptSender, sweeperKit, checkCopies). Each failed
// before its fix.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
)

// A1. A digest that may have gone out is re-sent in pieces under its one
// Message-ID when its crossings are not all due at once: the crossings of
// one digest can carry different attempts counts (one had a 451 alone
// before joining the digest), a 4xx on the re-send writes unconfirmed(n+1)
// for each, and retryAfter(n+1) differs; plan puts in again[D] only the
// rows due now, so D goes out with some of them, and later D again with
// the rest. The first digest's sender died after writing its claimed rows
// and before the server had anything (no copy of D ever arrived), so the
// receiver's first D lacks the late crossing, and a receiver dropping
// copies by Message-ID (as the README invites) never sees it: lost.
//
// Mechanism: plan filters by due() row by row before grouping by MsgID,
// and deliver sends whatever subset of a maybe-gone digest it holds.
func TestAdversary2DigestResentInPiecesByBackoff(t *testing.T) {
	e := advEnv(t)
	k := newKit(t, e, 1)
	srv := &scriptSender{}
	// /p/0 crosses alone and meets a 451: detected(1).
	k.page(0)
	srv.set(tempFail)
	if _, err := k.sweeper(srv, nil, nil).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// An hour later (its retry due) two more pages cross: the three make
	// one digest D; its sender dies after writing the claimed rows,
	// before sending (nothing arrived).
	k.ahead = time.Hour
	k.page(1)
	k.page(2)
	crashing(t, func(f func(string)) *alerts.Sweeper { return k.sweeper(srv, nil, f) }, "claimed")
	// The re-send of D meets a 451: /p/0 -> unconfirmed(2), the others
	// unconfirmed(1): due after 60 s and 30 s.
	srv.set(tempFail)
	sw := k.sweeper(srv, nil, nil)
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.ahead += 45 * time.Second // /p/1 and /p/2 due, /p/0 not yet
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.settle(sw)
	msgs := srv.messages()
	if bad := checkCopies(msgs, 2); len(bad) > 0 {
		t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
	}
}

// racingClaims is replica R2's claimer; R3 shares the claims. When R2
// comes to claim the key of page `at` (after holding the digest's earlier
// keys), R3 runs its scheduled sweep: it cannot claim what R2 holds, claims
// the rest, and sends that.
type racingClaims struct {
	alerts.Claimer
	store *alerts.Store
	at    string
	other func()
	done  bool
	keys  map[string]string // key -> path
}

func (r *racingClaims) Claim(ctx context.Context, key string, lease time.Duration) (alerts.Claim, bool, error) {
	if !r.done {
		if r.keys == nil {
			r.keys = map[string]string{}
			pending, err := r.store.Pending(ctx)
			if err != nil {
				return alerts.Claim{}, false, err
			}
			for _, p := range pending {
				r.keys[p.Key()] = p.Path
			}
		}
		if r.keys[key] == r.at {
			r.done = true
			r.other()
		}
	}
	return r.Claimer.Claim(ctx, key, lease)
}

// A2. Two replicas re-send one maybe-gone digest D (its sender died before
// the server had it) and split its crossings between them by their claims:
// R2 holds the first two, R3 gets the third; each sends its part as D.
// The receiver's first D lacks some crossings and drops the other part as
// a duplicate: lost (no fault besides the one death the README allows a
// copy for; the replicas only raced, which they are said to do safely).
//
// Mechanism: deliver sends a maybe-gone digest with whatever subset of it
// it could claim; a part of a digest is never held back for the whole.
func TestAdversary2DigestResentSplitByRacingClaims(t *testing.T) {
	e := advEnv(t)
	k := newKit(t, e, 1)
	srv := &scriptSender{}
	for i := range 3 {
		k.page(i)
	}
	crashing(t, func(f func(string)) *alerts.Sweeper { return k.sweeper(srv, nil, f) }, "claimed")
	shared := e.localClaims()
	r3 := k.sweeper(srv, shared, nil)
	var r3err error
	pending, err := k.store.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// R2 claims in pending order: R3 runs when R2 reaches the last one.
	last := pending[len(pending)-1].Path
	rc := &racingClaims{Claimer: shared, store: k.store, at: last, other: func() {
		_, r3err = r3.Sweep(context.Background())
	}}
	if _, err := k.sweeper(srv, rc, nil).Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r3err != nil {
		t.Fatal(r3err)
	}
	k.settle(k.sweeper(srv, nil, nil))
	msgs := srv.messages()
	if bad := checkCopies(msgs, 2); len(bad) > 0 {
		t.Fatalf("%s\nmessages stored:\n%s", strings.Join(bad, "\n"), describe(msgs))
	}
}

// appliedThenFailed is the store applying the write of the claimed rows and
// the client still getting an error (a SIGTERM cancelling the insert's
// context after the server took it, a timeout on the reply, a connection
// reset after the insert): once, when armed.
type appliedThenFailed struct {
	alerts.DB
	mu    sync.Mutex
	armed bool
}

func (f *appliedThenFailed) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	f.mu.Lock()
	fail := f.armed && strings.HasSuffix(table, ".crossings") && len(rows) > 0 && rows[0][7] == alerts.StateClaimed
	if fail {
		f.armed = false
	}
	f.mu.Unlock()
	if err := f.DB.InsertRows(ctx, table, columns, rows); err != nil {
		return err
	}
	if fail {
		return errors.New("clickhouse: context canceled (injected after the insert was applied)")
	}
	return nil
}

// A3. The claimed rows are written (the server applied the insert) but the
// write reports an error (SIGTERM cancels it, a reply lost): send returns
// before sending anything. The next pass reads claimed, i.e. "may have gone
// out", although nothing was sent:
//   - fresh: its first real send is treated as the re-send; no reply on it
//     fails the crossing at once ("sent again without a reply") where the
//     README promises exactly one re-send after no reply (1 copy, failed);
//   - after no reply (unconfirmed, marked): the claimed row carries the
//     no-reply mark, resendLost fails it ("its re-send's sender stopped
//     mid-send") and the one re-send never goes out (1 copy, failed).
//
// Mechanism: a claimed row is the "may have gone" signal, but it is written
// before the send and an error writing it is not told apart from a send
// that started. (Same family as the SendBudget skip the working tree now
// checks before writing the claimed rows.)
func TestAdversary2ClaimedWriteErrorIsAFalseMaybe(t *testing.T) {
	for _, variant := range []string{"fresh, then no reply", "no reply, then the re-send's claimed write"} {
		t.Run(variant, func(t *testing.T) {
			e := advEnv(t)
			k := newKit(t, e, 10)
			db := &appliedThenFailed{DB: e.store}
			k.store = alerts.NewStore(db, e.db)
			srv := &scriptSender{}
			k.page(0)
			sw := k.sweeper(srv, nil, nil)
			if variant == "fresh, then no reply" {
				db.armed = true
				if _, err := sw.Sweep(context.Background()); err == nil {
					t.Fatal("the injected error was not seen")
				}
				srv.set(acceptLost)
			} else {
				srv.set(acceptLost)
				if _, err := sw.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
				k.ahead = time.Hour
				db.armed = true
				if _, err := sw.Sweep(context.Background()); err == nil {
					t.Fatal("the injected error was not seen")
				}
			}
			for range 6 {
				k.ahead += 2 * time.Hour
				if _, err := sw.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			msgs := srv.messages()
			st := e.states()
			if len(msgs) != 2 {
				t.Fatalf("%d copies, states %v: a crossing whose send got no reply gets exactly one re-send, and none was made:\n%s", len(msgs), st, describe(msgs))
			}
		})
	}
}
