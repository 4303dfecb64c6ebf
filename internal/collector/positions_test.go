package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// The positions hint forgets a source once no present file has shown it for
// the whole grace period, and not before: a file missed by one scan (renamed
// in the middle of it) keeps its entry. The file on disk shrinks with it.
func TestPositionsForgetsSourcesGoneAWhile(t *testing.T) {
	dir := t.TempDir()
	p, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for id := uint64(1); id <= n; id++ {
		if err := p.set(id, skippedWhole); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.setInFlight(9999, sink.Span{First: 1, Last: 2}); err != nil {
		t.Fatal(err)
	}
	big := fileSize(t, filepath.Join(dir, "positions.json"))
	still := map[uint64]bool{7: true}
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	for i, at := range []time.Duration{0, 30 * time.Minute, 59 * time.Minute} {
		if err := p.prune(still, t0.Add(at), time.Hour); err != nil {
			t.Fatal(err)
		}
		if !p.hasAny(3) || !p.hasAny(7) {
			t.Fatalf("scan %d, %v in: an entry was forgotten before the hour", i, at)
		}
	}
	// Source 3 reappears for one scan: its clock starts again.
	if err := p.prune(map[uint64]bool{3: true, 7: true}, t0.Add(61*time.Minute), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := p.prune(still, t0.Add(62*time.Minute), time.Hour); err != nil {
		t.Fatal(err)
	}
	if !p.hasAny(3) || !p.hasAny(7) || p.hasAny(4) {
		t.Fatalf("after an hour: 3 %v (seen again), 7 %v (present), 4 %v (gone)", p.hasAny(3), p.hasAny(7), p.hasAny(4))
	}
	if _, ok := p.getInFlight(9999); ok {
		t.Fatal("the in-flight record of a source gone for an hour is kept")
	}
	reloaded, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(reloaded.m) != 2 || len(reloaded.inFlight) != 0 {
		t.Fatalf("on disk after pruning: %d starts, %d in flight; want 2, 0", len(reloaded.m), len(reloaded.inFlight))
	}
	if small := fileSize(t, filepath.Join(dir, "positions.json")); small*50 > big {
		t.Fatalf("positions.json %d bytes after forgetting %d sources, %d before", small, n-2, big)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".json") {
		t.Fatal(path)
	}
	return fi.Size()
}
