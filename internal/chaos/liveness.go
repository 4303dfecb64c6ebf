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
// oldest unshipped line, each open file's bytes behind); per replica fault
// it reports how many rows went in while it lasted and how long the
// collector took to catch up once it was undone; and anywhere in the run,
// a file whose lines waited stallMin with nothing committed, though the
// collector logged no failed insert or settle of it meanwhile (it did not
// depend on a replica), is a problem.

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

// stallMin is how long lines may wait in a file that depends on no
// replica: an insert into a paused replica fails only at the insert
// timeout, and until then the batches in flight may be all there are; a
// kill's failover takes a few seconds more; and with max_pending below the
// busy files, a file can wait seconds for a batch with no fault at all
// (seed 8: b waited 3.7 s while a and api committed twice, then 2.8 s
// through a kill). A gauge moves once a scan.
const stallMin = InsertTimeout + time.Second + 5*time.Second

// Stall is a stretch during which lines waited in a file and nothing of it
// was committed.
type Stall struct {
	File     string // relative to the log root
	From, To time.Duration
	// Waiting: the collector logged a failed insert or settle of the file
	// during the stretch: it waited on a replica. Otherwise it was stalled
	// by others: a problem, unless Known.
	Waiting bool
	// Known: stalled by others during a fault of a kind blocked for its
	// stalls (Block.Stalls), in a run other than CHAOS_FAULTS=all: printed,
	// not failed.
	Known Kind
}

func (s Stall) String() string {
	str := fmt.Sprintf("%s %.1f-%.1fs", s.File, s.From.Seconds(), s.To.Seconds())
	if s.Known != "" {
		str += " (known: " + string(s.Known) + ")"
	}
	return str
}

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
	// Stalls are the run's stalls that overlap the fault or the catch-up.
	Stalls []Stall
}

func (l Liveness) String() string {
	cu := "not caught up"
	if l.CatchUp >= 0 {
		cu = fmt.Sprintf("caught up %.1fs after", l.CatchUp.Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%6.1f-%5.1fs %-17s %6.0f rows in, oldest unshipped %4.1fs, %s (%s)",
		l.From.Seconds(), l.To.Seconds(), l.Kind, l.Rows, l.Oldest, cu, l.What)
	var waiting, stalled []string
	for _, s := range l.Stalls {
		if s.Waiting {
			waiting = append(waiting, s.String())
		} else {
			stalled = append(stalled, s.String())
		}
	}
	if len(waiting) > 0 {
		fmt.Fprintf(&b, "; waiting on a replica: %s", strings.Join(waiting, ", "))
	}
	if len(stalled) > 0 {
		fmt.Fprintf(&b, "; stalled by others: %s", strings.Join(stalled, ", "))
	}
	return b.String()
}

// liveness finds the run's stalls (a problem for each file stalled by
// others) and measures each replica fault against the samples.
func (r *runner) liveness(s *sampler) []Liveness {
	s.mu.Lock()
	samples := append([]sample(nil), s.samples...)
	s.mu.Unlock()
	r.mu.Lock()
	windows := append([]window(nil), r.windows...)
	r.mu.Unlock()
	sort.SliceStable(windows, func(i, j int) bool { return windows[i].from < windows[j].from })

	stalls := stalled(samples, stallMin)
	warnings := r.coll.Warnings()
	// The stretch of each fault: until the collector caught up after it.
	reach := make([]time.Duration, len(windows))
	for i, w := range windows {
		reach[i] = w.to
		for _, smp := range samples {
			if smp.at > w.to && smp.oldest >= 0 {
				reach[i] = smp.at
				if smp.oldest < caughtUp.Seconds() {
					break
				}
			}
		}
	}
	var byOthers []string
	for i, st := range stalls {
		// A failed insert or settle of the file from just before the
		// stretch to its end: it waited on a replica.
		from, to := r.start.Add(st.From-time.Second), r.start.Add(st.To)
		for _, w := range warnings {
			if w.path == st.File && !w.at.Before(from) && !w.at.After(to) {
				stalls[i].Waiting = true
				break
			}
		}
		if rel, err := filepath.Rel(r.logs.Root, st.File); err == nil {
			stalls[i].File = rel
		}
		if stalls[i].Waiting {
			continue
		}
		if !r.env.Settings.All {
			for j, w := range windows {
				if b, ok := Blocked[w.kind]; ok && b.Stalls && b.On(r.env.Store) && st.From <= reach[j] && st.To >= w.from {
					stalls[i].Known = w.kind
					break
				}
			}
		}
		if stalls[i].Known == "" {
			byOthers = append(byOthers, stalls[i].String())
		}
	}
	if len(byOthers) > 0 {
		r.problem("liveness: lines waited %v or more with nothing committed in files none of whose inserts or settles failed meanwhile (the collector stalled files that did not depend on a replica): %s",
			stallMin, strings.Join(byOthers, "; "))
	}

	var out []Liveness
	for j, w := range windows {
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
		for _, st := range stalls {
			if st.From <= reach[j] && st.To >= w.from {
				l.Stalls = append(l.Stalls, st)
			}
		}
		out = append(out, l)
	}
	return out
}

// stalledBehind is how far behind a file must be to count as waiting:
// bytes_behind counts from the start of the last committed line, so a file
// all shipped is one line behind, and a bursty writer's file sits there
// through its silences.
const stalledBehind = 4 << 10

// stalled finds the stretches, min or longer, during which a file stayed
// more than stalledBehind behind without once being less behind than at the
// sample before: lines were waiting and nothing of theirs was committed. A
// sample without the collector (stopped, restarting) ends every stretch.
func stalled(samples []sample, min time.Duration) []Stall {
	type track struct {
		since time.Duration // when the current wait began; -1: not waiting
		at    time.Duration // the wait's last sample
		last  float64
	}
	files := map[string]*track{}
	var out []Stall
	end := func(p string, t *track) {
		if t.since >= 0 && t.at-t.since >= min {
			out = append(out, Stall{File: p, From: t.since, To: t.at})
		}
		t.since = -1
	}
	for _, smp := range samples {
		if smp.behind == nil {
			for p, t := range files {
				end(p, t)
			}
			continue
		}
		for p, t := range files {
			if _, ok := smp.behind[p]; !ok {
				end(p, t) // finished or closed
			}
		}
		for p, v := range smp.behind {
			t := files[p]
			if t == nil {
				t = &track{since: -1, last: v}
				files[p] = t
			}
			switch {
			case v <= stalledBehind || v < t.last:
				end(p, t) // shipped up to a line, or committed something
			case t.since < 0:
				t.since = smp.at
			}
			t.at = smp.at
			t.last = v
		}
	}
	for p, t := range files {
		end(p, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].File < out[j].File
	})
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
