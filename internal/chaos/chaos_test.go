package chaos

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestScheduleIsSeeded(t *testing.T) {
	a := NewSchedule(42, time.Minute, AllKinds(), "server", 2*time.Second)
	b := NewSchedule(42, time.Minute, AllKinds(), "server", 2*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	c := NewSchedule(43, time.Minute, AllKinds(), "server", 2*time.Second)
	if reflect.DeepEqual(a.File, c.File) {
		t.Fatal("seeds 42 and 43 gave the same file lane")
	}
	if len(a.File) < 20 || len(a.Nemesis) < 5 {
		t.Fatalf("a minute of every fault: %d file and %d nemesis events", len(a.File), len(a.Nemesis))
	}
	for _, lane := range [][]Event{a.File, a.Nemesis} {
		for i, e := range lane {
			if e.At >= time.Minute || (i > 0 && e.At < lane[i-1].At) {
				t.Fatalf("event %d at %v: out of order or past the duration", i, e.At)
			}
		}
	}
	// A nemesis fault is undone before the next starts.
	for _, store := range []string{StoreServer, StoreCluster} {
		s := NewSchedule(42, time.Minute, AllKinds(), store, 2*time.Second)
		for i := 1; i < len(s.Nemesis); i++ {
			if prev := s.Nemesis[i-1]; prev.At+prev.End() >= s.Nemesis[i].At {
				t.Fatalf("%s: nemesis events overlap: %v then %v", store, prev, s.Nemesis[i])
			}
		}
	}
	for _, store := range []string{StoreServer, StoreEmbedded, StoreCluster} {
		s := NewSchedule(42, time.Minute, AllKinds(), store, 2*time.Second)
		for _, e := range s.Nemesis {
			if !e.Kind.AppliesTo(store) {
				t.Fatalf("fault %s scheduled on the %s store", e.Kind, store)
			}
		}
	}
	if n := a.Count()[SameFirstLine]; n > maxSameFirstLine {
		t.Fatalf("%d same-first-line events", n)
	}
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds(""); err != nil || k != nil {
		t.Fatalf("empty: %v %v", k, err)
	}
	for _, store := range []string{StoreServer, StoreEmbedded, StoreCluster} {
		def := (Settings{}).KindsFor(store)
		if len(def) == 0 {
			t.Fatalf("no default kinds on %s", store)
		}
		for _, k := range def {
			if b, ok := Blocked[k]; ok && b.On(store) && !b.Stalls {
				t.Fatalf("blocked kind %s in the default on %s", k, store)
			}
			if !k.AppliesTo(store) {
				t.Fatalf("kind %s in the default on %s, where it does not apply", k, store)
			}
		}
	}
	if k, err := ParseKinds("all"); err != nil || len(k) != len(AllKinds()) {
		t.Fatalf("all: %v %v", k, err)
	}
	if k, err := ParseKinds(" collector-kill, rotate-create,collector-kill"); err != nil || !reflect.DeepEqual(k, []Kind{CollectorKill, RotateCreate}) {
		t.Fatalf("list: %v %v", k, err)
	}
	if _, err := ParseKinds("rotate"); err == nil || !strings.Contains(err.Error(), `unknown fault kind "rotate"`) {
		t.Fatalf("unknown kind: %v", err)
	}
	for k := range Blocked {
		if _, ok := kinds[k]; !ok {
			t.Fatalf("Blocked names %q, no kind", k)
		}
	}
	t.Setenv("CHAOS_SEED", "77")
	t.Setenv("CHAOS_DURATION", "5s")
	t.Setenv("CHAOS_FAULTS", "pre-1970")
	s, err := FromEnv()
	if err != nil || s.Seed != 77 || s.Duration != 5*time.Second || s.Reproduce("embedded") != "CHAOS_SEED=77 CHAOS_DURATION=5s CHAOS_FAULTS=pre-1970" {
		t.Fatalf("%+v %v", s, err)
	}
}

// The cluster schedule draws every replica kind, with holds that mean what
// the kinds promise.
func TestClusterSchedule(t *testing.T) {
	const timeout = 2 * time.Second
	ks := []Kind{ReplicaKill, ReplicaPause, ReplicaDownLong, StopFetches, StopFetchesKill}
	seen := map[Kind]int{}
	pauses, longPauses, fetchKills, fetchAlone := 0, 0, 0, 0
	for seed := uint64(1); seed <= 20; seed++ {
		s := NewSchedule(seed, 2*time.Minute, ks, StoreCluster, timeout)
		for _, e := range s.Nemesis {
			seen[e.Kind]++
			switch e.Kind {
			case ReplicaPause:
				pauses++
				if e.Hold > timeout {
					longPauses++
				}
			case ReplicaDownLong:
				if e.Hold < 3*timeout {
					t.Fatalf("seed %d: %v is down for less than 3 insert timeouts", seed, e)
				}
			case StopFetches:
				fetchAlone++
				if e.KillFor > 0 {
					t.Fatalf("seed %d: %v kills a replica", seed, e)
				}
			case StopFetchesKill:
				fetchKills++
				if e.KillFor == 0 || e.KillAt >= e.Hold {
					t.Fatalf("seed %d: %v does not kill the other replica while this one lags", seed, e)
				}
			}
		}
	}
	for _, k := range ks {
		if seen[k] == 0 {
			t.Fatalf("20 seeds of 2 minutes never drew %s", k)
		}
	}
	if longPauses == 0 || longPauses == pauses {
		t.Fatalf("%d of %d pauses longer than the insert timeout: want some, not all", longPauses, pauses)
	}
	if fetchKills == 0 || fetchAlone == 0 {
		t.Fatalf("stop-fetches: %d with a kill, %d alone: want both", fetchKills, fetchAlone)
	}
	if n := NewSchedule(1, time.Minute, ks, StoreServer, timeout); len(n.Nemesis) != 0 {
		t.Fatalf("replica faults on the server store: %v", n.Nemesis)
	}
}

var markerRE = regexp.MustCompile(`/chaos/([^/ ?]+)/(\d+)`)

// readSeqs lists the seqs of stream name in a file, plain or gzip, and
// whether its last line lacks a newline.
func readSeqs(t *testing.T, path, name string) (seqs []uint64, partial bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	data, err := io.ReadAll(bufio.NewReader(r))
	if err != nil {
		t.Fatal(err)
	}
	partial = len(data) > 0 && data[len(data)-1] != '\n'
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if m := markerRE.FindStringSubmatch(line); m != nil && m[1] == name {
			n, _ := strconv.ParseUint(m[2], 10, 64)
			seqs = append(seqs, n)
		}
	}
	return seqs, partial
}

