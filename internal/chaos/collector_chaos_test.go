package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hitcount/hitcount/internal/chaos"
	"github.com/hitcount/hitcount/internal/testenv"
)

// collectorBin is the real collector, built once for the package's tests.
var collectorBin string

// TestMain builds ./cmd/collector as an operator would (static, no race
// detector: it is the binary under test, not the test), into a temporary
// directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hitcount-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	collectorBin = filepath.Join(dir, "collector")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	build := exec.Command(goBin, "build", "-o", collectorBin, "github.com/hitcount/hitcount/cmd/collector")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: go build ./cmd/collector: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestCollectorChaos runs the real collector binary under a seeded random
// schedule of faults on each store (a ClickHouse 18.16 server, the embedded
// engine), then checks every stream of lines: each line once in hits, the
// rollup agreeing. About 80 s per store.
//
//	scripts/test.sh -run TestCollectorChaos ./internal/chaos/
//	CHAOS_SEED=N          repeat a run (the seed is printed, and in any failure)
//	CHAOS_DURATION=5m     longer fault phase per store (default 60s)
//	CHAOS_FAULTS=all      every kind, the ones failing today too (chaos.Blocked);
//	                      or a comma list: CHAOS_FAULTS=server-kill,rotate-create
//	CHAOS_ARTIFACTS=DIR   where a failed run's logs, collector log, state and
//	                      embedded data are kept (default $TMPDIR/hitcount-chaos)
//	-run 'TestCollectorChaos/server'   one store
func TestCollectorChaos(t *testing.T) {
	t.Parallel()
	set, err := chaos.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range testenv.Backends {
		t.Run(store, func(t *testing.T) {
			t.Logf("chaos: %s", set.Reproduce(store))
			env := chaos.Env{Store: store, Bin: collectorBin, Dir: t.TempDir(), Settings: set, Logf: t.Logf}
			if store == "server" {
				env.Server = testenv.ClickHouse(t, chaos.ServerOptions(set.KindsFor(store))...)
			} else {
				env.ChdbLib = testenv.RequireChdb(t)
				testenv.HoldEngine(t) // the check opens the engine in this process
			}
			res := chaos.Run(t, env)
			t.Logf("\n%s", res.Summary())
			if res.Failed() {
				t.Logf("collector log, last lines:\n%s", res.LogTail)
				t.Fatalf("%s", res.FailureMessage())
			}
		})
	}
}
