package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// gated is a real store whose inserts wait while held: a collector whose
// batches cannot be committed (the store slow, an insert stuck), without a
// fault in the store itself.
type gated struct {
	collector.Inserter
	mu      sync.Mutex
	held    bool
	blocked int
	free    chan struct{}
}

func (g *gated) Insert(ctx context.Context, b *sink.Batch) error {
	g.mu.Lock()
	for g.held {
		g.blocked++
		free := g.free
		g.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
		g.blocked--
	}
	g.mu.Unlock()
	return g.Inserter.Insert(ctx, b)
}

func (g *gated) hold() {
	g.mu.Lock()
	g.held, g.free = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gated) release() {
	g.mu.Lock()
	g.held = false
	close(g.free)
	g.mu.Unlock()
}

func (g *gated) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

// A collector writes in source_owners, per file, when it last had every
// line of it committed (caught_up, the store's clock), and a record per
// site it reads: the sweeper's completeness of below and no_traffic rules
// (issue 19). While a batch cannot be committed, caught_up stays where it
// was; once committed, it moves on. A rotated file read to its end is
// caught up for ever; the site record goes on with the empty new file (no
// source yet). A collector that stops keeps its files' last caught_up.
func TestCaughtUpRecorded(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testCaughtUpRecorded)
}

func testCaughtUpRecorded(t *testing.T, d *testenv.Database) {
	const site = "cu"
	st := d.Open(t)
	ctx := context.Background()
	g := &gated{Inserter: st}
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	if err := os.WriteFile(path, logLines(91, 2000, base), 0o644); err != nil {
		t.Fatal(err)
	}
	storeNow := func() time.Time {
		t.Helper()
		var now time.Time
		if err := st.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
			t.Fatal(err)
		}
		return now
	}
	// caught returns, per source id, the largest caught_up written.
	caught := func() map[uint64]time.Time {
		t.Helper()
		out := map[uint64]time.Time{}
		err := st.Select(ctx, "SELECT source_id, max(caught_up) FROM "+d.Name+".source_owners WHERE site = ? GROUP BY source_id", []any{site},
			func(scan func(...any) error) error {
				var id uint64
				var c time.Time
				if err := scan(&id, &c); err != nil {
					return err
				}
				out[id] = c
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	siteID := sink.SiteRecordID(site)
	fileID := func() uint64 {
		for id := range caught() {
			if id != siteID {
				return id
			}
		}
		return 0
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("after 30s: %s; records %v", what, caught())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	_, stop := runShipping(t, g, ownersTune(path, site, t.TempDir()))
	waitSiteRows(t, &store{store: st, d: d, db: d.Name}, site, 2000, time.Minute)
	shipped := storeNow()
	waitFor("the file caught up after its lines were committed", func() bool {
		id := fileID()
		return id != 0 && !caught()[id].Before(shipped)
	})
	first := fileID()
	if c := caught()[siteID]; c.Before(shipped) {
		t.Errorf("the site record says %v, want at least %v", c, shipped)
	}

	// Inserts held: new lines are read, their batch waits; caught_up stays.
	g.hold()
	appended := storeNow()
	appendTo(t, path, logLines(92, 100, base.Add(time.Hour)))
	waitFor("a batch waiting for the store", func() bool { return g.waiting() > 0 })
	time.Sleep(3 * ownersRefresh) // three refresh rounds
	if c := caught()[first]; c.After(appended.Add(time.Second)) {
		t.Errorf("caught_up %v while a batch of lines appended at %v waits, want no later than then", c, appended)
	}
	// Committed: caught up again.
	g.release()
	waitSiteRows(t, &store{store: st, d: d, db: d.Name}, site, 2100, time.Minute)
	committed := storeNow()
	waitFor("caught up again once the batch is committed", func() bool { return !caught()[first].Before(committed) })

	// Rotated: the old file read to its end is caught up for ever; the new
	// one is empty (no source id yet); the site record goes on.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("the rotated file caught up for ever", func() bool { return caught()[first].Equal(sink.CaughtUpForever) })
	rotated := storeNow()
	waitFor("the site record after the rotation", func() bool { return !caught()[siteID].Before(rotated.Add(time.Second)) })

	// A line in the new file: a new source, caught up once committed.
	appendTo(t, path, logLines(93, 1, base.Add(2*time.Hour)))
	waitSiteRows(t, &store{store: st, d: d, db: d.Name}, site, 2101, time.Minute)
	var second uint64
	waitFor("the new file caught up", func() bool {
		for id, c := range caught() {
			if id != siteID && id != first && c.Before(sink.CaughtUpForever) && !c.Before(rotated) {
				second = id
				return true
			}
		}
		return false
	})

	// Stopped: its records are released, but the file keeps its last
	// caught_up (not for ever: its lines written from now on are unread).
	stop()
	stopped := storeNow()
	time.Sleep(2 * ownersRefresh)
	c := caught()
	if got := c[second]; !got.Before(stopped.Add(time.Second)) || got.Equal(sink.CaughtUpForever) {
		t.Errorf("after the stop the file's caught_up is %v, want at most %v", got, stopped)
	}
	if got := c[siteID]; got.After(stopped.Add(time.Second)) {
		t.Errorf("after the stop the site record is %v, want at most %v", got, stopped)
	}
}
