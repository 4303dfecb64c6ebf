package collector_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
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