func expand(rs []seqRange) []uint64 {
	var out []uint64
	for _, r := range rs {
		for s := r.lo; s <= r.hi; s++ {
			out = append(out, s)
		}
	}
	return out
}

// The harness's bookkeeping of which line is in which file must match the
// files: the check's "may be lost" lines come from it.
func TestRotationBookkeeping(t *testing.T) {
	for _, style := range []Kind{RotateCreate, RotateCopyTruncate, RotateDelayCompress} {
		t.Run(string(style), func(t *testing.T) {
			l := NewLogs(t.TempDir(), 1)
			s := l.add("x", "www", "x/access.log", style, 0)
			s.Release()
			s.rotatable = true // no writer here: the test writes
			ctx := context.Background()
			for i := range 6 {
				if err := s.write(10 + i); err != nil {
					t.Fatal(err)
				}
				var err error
				switch i {
				case 2:
					err = l.rotate(s, style, 0, "no-newline")
				case 4:
					err = l.rotate(s, style, 2, "")
				default:
					_, err = l.Apply(ctx, Event{Kind: style})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := s.write(5); err != nil {
				t.Fatal(err)
			}
			l.Close()
			onDisk, _ := filepath.Glob(s.Path + "*")
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(onDisk) != len(s.files) {
				t.Fatalf("files on disk %v, bookkept %d", onDisk, len(s.files))
			}
			seen := map[uint64]int{}
			for _, p := range onDisk {
				obj := s.files[p]
				if obj == nil {
					t.Fatalf("%s is not bookkept", p)
				}
				got, partial := readSeqs(t, p, "x")
				if want := expand(obj.ranges); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
					t.Fatalf("%s holds %v, bookkept %v", p, got, want)
				}
				if partial {
					if last := got[len(got)-1]; s.special[last] != lineOdd {
						t.Fatalf("%s ends without a newline after line %d, not marked odd", p, last)
					}
				}
				for _, q := range got {
					seen[q]++
				}
			}
			for q := uint64(0); q < s.next; q++ {
				switch {
				case seen[q] > 1:
					t.Fatalf("line %d in %d files", q, seen[q])
				case seen[q] == 0 && !s.lost[q]:
					t.Fatalf("line %d in no file and not marked lost", q)
				case seen[q] == 1 && s.lost[q]:
					t.Fatalf("line %d marked lost but on disk", q)
				}
			}
			if len(s.lost) == 0 {
				t.Fatal("keeping 2 rotated files deleted none")
			}
		})
	}
}

// A file counts as stalled only if lines waited in it, more than a few
// lines behind, for the minimum without anything of it committed: not one
// caught up, not one that commits now and then, not a bursty writer's file
// sitting one line behind through a silence, not a burst written just
// before the end; and a stretch without the collector ends every wait.
func TestStalled(t *testing.T) {
	at := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	var samples []sample
	for i := range 10 {
		b := map[string]float64{
			"/l/stuck":   float64(1000 + 3000*i),
			"/l/moving":  float64(5000 + 3000*(i%3)), // commits every third sample
			"/l/silent":  194,                        // one line behind, writer silent
			"/l/shipped": 0,
			"/l/burst":   194,
		}
		if i >= 7 {
			b["/l/burst"] = 11000 // written at 3.5 s, not committed by 4.5 s
		}
		samples = append(samples, sample{at: at(float64(i) * 0.5), behind: b})
	}
	want := []Stall{{File: "/l/stuck", From: at(1), To: at(4.5)}}
	if got := stalled(samples, 3*time.Second); !reflect.DeepEqual(got, want) {
		t.Fatalf("stalled: %v, want %v", got, want)
	}
	if got := stalled(samples, 4*time.Second); got != nil {
		t.Fatalf("4 s minimum: %v, want none (stuck waits 3.5 s)", got)
	}
	samples[5].behind = nil // the collector restarting at 2.5 s
	if got := stalled(samples, 3*time.Second); got != nil {
		t.Fatalf("across a restart: %v, want none", got)
	}
}
