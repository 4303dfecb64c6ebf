package collector_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
)

// garbageLines are n lines no format accepts.
func garbageLines(from, n int) []byte {
	var out []byte
	for i := from; i < from+n; i++ {
		out = fmt.Appendf(out, "garbage line %d <<%08x>>\n", i, i*2654435761)
	}
	return out
}

// Found by TestAdversary17KillNineWhileFormatsChange on the server (93
// lines lost): a batch in flight whose last hit is not its last line, its
// hits committed and its rejects not (the two inserts of one batch, a
// kill -9 between them), then a restart.
//
// ingest_progress is fed by both inserts, so the committed offset is the
// batch's last hit, inside the batch. The reopen resumed after that hit
// and asked Holds only about the lines from there on being read again: the
// rejects before the last hit were neither read again nor in the store.
//
// The batch here: 10 rejects, 20 hits, 10 rejects (combined; too few
// rejects for the format watch). The rejects table is away, so the hits
// insert commits and the rejects insert fails; the collector stops while
// it retries (the in-flight record stays, as after a kill -9 between the
// two inserts); the table comes back and the collector starts again. Every
// one of the 40 lines must be stored once.
func TestLoss17RejectsBeforeTheLastHitOfABatchInFlight(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name                 string
		before, hits, after  int
		wantHits, wantReject uint64
	}{
		{name: "rejects around the hits", before: 10, hits: 20, after: 10, wantHits: 20, wantReject: 20},
		{name: "rejects before the hits, one after", before: 93, hits: 5, after: 1, wantHits: 5, wantReject: 94},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
				st := newStore(t, d)
				path := filepath.Join(t.TempDir(), "access.log")
				data := garbageLines(0, tc.before)
				data = append(data, logLines(1, tc.hits, base)...)
				data = append(data, garbageLines(tc.before, tc.after)...)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				state := t.TempDir()
				tune := func(o *collector.Options) {
					o.StateDir = state
					o.BatchRows = 100
				}
				execSQL(t, st, fmt.Sprintf("RENAME TABLE %s.rejects TO %s.rejects_away", st.db, st.db))
				stop := startCollector(t, st, path, tune)
				st.waitRows(t, uint64(tc.hits), 30*time.Second)
				time.Sleep(time.Second) // the rejects insert fails and is retried
				stop()
				execSQL(t, st, fmt.Sprintf("RENAME TABLE %s.rejects_away TO %s.rejects", st.db, st.db))
				startCollector(t, st, path, tune)
				all := uint64(tc.before + tc.hits + tc.after)
				got := settleStore(t, st, all, 30*time.Second)
				stored := st.count(t, "SELECT uniqExact(offset) FROM (SELECT offset FROM "+st.db+".hits UNION ALL SELECT offset FROM "+st.db+".rejects)")
				t.Logf("%s: %v; %d of the %d lines stored", d.Backend, got, stored, all)
				if got.violated() || stored != all || got.hits != tc.wantHits || got.rejects != tc.wantReject {
					t.Errorf("%s: want %d hits and %d rejects, each line once; got %v, %d of %d lines stored", d.Backend, tc.wantHits, tc.wantReject, got, stored, all)
				}
			})
		})
	}
}

// The loss TestAdversary17KillNineWhileFormatsChange reported on the server
// (93 lines, and 108 in a rerun, all at the end of the file; 73 on the
// embedded engine) was its final collector run's: it runs the collector in
// 2-second rounds until one adds nothing to hits. A round that resumed
// with fewer lines left than format detection reads (200) waited for more
// the whole DetectWait, 2 s by default, or 10 times as long when the lines
// look like header lines only (gcs takes any line starting with a letter
// for its CSV header): it shipped nothing and was taken for quiet. The
// final run now detects after 50 ms (nothing is written any more) and
// counts rejects too. Here: a short file with format: auto, shipped by
// the final run alone.
func TestLoss17FinalRunShipsAShortTail(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name          string
		data          []byte
		hits, rejects uint64
	}{
		{name: "JSON then garbage", data: append(jsonLines(100, base), garbageLines(0, 20)...), hits: 100, rejects: 20},
		{name: "garbage only", data: garbageLines(0, 73), rejects: 73},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
				st := newStore(t, d)
				st.store.Close() // the child opens it (the embedded engine: one process)
				path := filepath.Join(t.TempDir(), "access.log")
				if err := os.WriteFile(path, tc.data, 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(append(os.Environ(), d.Env()...), "HITCOUNT_CHILD_COLLECTOR=1", "HC_UNTIL_QUIET=1",
					"HC_GLOB="+path, "HC_ROWS=100", "HC_STATE="+t.TempDir(), "HC_FORMAT="+parser.Auto)
				cmd.Stderr = testWriter{t}
				if err := cmd.Run(); err != nil {
					t.Fatalf("final collector run: %v", err)
				}
				st.store = d.Open(t)
				got := onceCheck(t, st)
				t.Logf("%s: %v", d.Backend, got)
				if got.violated() || got.hits != tc.hits || got.rejects != tc.rejects {
					t.Errorf("%s: want %d hits and %d rejects, each once; got %v", d.Backend, tc.hits, tc.rejects, got)
				}
			})
		})
	}
}
