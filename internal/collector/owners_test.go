package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/tailer"
	"github.com/hitcount/hitcount/sink"
)

// Of a source's live records the one started first ships it, then the
// lowest collector id; a claim made in the round (fresh) gives way to every
// other record it sees (the other may have read before it was written).
func TestFirstOwner(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	rec := func(id string, at time.Time) sink.Owner { return sink.Owner{Collector: id, Started: at} }
	for _, tc := range []struct {
		name   string
		fresh  bool
		others []sink.Owner
		want   string
	}{
		{"alone", true, nil, "b"},
		{"own record only", true, []sink.Owner{rec("b", t0)}, "b"},
		{"an older claim ships", false, []sink.Owner{rec("a", t0.Add(-time.Minute))}, "a"},
		{"a younger claim waits", false, []sink.Owner{rec("a", t0.Add(time.Second))}, "b"},
		{"tie, lower id", false, []sink.Owner{rec("a", t0)}, "a"},
		{"tie, higher id", false, []sink.Owner{rec("c", t0)}, "b"},
		{"oldest of several", false, []sink.Owner{rec("c", t0.Add(-time.Second)), rec("a", t0), rec("d", t0.Add(-2*time.Second))}, "d"},
		{"fresh gives way to an older claim", true, []sink.Owner{rec("a", t0.Add(-time.Minute))}, "a"},
		{"fresh gives way on a tie with a higher id", true, []sink.Owner{rec("c", t0)}, "c"},
		{"fresh gives way to a younger claim", true, []sink.Owner{rec("c", t0.Add(time.Second))}, "c"},
		{"fresh, the first of the others", true, []sink.Owner{rec("d", t0), rec("c", t0), rec("e", t0.Add(-time.Second))}, "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &ownership{id: "b"}
			got := o.first(&ownEntry{started: t0}, tc.others, tc.fresh)
			if got.Collector != tc.want {
				t.Errorf("first = %s, want %s", got.Collector, tc.want)
			}
		})
	}
	if got := latest([]sink.Owner{rec("b", t0.Add(time.Hour)), rec("a", t0), rec("c", t0.Add(time.Second))}, "b"); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("latest = %v, want the latest other's start", got)
	}
}

// The collector's id is made once per state directory and kept; two
// collectors starting on a new directory at the same moment get the same
// one (the directory's lock then refuses one of them).
func TestInstanceID(t *testing.T) {
	dir := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := instanceID(dir)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || !instanceRE.MatchString(id) {
			t.Fatalf("ids %v: want one id of 16 hex digits", ids)
		}
	}
	again, err := instanceID(dir)
	if err != nil || again != ids[0] {
		t.Errorf("id after a restart: %q, %v; want %q", again, err, ids[0])
	}
	if left, _ := filepath.Glob(filepath.Join(dir, instanceFile+".tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := os.WriteFile(filepath.Join(dir, instanceFile), []byte("not an id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := instanceID(dir); err == nil {
		t.Error("a damaged id was taken")
	}
	a, _ := instanceID("")
	b, _ := instanceID("")
	if a == b || !instanceRE.MatchString(a) {
		t.Errorf("without a state directory: %q and %q, want two new ids", a, b)
	}
}

// ownersStore answers ClaimSources with the records it is given, and keeps
// what it was sent.
type ownersStore struct {
	lineStore
	mu     sync.Mutex
	now    time.Time
	others []sink.Owner
	claims []sink.Claim
}

func (s *ownersStore) ClaimSources(_ context.Context, c sink.Claim) (time.Time, []sink.Owner, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = append(s.claims, c)
	return s.now, append([]sink.Owner(nil), s.others...), nil
}

// A file another collector ships waits, under the id it was opened by as
// well as the one open gave it; once the other's record is gone the file is
// this collector's again; a finished file's record is released at the next
// round; every refresh is one claim whatever the number of files.
func TestOwnershipStates(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st := &ownersStore{now: t0, others: []sink.Owner{{Source: 7, Collector: "a", Started: t0.Add(-time.Hour)}}}
	o := newOwnership(st, slog.New(slog.DiscardHandler), nil, "b", "host-b", time.Minute, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.loop(ctx)
	ship := func(id uint64, path string) *shipper {
		return &shipper{src: &Source{Site: "www"}, id: tailer.Identity{ID: id}, path: path}
	}
	// Source 7 was opened as 70 (re-keyed at open): another collector has it.
	if err := o.claim(ctx, ship(7, "/a.log"), 70); !errors.Is(err, errOwnedElsewhere) {
		t.Fatalf("claim of a file another collector ships: %v", err)
	}
	if !o.waits(7) || !o.waits(70) || o.waits(8) {
		t.Errorf("waits(7, 70, 8) = %v %v %v, want true true false", o.waits(7), o.waits(70), o.waits(8))
	}
	if err := o.problem(); err == nil || !strings.Contains(err.Error(), "/a.log shipped by collector a") {
		t.Errorf("problem() = %v", err)
	}
	if err := o.claim(ctx, ship(8, "/b.log"), 8); err != nil {
		t.Fatalf("claim of a file nobody ships: %v", err)
	}
	// The other collector stops: at the next refresh file 7 is this one's.
	st.mu.Lock()
	st.others = nil
	st.mu.Unlock()
	o.runRound(ctx, true)
	if o.waits(7) || o.waits(70) || o.problem() != nil {
		t.Errorf("after the other left: waits = %v, problem = %v", o.waits(7), o.problem())
	}
	o.closed(8, true)
	o.runRound(ctx, true)
	st.mu.Lock()
	last := st.claims[len(st.claims)-1]
	st.mu.Unlock()
	var released, kept []uint64
	for _, s := range last.Sources {
		if s.Release {
			released = append(released, s.ID)
		} else {
			kept = append(kept, s.ID)
			if !s.Started.Equal(t0) {
				t.Errorf("source %d rewritten with start %v, want the first claim's %v", s.ID, s.Started, t0)
			}
		}
	}
	if fmt.Sprint(released) != "[8]" || fmt.Sprint(kept) != "[7]" {
		t.Errorf("last round released %v and kept %v, want [8] and [7]", released, kept)
	}
}
