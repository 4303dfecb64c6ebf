package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// One collector per file (issue 16, finding 6). The lock on the state
// directory keeps two collectors off one directory; two with directories
// of their own (two containers sharing a log volume, a second instance with
// another config) would each ship the same file's lines. So each collector
// keeps a record per file it ships or waits for in the store's
// source_owners (sink/owners.go), and of the live records of a source the
// one started first ships it:
//
//   - At open, once the collector knows where it would resume, it writes
//     its record and then reads the others' (one round, shared by every
//     file opening at that moment). Any other live record (a collector
//     that ships the file or waits for it): the file is not read, the log
//     and Ready() name that collector, and the record is kept, dated after
//     the others: the collector waits in line. Since each collector writes
//     before it reads, of two opening the file at the same moment at least
//     one sees the other and waits.
//   - Every refresh interval one round rewrites the records of every file
//     it ships or waits for (one insert, whatever the number of files) and
//     reads them again; of the live records of a source the one started
//     first ships it (then the lowest id). A file shipped here whose source
//     another collector claimed first without being seen at open (a replica
//     lagged; or this collector could not refresh for the window) is
//     stopped at its next batch: the batch being sent completes, the lines
//     read after it are dropped (the other collector reads them: the file
//     is the buffer), and the file waits. A file waited for whose owner is
//     gone (its record released at its stop, or stale after 3 intervals)
//     is opened at the next scan.
//   - A collector that stops releases its records once its last batches
//     are committed, so the next in line takes the files over within one
//     interval; one killed is stale after the window.
//
// ClickHouse has no compare-and-set, so this is detection: where two
// collectors do not see each other's records at open (their replicas lag,
// or cannot fetch each other's parts), both ship the file until the first
// refresh that sees both records, one interval after the replicas have
// them; then one of them stops.
//
// The records also carry how far each file is committed (caught_up, see
// sink/owners.go), which the sweeper's below and no_traffic rules wait for:
//
//   - A file this collector ships is caught up at a round when its reader
//     last found the end of the data at the file's size now and no batch of
//     it is being filled, waits or is in flight (shipper.caughtUp, read as
//     the round begins); its record then says the round's time (the store's
//     clock), else the last time it did.
//   - A file read to its end and given up (closed finished, or gone from
//     disk: prune) is released as caught up for ever; one released because
//     the collector stops keeps its last time, so a collector that stops
//     holds its sites' windows until it is back (or the sweeper forgets it).
//   - Every refresh also writes one record per configured site
//     (sink.SiteRecord): this collector is there for the site, even with no
//     file holding a line yet.
//
// The time is read a little before the store stamps it (the round's
// insert): sweep.lateness, at least a minute, covers that, as it covers the
// web server's buffered log writes and the wait for the reader to wake.

const (
	// defaultOwnersRefresh is how often records are rewritten and read.
	defaultOwnersRefresh = time.Minute
	// ownersWindow is how many refresh intervals a record stays live
	// without being rewritten: two refreshes may fail before a collector
	// that is still there looks gone.
	ownersWindow = 3
	// waitingLogEvery: a file left to another collector is logged when that
	// starts, then again at most this often while it lasts.
	waitingLogEvery = 10 * time.Minute
	// releaseTimeout bounds the release of the records at stop.
	releaseTimeout = 5 * time.Second
)

// errOwnedElsewhere says another collector ships the file.
var errOwnedElsewhere = errors.New("another collector ships this file")

type ownState int

const (
	ownShipping ownState = iota // read by this collector
	ownIdle                     // this collector's, not open now (reopened by the scan)
	ownWaiting                  // another collector ships it
)

// ownEntry is this collector's record of one source.
type ownEntry struct {
	id         uint64
	site, path string
	state      ownState
	// started is when this collector's claim began, by the store's clock
	// (zero: not written yet, or lapsed: a new claim).
	started time.Time
	// written is when a round last wrote the record (this host's clock,
	// only to measure how long ago).
	written time.Time
	// opened is the id the file had when the scan opened it, before open
	// re-keyed it (the scan checks it, see waits).
	opened uint64
	other  sink.Owner // waiting: who ships the file
	logged time.Time  // waiting: when last logged
	yield  func()     // shipping: stops the shipper at its next batch
	// caught reports whether every line of the file is committed (the
	// shipper's caughtUp); nil when no shipper reads it.
	caught func() bool
	// caughtAt is the last caught_up written (the store's clock).
	caughtAt time.Time
}

