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

// Rules with count: visitors under racing replicas (issue 19), in the
// shape of TestBelowRacingReplicas: on each tick three `sweeper -once`
// start together, with keeper claims on ClickHouse 18.16 and ZooKeeper, or
// local claims on one state directory. A threshold on visitors crosses in
// three hours of each of ten pages (6 visitors, 5 needed); a below rule on
// visitors fires for each complete hour of the last day of ten other pages
// (one visitor making 5 hits an hour for three days, 2 needed). Every crossing recorded
// is sent and arrives exactly once; later ticks send nothing more.
func TestVisitorsRacingReplicas(t *testing.T) {
	t.Parallel()
	for _, claims := range []string{"keeper", "local"} {
		t.Run(claims, func(t *testing.T) { testVisitorsRacingReplicas(t, claims) })
	}
}

func testVisitorsRacingReplicas(t *testing.T, claims string) {
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
	b := sink.NewBatch(pages * (3*6*2 + 72*5))
	b.Reset(raceSite, 4343)
	var off int64
	add := func(path string, at time.Time, client string, n int) {
		hit := parser.Hit{Unix: at.Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200, UserAgent: []byte("Mozilla/5.0"), RemoteAddr: []byte(client)}
		for range n {
			b.Add(&hit, off, off+100)
			off += 100
		}
	}
	for i := range pages {
		for k := 1; k <= 3; k++ {
			for v := range 6 {
				add(fmt.Sprintf("/v/%02d", i), hour.Add(-time.Duration(k)*time.Hour+time.Duration(v)*time.Minute), fmt.Sprintf("198.51.100.%d", v+1), 2)
			}
		}
		// Three days: not a page born within the lookback, whose first
		// window (partial) is not judged.
		for k := 1; k <= 72; k++ {
			add(fmt.Sprintf("/b/%02d", i), hour.Add(-time.Duration(k)*time.Hour+7*time.Minute), "203.0.113.1", 5)
		}
	}
	if err := h.store.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{uint64(1), raceSite, "c1", "web-1", "/var/log/nginx/access.log", now.Add(-80 * time.Hour), now, uint8(0), now}}
	if err := h.store.InsertRows(ctx, h.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("clickhouse: {addr: [%q], database: %s}", ch.Addr(), h.db)
	reps := h.kindReplicas(claims, func(name, claims, stateDir, extra string) string {
		return visitorsRaceConfig(t, h, name, store, claims, stateDir, extra)
	})
	h.onceTicks(reps, claims, 3)

	states, _, bad := h.exactlyOnce()
	byRule := h.crossingsBy("rule")
	t.Logf("%s: %d crossings (%v), %d messages, %d left sent", claims, len(states), byRule, len(h.smtp.Messages(t)), len(h.left))
	if len(bad) > 0 || len(h.left) > 0 {
		t.Errorf("not exactly once: %d bad, e.g. %v; %d seen leaving sent", len(bad), bad[:min(len(bad), 3)], len(h.left))
	}
	// 22 complete hours in the first sweep.lateness of an hour, else 23.
	if byRule["visitors-hot"] != pages*3 || byRule["visitors-low"] < pages*22 || byRule["visitors-low"] > pages*23 {
		t.Errorf("crossings by rule %v, want %d visitors-hot and %d to %d visitors-low", byRule, pages*3, pages*22, pages*23)
	}
}

// visitorsRaceConfig writes a sweeper config with a threshold and a below
// rule, both counting visitors.
func visitorsRaceConfig(t *testing.T, h *raceHarness, name, store, claims, stateDir, extra string) string {
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
  - {name: visitors-hot, match: {site: %[2]s, path: "/v/*"}, count: visitors, threshold: 5, window: 1h, to: [ops@example.com]}
  - {name: visitors-low, match: {site: %[2]s, path: "/b/*"}, count: visitors, below: 2, window: 1h, no_data_after: 0, to: [ops@example.com]}
`, store, raceSite, filepath.Join(h.dir, stateDir), claims, extra, h.smtp.Port())
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
