package collector

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

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
