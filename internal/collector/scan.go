package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hitcount/hitcount/internal/tailer"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// rotatedSuffix matches the names logrotate gives rotated files after the
// live name: .1, .2.gz, -20261122, -2026112213.gz, .2026-11-22. Only these are
// read as a live file's rotated siblings, so an unrelated access.log.bak is left alone.
var rotatedSuffix = regexp.MustCompile(`^(\.\d+|[.-]\d{8,10}|[.-]\d{4}-\d{2}-\d{2})(\.gz)?$`)

type candidate struct {
	path string
	// base is the glob's directory before its first wildcard, rel the path
	// below it: tailer.OpenLog follows no symlink below base.
	base, rel string
	live      bool
	// literal: the configured pattern has no wildcard and names this path
	// itself, the one case where the file may be a symlink (see OpenLog).
	literal bool
}

// candidates expands a source's glob: the live files it matches, then their
// rotated siblings, oldest first (.2.gz before .1), so a backfill reads history
// in order.
func candidates(glob string) []candidate {
	base, literal := globBase(glob)
	// WithNoFollow: ** does not descend into a symlinked directory, whose
	// files OpenLog would refuse one by one anyway.
	live, _ := doublestar.FilepathGlob(glob, doublestar.WithNoFollow())
	sort.Strings(live)
	isLive := map[string]bool{}
	var out []candidate
	add := func(p string, live bool) {
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return // not below base: cannot happen for what the glob matched
		}
		out = append(out, candidate{path: p, base: base, rel: rel, live: live, literal: live && literal})
	}
	for _, p := range live {
		isLive[p] = true
		add(p, true)
	}
	var rotated []string
	for _, p := range live {
		dot, _ := filepath.Glob(escapeGlob(p) + ".*")
		dash, _ := filepath.Glob(escapeGlob(p) + "-*")
		for _, s := range append(dot, dash...) {
			if !isLive[s] && rotatedSuffix.MatchString(s[len(p):]) {
				rotated = append(rotated, s)
			}
		}
	}
	sort.Slice(rotated, func(i, j int) bool { return rotatedOrder(rotated[i]) > rotatedOrder(rotated[j]) })
	for _, p := range rotated {
		add(p, false)
	}
	return out
}

