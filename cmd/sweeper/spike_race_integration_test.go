package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Drop and spike rules under racing replicas (issue 19), in the shape of
// below_race_integration_test.go: on each tick three `sweeper -once` start
// together, with keeper claims on ClickHouse 18.16 and ZooKeeper, or local
// claims on one state directory. Ten pages of a glob had 4 hits an hour for
// nine days until 30 hours ago and none since: every complete hour of the
// last day is a drop for each (a baseline of 4, the median of the same hour
// on the previous 7 days); one page had a burst of 100 hits 3 hours ago:
// one spike. Every crossing recorded is sent, and arrives exactly once.
func TestSpikeDropRacingReplicas(t *testing.T) {
	t.Parallel()
	for _, claims := range []string{"keeper", "local"} {
		t.Run(claims, func(t *testing.T) { testSpikeDropRacingReplicas(t, claims) })
	}
}

func testSpikeDropRacingReplicas(t *testing.T, claims string) {
	h := newRaceHarness(t)
	ch := testenv.ClickHouse(t)
	h.serverStore(ch)
	ctx := context.Background()
	var now time.Time
	if err := h.store.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
		t.Fatal(err)
	}
	const pages = 10
	hour := now.Truncate(time.Hour)
	b := sink.NewBatch(pages * 10 * 24 * 4)
	b.Reset(raceSite, 4242)
	var off int64
	add := func(path string, at time.Time, n int) {
		hit := parser.Hit{Unix: at.Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200, UserAgent: []byte("Mozilla/5.0")}
		for range n {
			b.Add(&hit, off, off+100)
			off += 100
		}
	}
	for i := range pages {
		for at := hour.Add(-10 * 24 * time.Hour); at.Before(hour.Add(-30 * time.Hour)); at = at.Add(time.Hour) {
			add(fmt.Sprintf("/d/%02d", i), at.Add(5*time.Minute), 4)
		}
	}
	for at := hour.Add(-10 * 24 * time.Hour); at.Before(hour); at = at.Add(time.Hour) {
		n := 4
		if at.Equal(hour.Add(-3 * time.Hour)) {
			n = 100
		}
		add("/s/burst", at.Add(5*time.Minute), n)
	}
	if err := h.store.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{uint64(1), raceSite, "c1", "web-1", "/var/log/nginx/access.log", now.Add(-11 * 24 * time.Hour), now, uint8(0), now}}
	if err := h.store.InsertRows(ctx, h.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("clickhouse: {addr: [%q], database: %s}", ch.Addr(), h.db)
	reps := h.kindReplicas(claims, func(name, claims, stateDir, extra string) string {
		return spikeRaceConfig(t, h, name, store, claims, stateDir, extra)
	})
	h.onceTicks(reps, claims, 3)

	states, _, bad := h.exactlyOnce()
	kinds := h.crossingsBy("kind")
	t.Logf("%s: %d crossings (%v), %d messages, %d left sent", claims, len(states), kinds, len(h.smtp.Messages(t)), len(h.left))
	if len(bad) > 0 || len(h.left) > 0 {
		t.Errorf("not exactly once: %d bad, e.g. %v; %d seen leaving sent", len(bad), bad[:min(len(bad), 3)], len(h.left))
	}
	// 23 hours of the last day, or 22 in the first lateness of an hour.
	if kinds["spike"] != 1 || kinds["drop"] < pages*22 || kinds["drop"] > pages*23 {
		t.Errorf("crossings by kind %v, want one spike and %d to %d drops", kinds, pages*22, pages*23)
	}
}

// spikeRaceConfig writes a sweeper config with a drop and a spike rule on
// the race site's globs.
func spikeRaceConfig(t *testing.T, h *raceHarness, name, store, claims, stateDir, extra string) string {
	t.Helper()
	p := filepath.Join(h.dir, name+".yaml")
	data := fmt.Sprintf(`%s
sources: [{path: /var/log/x.log, site: %s}]
http: {listen: ""}
state_dir: %s
sweep: {every: 1m, claims: %s, digest_after: 1000000}
%s
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "hitcount <alerts@example.com>", timeout: 10s}
rules:
  - {name: dropped, match: {site: %s, path: "/d/*"}, drop: {factor: 2, min_baseline: 2}, window: 1h, no_data_after: 0, to: [ops@example.com]}
  - {name: burst, match: {site: %s, path: "/s/*"}, spike: {factor: 3, min: 50}, window: 1h, no_data_after: 0, to: [ops@example.com]}
`, store, raceSite, filepath.Join(h.dir, stateDir), claims, extra, h.smtp.Port(), raceSite, raceSite)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
