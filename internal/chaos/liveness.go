package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Liveness: the invariant says nothing of a collector that stalls while a
// fault lasts and catches up after it. On the cluster store that is the
// question: a part only a down replica has must stall the files whose
// batch depends on it, not the others, while the other replica takes
// inserts. So the run samples the collector's counters (rows inserted, the
// oldest unshipped line, each open file's bytes behind) and, per replica
// fault, reports how many rows went in while it lasted and how long the
// collector took to catch up once it was undone; a file that committed
// nothing through a long enough fault though none of its inserts failed
// (it did not depend on the replica) is a problem.

// sampleEvery is how often the collector's counters are sampled.
const sampleEvery = 500 * time.Millisecond

type sample struct {
	at     time.Duration      // since the run's start
	rows   float64            // rows inserted, summed across collector restarts
	oldest float64            // oldest_unshipped_seconds; -1: unreachable
	behind map[string]float64 // bytes_behind by open file's path
}

var pathLabel = regexp.MustCompile(`file="((?:[^"\\]|\\.)*)"`)

type sampler struct {
	mu      sync.Mutex
	samples []sample
	base    float64 // rows of earlier collector processes
	last    float64 // the current process's last reading
}

// run samples until ctx ends.
func (s *sampler) run(ctx context.Context, r *runner) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		m, byLabels, err := r.coll.MetricsByLabels(ctx)
		at := time.Since(r.start)
		s.mu.Lock()
		smp := sample{at: at, oldest: -1}
		if err == nil {
			smp.behind = map[string]float64{}
			for labels, v := range byLabels["hitcount_collector_bytes_behind"] {
				if p := pathLabel.FindStringSubmatch(labels); p != nil {
					smp.behind[p[1]] = v
				}
			}
			raw := m["hitcount_collector_rows_inserted_total"]
			if raw < s.last { // a new process: its counter started at 0
				s.base += s.last
			}
			s.last = raw
			smp.oldest = m["hitcount_collector_oldest_unshipped_seconds"]
		}
		smp.rows = s.base + s.last
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// window is a stretch of the run during which a fault was in force.
type window struct {
	kind     Kind
	what     string
	from, to time.Duration
}

// mark records that a fault was in force from from until now.
func (r *runner) mark(k Kind, what string, from time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows = append(r.windows, window{kind: k, what: what, from: from, to: time.Since(r.start)})
}

// caughtUp is the age of the oldest unshipped line under which the
// collector counts as caught up: a few batch delays.
const caughtUp = 2 * time.Second

// stallGrace is how long into a fault files may all wait: an insert into a
// paused replica fails only at the insert timeout, and until then the
// batches in flight may be all there are; a gauge moves once a scan.
const stallGrace = InsertTimeout + time.Second

// Liveness is what the collector did while one fault was in force.
type Liveness struct {
	Kind     Kind
	What     string
	From, To time.Duration
	// Rows inserted while the fault was in force.
	Rows float64
	// Oldest is the longest a read line waited to be committed, during the
	// fault and until the collector caught up.
	Oldest float64
	// CatchUp is how long after the fault was undone the oldest unshipped
	// line was younger than caughtUp again; -1: not within the samples.
	CatchUp time.Duration
	// Judged is the stretch, from stallGrace into the fault to its end,
	// over which files must commit; 0 when shorter than stalledMin.
	Judged time.Duration
	// Stalled are the files (relative to the log root) behind all through
	// Judged that committed nothing, though none of their inserts failed
	// during the fault: they did not depend on the replica.
	Stalled []string
	// Waiting are files that committed nothing either, with an insert or a
	// settle that failed during the fault: waiting on the replica.
	Waiting []string
}

