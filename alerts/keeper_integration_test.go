package alerts_test

import (
	"context"
	"testing"
	"time"

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
