package testenv

import (
	"strings"
	"sync"
	"testing"
)

// The embedded engine serves one data directory per process, so two tests
// that run in parallel (t.Parallel) cannot each have an embedded database at
// once. The gate lets one top-level test at a time hold the engine; the
// others wait in NewDatabase. A package-level value because the engine it
// guards is itself one per process.
var engine = newEngineGate()

type engineGate struct {
	mu    sync.Mutex
	freed *sync.Cond
	owner string // the top-level test holding the engine; "" when free
	held  int    // how many of its (sub)tests hold it
}

func newEngineGate() *engineGate {
	g := &engineGate{}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// enter waits until t's top-level test may use the engine and holds it
// until t ends. A test and its subtests share the hold: a subtest that makes
// a second embedded database (a fresh directory for a DST day, say) after
// the first one was closed goes on at once.
func (g *engineGate) enter(t testing.TB) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	g.mu.Lock()
	for g.owner != "" && g.owner != top {
		g.freed.Wait()
	}
	g.owner = top
	g.held++
	g.mu.Unlock()
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.held--; g.held == 0 {
			g.owner = ""
			g.freed.Broadcast()
		}
	})
}

// HoldEngine holds the process's embedded engine for t (and its top-level
// test) until t ends, for a test that opens the engine itself rather than
// through NewDatabase; see engineGate.
func HoldEngine(t testing.TB) {
	t.Helper()
	engine.enter(t)
}
