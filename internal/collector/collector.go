// Package collector ships access-log lines into ClickHouse, every line exactly
// once. The log file is the buffer and ClickHouse is the checkpoint: a batch's
// lines are forgotten only once ClickHouse has them, and after any failure the
// collector asks ClickHouse what it committed and reads again from there.
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hitcount/hitcount/internal/filewake"
	"github.com/hitcount/hitcount/internal/lockfile"
	"github.com/hitcount/hitcount/internal/tailer"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Inserter is the store the collector ships to: a ClickHouse server (sink) or
// the embedded engine.
type Inserter interface {
	// Insert writes a batch; any error means its outcome is unknown.
	Insert(ctx context.Context, b *sink.Batch) error
	// Settle waits until no insert of the source is running, then returns the
	// offset of its last committed line (ok false: none).
	Settle(ctx context.Context, source uint64) (off int64, ok bool, err error)
	// Committed reads the last committed line of every source.
	Committed(ctx context.Context) (sink.Progress, error)
	// Holds says which of a source's lines in span hits and rejects hold
	// (call it once Settle says no insert of the source runs).
	Holds(ctx context.Context, source uint64, span sink.Span) (sink.Held, error)
	// MarkProgress records a source committed up to the line at last.
	MarkProgress(ctx context.Context, site string, source uint64, last int64) error
	// RecordSource notes which file a source id is, for operators.
	RecordSource(ctx context.Context, site string, id uint64, path string) error
	// ClaimSources writes this collector's records of the sources it ships
	// or waits for in one insert, then reads every live record of them
	// (which collector ships each: owners.go), with the store's time the
	// records were stamped with.
	ClaimSources(ctx context.Context, c sink.Claim) (time.Time, []sink.Owner, error)
	// Deduplicates reports whether an identical batch inserted again (same
	// id) is dropped by the store wherever it already landed, the main table
	// and each materialized view alike.
	Deduplicates() bool
}

// Source is one configured log: a glob and how to read what it matches.
type Source struct {
	Glob string
	Site string
	// Format is a parser format, or parser.Auto: detected per file
	// (format.go).
	Format     string
	StartAtEnd bool
	MaxLine    int
	// Location is the zone of times logged without one (parser.Options);
	// UTC when nil.
	Location *time.Location
	// Clients: how client addresses are stored (anonymized or not) and
	// the key of the visitor hash (sink/visitor.go).
	Clients sink.Clients
}

// Options tune a Collector; zero values take the defaults in brackets.
type Options struct {
	Sources    []Source
	BatchRows  int           // rows per insert [50000]
	BatchDelay time.Duration // longest a line waits for its batch to fill [1s]
	MaxPending int           // batches being filled or sent at once, over all files [2]
	// MaxOpenRotated is how many rotated files (not a glob's live match) are
	// open at once; the others wait, oldest first [4].
	MaxOpenRotated int
	Poll           time.Duration // how often an idle file is checked for growth [250ms]
	Scan           time.Duration // how often globs are expanded for new files [1s]
	// RotatedIdle is how long a file that left its path (renamed or deleted by
	// rotation) or a rotated sibling stays open at its end before it counts as
	// finished: the web server may write to it until it reopens its log [5s].
	RotatedIdle time.Duration
	// PollOnly: an idle file is not watched for changes (inotify), only
	// checked every Poll. Watched, it is read as soon as it grows, and Poll
	// still bounds the wait (NFS, for one, tells nothing of another host's
	// writes).
	PollOnly bool
	// StateDir holds the positions hint (where a never-seen file started when
	// start_at is end) and the collector's id (collector.id); empty disables
	// the hint, and the id is new for each process.
	StateDir string
	Logger   *slog.Logger
	Metrics  *Metrics
	Now      func() time.Time
	// Backfill, if set, is called when a file is opened with more than
	// BackfillMin bytes to read, and the returned Progress follows the read
	// until it catches up (a progress bar on a terminal).
	Backfill func(path string, start, size int64) Progress

	// DetectWait is how long a live file with format: auto that has fewer
	// lines than detection looks at waits for more before its format is
	// detected on what it has [2s].
	DetectWait time.Duration

	// OwnersRefresh is how often the collector rewrites its records of the
	// files it ships in source_owners and reads the other collectors'; a
	// record not rewritten for 3 intervals is stale (owners.go) [1m].
	OwnersRefresh time.Duration
}

