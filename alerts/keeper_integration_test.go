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
	t.Parallel()
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
// when credentials are added), and on one an attacker prepared with an ACL
// that admits anyone without being scheme world (ip:0.0.0.0/0), forged claims
// and an election node included: the sweeper takes the nodes over, warns,
// and deletes the forgeries. Nodes of another identity fail the start with an
// error naming the node and the way out. Without credentials, the start says
// the nodes are world-writable; neither the password nor its digest is
// logged.
func TestKeeperClaimsAuth(t *testing.T) {
	t.Parallel()
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

	// An attacker without credentials got to the nodes first, with an ACL
	// that is not scheme world but admits anyone all the same
	// (ip:0.0.0.0/0), and left a forged claim (ephemeral, in a session it
	// keeps), a forged persistent claim it alone may read, and an election
	// node that would win every election. The sweeper with credentials takes
	// the nodes over (it has ADMIN through that very ACL), says so, drops
	// the forged nodes, and from then on the attacker is locked out.
	attacker, _, err := zk.Connect([]string{zkSrv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	mallory, _, err := zk.Connect([]string{zkSrv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
	if err != nil {
		t.Fatal(err)
	}
	defer mallory.Close()
	if err := mallory.AddAuth("digest", []byte("mallory:m-pw")); err != nil {
		t.Fatal(err)
	}
	ipOpen := []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "0.0.0.0/0"}}
	malloryACL := zk.DigestACL(zk.PermAll, "mallory", "m-pw")
	mustCreate := func(t *testing.T, c *zk.Conn, p string, flags int32, acl []zk.ACL) string {
		t.Helper()
		got, err := c.Create(p, []byte("session 1"), flags, acl)
		if err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
		return got
	}
	preCreate := func(t *testing.T, c *zk.Conn, root string, acl []zk.ACL) {
		t.Helper()
		mustCreate(t, c, root[:strings.LastIndex(root, "/")], 0, zk.WorldACL(zk.PermAll))
		for _, p := range []string{root, root + "/claims", root + "/leader"} {
			mustCreate(t, c, p, 0, acl)
		}
	}
	exists := func(t *testing.T, p string) bool {
		t.Helper()
		ok, _, err := owner.Exists(p)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// takenOver: the start warned about each of the nodes with its old ACL.
	takenOver := func(t *testing.T, log, root, oldACL string) {
		t.Helper()
		for _, p := range []string{root, root + "/claims", root + "/leader"} {
			found := false
			for _, line := range strings.Split(log, "\n") {
				found = found || strings.Contains(line, "level=WARN") && strings.Contains(line, "path="+p+" ") && strings.Contains(line, oldACL)
			}
			if !found {
				t.Errorf("no warning naming %s and its old ACL %s; log:\n%s", p, oldACL, log)
			}
		}
	}
	t.Run("root pre-created with an open ip ACL", func(t *testing.T) {
		const root = "/squatted/hitcount"
		preCreate(t, attacker, root, ipOpen)
		forged := mustCreate(t, attacker, root+"/claims/k1", zk.FlagEphemeral, ipOpen)
		forgedHidden := mustCreate(t, mallory, root+"/claims/k4", 0, malloryACL)
		election := mustCreate(t, attacker, root+"/leader/n_", zk.FlagEphemeralSequential, ipOpen)
		before := len(logs.String())
		k, err := open(root, user, pass)
		if err != nil {
			t.Fatalf("start on nodes the sweeper can take over: %v", err)
		}
		defer k.Close()
		l := logs.String()[before:]
		takenOver(t, l, root, "ip:0.0.0.0/0:cdrwa")
		for _, p := range []string{forged, forgedHidden, election} {
			if exists(t, p) {
				t.Errorf("%s, made without the credentials, is still there", p)
			}
			if !strings.Contains(l, "path="+p+" ") {
				t.Errorf("the removal of %s is not logged; log:\n%s", p, l)
			}
		}
		if err := k.IsLeader(ctx); err != nil {
			t.Errorf("the only sweeper does not lead: %v", err)
		}
		c, ok, err := k.Claim(ctx, "k1", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim of a crossing the attacker had forged: %v %v", ok, err)
		}
		if err := attacker.Delete(root+"/claims/k1", -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("the attacker's delete of the sweeper's claim: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := attacker.Create(root+"/claims/k2", nil, zk.FlagEphemeral, ipOpen); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("the attacker's forged claim: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := attacker.Set(root+"/claims", []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("the attacker's set of the claims node: %v, want %v", err, zk.ErrNoAuth)
		}
		if _, err := attacker.SetACL(root+"/claims", ipOpen, -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("the attacker's ACL change of the claims node: %v, want %v", err, zk.ErrNoAuth)
		}
		// Another replica starting now leaves the first one's claim and
		// election node alone.
		k2 := mustOpen(t, root, user, pass)
		defer k2.Close()
		if v, err := k.Valid(ctx, "k1", c); err != nil || !v {
			t.Fatalf("the sweeper's claim is no longer valid: %v %v", v, err)
		}
		if err := k.IsLeader(ctx); err != nil {
			t.Errorf("the first sweeper no longer leads after another started: %v", err)
		}
		if err := k.Release(ctx, "k1", c); err != nil {
			t.Fatal(err)
		}
		if err := attacker.Delete(root+"/claims", -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("the attacker's delete of the empty claims node: %v, want %v", err, zk.ErrNoAuth)
		}
		k.Close()
		k2.Close()
		locked(t, root)
	})
	t.Run("world nodes of a run without credentials set to an ip ACL", func(t *testing.T) {
		const root = "/reopened/hitcount"
		anon := mustOpen(t, root, "", "")
		anon.Close()
		for _, p := range []string{root, root + "/claims", root + "/leader"} {
			if _, err := attacker.SetACL(p, ipOpen, -1); err != nil {
				t.Fatal(err)
			}
		}
		before := len(logs.String())
		k := mustOpen(t, root, user, pass)
		k.Close()
		takenOver(t, logs.String()[before:], root, "ip:0.0.0.0/0:cdrwa")
		locked(t, root)
	})
	// Nodes another identity owns cannot be taken over: the start fails and
	// says which node, whose ACL, and what to do.
	refused := func(t *testing.T, root, node string, want ...string) {
		t.Helper()
		k, err := open(root, user, pass)
		if err == nil {
			k.Close()
			t.Fatal("the sweeper started on nodes another identity controls")
		}
		msg := err.Error()
		if !strings.Contains(msg, node+" ") && !strings.Contains(msg, node+":") {
			t.Errorf("the start error does not name %s: %v", node, err)
		}
		for _, w := range append(want, "deleteall "+node) {
			if !strings.Contains(msg, w) {
				t.Errorf("the start error does not say %q: %v", w, err)
			}
		}
		if strings.Contains(msg, pass) {
			t.Errorf("the start error holds the password: %v", err)
		}
	}
	t.Run("root of another digest user", func(t *testing.T) {
		preCreate(t, mallory, "/taken/hitcount", malloryACL)
		refused(t, "/taken/hitcount", "/taken/hitcount", "cannot read")
		// Readable by the world, so its ACL can be named.
		preCreate(t, mallory, "/taken2/hitcount", append(malloryACL[:1:1], zk.ACL{Perms: zk.PermRead, Scheme: "world", ID: "anyone"}))
		refused(t, "/taken2/hitcount", "/taken2/hitcount", "digest:mallory:cdrwa", "world:anyone:r")
		// The sweeper's own user with another password is another identity.
		old, _, err := zk.Connect([]string{zkSrv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if err := old.AddAuth("digest", []byte(user+":old-password")); err != nil {
			t.Fatal(err)
		}
		preCreate(t, old, "/rotated/hitcount", zk.DigestACL(zk.PermAll, user, "old-password"))
		refused(t, "/rotated/hitcount", "/rotated/hitcount")
	})
	t.Run("forged claim that cannot be deleted", func(t *testing.T) {
		const root = "/stuck/hitcount"
		preCreate(t, attacker, root, ipOpen)
		mustCreate(t, mallory, root+"/claims/k9", 0, malloryACL)
		mustCreate(t, mallory, root+"/claims/k9/x", 0, malloryACL)
		refused(t, root, root+"/claims/k9")
		if exists(t, root+"/claims/k9") != true {
			t.Fatal("k9 vanished")
		}
	})

	hash := zk.DigestACL(zk.PermAll, user, pass)[0].ID
	hash = hash[strings.Index(hash, ":")+1:]
	if strings.Contains(logs.String(), pass) || strings.Contains(logs.String(), hash) {
		t.Errorf("the keeper password or its digest is in the log:\n%s", logs.String())
	}
}

type zkTestLogger struct{ t *testing.T }

func (l zkTestLogger) Printf(format string, args ...any) { l.t.Logf(format, args...) }

// Release deletes only the node its own claim created: not a node another
// replica created after this claim's node was gone, and not one that carries
// the same creation zxid because the ensemble started over empty (its zxids
// numbered from the start again), which the creation zxid alone let through.
func TestKeeperClaimsReleaseOwnNodeOnly(t *testing.T) {
	t.Parallel()
	srv := testenv.ZooKeeper(t)
	ctx := context.Background()
	open := func() *alerts.KeeperClaims {
		t.Helper()
		k, err := alerts.OpenKeeperClaims(ctx, alerts.KeeperOptions{Addr: []string{srv.Addr()}, Root: "/hitcount/test", SessionTimeout: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	raw := func() *zk.Conn {
		t.Helper()
		c, _, err := zk.Connect([]string{srv.Addr()}, 4*time.Second, zk.WithLogger(zkTestLogger{t}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// burnTo makes transactions (writes of one node) until the last one
	// has zxid last: the next transaction gets last+1.
	burnTo := func(c *zk.Conn, last int64) {
		t.Helper()
		if _, err := c.Create("/burn", nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
		for {
			st, err := c.Set("/burn", nil, -1)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mzxid == last {
				return
			}
			if st.Mzxid > last {
				t.Fatalf("setup: zxid %#x is past %#x", st.Mzxid, last)
			}
		}
	}

	// The holder's node vanished (deleted by hand) and another replica
	// claimed the crossing: a late Release of the first claim leaves it.
	a, b := open(), open()
	defer b.Close()
	ca, ok, err := a.Claim(ctx, "k1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	op := raw()
	if err := op.Delete("/hitcount/test/claims/k1", -1); err != nil {
		t.Fatal(err)
	}
	cb, ok, err := b.Claim(ctx, "k1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim after the node was deleted: %v %v", ok, err)
	}
	if err := a.Release(ctx, "k1", ca); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Valid(ctx, "k1", cb); err != nil || !v {
		t.Fatalf("a Release of a claim whose node was gone deleted another replica's claim: %v %v", v, err)
	}

	// a claims k2 late in the ensemble's history (zxid X), then the
	// ensemble loses its data and starts empty. Another replica claims k2
	// as the new history's transaction X, so its node has a's token as its
	// creation zxid. a reconnects (a new session: the old one is unknown
	// there) and releases its old claim.
	burnTo(op, 200)
	op.Close()
	b.Close()
	ca2, ok, err := a.Claim(ctx, "k2", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim k2: %v %v", ok, err)
	}
	srv.Wipe()
	b2 := open()
	defer b2.Close()
	op2 := raw()
	defer op2.Close()
	burnTo(op2, int64(ca2.Token)-1)
	cb2, ok, err := b2.Claim(ctx, "k2", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim k2 on the empty ensemble: %v %v", ok, err)
	}
	if cb2.Token != ca2.Token {
		t.Fatalf("setup: the new node's creation zxid is %#x, want a's token %#x", cb2.Token, ca2.Token)
	}
	deadline := time.Now().Add(30 * time.Second)
	for a.Healthy() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("a has no session on the empty ensemble: %v", a.Healthy())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := a.Valid(ctx, "k2", ca2); err != nil || v {
		t.Fatalf("a's claim from before the ensemble started over is valid: %v %v", v, err)
	}
	if err := a.Release(ctx, "k2", ca2); err != nil {
		t.Fatal(err)
	}
	if v, err := b2.Valid(ctx, "k2", cb2); err != nil || !v {
		t.Fatalf("a Release of a claim from before the ensemble started over deleted another replica's claim with the same creation zxid: %v %v", v, err)
	}
	a.Close()
}