// claimReq is a file at open waiting for its round.
type claimReq struct {
	e    *ownEntry
	done chan error // nil, errOwnedElsewhere, or the store's error
}

// ownership is the collector's side of source_owners.
type ownership struct {
	ins        Inserter
	log        *slog.Logger
	m          *Metrics
	id, host   string
	every, win time.Duration
	// sites are this collector's records of the sites it reads
	// (sink.SiteRecord), rewritten at every refresh.
	sites []sink.ClaimedSource
	// done is closed when the collector's run ends (start).
	done <-chan struct{}

	kick  chan struct{}
	round sync.Mutex // one round at a time

	mu      sync.Mutex
	entries map[uint64]*ownEntry
	aliases map[uint64]uint64 // the id a file was opened under -> its entry's, where open re-keyed it
	pending []*claimReq
	gone    []sink.ClaimedSource // released at the next round
	// uncheckedLogged: when source_owners unusable was last logged.
	uncheckedLogged time.Time
}

func newOwnership(ins Inserter, log *slog.Logger, m *Metrics, id, host string, every time.Duration, sources []Source) *ownership {
	globs := map[string][]string{}
	var sites []string
	for _, src := range sources {
		if globs[src.Site] == nil {
			sites = append(sites, src.Site)
		}
		globs[src.Site] = append(globs[src.Site], src.Glob)
	}
	o := &ownership{ins: ins, log: log, m: m, id: id, host: host, every: every, win: ownersWindow * every,
		kick: make(chan struct{}, 1), entries: map[uint64]*ownEntry{}, aliases: map[uint64]uint64{}}
	for _, site := range sites {
		o.sites = append(o.sites, sink.SiteRecord(site, strings.Join(globs[site], " ")))
	}
	return o
}

