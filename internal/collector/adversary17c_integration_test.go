package collector_test

// Adversary of issue 17, third round: reproductions of ways the
// exactly-once guarantee of format: auto still breaks. Each test fails
// while its finding stands; they run only with HITCOUNT_ADVERSARY=1, so
// the suite stays green until they are fixed:
//
//	HITCOUNT_ADVERSARY=1 HITCOUNT_CHDB_LIB=/work/main/.cache/chdb/current/libchdb.so CI=1 \
//	  go test -count=1 -run 'TestAdversary17c' ./internal/collector/

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

func adversary17c(t *testing.T) {
	t.Helper()
	if os.Getenv("HITCOUNT_ADVERSARY") == "" {
		t.Skip("an open adversary finding: set HITCOUNT_ADVERSARY=1 to run it")
	}
}

// crashInFlight runs a collector on path whose first insert that hold
// picks commits and loses its answer, then stops it (= a kill -9 while the
// batch is in flight: its in-flight record stays in state).
func crashInFlight(t *testing.T, st *store, path string, tune func(*collector.Options), hold func(b *sink.Batch) bool) {
	t.Helper()
	la := newLostAck(st.store, hold)
	stop := startInserter(t, la, path, tune)
	select {
	case <-la.inserted:
	case <-time.After(60 * time.Second):
		t.Fatal("the batch was never inserted")
	}
	t.Logf("%s: committed, answer lost: %v", st.d.Backend, onceCheck(t, st))
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	time.Sleep(200 * time.Millisecond) // the collector is stopping
	close(la.release)
	<-stopped
}

// Finding 1: a W3C header block of more than 64 lines is recorded cut
// short with the batch in flight.
//
// noteDirective keeps at most 64 lines of a block (s.headers), and that is
// what positions' in_flight_formats records as the batch's header lines.
// The parser itself saw every line, so the live run parses the rows; a
// restart replays the batch in flight with the recorded 64 lines, which
// lack the "#Fields:" line (the 70th here): every row of the batch is a
// reject the second time, when the batch starts after the block. IIS
// file with a 70-line header block (66 "#Remark:" lines) and 50 rows,
// shipped; 50 rows more, a batch committed whose answer is lost; restart:
// want 100 hits and no reject. Measured on both backends: hits 100 rows,
// rejects 50 rows, 50 offsets in both (the replayed batch's rows, sent
// again as rejects: "for the rejects it may lack" on the server, in the
// replayed block on the embedded engine).
func TestAdversary17cLongHeaderBlockInFlight(t *testing.T) {
	adversary17c(t)
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "u_ex261124.log")
		var block strings.Builder
		block.WriteString("#Software: Microsoft Internet Information Services 10.0\n#Version: 1.0\n#Date: 2026-11-24 10:00:00\n")
		for i := range 66 {
			fmt.Fprintf(&block, "#Remark: maintenance note %d\n", i)
		}
		block.WriteString("#Fields: " + w3cFieldsA + "\n")
		data := block.String() + w3cRows(w3cFieldsA, 0, 50, base)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		go func() {
			// The second batch, once the first is stored.
			for onceCheck(t, st).hits < 50 {
				time.Sleep(50 * time.Millisecond)
			}
			appendTo(t, path, []byte(w3cRows(w3cFieldsA, 50, 50, base)))
		}()
		state := t.TempDir()
		tune := func(o *collector.Options) {
			o.Sources[0].Format = parser.Auto
			o.StateDir = state
			o.DetectWait = 200 * time.Millisecond
		}
		crashInFlight(t, st, path, tune, func(b *sink.Batch) bool { return b.First > int64(len(data))-1 })
		startCollector(t, st, path, tune)
		got := settleStore(t, st, 100, 30*time.Second)
		t.Logf("%s: after the restart: %v", d.Backend, got)
		if got.violated() || got.hits != 100 || got.rejects != 0 {
			t.Errorf("%s: want the 100 rows once, as hits; got %v", d.Backend, got)
		}
	})
}
