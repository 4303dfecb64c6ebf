package collector

import (
	"fmt"
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
	if err := p.setInFlight(9999, sink.Span{First: 1, Last: 2}, nil); err != nil {
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

// What the store acknowledged survives a restart with the batch in flight's
// record, rejects' stamp included, and a file written by the version before
// (four numbers per record, no acknowledged offsets) still loads.
func TestPositionsKeepAcknowledgedAndInFlight(t *testing.T) {
	dir := t.TempDir()
	p, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	span := sink.Span{First: 100, Last: 900, MinTS: 1_800_000_000, MaxTS: 1_800_000_060, RejectsAt: 1_800_000_061}
	if err := p.setInFlight(7, span, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.clearInFlight(7, "www", 900, -1); err != nil {
		t.Fatal(err)
	}
	if err := p.setInFlight(7, sink.Span{First: 901, Last: 950, RejectsAt: 1_800_000_070}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.clearInFlight(7, "www", 800, -1); err != nil { // an older batch's late ack never moves it back
		t.Fatal(err)
	}
	if err := p.setInFlight(7, span, nil); err != nil {
		t.Fatal(err)
	}
	q, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := q.getInFlight(7); !ok || got != span {
		t.Errorf("in flight after reload: %+v %v, want %+v", got, ok, span)
	}
	if got, ok := q.getAcked(7); !ok || got != 900 {
		t.Errorf("acknowledged after reload: %d %v, want 900", got, ok)
	}
	if sites := q.ackedSites(); len(sites) != 1 || sites[0] != "www" {
		t.Errorf("sites after reload: %v", sites)
	}

	old := `{"start":{"a":5},"in_flight":{"b":[1,2,3,4]}}`
	if err := os.WriteFile(filepath.Join(dir, "positions.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.getInFlight(0xb); got != (sink.Span{First: 1, Last: 2, MinTS: 3, MaxTS: 4}) {
		t.Errorf("an older version's record: %+v", got)
	}
	if _, ok := r.getAcked(0xb); ok {
		t.Error("an older version's file has no acknowledged offsets, yet one was read")
	}
}

// The formats of a batch in flight and the header block at the acked line
// survive a restart; the formats go with the record's clearing, the block
// moves only with the acked line.
func TestPositionsKeepFormats(t *testing.T) {
	dir := t.TempDir()
	p, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	fm := []parseSpan{{From: 10, Format: "w3c", Headers: [][]byte{[]byte("#Fields: date\xff\n")}, HeadersAt: 0}, {From: 70, Format: "json", HeadersAt: -1}}
	if err := p.setInFlight(7, sink.Span{First: 10, Last: 90}, fm); err != nil {
		t.Fatal(err)
	}
	q, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.getFormats(7); fmt.Sprint(got) != fmt.Sprint(fm) {
		t.Errorf("formats after reload: %v, want %v", got, fm)
	}
	if err := q.clearInFlight(7, "www", 90, 4); err != nil {
		t.Fatal(err)
	}
	if err := q.clearInFlight(7, "www", 50, 8); err != nil { // a late ack of an older batch
		t.Fatal(err)
	}
	r, err := loadPositions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.getFormats(7); got != nil {
		t.Errorf("formats after the ack: %v", got)
	}
	if acked, at, ok := r.getHeaders(7); !ok || acked != 90 || at != 4 {
		t.Errorf("headers after reload: %d %d %v, want 90 4 true", acked, at, ok)
	}
	if err := r.clearInFlight(7, "www", 120, -1); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := r.getHeaders(7); ok {
		t.Error("a header block kept past an acked line without one")
	}
}
