package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// Adversarial: "claims: local" promises one sweeper against a database, "one
// elsewhere against the same tables is refused when another owner swept
// within 2 x sweep.every + sweep.lease", and the sweeper's guarantee holds
// "however far apart their clocks are". The check compares sweeps.finished,
// written with the finishing sweeper's own clock (Store.Finish: time.Now()),
// with the starting sweeper's own clock (service.NewSweep: time.Now()). A
// running sweeper whose host clock is an hour behind records its sweeps an
// hour in the past, so a second sweeper on a correct clock does not see it,
// starts, and both send every crossing (local claims live in memory: nothing
// else stops the second copy).
//
// Reproduction: the sweeps row such a sweeper writes (finished = real time -
// 1h, a moment ago by its clock), then `sweeper -once` with local claims from
// another state directory. Expected: refused (exit 1, "another sweeper is
// active"). Observed: it runs (exit 0).
// Fix: date finished by the store (INSERT ... SELECT now()) and compare with
// the store's now(), like every other time decision.
func TestAdversaryLocalSecondSweeperBehindClockRefused(t *testing.T) {
	ch := testenv.ClickHouse(t)
	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "advlocal"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The other sweeper (host B, clock 1 h behind) finished a sweep a
	// second ago, by its clock.
	// Its own clock no longer dates the sweep: Finish reads the store's.
	if err := alerts.NewStore(s, "advlocal").Finish(ctx, time.Now().Add(-time.Hour), "host-b:/var/lib/hitcount", 0, 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: advlocal}
sources: [{path: /var/log/x.log, site: www.example.com}]
state_dir: state
outbox: outbox
sweep: {every: 5m, lease: 2m}
rules:
  - {name: pricing, match: {path: /pricing}, threshold: 100, window: 1h, to: [ops@example.com]}
`, ch.Addr())), 0o644)
	var out, errb bytes.Buffer
	code := run(ctx, []string{"-config", cfg, "-once"}, &out, &errb)
	if code != 1 {
		t.Fatalf("a second local sweeper started (exit %d) while another swept a second ago on a clock 1h behind; want it refused.\nstderr: %s", code, errb.String())
	}
}
