package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hitcount/hitcount/internal/tailer"
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
	// owned: the file is read only if the opened file belongs to owner
	// (checked on the descriptor: a directory on the way may be swapped
	// for a symlink between the glob and the open).
	owned bool
	owner uint32
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
		rotated = append(rotated, siblings(p, isLive)...)
	}
	sort.Slice(rotated, func(i, j int) bool { return rotatedOrder(rotated[i]) > rotatedOrder(rotated[j]) })
	for _, p := range rotated {
		add(p, false)
	}
	if literal && len(live) == 1 {
		out = append(out, targetSiblings(live[0])...)
	}
	return out
}

// siblings lists the rotated files beside the live file p.
func siblings(p string, isLive map[string]bool) []string {
	var out []string
	dot, _ := filepath.Glob(escapeGlob(p) + ".*")
	dash, _ := filepath.Glob(escapeGlob(p) + "-*")
	for _, s := range append(dot, dash...) {
		if !isLive[s] && rotatedSuffix.MatchString(s[len(p):]) {
			out = append(out, s)
		}
	}
	return out
}

// targetSiblings are the rotated files of a configured symlink's target
// (current.log -> /srv/app/logs/app.log): logrotate renames the target
// beside itself, so app.log.1 holds the lines written before the server
// reopened its log, and after a collector restart the only copy of lines it
// had not read. They are read only when the link would be (owned by root or
// by the target's owner, see tailer.OpenLog), and only those owned by the
// target's owner: whoever may point the link may not make the collector
// read someone else's file named like a rotated log.
func targetSiblings(link string) []candidate {
	li, err := os.Lstat(link)
	if err != nil || li.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return nil
	}
	ti, err := os.Stat(target)
	if err != nil || !ti.Mode().IsRegular() {
		return nil
	}
	owner := func(fi os.FileInfo) (uint32, bool) {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return 0, false
		}
		return st.Uid, true
	}
	linkUID, ok1 := owner(li)
	targetUID, ok2 := owner(ti)
	if !ok1 || !ok2 || (linkUID != 0 && linkUID != targetUID) {
		return nil
	}
	rotated := siblings(target, map[string]bool{target: true})
	sort.Slice(rotated, func(i, j int) bool { return rotatedOrder(rotated[i]) > rotatedOrder(rotated[j]) })
	var out []candidate
	for _, p := range rotated {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue // a symlink or a FIFO here is never read
		}
		if uid, ok := owner(fi); !ok || uid != targetUID {
			continue
		}
		out = append(out, candidate{path: p, base: filepath.Dir(target), rel: filepath.Base(p), owned: true, owner: targetUID})
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

// forgetAfter is how long the positions hint keeps what it knows of a
// source no matched file has shown: long past a rename in the middle of a
// scan, short enough that the file does not grow with every log ever read.
const forgetAfter = time.Hour

// skippedWhole is the position of a file a first start with start_at: end
// leaves out entirely (a gzipped rotated file).
const skippedWhole int64 = -1

// scanState is what one scan saw: what is present (so what is gone can be
// forgotten) and which files share a first line.
type scanState struct {
	paths map[string]bool
	keys  map[[2]uint64]bool
	ids   map[uint64]bool
	// firsts maps a first-line id to the present files (by device and
	// inode) that start with that line, with a path of each.
	firsts map[uint64]map[[2]uint64]string
	// done is closed once the scan has met every candidate.
	done chan struct{}
}

func (st *scanState) first(id uint64, key [2]uint64, path string) {
	m := st.firsts[id]
	if m == nil {
		m = map[[2]uint64]string{}
		st.firsts[id] = m
	}
	if _, ok := m[key]; !ok {
		m[key] = path
	}
}

