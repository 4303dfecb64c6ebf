package alerts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/testenv"
)

// openKeeperMap opens the embedded engine (ClickHouse 26) with a <zookeeper>
// config and KeeperMap claims in it.
func openKeeperMap(ctx context.Context, dir, zkAddr, owner string) (*alerts.KeeperMapClaims, *chdb.Engine, error) {
	e, err := openKeeperMapEngine(ctx, dir, zkAddr)
	if err != nil {
		return nil, nil, err
	}
	k, err := alerts.OpenKeeperMapClaims(ctx, alerts.EngineSQL{Engine: e}, "hitcount", "/hitcount", owner, time.Now)
	return k, e, err
}

// openKeeperMapEngine opens the embedded engine with a <zookeeper> config
// and the database hitcount.
func openKeeperMapEngine(ctx context.Context, dir, zkAddr string) (*chdb.Engine, error) {
	host, port, _ := strings.Cut(zkAddr, ":")
	cfg := filepath.Join(dir, "config.xml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`<clickhouse><zookeeper><node><host>%s</host><port>%s</port></node></zookeeper><keeper_map_path_prefix>/keeper_map_tables</keeper_map_path_prefix></clickhouse>`, host, port)), 0o644)
	e, err := chdb.Open(ctx, chdb.Options{LibPath: testenv.ChdbLibPath(), DataPath: filepath.Join(dir, "data"), ExtraArgs: []string{"--config-file=" + cfg}})
	if err != nil {
		return nil, err
	}
	if err := e.Exec(ctx, "CREATE DATABASE IF NOT EXISTS hitcount"); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// childKeeperMap claims a key in another process and exits without releasing
// it: a holder that crashed.
func childKeeperMap() int {
	ctx := context.Background()
	k, e, err := openKeeperMap(ctx, os.Getenv("HC_DIR"), os.Getenv("HC_ZK"), "child")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	lease, err := time.ParseDuration(os.Getenv("HC_LEASE"))
	if err != nil {
		lease = 3 * time.Second
	}
	c, ok, err := k.Claim(ctx, os.Getenv("HC_KEY"), lease)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%v %d\n", ok, c.Token)
	return 0
}

// KeeperMap claims between two processes sharing a real ZooKeeper: a held key
// cannot be claimed; a crashed holder's claim is taken over after its lease;
// its fencing token is then invalid.
func TestKeeperMapClaims(t *testing.T) {
	t.Parallel()
	testenv.RequireChdb(t)
	testenv.HoldEngine(t) // it opens the engine itself
	zk := testenv.ZooKeeper(t)
	ctx := context.Background()
	child := func(key string, env ...string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), "HITCOUNT_CHILD_KEEPERMAP=1", "HC_DIR="+t.TempDir(), "HC_ZK="+zk.Addr(), "HC_KEY="+key), env...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	// The parent's engine first: the child's lease must outlast only the
	// child's own exit, not the parent's start as well (on a loaded machine
	// the two took most of a 3 s lease).
	k, e, err := openKeeperMap(ctx, t.TempDir(), zk.Addr(), "parent")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// The child claims k1 with a 6 s lease and dies holding it.
	const lease = 6 * time.Second
	got := child("k1", "HC_LEASE="+lease.String())
	claimed := time.Now()
	if !strings.HasPrefix(got, "true ") {
		t.Fatalf("child claim: %q", got)
	}
	var childToken uint64
	fmt.Sscan(strings.TrimPrefix(got, "true "), &childToken)
	if _, ok, err := k.Claim(ctx, "k1", time.Minute); err != nil || ok {
		t.Fatalf("claimed a key held under a live lease: %v %v", ok, err)
	}
	time.Sleep(time.Until(claimed.Add(lease + 500*time.Millisecond))) // the child's lease runs out
	c, ok, err := k.Claim(ctx, "k1", time.Minute)
	if err != nil || !ok {
		t.Fatalf("no takeover after the lease: %v %v", ok, err)
	}
	if v, _ := k.Valid(ctx, "k1", c); !v {
		t.Fatal("the new claim is not valid")
	}
	if v, _ := k.Valid(ctx, "k1", alerts.Claim{Token: childToken, Expires: time.Now().Add(time.Hour)}); v {
		t.Fatal("the dead holder's fencing token is still valid")
	}
	// Held by the parent: the child cannot take it.
	if got := child("k1"); !strings.HasPrefix(got, "false") {
		t.Fatalf("a second process claimed a held key: %q", got)
	}
	if err := k.Release(ctx, "k1", c); err != nil {
		t.Fatal(err)
	}
	if got := child("k1"); !strings.HasPrefix(got, "true") {
		t.Fatalf("a released key could not be claimed: %q", got)
	}
	// Real crossing keys are hex, most starting with a digit; anything that
	// could end the quotes it is written between is refused.
	for i := range 16 {
		key := alerts.Crossing{Rule: "r", Subject: fmt.Sprint("/p", i), WindowStart: time.Unix(0, 0), Threshold: 10}.Key()
		if _, ok, err := k.Claim(ctx, key, time.Minute); err != nil || !ok {
			t.Fatalf("crossing key %s: claimed %v, %v", key, ok, err)
		}
	}
	for _, bad := range []string{"", "a'b", `a\b`, "a b", strings.Repeat("a", 200)} {
		if _, _, err := k.Claim(ctx, bad, time.Minute); err == nil {
			t.Fatalf("key %q accepted", bad)
		}
	}
}

// KeeperMap claims of replicas whose clocks are an hour ahead and an hour
// behind (issue 15): leases are on the ClickHouse server's clock, so neither
// takes the other's live claim, whichever claimed first, and each takes over
// the other's expired one. Claim.Expires is on the claimant's own clock.
// Claimants whose clocks read the same instant get different fencing tokens.
// The replicas share one engine, as sweepers share one server: only their
// own clocks differ.
func TestKeeperMapClaimsSkewedClocks(t *testing.T) {
	t.Parallel()
	testenv.RequireChdb(t)
	testenv.HoldEngine(t) // it opens the engine itself
	zk := testenv.ZooKeeper(t)
	ctx := context.Background()
	e, err := openKeeperMapEngine(ctx, t.TempDir(), zk.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	type replica struct {
		name  string
		clock func() time.Time
		k     *alerts.KeeperMapClaims
	}
	open := func(name string, clock func() time.Time) *replica {
		k, err := alerts.OpenKeeperMapClaims(ctx, alerts.EngineSQL{Engine: e}, "hitcount", "/hitcount", name, clock)
		if err != nil {
			t.Fatal(err)
		}
		return &replica{name, clock, k}
	}
	skewed := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	ahead, behind := open("ahead", skewed(time.Hour)), open("behind", skewed(-time.Hour))
	frozen := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	stopped := func() time.Time { return frozen }
	stopA, stopB := open("stopped-a", stopped), open("stopped-b", stopped)
	pairs := [][2]*replica{{ahead, behind}, {behind, ahead}, {stopA, stopB}}

	// A live claim is refused to the other, whichever clock claimed it.
	for _, p := range pairs {
		first, second := p[0], p[1]
		key := "live-" + first.name
		before := first.clock()
		c, ok, err := first.k.Claim(ctx, key, time.Minute)
		after := first.clock()
		if err != nil || !ok {
			t.Fatalf("%s: claim %s: %v %v", first.name, key, ok, err)
		}
		if c.Expires.Before(before.Add(time.Minute)) || c.Expires.After(after.Add(time.Minute)) {
			t.Errorf("%s: Expires %v, want its own clock + the lease, in [%v, %v]", first.name, c.Expires, before.Add(time.Minute), after.Add(time.Minute))
		}
		if _, ok, err := second.k.Claim(ctx, key, time.Minute); err != nil || ok {
			t.Errorf("%s took the live claim of %s: %v %v", second.name, first.name, ok, err)
		}
		if v, err := first.k.Valid(ctx, key, c); err != nil || !v {
			t.Errorf("%s: its live claim is not valid: %v %v", first.name, v, err)
		}
	}

	// An expired lease is taken over, whichever clock claimed it.
	const short = 2 * time.Second
	held := map[string]alerts.Claim{}
	for _, p := range pairs {
		key := "expired-" + p[0].name
		c, ok, err := p[0].k.Claim(ctx, key, short)
		if err != nil || !ok {
			t.Fatalf("%s: claim %s: %v %v", p[0].name, key, ok, err)
		}
		held[key] = c
	}
	time.Sleep(short + 500*time.Millisecond)
	for _, p := range pairs {
		first, second := p[0], p[1]
		key := "expired-" + first.name
		old := held[key]
		if v, err := first.k.Valid(ctx, key, old); err != nil || v {
			t.Errorf("%s: its expired claim is still valid: %v %v", first.name, v, err)
		}
		c, ok, err := second.k.Claim(ctx, key, time.Minute)
		if err != nil || !ok {
			t.Errorf("%s did not take over the expired claim of %s: %v %v", second.name, first.name, ok, err)
			continue
		}
		if c.Token == old.Token {
			t.Errorf("%s and %s: the claim taken over has the fencing token of the expired one (%d)", first.name, second.name, c.Token)
		}
		if v, err := first.k.Valid(ctx, key, old); err != nil || v {
			t.Errorf("%s: its claim is valid after %s took it over: %v %v", first.name, second.name, v, err)
		}
		if v, err := second.k.Valid(ctx, key, c); err != nil || !v {
			t.Errorf("%s: the claim it took over is not valid: %v %v", second.name, v, err)
		}
	}
}
