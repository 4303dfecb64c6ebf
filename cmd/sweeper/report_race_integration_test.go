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

// Report rules under racing replicas (issue 19): on each tick three
// `sweeper -once` start together, with keeper claims on ClickHouse 18.16
// and ZooKeeper, or local claims on one state directory. The weekly and
// the monthly report of the last ended period are each recorded once and
// arrive exactly once, under their crossing's Message-ID; later ticks send
// nothing more.
func TestReportRacingReplicas(t *testing.T) {
	t.Parallel()
	for _, claims := range []string{"keeper", "local"} {
		t.Run(claims, func(t *testing.T) { testReportRacingReplicas(t, claims) })
	}
}

func testReportRacingReplicas(t *testing.T, claims string) {
	h := newRaceHarness(t)
	ch := testenv.ClickHouse(t)
	h.serverStore(ch)
	ctx := context.Background()
	var now time.Time
	if err := h.store.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
		t.Fatal(err)
	}
	// Hits over the last 70 days, a page a day: every last ended week and
	// month has some. The site's collector is caught up now.
	b := sink.NewBatch(70)
	b.Reset(raceSite, 4343)
	var off int64
	for d := range 70 {
		hit := parser.Hit{Unix: now.Add(-time.Duration(d) * 24 * time.Hour).Unix(), Method: []byte("GET"), Path: fmt.Appendf(nil, "/r/%02d", d%7), Status: 200, UserAgent: []byte("Mozilla/5.0")}
		b.Add(&hit, off, off+100)
		off += 100
	}
	if err := h.store.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{uint64(1), raceSite, "c1", "web-1", "/var/log/nginx/access.log", now.Add(-90 * 24 * time.Hour), now, uint8(0), now}}
	if err := h.store.InsertRows(ctx, h.db+".source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	store := fmt.Sprintf("clickhouse: {addr: [%q], database: %s}", ch.Addr(), h.db)
	reps := h.kindReplicas(claims, func(name, claims, stateDir, extra string) string {
		return reportRaceConfig(t, h, name, store, claims, stateDir, extra)
	})
	h.onceTicks(reps, claims, 3)

	states, _, bad := h.exactlyOnce()
	if len(states) != 2 {
		t.Errorf("%d crossings recorded, want the weekly and the monthly report: %v", len(states), states)
	}
	for _, b := range bad {
		t.Errorf("report %s; want sent, once", b)
	}
	ids := map[string]string{}
	for _, m := range h.smtp.Messages(t) {
		ids[m.Header.Get("X-Hitcount-Crossing")] = m.Header.Get("Message-Id")
	}
	for k := range states {
		if want := "<hitcount." + k + "@example.com>"; ids[k] != want {
			t.Errorf("report %s: Message-ID %s, want %s", k, ids[k], want)
		}
	}
	if len(h.left) > 0 {
		t.Errorf("%d seen leaving sent", len(h.left))
	}
}

// reportRaceConfig writes a sweeper config with a weekly and a monthly
// report of the race site.
func reportRaceConfig(t *testing.T, h *raceHarness, name, store, claims, stateDir, extra string) string {
	t.Helper()
	p := filepath.Join(h.dir, name+".yaml")
	data := fmt.Sprintf(`%s
sources: [{path: /var/log/x.log, site: %s}]
http: {listen: ""}
state_dir: %s
sweep: {every: 1m, claims: %s}
%s
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "hitcount <alerts@example.com>", timeout: 10s}
rules:
  - {name: weekly, match: {site: %s}, report: weekly, timezone: Europe/Berlin, to: [boss@example.com]}
  - {name: monthly, match: {site: %s, path: "/r/*"}, report: monthly, timezone: Europe/Berlin, to: [boss@example.com]}
`, store, raceSite, filepath.Join(h.dir, stateDir), claims, extra, h.smtp.Port(), raceSite, raceSite)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
