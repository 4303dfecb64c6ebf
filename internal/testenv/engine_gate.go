package testenv

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// The embedded engine serves one data directory per process, so two tests
// that run in parallel (t.Parallel) cannot each have an embedded database at
// once. The gate lets one test at a time hold the engine, with its subtests;
// the others wait in NewDatabase or HoldEngine. A package-level value because
// the engine it guards is itself one per process.
var engine = newEngineGate()

// engineWait bounds a wait at the gate: a test that waits longer names the
// holder and fails, instead of hanging the package until go test's timeout
// (a holder that gave up its parallel slot while waiters keep theirs would
// never finish).
const engineWait = 10 * time.Minute

type engineGate struct {
	mu    sync.Mutex
	freed *sync.Cond
	owner string // the name of the test holding the engine; "" when free
	since time.Time
	held  int // how many holds it and its subtests have
}

func newEngineGate() *engineGate {
	g := &engineGate{}
	g.freed = sync.NewCond(&g.mu)
	return g
}

// enter waits until t may use the engine and holds it until t ends. The
// holder's subtests share its hold (a subtest that makes a second embedded
// database, a fresh directory for a DST day, say, after the first was
// closed); its siblings and every other test wait.
func (g *engineGate) enter(t testing.TB) {
	t.Helper()
	name := t.Name()
	deadline := time.Now().Add(engineWait)
	stop := time.AfterFunc(engineWait, func() {
		g.mu.Lock()
		g.freed.Broadcast() // wake the waiter to see its deadline
		g.mu.Unlock()
	})
	defer stop.Stop()
	g.mu.Lock()
	for g.owner != "" && g.owner != name && !strings.HasPrefix(name, g.owner+"/") {
		if !time.Now().Before(deadline) {
			owner, since := g.owner, g.since
			g.mu.Unlock()
			t.Fatalf("the embedded engine is still held by %s (since %s) after %v", owner, since.Format(time.TimeOnly), engineWait)
		}
		g.freed.Wait()
	}
	if g.owner == "" {
		g.owner, g.since = name, time.Now()
	}
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

// HoldEngine holds the process's embedded engine for t (and its subtests)
// until t ends, for a test that opens the engine itself rather than through
// NewDatabase; see engineGate.
func HoldEngine(t testing.TB) {
	t.Helper()
	engine.enter(t)
}