// caughtUp reports whether every line written to the file so far is
// committed: the reader last found the end of the data at the file's size
// now, and no batch of the source is being filled, waiting or in flight
// (a batch is in unshipped from its first line until it is released). A
// gzipped file is never: it is caught up once finished (released so).
func (s *shipper) caughtUp() bool {
	if s.id.Gzip || s.reader == nil {
		return false
	}
	fi, err := s.reader.File().Stat()
	if err != nil || fi.Size() != s.endAt.Load() {
		return false
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for b := range c.unshipped {
		if b.SourceID == s.id.ID {
			return false
		}
	}
	return true
}

// start runs the rounds (loop) until ctx ends: the collector's run. A file
// closed once ctx has ended is not finished for good, whatever it was read
// to: the collector stops (closed).
func (o *ownership) start(ctx context.Context) {
	o.mu.Lock()
	o.done = ctx.Done()
	o.mu.Unlock()
	go o.loop(ctx)
}

// stopping reports whether the collector's run has ended; o.mu is held.
func (o *ownership) stopping() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// loop runs a round for the files opening (kicked by claim) and one for
// every file at each refresh interval, until ctx ends.
func (o *ownership) loop(ctx context.Context) {
	t := time.NewTicker(o.every)
	defer t.Stop()
	for {
		refresh := false
		select {
		case <-ctx.Done():
			return
		case <-o.kick:
		case <-t.C:
			refresh = true
		}
		o.runRound(ctx, refresh)
	}
}

// claim writes s's record and reads the others' (in the next round); it
// returns errOwnedElsewhere when another collector ships the file, and
// retries while the store cannot answer. opened is the id the scan opened
// the file under.
func (o *ownership) claim(ctx context.Context, s *shipper, opened uint64) error {
	bo := newBackoff()
	for {
		o.mu.Lock()
		e := o.entries[s.id.ID]
		if e == nil {
			e = &ownEntry{id: s.id.ID, state: ownIdle}
			o.entries[s.id.ID] = e
		}
		e.site, e.path, e.opened = s.src.Site, s.path, opened
		if opened != e.id {
			o.aliases[opened] = e.id
		}
		e.yield, e.caught = s.yield, s.caughtUp
		r := &claimReq{e: e, done: make(chan error, 1)}
		o.pending = append(o.pending, r)
		o.mu.Unlock()
		select {
		case o.kick <- struct{}{}:
		default:
		}
		var err error
		select {
		case err = <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err == nil || errors.Is(err, errOwnedElsewhere) {
			return err
		}
		wait := bo.NextBackOff()
		o.log.Warn("cannot learn whether another collector ships the file; retrying", "path", s.path, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// closed is told that the shipper of source id has ended. finished: read
// to its end, not to be reopened: the record is released.
func (o *ownership) closed(id uint64, finished bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[id]
	if e == nil || e.state == ownWaiting {
		return // a file that yielded waits in line
	}
	e.yield, e.caught = nil, nil
	if finished {
		o.forget(e)
		// Read to its end when the collector stops is not finished: the
		// live file goes on being written, unread (its caught_up stays).
		o.gone = append(o.gone, sink.ClaimedSource{ID: id, Site: e.site, Path: e.path, Release: true, Finished: !o.stopping(), LastCaughtUp: e.caughtAt})
		return
	}
	e.state = ownIdle
}

// waits reports whether another collector ships the file the scan knows as
// id: it is not opened until a round says it is this collector's.
func (o *ownership) waits(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entries[id]
	if e == nil {
		e = o.entries[o.aliases[id]]
	}
	return e != nil && e.state == ownWaiting
}

// forget drops e; o.mu is held.
func (o *ownership) forget(e *ownEntry) {
	delete(o.entries, e.id)
	if o.aliases[e.opened] == e.id {
		delete(o.aliases, e.opened)
	}
}

// prune forgets the sources no present file has (ids from the last scan),
// releasing their records at the next round.
func (o *ownership) prune(present map[uint64]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, e := range o.entries {
		if present[id] || present[e.opened] || e.state == ownShipping {
			continue
		}
		o.forget(e)
		// Gone from disk: no line of it will be read again, by anyone.
		o.gone = append(o.gone, sink.ClaimedSource{ID: id, Site: e.site, Path: e.path, Release: true, Finished: true})
	}
	o.gauge()
}

// runRound writes the records of the files opening (and, at a refresh, of
// every file) in one insert, reads them back and decides for each.
func (o *ownership) runRound(ctx context.Context, refresh bool) {
	o.round.Lock()
	defer o.round.Unlock()
	o.mu.Lock()
	reqs := o.pending
	o.pending = nil
	var entries []*ownEntry
	in := map[*ownEntry]bool{}
	add := func(e *ownEntry) {
		if !in[e] {
			in[e] = true
			entries = append(entries, e)
		}
	}
	for _, r := range reqs {
		add(r.e)
	}
	if refresh {
		for _, e := range o.entries {
			add(e)
		}
	}
	t0 := time.Now()
	claim := sink.Claim{Collector: o.id, Host: o.host, Window: o.win}
	caught := make([]func() bool, len(entries))
	for i, e := range entries {
		if !e.written.IsZero() && t0.Sub(e.written) > o.win {
			// Not rewritten for the window: to the others the claim has
			// lapsed, and another collector may have taken the file. A
			// new claim, behind any such.
			e.started = time.Time{}
		}
		if e.state == ownShipping {
			caught[i] = e.caught
		}
		claim.Sources = append(claim.Sources, sink.ClaimedSource{ID: e.id, Site: e.site, Path: e.path, Started: e.started, LastCaughtUp: e.caughtAt})
	}
	gone := o.gone
	o.gone = nil
	claim.Sources = append(claim.Sources, gone...)
	if refresh {
		claim.Sources = append(claim.Sources, o.sites...)
	}
	o.mu.Unlock()
	if len(claim.Sources) == 0 {
		return
	}
	// Outside o.mu: caughtUp takes the collector's lock, which is held
	// when a finishing shipper calls closed.
	for i, f := range caught {
		claim.Sources[i].CaughtUp = f != nil && f()
	}
	rctx, cancel := context.WithTimeout(ctx, max(o.every, 30*time.Second))
	now, owners, err := o.ins.ClaimSources(rctx, claim)
	cancel()
	if err != nil && sink.OwnersUnusable(err) {
		o.unchecked(err, t0, reqs)
		return
	}
	if err != nil {
		o.mu.Lock()
		if ctx.Err() == nil {
			o.gone = append(o.gone, gone...)
		}
		o.mu.Unlock()
		if len(reqs) == 0 && ctx.Err() == nil {
			o.log.Warn("cannot refresh the records of the files this collector ships (source_owners); retrying at the next interval", "files", len(entries), "err", err)
		}
		for _, r := range reqs {
			r.done <- err
		}
		return
	}
	if o.m != nil {
		o.m.OwnersUnchecked.Set(0)
	}
	bySource := map[uint64][]sink.Owner{}
	for _, ow := range owners {
		bySource[ow.Source] = append(bySource[ow.Source], ow)
	}
	results := map[*ownEntry]error{}
	var redated []sink.ClaimedSource
	o.mu.Lock()
	for i, e := range entries {
		if claim.Sources[i].CaughtUp {
			e.caughtAt = now
		}
		fresh := e.started.IsZero()
		if fresh {
			e.started = now
		}
		e.written = t0
		first := o.first(e, bySource[e.id], fresh)
		if first.Collector == o.id {
			if e.state == ownWaiting {
				o.log.Info("the file is this collector's now (the one that shipped it stopped, or gave way); it reads it from where the store's lines end", "path", e.path,
					"collector", e.other.Collector, "host", e.other.Host)
				e.state = ownIdle
			}
			continue
		}
		results[e] = errOwnedElsewhere
		if last := latest(bySource[e.id], o.id); fresh && !e.started.After(last) {
			// A claim that gave way is dated after every record it saw,
			// at once, so that the order every collector reads from the
			// records (started, then id) puts it behind them: the clocks
			// of two claims written in the same second, or of two
			// servers, do not say which was first.
			e.started = last.Add(time.Second)
			redated = append(redated, sink.ClaimedSource{ID: e.id, Site: e.site, Path: e.path, Started: e.started})
		}
		if e.state == ownShipping && e.yield != nil {
			// Shipped here too: the two started within one interval of
			// each other and a lagging replica hid the other's record at
			// open, or this collector could not refresh its records for
			// the window. The later claim gives way.
			o.log.Error("another collector claimed this file first and was not seen at open (a replica lagged, or this collector's records went stale): this one stops reading it at its next batch",
				"path", e.path, "collector", first.Collector, "host", first.Host, "since", first.Started.UTC())
			e.yield()
			e.yield = nil
			if o.m != nil {
				o.m.SourcesYielded.Inc()
			}
		}
		if e.state != ownWaiting || e.other.Collector != first.Collector || t0.Sub(e.logged) >= waitingLogEvery {
			o.log.Error("not reading a log file another collector ships (one collector per file); looking again every refresh",
				"path", e.path, "collector", first.Collector, "host", first.Host, "its_path", first.Path, "since", first.Started.UTC(), "refresh", o.every)
			e.logged = t0
		}
		e.state, e.other, e.yield = ownWaiting, first, nil
	}
	for _, r := range reqs {
		err := results[r.e]
		if err == nil && o.entries[r.e.id] == r.e {
			r.e.state = ownShipping
		}
		r.done <- err
	}
	o.gauge()
	o.mu.Unlock()
	if len(redated) > 0 {
		rctx, cancel := context.WithTimeout(ctx, max(o.every, 30*time.Second))
		defer cancel()
		if _, _, err := o.ins.ClaimSources(rctx, sink.Claim{Collector: o.id, Host: o.host, Window: o.win, Sources: redated}); err != nil && ctx.Err() == nil {
			o.log.Warn("cannot write the new dates of claims that gave way; written at the next refresh", "files", len(redated), "err", err)
		}
	}
}

// unchecked: the store refuses source_owners to this collector for good
// (a table missing, a privilege not granted: sink.OwnersUnusable). The
// files opening are shipped without the check, as before there was one:
// an upgrade whose schema step was skipped must not stop shipping. Said
// loudly, at most every waitingLogEvery, and in a gauge; once the table is
// usable the rounds check again.
func (o *ownership) unchecked(err error, now time.Time, reqs []*claimReq) {
	o.mu.Lock()
	if now.Sub(o.uncheckedLogged) >= waitingLogEvery {
		o.log.Error("cannot record which collector ships each file (source_owners): shipping without the check, so a second collector on the same files would ship their lines twice; run `collector -migrate` as an administrator, or grant SELECT, INSERT on source_owners to the collector (deploy/sql/users.sql)", "err", err)
		o.uncheckedLogged = now
	}
	for _, r := range reqs {
		if o.entries[r.e.id] == r.e {
			r.e.state = ownShipping
		}
		r.done <- nil
	}
	o.mu.Unlock()
	if o.m != nil {
		o.m.OwnersUnchecked.Set(1)
	}
}

// first is the live record of e's source that ships it: the one started
// first, then the lowest collector id, this collector's own record counting
// with the start it wrote. Every collector reading the same records picks
// the same one.
//
// Except that a claim made in this round (fresh) gives way to every other
// record it sees: that collector may have read the records before this
// claim was written, found none but its own, and be shipping. Since each
// writes its claim before it reads, of two claims made at the same moment
// at least one sees the other (given complete replicas, see
// sink.ClaimSources): one of them ships, or, when both saw each other, the
// next refresh picks one; the file then waits one interval, and no line is
// shipped twice.
func (o *ownership) first(e *ownEntry, owners []sink.Owner, fresh bool) sink.Owner {
	me := sink.Owner{Source: e.id, Collector: o.id, Host: o.host, Path: e.path, Started: e.started}
	var best *sink.Owner
	if !fresh {
		best = &me
	}
	for i, ow := range owners {
		if ow.Collector == o.id {
			continue
		}
		if best == nil || ow.Started.Before(best.Started) || ow.Started.Equal(best.Started) && ow.Collector < best.Collector {
			best = &owners[i]
		}
	}
	if best == nil {
		return me
	}
	return *best
}

// latest is the latest start among the records of collectors other than
// self (zero: none).
func latest(owners []sink.Owner, self string) time.Time {
	var t time.Time
	for _, ow := range owners {
		if ow.Collector != self && ow.Started.After(t) {
			t = ow.Started
		}
	}
	return t
}

// releaseAll gives every record up, once the collector's last batches are
// committed: the next collector in line takes the files over at its next
// refresh instead of after the window.
func (o *ownership) releaseAll(ctx context.Context) {
	o.round.Lock()
	defer o.round.Unlock()
	o.mu.Lock()
	claim := sink.Claim{Collector: o.id, Host: o.host, Window: o.win, Sources: o.gone}
	for _, e := range o.entries {
		// Released, not finished: the file may have lines this collector
		// did not read, so its sites' windows wait (caught_up stays).
		claim.Sources = append(claim.Sources, sink.ClaimedSource{ID: e.id, Site: e.site, Path: e.path, Release: true, LastCaughtUp: e.caughtAt})
	}
	for _, site := range o.sites {
		site.Release = true
		claim.Sources = append(claim.Sources, site)
	}
	o.entries, o.aliases, o.gone = map[uint64]*ownEntry{}, map[uint64]uint64{}, nil
	o.gauge()
	o.mu.Unlock()
	if len(claim.Sources) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	if _, _, err := o.ins.ClaimSources(ctx, claim); err != nil && !sink.OwnersUnusable(err) {
		o.log.Warn("cannot release the records of the files this collector shipped; another collector takes them over once they are stale", "files", len(claim.Sources), "after", o.win, "err", err)
	}
}

// problem says which files another collector ships, for Ready().
func (o *ownership) problem() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var waiting []*ownEntry
	for _, e := range o.entries {
		if e.state == ownWaiting {
			waiting = append(waiting, e)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].path < waiting[j].path })
	var b strings.Builder
	fmt.Fprintf(&b, "%d log file(s) not read: another collector ships them (one collector per file): ", len(waiting))
	for i, e := range waiting {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(waiting)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s shipped by collector %s on %s since %s", e.path, e.other.Collector, e.other.Host, e.other.Started.UTC().Format(time.RFC3339))
	}
	return errors.New(b.String())
}

// gauge sets the refused-files gauge; o.mu is held.
func (o *ownership) gauge() {
	if o.m == nil {
		return
	}
	n := 0
	for _, e := range o.entries {
		if e.state == ownWaiting {
			n++
		}
	}
	o.m.SourcesRefused.Set(float64(n))
}