// scan opens every candidate file not being read yet.
func (c *Collector) scan(ctx context.Context, wg *sync.WaitGroup, first bool) {
	st := &scanState{paths: map[string]bool{}, keys: map[[2]uint64]bool{}, ids: map[uint64]bool{},
		firsts: map[uint64]map[[2]uint64]string{}, done: make(chan struct{})}
	defer close(st.done)
	for i := range c.opts.Sources {
		src := &c.opts.Sources[i]
		cands := candidates(src.Glob)
		c.reportMatches(i, src, len(cands))
		for _, cand := range cands {
			if ctx.Err() != nil {
				return
			}
			st.paths[cand.path] = true
			if err := c.consider(ctx, wg, src, cand, first, st); err != nil {
				c.log.Warn("cannot read log file", "path", cand.path, "err", err)
			}
		}
	}
	// A refused path that is gone is forgotten: should it come back, it is
	// reported again.
	c.mu.Lock()
	for p := range c.refused {
		if !st.paths[p] {
			delete(c.refused, p)
		}
	}
	// So is a finished file that is gone (deleted by rotation): the memory
	// of files read stays the size of what the globs match.
	for k, f := range c.seen {
		if !st.keys[k] {
			delete(c.seen, k)
		} else {
			st.ids[f.ids[0]], st.ids[f.ids[1]] = true, true
			st.first(f.ids[1], k, f.path)
		}
	}
	var open []*shipper
	for _, s := range c.open {
		st.ids[s.id.ID], st.ids[s.id.First] = true, true
		open = append(open, s)
	}
	c.mu.Unlock()
	// An open file counts as starting with the line it starts with now: one
	// truncated and rewritten no longer does (its copy is then the only
	// file with that first line).
	for _, s := range open {
		if cur, err := tailer.Fingerprint(s.reader.File(), s.src.Site); err == nil {
			st.first(cur.First, s.key, s.path)
		}
	}
	c.mu.Lock()
	c.firsts = st.firsts
	c.mu.Unlock()
	// Records of files gone are released (owners.go).
	c.own.prune(st.ids)
	// And the positions hint of a source no file has shown for a while.
	if err := c.positions.prune(st.ids, c.opts.Now(), forgetAfter); err != nil {
		c.log.Warn("cannot save the positions hint", "err", err)
	}
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

// consider opens a candidate that is not being read yet and starts its
// shipper. Only what is quick is done here, on the scan goroutine: whatever
// waits on the store (where the source's committed lines end, what a batch in
// flight at a crash left) happens on the file's own goroutine (shipper.run),
// so one source whose store query hangs does not keep every other file from
// being opened.
func (c *Collector) consider(ctx context.Context, wg *sync.WaitGroup, src *Source, cand candidate, first bool, st *scanState) error {
	if c.unchanged(cand, st.keys) {
		return nil
	}
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
	if st, ok := fi.Sys().(*syscall.Stat_t); cand.owned && (!ok || st.Uid != cand.owner) {
		// The owner seen by path was another file's: whoever controls a
		// directory on the way swapped it. Refused on what was opened.
		f.Close()
		c.skip(src.Site, cand.path, &tailer.RefusedError{Path: cand.path, Reason: tailer.ReasonLinkOwner,
			Detail: fmt.Sprintf("a rotated file beside a configured symlink's target must belong to the target's owner (uid %d)", cand.owner)})
		return nil
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
	st.ids[id.ID], st.ids[id.First] = true, true
	st.first(id.First, key, cand.path)
	if c.own.waits(id.ID) {
		// Another collector ships it (owners.go): a refresh says when it
		// is this one's, not every scan.
		f.Close()
		return nil
	}
	c.mu.Lock()
	_, dup := c.open[id.ID]
	holder := c.open[id.First]
	hasSite := c.sites[src.Site]
	c.mu.Unlock()
	if !dup && holder != nil {
		// A file read under this one's first-line id (it had one line when
		// opened): this is a copy of it (copytruncate) when its head is
		// that file's head now; another log that only shares the first
		// line is not, and must not wait for it (a quiet vhost's log may
		// stay open for ever).
		dup = !id.HasBoth || holder.sameHead(id)
	}
	if dup {
		// The same content under another name and inode while the original
		// is still open: copytruncate's copy before the truncation. Read it
		// once the original is finished.
		f.Close()
		return nil
	}
	markSeen := func() {
		c.mu.Lock()
		c.seen[key] = fileStat{size: fi.Size(), mtime: fi.ModTime(), ids: [2]uint64{id.ID, id.First}, path: cand.path}
		c.mu.Unlock()
		f.Close()
	}
	endStart := int64(-1)
	if first && src.StartAtEnd && !hasSite && !c.positions.hasAny(id.ID, id.First) {
		// start_at: end, first start: every file present now is history,
		// and where each starts is decided now, once, and kept in the
		// positions hint (no store query needed: the site has no line in
		// the store, so no file of it has). The live file starts at its end;
		// a rotated one too, should the web server still write to it; a
		// gzipped one never grows and is left out whole, or the next start
		// (its site now has lines) would take it for a file new since the
		// first run and ship it all.
		start := skippedWhole
		if !id.Gzip {
			if start, err = tailer.AlignToLineEnd(f, fi.Size()); err != nil {
				f.Close()
				return err
			}
		}
		if err := c.positions.set(id.ID, start); err != nil {
			c.log.Warn("cannot save the positions hint", "err", err)
		}
		if !cand.live {
			markSeen()
			return nil
		}
		endStart = start
	}
	if !id.HasBoth && !id.Gzip && c.opts.Now().Sub(fi.ModTime()) < c.opts.RotatedIdle {
		// One line so far: a file is known by its first two lines (see
		// tailer.Identity), so it waits for its second, or until it has been
		// quiet a while, then ships known by the one (and keeps that id).
		f.Close()
		return nil
	}
	// A file with a batch in flight at the last stop is opened whatever the
	// count: on the embedded engine its replay completes the rollups, and
	// rotation may delete it while it waits.
	_, inFlight := c.positions.getInFlight(id.ID)
	if _, first := c.positions.getInFlight(id.First); first {
		inFlight = true
	}
	if !cand.live && !c.rotatedSlot(inFlight) {
		// Rotated history is read a few files at a time, oldest first: a
		// glob over years of .gz files must not keep them all open at once
		// (a descriptor and ~130 KiB of buffers each). The rest waits for a
		// later scan.
		f.Close()
		return nil
	}
	// The parser is made at the first line (shipper.prepare): with format:
	// auto, from the lines there.
	r, err := tailer.NewReader(f, id.Gzip, 0, src.MaxLine)
	if err != nil {
		f.Close()
		if !cand.live {
			c.releaseRotatedSlot()
		}
		return err
	}
	s := &shipper{
		c: c, src: src, id: id, path: cand.path, live: cand.live, literal: cand.literal, reader: r,
		key: key, openedAs: fi, sendCh: make(chan *sink.Batch), sent: make(chan struct{}),
		replayUntil: -1, endStart: endStart, scanned: st.done, watch: newFormatWatch(), blocks: newHeaderMemo(), lastRecut: -1,
		replayEnd: -1, nextSwitch: math.MaxInt64,
	}
	c.mu.Lock()
	c.open[id.ID] = s
	c.openInode[key] = true
	c.mu.Unlock()
	wg.Add(1)
	go func() { defer wg.Done(); s.run(ctx, f) }()
	return nil
}

// unchanged reports, from the path alone, that a candidate is a file already
// read to its end or being read, so the scan need not open it again (a glob
// over a year of rotated files would otherwise open each every second). Only
// a shortcut: a file that looks changed is opened and checked on its
// descriptor as before.
func (c *Collector) unchanged(cand candidate, present map[[2]uint64]bool) bool {
	stat := os.Lstat
	if cand.literal {
		stat = os.Stat
	}
	fi, err := stat(cand.path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	key, ok := statKey(fi)
	if !ok {
		return false
	}
	present[key] = true
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openInode[key] {
		return true
	}
	prev, seen := c.seen[key]
	return seen && prev.size == fi.Size() && prev.mtime.Equal(fi.ModTime())
}

// rotatedSlot takes one of the MaxOpenRotated places for a rotated file
// (force: one more, beyond them).
func (c *Collector) rotatedSlot(force bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.openRotated >= c.opts.MaxOpenRotated && !force {
		return false
	}
	c.openRotated++
	return true
}

func (c *Collector) releaseRotatedSlot() {
	c.mu.Lock()
	c.openRotated--
	c.mu.Unlock()
}
