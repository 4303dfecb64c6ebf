package alerts_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Two replicas against a real ZooKeeper: a claim is exclusive; the holder's
// death (session end) frees it for the other; a dead holder's claim is no
// longer valid; exactly one replica leads the sweeps.
func TestKeeperClaims(t *testing.T) {
	zk := testenv.ZooKeeper(t)
	ctx := context.Background()
	open := func() *alerts.KeeperClaims {
		k, err := alerts.OpenKeeperClaims(ctx, alerts.KeeperOptions{Addr: []string{zk.Addr()}, Root: "/hitcount/test", SessionTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a, b := open(), open()
	defer b.Close()
	ca, ok, err := a.Claim(ctx, "k1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if _, ok, err := b.Claim(ctx, "k1", time.Minute); err != nil || ok {
		t.Fatalf("second replica claimed a held crossing: %v %v", ok, err)
	}
	if v, err := a.Valid(ctx, "k1", ca); err != nil || !v {
		t.Fatalf("holder's claim not valid: %v %v", v, err)
	}
	leaders := 0
	for _, k := range []*alerts.KeeperClaims{a, b} {
		if k.IsLeader(ctx) == nil {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders, want 1", leaders)
	}
	a.Close() // the holder dies
	cb, ok, err := b.Claim(ctx, "k1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim after the holder died: %v %v", ok, err)
	}
	if cb.Token == ca.Token {
		t.Fatal("a new claim reused the old fencing token")
	}
	if err := b.IsLeader(ctx); err != nil {
		t.Fatalf("the survivor does not lead: %v", err)
	}
	if err := b.Release(ctx, "k1", cb); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.Claim(ctx, "k1", time.Minute); !ok {
		t.Fatal("a released crossing cannot be claimed again")
	}
	// ZooKeeper down: no valid claims, no new ones.
	zk.Stop()
	if v, _ := b.Valid(ctx, "k1", cb); v {
		t.Fatal("a claim is valid while ZooKeeper is down")
	}
	if _, ok, _ := b.Claim(ctx, "k2", time.Minute); ok {
		t.Fatal("claimed while ZooKeeper is down")
	}
}

// syncBuffer is a log destination safe for the zk library's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With keeper credentials, claim nodes belong to that digest user: a session
// without them (anyone who reaches ZooKeeper) cannot delete, overwrite or
// create a claim, or change the paths above them, while two authenticated
// sweepers still exclude each other. This holds on a fresh root and on one a
// deployment without credentials created first (world-writable nodes, closed
// when credentials are added). Without credentials, the start says the nodes
// are world-writable; the password is never logged.
func TestKeeperClaimsAuth(t *testing.T) {
	zkSrv := testenv.ZooKeeper(t)
	ctx := context.Background()
	const user, pass = "sweeper", "s3cret-keeper-pw"
	var logs syncBuffer
	open := func(root, user, pass string) (*alerts.KeeperClaims, error) {
		return alerts.OpenKeeperClaims(ctx, alerts.KeeperOptions{Addr: []string{zkSrv.Addr()}, Root: root, SessionTimeout: 4 * time.Second,
			Username: user, Password: pass, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}
	mustOpen := func(t *testing.T, root, user, pass string) *alerts.KeeperClaims {
		t.Helper()
		k, err := open(root, user, pass)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	conn, _, err := zk.Connect([]string{zkSrv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	owner, _, err := zk.Connect([]string{zkSrv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	if err := owner.AddAuth("digest", []byte(user+":"+pass)); err != nil {
		t.Fatal(err)
	}

	// locked checks a root with two authenticated sweepers against an
	// unauthenticated session.
	locked := func(t *testing.T, root string) {
		before := len(logs.String())
		a, b := mustOpen(t, root, user, pass), mustOpen(t, root, user, pass)
		defer a.Close()
		defer b.Close()
		if l := logs.String()[before:]; strings.Contains(l, "claim nodes are world-writable") {
			t.Errorf("world-writable warning with credentials set; log:\n%s", l)
		}
		ca, ok, err := a.Claim(ctx, "k1", time.Minute)
		if err != nil || !ok {
			t.Fatalf("authenticated claim: %v %v", ok, err)
		}
		if _, ok, err := b.Claim(ctx, "k1", time.Minute); err != nil || ok {
			t.Fatalf("a second authenticated sweeper claimed a held crossing: %v %v", ok, err)
		}
		if err := a.Release(ctx, "k1", ca); err != nil {
			t.Fatal(err)
		}
		cb, ok, err := b.Claim(ctx, "k1", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim after release by the other sweeper: %v %v", ok, err)
		}
		if (a.IsLeader(ctx) == nil) == (b.IsLeader(ctx) == nil) {
			t.Error("not exactly one leader among the authenticated sweepers")
		}

		claim := root + "/claims/k1"
		if err := conn.Delete(claim, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated delete of a claim: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := conn.Set(claim, []byte("forged"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated set of a claim: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := conn.Create(root+"/claims/k2", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated claim: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := conn.Create(root+"/leader/n_", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated election node: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := conn.SetACL(root, zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("unauthenticated ACL change of the root: %v, want %v", err, zk.ErrNoAuth)
		}
		for _, p := range []string{root, root + "/claims", root + "/leader", claim} {
			// getACL needs READ, which the world no longer has: ask as the
			// owner.
			acl, _, err := owner.GetACL(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(acl) != 1 || acl[0].Scheme != "digest" || !strings.HasPrefix(acl[0].ID, user+":") {
				t.Errorf("%s: ACL %+v, want only digest %s", p, acl, user)
			}
		}
		if v, err := b.Valid(ctx, "k1", cb); err != nil || !v {
			t.Fatalf("the claim is no longer valid after the attempts: %v %v", v, err)
		}

		// A wrong password is refused (at open, where it would create a
		// node, or at its first claim), never let in.
		wrong, err := open(root, user, "wrong")
		if err == nil {
			defer wrong.Close()
			_, ok, err = wrong.Claim(ctx, "k3", time.Minute)
			if ok {
				t.Error("claimed with a wrong password")
			}
		}
		if !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("sweeper with a wrong password: %v, want %v", err, zk.ErrNoAuth)
		}
	}

	t.Run("fresh root", func(t *testing.T) { locked(t, "/fresh/hitcount") })
	t.Run("root first created without credentials", func(t *testing.T) {
		const root = "/upgraded/hitcount"
		before := len(logs.String())
		anon := mustOpen(t, root, "", "")
		if l := logs.String()[before:]; !strings.Contains(l, "claim nodes are world-writable") {
			t.Errorf("no warning about world-writable claim nodes without credentials; log:\n%s", l)
		}
		if _, _, err := anon.Claim(ctx, "k0", time.Minute); err != nil {
			t.Fatal(err)
		}
		anon.Close()
		locked(t, root)
	})
	if strings.Contains(logs.String(), pass) {
		t.Errorf("the keeper password is in the log:\n%s", logs.String())
	}
}

type zkTestLogger struct{ t *testing.T }

func (l zkTestLogger) Printf(format string, args ...any) { l.t.Logf(format, args...) }
