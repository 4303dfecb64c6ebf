package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Event is one fault of a schedule.
type Event struct {
	At   time.Duration // from the start of the fault phase
	Kind Kind
	// Hold is how long a nemesis fault lasts before it is undone: the
	// collector or the server down, the server frozen, the view failing.
	Hold time.Duration
	// Pick chooses the target at run time (a stream, a quiet file, a
	// replica) among those that exist then, so the schedule itself needs no
	// knowledge of the files.
	Pick uint64
	// KillAt and KillFor (stop-fetches-kill): the other replica is killed
	// KillAt after the fetches stop and started again KillFor later, which
	// may be after the fetches start again.
	KillAt, KillFor time.Duration
}

// End is how long after At the fault is fully undone.
func (e Event) End() time.Duration { return max(e.Hold, e.KillAt+e.KillFor) }

func (e Event) String() string {
	if e.KillFor > 0 {
		return fmt.Sprintf("%6.1fs %s (%.1fs, other killed %.1f-%.1fs)", e.At.Seconds(), e.Kind, e.Hold.Seconds(),
			e.KillAt.Seconds(), (e.KillAt + e.KillFor).Seconds())
	}
	if e.Hold > 0 {
		return fmt.Sprintf("%6.1fs %s (%.1fs)", e.At.Seconds(), e.Kind, e.Hold.Seconds())
	}
	return fmt.Sprintf("%6.1fs %s", e.At.Seconds(), e.Kind)
}

// Schedule is what the nemesis does during a run: two lanes, each in time
// order. File faults run beside the writers; nemesis faults (collector,
// server, replicas) one at a time, each undone before the next.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Store    string
	Kinds    []Kind // the kinds that apply to the store
	File     []Event
	Nemesis  []Event
}

// Limits on how often a kind is scheduled where more would add nothing.
const (
	maxSameFirstLine = 3
	maxStartAtEnd    = 2
)

// NewSchedule draws the schedule of a run from seed: the same seed, duration,
// kinds, store and insert timeout always give the same schedule. Kinds that
// do not apply to the store (server faults on the embedded engine, replica
// faults off the cluster) are left out.
func NewSchedule(seed uint64, d time.Duration, ks []Kind, store string, insertTimeout time.Duration) Schedule {
	s := Schedule{Seed: seed, Duration: d, Store: store}
	var file, nem []Kind
	for _, k := range ks {
		if !k.AppliesTo(store) {
			continue
		}
		s.Kinds = append(s.Kinds, k)
		switch kinds[k].lane {
		case fileLane:
			file = append(file, k)
		case nemesisLane:
			nem = append(nem, k)
		}
	}
	counts := map[Kind]int{}
	pick := func(r *rand.Rand, from []Kind) (Kind, bool) {
		var ok []Kind
		for _, k := range from {
			switch {
			case k == SameFirstLine && counts[k] >= maxSameFirstLine:
			case k == StartAtEnd && counts[k] >= maxStartAtEnd:
			default:
				ok = append(ok, k)
			}
		}
		if len(ok) == 0 {
			return "", false
		}
		k := ok[r.IntN(len(ok))]
		counts[k]++
		return k, true
	}
	between := func(r *rand.Rand, lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	}

	fr := rand.New(rand.NewPCG(seed, 1))
	for at := between(fr, time.Second, 2*time.Second); at < d && len(file) > 0; at += between(fr, 500*time.Millisecond, 2500*time.Millisecond) {
		k, ok := pick(fr, file)
		if !ok {
			break
		}
		s.File = append(s.File, Event{At: at, Kind: k, Pick: fr.Uint64()})
	}

	nr := rand.New(rand.NewPCG(seed, 2))
	for at := between(nr, 2*time.Second, 4*time.Second); at < d && len(nem) > 0; {
		k, ok := pick(nr, nem)
		if !ok {
			break
		}
		var hold time.Duration
		switch k {
		case CollectorKill:
			hold = between(nr, 0, 1500*time.Millisecond)
		case CollectorTerm, StartAtEnd:
			hold = between(nr, 0, time.Second)
		case ServerKill:
			hold = between(nr, 500*time.Millisecond, 3*time.Second)
		case ServerFreeze:
			hold = insertTimeout + between(nr, 500*time.Millisecond, 3*time.Second)
		case ServerRestart:
			hold = between(nr, 0, 2*time.Second)
		case ViewFail:
			hold = between(nr, 4*time.Second, 9*time.Second)
		case ReplicaKill:
			hold = between(nr, 500*time.Millisecond, 4*time.Second)
		case ReplicaPause:
			// From well under the insert timeout (a hiccup the insert
			// outlives) to twice it (the outcome unknown, the collector
			// turning to the other replica).
			hold = between(nr, 300*time.Millisecond, 2*insertTimeout+time.Second)
		case ReplicaDownLong:
			hold = between(nr, 3*insertTimeout, 5*insertTimeout)
		case StopFetches, StopFetchesKill:
			hold = between(nr, 4*time.Second, 10*time.Second)
		}
		e := Event{At: at, Kind: k, Hold: hold, Pick: nr.Uint64()}
		// The other replica is killed once this one lags, so that what
		// was inserted into it since is on no running replica, for long
		// enough that the files not waiting on it must be seen to move.
		if k == StopFetchesKill {
			e.KillAt = between(nr, time.Second, e.Hold/2)
			e.KillFor = between(nr, 3*time.Second, 8*time.Second)
		}
		s.Nemesis = append(s.Nemesis, e)
		at += e.End() + between(nr, 1500*time.Millisecond, 5*time.Second)
	}
	return s
}

// Count is how many events of each kind the schedule has.
func (s Schedule) Count() map[Kind]int {
	n := map[Kind]int{}
	for _, e := range s.File {
		n[e.Kind]++
	}
	for _, e := range s.Nemesis {
		n[e.Kind]++
	}
	return n
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule (seed %d, %s, %s store): %d file faults, %d collector/server/replica faults\n",
		s.Seed, s.Duration, s.Store, len(s.File), len(s.Nemesis))
	line := func(name string, evs []Event) {
		if len(evs) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:", name)
		for i, e := range evs {
			if i%4 == 0 {
				b.WriteString("\n   ")
			}
			fmt.Fprintf(&b, " %-34s", e.String())
		}
		b.WriteString("\n")
	}
	line("file lane", s.File)
	line("nemesis lane", s.Nemesis)
	return b.String()
}
