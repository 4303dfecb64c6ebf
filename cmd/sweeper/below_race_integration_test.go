package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Below rules and the no-data notice under racing replicas (issue 19): on
// each tick three `sweeper -once` start together (the harness of
// race_integration_test.go), with keeper claims on ClickHouse 18.16 and
// ZooKeeper, or local claims on one state directory (the runs after the
// first refused). Every below crossing and every notice recorded is sent,
// and arrives exactly once; a second tick sends nothing more.
func TestBelowRacingReplicas(t *testing.T) {
	t.Parallel()
	for _, claims := range []string{"keeper", "local"} {
		t.Run(claims, func(t *testing.T) { testBelowRacingReplicas(t, claims) })
	}
}

func testBelowRacingReplicas(t *testing.T, claims string) {
	h := newRaceHarness(t)
	ch := testenv.ClickHouse(t)
	h.serverStore(ch)
	ctx := context.Background()
	var now time.Time
	if err := h.store.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
		t.Fatal(err)
	}
	// Ten pages of a glob with hits two days ago and none since: every
	// complete hour of the last day is below for each: 23 hours, or 22 in
	// the first sweep.lateness (10m) of an hour, when the last hour has
	// ended but is not yet past its lateness. The site's collector is caught up now, collecting for 30
	// hours. Another site's collector stopped two hours ago: one notice.
	const pages = 10
	b := sink.NewBatch(pages * 3)
	b.Reset(raceSite, 4242)
	var off int64
	for i := range pages {
		hit := parser.Hit{Unix: now.Add(-48 * time.Hour).Unix(), Method: []byte("GET"), Path: fmt.Appendf(nil, "/b/%02d", i), Status: 200, UserAgent: []byte("Mozilla/5.0")}
		for range 3 {
			b.Add(&hit, off, off+100)
			off += 100
		}
	}
	if err := h.store.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{
		{uint64(1), raceSite, "c1", "web-1", "/var/log/nginx/access.log", now.Add(-30 * time.Hour), now, uint8(0), now},
		{uint64(2), "stopped.example.com", "c2", "web-2", "/var/log/nginx/access.log", now.Add(-30 * time.Hour), now.Add(-2 * time.Hour), uint8(1), now.Add(-2 * time.Hour)},
	}
	if err := h.store.InsertRows(ctx, h.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("clickhouse: {addr: [%q], database: %s}", ch.Addr(), h.db)
	reps := h.kindReplicas(claims, func(name, claims, stateDir, extra string) string {
		return belowRaceConfig(t, h, name, store, claims, stateDir, extra)
	})
	h.onceTicks(reps, claims, 3)

	// Every crossing recorded is sent and arrived once; nothing else did.
	states, _, bad := h.exactlyOnce()
	kinds := h.crossingsBy("kind")
	t.Logf("%s: %d crossings (%v), %d messages, %d left sent", claims, len(states), kinds, len(h.smtp.Messages(t)), len(h.left))
	if len(bad) > 0 || len(h.left) > 0 {
		t.Errorf("not exactly once: %d bad, e.g. %v; %d seen leaving sent", len(bad), bad[:min(len(bad), 3)], len(h.left))
	}
	if kinds[alerts.KindNoData] != 1 || kinds["below"] < pages*22 {
		t.Errorf("crossings by kind %v, want one no_data and at least %d below", kinds, pages*22)
	}
}

// belowRaceConfig writes a sweeper config with a below rule on the race
// site's glob and a notice rule on a site whose collector stopped.
func belowRaceConfig(t *testing.T, h *raceHarness, name, store, claims, stateDir, extra string) string {
	t.Helper()
	p := filepath.Join(h.dir, name+".yaml")
	data := fmt.Sprintf(`%s
sources: [{path: /var/log/x.log, site: %s}, {path: /var/log/y.log, site: stopped.example.com}]
http: {listen: ""}
state_dir: %s
sweep: {every: 1m, claims: %s, digest_after: 1000000}
%s
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "hitcount <alerts@example.com>", timeout: 10s}
rules:
  - {name: quiet-pages, match: {site: %s, path: "/b/*"}, below: 1, window: 1h, no_data_after: 0, to: [ops@example.com]}
  - {name: stopped, match: {site: stopped.example.com}, below: 1, window: 1h, no_data_after: 30m, to: [ops@example.com]}
`, store, raceSite, filepath.Join(h.dir, stateDir), claims, extra, h.smtp.Port(), raceSite)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