func (l Liveness) String() string {
	cu := "not caught up"
	if l.CatchUp >= 0 {
		cu = fmt.Sprintf("caught up %.1fs after", l.CatchUp.Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1f-%5.1fs %-17s %6.0f rows in, oldest unshipped %4.1fs, %s (%s)",
		l.From.Seconds(), l.To.Seconds(), l.Kind, l.Rows, l.Oldest, cu, l.What)
	if len(l.Waiting) > 0 {
		fmt.Fprintf(&b, "; waiting on it: %s", strings.Join(l.Waiting, " "))
	}
	if len(l.Stalled) > 0 {
		fmt.Fprintf(&b, "; STALLED %.1fs without a failed insert: %s", l.Judged.Seconds(), strings.Join(l.Stalled, " "))
	}
	return b.String()
}

// liveness measures each window against the samples and the collector's
// log; a stalled file is a problem.
func (r *runner) liveness(s *sampler) []Liveness {
	s.mu.Lock()
	samples := append([]sample(nil), s.samples...)
	s.mu.Unlock()
	r.mu.Lock()
	windows := append([]window(nil), r.windows...)
	r.mu.Unlock()
	sort.SliceStable(windows, func(i, j int) bool { return windows[i].from < windows[j].from })
	var out []Liveness
	for _, w := range windows {
		l := Liveness{Kind: w.kind, What: w.what, From: w.from, To: w.to, CatchUp: -1}
		var first, last *sample
		for i := range samples {
			smp := &samples[i]
			if smp.at < w.from {
				continue
			}
			if smp.at <= w.to {
				if first == nil {
					first = smp
				}
				last = smp
				l.Oldest = max(l.Oldest, smp.oldest)
				continue
			}
			if smp.oldest < 0 {
				continue
			}
			l.Oldest = max(l.Oldest, smp.oldest)
			if smp.oldest < caughtUp.Seconds() {
				l.CatchUp = smp.at - w.to
				break
			}
		}
		if first != nil {
			l.Rows = last.rows - first.rows
		}
		if judged := w.to - (w.from + stallGrace); judged >= stalledMin {
			l.Judged = judged
			// Files that logged a failed insert or settle from just
			// before the fault to its end depend on the replica.
			warned := r.coll.WarnedPaths(r.start.Add(w.from-time.Second), r.start.Add(w.to))
			for _, p := range stalled(samples, w.from+stallGrace, w.to) {
				rel, err := filepath.Rel(r.logs.Root, p)
				if err != nil {
					rel = p
				}
				if warned[p] {
					l.Waiting = append(l.Waiting, rel)
				} else {
					l.Stalled = append(l.Stalled, rel)
				}
			}
			if len(l.Stalled) > 0 {
				r.problem("liveness: %s (%s, %.1f-%.1fs): %s committed nothing for %.1fs, though none of their inserts failed: the collector stalled files that do not depend on the replica (rows inserted meanwhile: %.0f; waiting on the replica: %v)",
					w.what, w.kind, w.from.Seconds(), w.to.Seconds(), strings.Join(l.Stalled, ", "), judged.Seconds(), l.Rows, l.Waiting)
			}
		}
		out = append(out, l)
	}
	return out
}

// stalledMin is the shortest fault over which a file that committed
// nothing counts as stalled: a few scans (the gauge moves once a scan).
const stalledMin = 3 * time.Second

// stalledBehind is how far behind a file must be to count as waiting:
// bytes_behind counts from the start of the last committed line, so a file
// all shipped is one line behind, and a bursty writer's file sits there
// through its silences.
const stalledBehind = 4 << 10

// stalled lists the files that, between from and to, stayed more than
// stalledBehind behind for stalledMin or longer without once being less
// behind than at the sample before: lines were waiting and nothing of
// theirs was committed. A burst written just before to is not a stall.
func stalled(samples []sample, from, to time.Duration) []string {
	type track struct {
		since   time.Duration // when the current wait began; -1: not waiting
		last    float64
		longest time.Duration
	}
	files := map[string]*track{}
	for _, smp := range samples {
		if smp.at < from || smp.at > to || smp.behind == nil {
			continue
		}
		for p, v := range smp.behind {
			t := files[p]
			if t == nil {
				t = &track{since: -1, last: v}
				files[p] = t
			}
			switch {
			case v <= stalledBehind || v < t.last:
				t.since = -1 // shipped up to a line, or committed something
			case t.since < 0:
				t.since = smp.at
			}
			if t.since >= 0 {
				t.longest = max(t.longest, smp.at-t.since)
			}
			t.last = v
		}
	}
	var out []string
	for p, t := range files {
		if t.longest >= stalledMin {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// write saves the samples as text (one line per sample: seconds, rows,
// oldest unshipped, then path=bytes behind), kept with a run's files.
func (s *sampler) write(path, root string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, smp := range s.samples {
		fmt.Fprintf(&b, "%.1f rows=%.0f oldest=%.1f", smp.at.Seconds(), smp.rows, smp.oldest)
		var paths []string
		for p := range smp.behind {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				rel = p
			}
			fmt.Fprintf(&b, " %s=%.0f", rel, smp.behind[p])
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func livenessTable(ls []Liveness) string {
	if len(ls) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("replica faults: rows inserted while in force, the oldest unshipped line's age until caught up (< 2s):\n")
	for _, l := range ls {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}