// globBase splits a glob as doublestar does: the directory before the first
// wildcard, and whether there is no wildcard at all. An escaped wildcard
// counts as one, which only makes the symlink rule stricter.
func globBase(glob string) (base string, literal bool) {
	base, rest := doublestar.SplitPattern(filepath.ToSlash(filepath.Clean(glob)))
	return filepath.FromSlash(base), !strings.ContainsAny(rest, `*?[{\`)
}

// rotatedOrder ranks a rotated file by age: the modification time, as names
// are numbered (.1 newest) or dated (newest last) depending on the config.
// Lstat: a symlink is refused when opened, and its target is none of our
// business, not even its time.
func rotatedOrder(p string) int64 {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0
	}
	return -fi.ModTime().UnixNano()
}

var globMeta = regexp.MustCompile(`[*?\[\]\\]`)

func escapeGlob(p string) string { return globMeta.ReplaceAllString(p, `\$0`) }

func inodeOf(fi os.FileInfo) ([2]uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return [2]uint64{}, false
	}
	return [2]uint64{uint64(st.Dev), st.Ino}, true
}

// skippedWhole is the position of a file a first start with start_at: end
// leaves out entirely (a gzipped rotated file).
const skippedWhole int64 = -1

// scan opens every candidate file not being read yet.
func (c *Collector) scan(ctx context.Context, wg *sync.WaitGroup, first bool) {
	present := map[string]bool{}
	for i := range c.opts.Sources {
		src := &c.opts.Sources[i]
		cands := candidates(src.Glob)
		c.reportMatches(i, src, len(cands))
		for _, cand := range cands {
			if ctx.Err() != nil {
				return
			}
			present[cand.path] = true
			if err := c.consider(ctx, wg, src, cand, first); err != nil {
				c.log.Warn("cannot read log file", "path", cand.path, "err", err)
			}
		}
	}
	// A refused path that is gone is forgotten: should it come back, it is
	// reported again.
	c.mu.Lock()
	for p := range c.refused {
		if !present[p] {
			delete(c.refused, p)
		}
	}
	c.mu.Unlock()
}

// reportMatches says when a source matches no file (a typo in the path, or a
// log not written yet: nothing else would show it) and when it matches again,
// once per change, and keeps the count in a gauge. Only the scan goroutine
// calls it.
func (c *Collector) reportMatches(i int, src *Source, n int) {
	if c.m != nil {
		c.m.SourceFiles.WithLabelValues(src.Site, src.Glob).Set(float64(n))
	}
	prev, seen := c.matches[i]
	c.matches[i] = n
	switch {
	case n == 0 && (!seen || prev > 0):
		c.log.Warn("source matches no file: check the path (the collector keeps looking and reads it once it appears)", "path", src.Glob, "site", src.Site)
	case n > 0 && seen && prev == 0:
		c.log.Info("source matches files again", "path", src.Glob, "site", src.Site, "files", n)
	}
}

// skip reports a file the policy refuses (see tailer.OpenLog): once per path
// and reason, in the log and the skipped-files metric, as the scan meets it
// again every few seconds.
func (c *Collector) skip(site, path string, r *tailer.RefusedError) {
	c.mu.Lock()
	prev, known := c.refused[path]
	c.refused[path] = r.Reason
	c.mu.Unlock()
	if known && prev == r.Reason {
		return
	}
	c.log.Warn("not reading a file the source matches", "path", path, "reason", r.Reason, "why", r.Detail, "site", site)
	if c.m != nil {
		c.m.FilesSkipped.WithLabelValues(site, r.Reason).Inc()
	}
}

func (c *Collector) consider(ctx context.Context, wg *sync.WaitGroup, src *Source, cand candidate, first bool) error {
	// Opened before anything is decided, and everything after is asked of
	// the descriptor: a path checked and then opened could be swapped for a
	// symlink in between.
	f, fi, err := tailer.OpenLog(cand.base, cand.rel, cand.literal)
	if err != nil {
		var refused *tailer.RefusedError
		switch {
		case errors.As(err, &refused):
			c.skip(src.Site, cand.path, refused)
			return nil
		case errors.Is(err, os.ErrNotExist):
			return nil // rotated away between the glob and now
		}
		return err
	}
	key, _ := statKey(fi)
	c.mu.Lock()
	delete(c.refused, cand.path)
	busy := c.openInode[key]
	prev, wasSeen := c.seen[key]
	c.mu.Unlock()
	if busy || (wasSeen && prev.size == fi.Size() && prev.mtime.Equal(fi.ModTime())) {
		f.Close()
		return nil
	}
	id, err := tailer.Fingerprint(f, src.Site)
	if err != nil {
		f.Close()
		if errors.Is(err, tailer.ErrNotReady) {
			return nil
		}
		return err
	}
	c.mu.Lock()
	_, dup := c.open[id.ID]
	hasSite := c.sites[src.Site]
	c.mu.Unlock()
	if dup {
		// The same content under another name and inode while the original
		// is still open: copytruncate's copy before the truncation. Read it
		// once the original is finished.
		f.Close()
		return nil
	}
	markSeen := func() {
		c.mu.Lock()
		c.seen[key] = fileStat{size: fi.Size(), mtime: fi.ModTime(), id: id.ID}
		c.mu.Unlock()
		f.Close()
	}
	r, err := tailer.NewReader(f, id.Gzip, 0, src.MaxLine)
	if err != nil {
		f.Close()
		return err
	}
	var start int64
	how := "from the beginning"
	off, ok, err := c.settle(ctx, id.ID)
	if err != nil {
		f.Close()
		return err
	}
	switch {
	case ok:
		found, err := r.SeekAfterLine(off)
		if err != nil {
			f.Close()
			return err
		}
		if !found {
			// Shorter than what was committed: a copy taken before lines
			// that were shipped from the original. Nothing left to read.
			markSeen()
			return nil
		}
		start, how = r.Offset(), "after the last committed line"
	case c.positions.has(id.ID) && c.positions.get(id.ID) == skippedWhole:
		// History a first start with start_at: end left out: still out.
		markSeen()
		return nil
	case c.positions.has(id.ID):
		start, how = c.positions.get(id.ID), "at the position chosen when first seen"
		if err := r.SeekTo(start); err != nil {
			f.Close()
			return err
		}
	case hasSite || !first || !src.StartAtEnd:
		// New since the collector first ran (or backfill asked for): all of it.
	case !cand.live || id.Gzip:
		// start_at end, first run: history is not backfilled. Should a rotated
		// file still grow (the server writes to it until it reopens its log),
		// only the new lines are read.
		// A gzipped file never grows: it is left out whole, and remembered
		// so, or the next start (its site now has lines) would take it for
		// a file new since the first run and ship it all.
		end := skippedWhole
		if !id.Gzip {
			if end, err = tailer.AlignToLineEnd(f, fi.Size()); err != nil {
				f.Close()
				return err
			}
		}
		if err := c.positions.set(id.ID, end); err != nil {
			c.log.Warn("cannot save the positions hint", "err", err)
		}
		markSeen()
		return nil
	default:
		start, err = tailer.AlignToLineEnd(f, fi.Size())
		if err != nil {
			f.Close()
			return err
		}
		if err := r.SeekTo(start); err != nil {
			f.Close()
			return err
		}
		how = "at its end (start_at: end)"
		if err := c.positions.set(id.ID, start); err != nil {
			c.log.Warn("cannot save the positions hint", "err", err)
		}
	}
	// The in-flight record is written before every insert and cleared once
	// the store acknowledged it: it exists only for a batch whose outcome the
	// previous process never learnt.
	replay := int64(-1)
	var held map[int64]bool
	if span, ok := c.positions.getInFlight(id.ID); ok {
		x, ok := c.ins.(interface{ Exclusive() bool })
		exclusive := ok && x.Exclusive()
		switch {
		case exclusive && c.dedup && span.First <= start:
			// No other process inserts into this store, and nothing has
			// since the crash: the identical batch is still inside the
			// deduplication window. The store keeps what it has and fills
			// what the crash cut short (a view's part after the table's).
			// Even when ingest_progress counts the batch: it is a view
			// too, and its part may have landed while another's did not
			// (found by the chaos harness: hits_1m short after kill -9s).
			if err := r.SeekTo(span.First); err == nil {
				start, replay, how = span.First, span.Last, how+", replaying the batch in flight"
			}
		case span.Last >= start:
			// Elsewhere a window may have passed: ask the tables what they
			// hold of the batch, and send only the rest.
			h, err := c.ins.Holds(ctx, id.ID, span)
			if err != nil {
				f.Close()
				return err
			}
			held = h.Hits
			for off := range h.Rejects {
				held[off] = true
			}
			how += fmt.Sprintf(", %d lines of the batch in flight already stored", len(held))
		}
	}
	p, err := parser.New(src.Format)
	if err != nil {
		f.Close()
		return err
	}
	s := &shipper{
		c: c, src: src, id: id, path: cand.path, live: cand.live, literal: cand.literal, reader: r, parser: p,
		key: key, sendCh: make(chan *sink.Batch), sent: make(chan struct{}),
		replayUntil: replay, held: held,
	}
	c.mu.Lock()
	c.open[id.ID] = s
	c.openInode[key] = true
	c.mu.Unlock()
	c.log.Info("reading log file", "path", cand.path, "site", src.Site, "source_id", id.ID, "offset", start, "how", how, "gzip", id.Gzip)
	if err := c.ins.RecordSource(ctx, src.Site, id.ID, cand.path); err != nil {
		c.log.Warn("cannot record the source's path", "path", cand.path, "err", err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.send(ctx) }()
	go func() { defer wg.Done(); s.read(ctx) }()
	return nil
}