// Progress follows one backfill.
type Progress interface {
	Set(offset int64)
	Done()
}

// BackfillMin is the backlog above which a file's reading counts as a backfill.
const BackfillMin = 64 << 20

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = 50000
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = time.Second
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 2
	}
	if o.MaxOpenRotated <= 0 {
		o.MaxOpenRotated = 4
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Scan <= 0 {
		o.Scan = time.Second
	}
	if o.RotatedIdle <= 0 {
		o.RotatedIdle = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OwnersRefresh <= 0 {
		o.OwnersRefresh = defaultOwnersRefresh
	}
	if o.DetectWait <= 0 {
		o.DetectWait = 2 * time.Second
	}
}

// Collector tails every configured source and ships its lines.
type Collector struct {
	ins  Inserter
	opts Options
	log  *slog.Logger
	m    *Metrics
	// rejected counts the lines that did not parse since New, every one
	// (the rejects table keeps a sample): for the live view.
	rejected atomic.Uint64

	// free holds the batches not in use: taking one is the permission to read
	// more, so memory is bounded by MaxPending batches whatever the backlog.
	free chan *sink.Batch
	// freed is closed, and replaced, at each batch given back to free:
	// what a reader waiting for a second batch wakes on (acquireSecond).
	poolMu sync.Mutex
	freed  chan struct{}

	mu        sync.Mutex
	committed map[uint64]int64 // last committed line of each open source, from the store, then acks
	sites     map[string]bool  // sites with any committed line
	open      map[uint64]*shipper
	openInode map[[2]uint64]bool
	// openRotated counts the open files that are not a live match.
	openRotated int
	// firsts is what the last complete scan saw of files sharing a first
	// line.
	firsts map[uint64]map[[2]uint64]string
	// seen are files read to their end (or left out), by device and inode,
	// with their size and time then: unchanged, they are not opened again.
	// Entries of files no longer present are dropped at each scan.
	seen      map[[2]uint64]fileStat
	refused   map[string]string // path -> reason, for paths reported as not read
	positions *positions
	matches   map[int]int // files each source matched at the last scan (scan goroutine only)
	dedup     bool        // the store drops an identical re-insert (see Inserter.Deduplicates)
	watcher   fileWatcher // wakes idle files on change; nil: poll only (set by Run)
	ready     bool
	storeErr  error                     // why the store failed last, while not ready (Ready)
	unshipped map[*sink.Batch]time.Time // batches read and not yet committed, by read time
	own       *ownership                // which collector ships each file (owners.go)
}

type fileStat struct {
	size  int64
	mtime time.Time
	ids   [2]uint64 // the source id it was read under, and its first-line id
	path  string
}

// New returns a collector shipping to ins.
func New(ins Inserter, opts Options) (*Collector, error) {
	opts.defaults()
	for _, s := range opts.Sources {
		if s.Format == parser.Auto {
			continue
		}
		if _, err := parser.NewWith(s.Format, parser.Options{Location: s.Location}); err != nil {
			return nil, fmt.Errorf("source %s: %w", s.Glob, err)
		}
	}
	c := &Collector{
		ins: ins, opts: opts, log: opts.Logger, m: opts.Metrics,
		free: make(chan *sink.Batch, opts.MaxPending), freed: make(chan struct{}),
		committed: map[uint64]int64{}, sites: map[string]bool{},
		open: map[uint64]*shipper{}, openInode: map[[2]uint64]bool{},
		seen: map[[2]uint64]fileStat{}, refused: map[string]string{},
		unshipped: map[*sink.Batch]time.Time{}, matches: map[int]int{},
		dedup: ins.Deduplicates(),
	}
	for range opts.MaxPending {
		c.free <- nil // allocated on first use
	}
	if opts.StateDir != "" {
		p, err := loadPositions(opts.StateDir)
		if err != nil {
			return nil, err
		}
		c.positions = p
	}
	id, err := instanceID(opts.StateDir)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	c.own = newOwnership(ins, opts.Logger, opts.Metrics, id, host, opts.OwnersRefresh, opts.Sources)
	return c, nil
}

// Ready reports whether the collector has loaded ClickHouse's committed
// offsets, its last contact with ClickHouse succeeded, (cluster mode) its
// replica lacks no part it cannot fetch, and no file it matches is left to
// another collector that ships it (owners.go).
func (c *Collector) Ready() error {
	if r, ok := c.ins.(replicaChecker); ok {
		if err := r.ReplicaProblem(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		if c.storeErr != nil {
			// Why, for an operator reading /readyz: a refused login above all.
			if sink.LoginRefused(c.storeErr) {
				return fmt.Errorf("clickhouse refuses the login: %w", c.storeErr)
			}
			return fmt.Errorf("the store does not answer: %w", c.storeErr)
		}
		return errors.New("not connected to the store, or offsets not loaded yet")
	}
	return c.own.problem()
}

// replicaChecker is a store with replicas (a cluster) that can be incomplete.
type replicaChecker interface {
	ReplicaProblem() error
	RecheckReplicas(ctx context.Context)
}

func (c *Collector) setReady(ok bool) {
	c.mu.Lock()
	c.ready = ok
	if ok {
		c.storeErr = nil
	}
	c.mu.Unlock()
	if c.m != nil {
		c.m.ClickHouseUp.Set(map[bool]float64{true: 1, false: 0}[ok])
	}
}

// Run ships until ctx ends, then flushes what it has read and returns.
func (c *Collector) Run(ctx context.Context) error {
	if c.opts.StateDir != "" {
		// Two collectors on one state directory are two collectors on the
		// same files, each with its own batches in flight: lines would ship
		// twice. The lock dies with the process.
		lock, err := lockfile.Take(filepath.Join(c.opts.StateDir, "collector.lock"))
		if errors.Is(err, lockfile.ErrHeld) {
			return fmt.Errorf("another collector runs on state_dir %s: %w; run one collector per state_dir", c.opts.StateDir, err)
		}
		if err != nil {
			return err
		}
		defer lock.Release()
	}
	if err := c.loadCommitted(ctx); err != nil {
		return err
	}
	if !c.opts.PollOnly && c.watcher == nil { // (a test may have set one)
		// One watcher for every file, closed once they are all finished.
		w, err := filewake.New()
		if err != nil {
			c.log.Warn("cannot watch files for changes; idle files are polled", "poll", c.opts.Poll, "err", err)
		} else {
			c.watcher = w
			defer w.Close()
		}
	}
	c.own.start(ctx)
	// After the last batches are committed (wg.Wait, deferred below, runs
	// first): the next collector in line then resumes after them.
	defer c.own.releaseAll(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer wg.Wait()
	first := true
	ticker := time.NewTicker(c.opts.Scan)
	defer ticker.Stop()
	for {
		c.scan(ctx, &wg, first)
		first = false
		c.updateGauges()
		if r, ok := c.ins.(replicaChecker); ok {
			r.RecheckReplicas(ctx)
		}
		select {
		case <-ctx.Done():
			c.log.Info("collector stopping: flushing batches in flight")
			return nil
		case <-ticker.C:
		}
	}
}

// loadCommitted reads committed offsets, retrying while the store is down.
func (c *Collector) loadCommitted(ctx context.Context) error {
	bo := newBackoff()
	for {
		p, err := c.ins.Committed(ctx)
		var inc *sink.IncompleteError
		if errors.As(err, &inc) {
			// What this replica has, and the sites this collector shipped
			// lines of itself, decide start_at: end; each source then asks
			// for its own offset (settle).
			c.log.Warn("the store's replica lacks parts it cannot fetch now; starting with what it has", "err", err)
			err = nil
		}
		if err == nil {
			for _, s := range c.positions.ackedSites() {
				p.Sites[s] = true
			}
			// Offsets are asked of the store per source as each file opens
			// (Settle); kept here they would only grow with every file ever
			// shipped.
			c.mu.Lock()
			for s := range p.Sites {
				c.sites[s] = true
			}
			c.mu.Unlock()
			c.setReady(true)
			return nil
		}
		c.storeFailed(err)
		wait := bo.NextBackOff()
		c.logStoreErr("cannot read committed offsets; retrying", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("load committed offsets: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// knownAs reports whether this collector's records have a file under one of
// its other ids and nothing under source (never acknowledged, nothing in
// flight): what it shipped of the file is under that id.
func (c *Collector) knownAs(source uint64, others []uint64) bool {
	if _, inFlight := c.positions.getInFlight(source); inFlight {
		return false
	}
	for _, id := range others {
		if id == source {
			continue
		}
		if _, ok := c.positions.getAcked(id); ok {
			return true
		}
		if _, ok := c.positions.getInFlight(id); ok {
			return true
		}
	}
	return false
}

func (c *Collector) updateGauges() {
	if c.m == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.OpenFiles.Set(float64(len(c.open)))
	var oldest time.Time
	for _, t := range c.unshipped {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		c.m.OldestAge.Set(0)
	} else {
		c.m.OldestAge.Set(c.opts.Now().Sub(oldest).Seconds())
	}
	for _, s := range c.open {
		if st, err := s.reader.File().Stat(); err == nil && !s.reader.Gzip() {
			done := c.committed[s.id.ID]
			c.m.BytesBehind.WithLabelValues(s.src.Site, s.path).Set(float64(max(0, st.Size()-done)))
		}
	}
}

// acquire takes a free batch, blocking while MaxPending are in use.
func (c *Collector) acquire(ctx context.Context) (*sink.Batch, error) {
	select {
	case b := <-c.free:
		if b == nil {
			b = sink.NewBatch(c.opts.BatchRows)
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// acquireSecond takes a batch for a source whose previous batch is still
// being committed (busy), only while another stays free for the other
// sources; otherwise it waits until one does or its own batch is done. A
// source whose commit waits (on a replica, an unknown outcome) would else
// hold two batches, all of max_pending 2, and every other file would wait
// with it (found by the chaos harness's cluster store: files without a
// fault of their own waited up to 22 s). Reading is far faster than an
// insert, so the second batch only overlaps a little of the first's.
func (c *Collector) acquireSecond(ctx context.Context, busy *atomic.Bool) (*sink.Batch, error) {
	for {
		c.poolMu.Lock()
		wake := c.freed
		c.poolMu.Unlock()
		if !busy.Load() {
			return c.acquire(ctx)
		}
		if len(c.free) >= 2 {
			select {
			case b := <-c.free:
				if b == nil {
					b = sink.NewBatch(c.opts.BatchRows)
				}
				return b, nil
			default:
			}
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Collector) release(b *sink.Batch) {
	c.mu.Lock()
	delete(c.unshipped, b)
	c.mu.Unlock()
	c.free <- b
	c.poolMu.Lock()
	close(c.freed)
	c.freed = make(chan struct{})
	c.poolMu.Unlock()
}

// ack records a committed batch.
func (c *Collector) ack(b *sink.Batch) {
	c.mu.Lock()
	if cur, ok := c.committed[b.SourceID]; !ok || b.Last > cur {
		c.committed[b.SourceID] = b.Last
	}
	c.sites[b.Site] = true
	c.mu.Unlock()
}

// settle learns where a source's committed lines end, once no insert of it is
// still running on the server (after a failed insert, or at open: a killed
// predecessor's insert may still be running). It retries until it knows or ctx
// ends.
//
// When the store's replica is incomplete, this collector's own record of
// what the store acknowledged answers for a source it shipped; for one it
// has no record of, a record under another of its ids (alsoKnownAs: a file
// shipped under its first line's id) means nothing was shipped under this
// one, and the caller asks about that id next. path, the file being opened,
// is for the log: an operator (and the chaos harness) learns which file waits.
func (c *Collector) settle(ctx context.Context, path string, source uint64, alsoKnownAs ...uint64) (int64, bool, error) {
	bo := newBackoff()
	warned := false
	for {
		off, ok, err := c.ins.Settle(ctx, source)
		var inc *sink.IncompleteError
		if errors.As(err, &inc) {
			// The replica lacks parts a replica that is down holds: they
			// may hold this source's last lines. This collector's own
			// record of what the store acknowledged says where it stopped
			// (one collector per file: nobody else ships it), so the source
			// goes on; one it has no record of waits for the parts.
			if acked, known := c.positions.getAcked(source); known {
				c.log.Warn("resuming from this collector's record of what the store acknowledged", "path", path, "source_id", source, "acked", acked, "replica_has", off, "err", err)
				if !ok || acked > off {
					off, ok = acked, true
				}
				err = nil
			} else if c.knownAs(source, alsoKnownAs) {
				err = nil
			} else if !warned {
				c.log.Warn("a source this collector has no record of waits until the store's replica has every part", "path", path, "source_id", source, "err", err)
				warned = true
			}
		}
		if err == nil {
			c.setReady(true)
			c.mu.Lock()
			if ok {
				c.committed[source] = off
			} else {
				delete(c.committed, source)
			}
			c.mu.Unlock()
			return off, ok, nil
		}
		if ctx.Err() != nil {
			return 0, false, ctx.Err() // stopping: not the store's fault
		}
		c.storeFailed(err)
		wait := bo.NextBackOff()
		c.logStoreErr("cannot learn what the store committed yet; retrying", err, "path", path, "source_id", source, "retry_in", wait)
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// fileKey identifies an open file by device and inode, to skip files already
// being read under another name.
func fileKey(id tailer.Identity) [2]uint64 { return [2]uint64{id.Dev, id.Inode} }

func statKey(fi os.FileInfo) ([2]uint64, bool) {
	id, ok := inodeOf(fi)
	return id, ok
}

// MemoryLimit is the Go runtime's soft memory limit the collector runs with
// unless GOMEMLIMIT says otherwise. The live data is about 50 MB at the default
// batch size (two pointer-free batches plus the driver's block); without a limit
// the garbage collector lets the heap grow to twice that, which would put a
// sidecar's RSS near the 150 MB it promises (measured: 95 MB with the limit).
const MemoryLimit = 80 << 20

// ApplyMemoryLimit sets MemoryLimit unless GOMEMLIMIT is set.
func ApplyMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(MemoryLimit)
	}
}

// storeFailed marks the collector not ready because of err, which Ready
// then gives as the reason.
func (c *Collector) storeFailed(err error) {
	c.setReady(false)
	c.mu.Lock()
	c.storeErr = err
	c.mu.Unlock()
}

// logStoreErr logs a failed call to the store that is retried. A login the
// server refuses is retried too, once running (the password may be being
// rotated, and the log files keep the lines meanwhile), but at error level
// and named as such: it does not pass by itself, unlike a server restarting.
// At start-up it is fatal instead (backend.Open).
func (c *Collector) logStoreErr(msg string, err error, args ...any) {
	if sink.LoginRefused(err) {
		c.log.Error("clickhouse refuses the login (check the password and the server's users); "+msg, append(args, "err", err)...)
		return
	}
	c.log.Warn(msg, append(args, "err", err)...)
}

// RejectedLines is how many lines did not parse since the collector was
// made: every one, where the rejects table keeps at most a sample of each
// batch's (100).
func (c *Collector) RejectedLines() uint64 { return c.rejected.Load() }
