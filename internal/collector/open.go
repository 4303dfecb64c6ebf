package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/hitcount/hitcount/internal/tailer"
)

// run is a file's life once the scan has opened it: decide where to start
// (asking the store, which may take long: the store may be down, or a killed
// predecessor's insert of this source may still run), then read and send
// until the file is finished or ctx ends.
func (s *shipper) run(ctx context.Context, f *os.File) {
	opened := s.id.ID
	start, how, read, err := s.open(ctx, f)
	if err == nil && read {
		// Only one collector reads a file (owners.go): another that ships
		// it keeps it, and this one waits in line.
		err = s.c.own.claim(ctx, s, opened)
	}
	if err != nil || !read {
		if err != nil && ctx.Err() == nil && !errors.Is(err, errNotNow) && !errors.Is(err, errOwnedElsewhere) {
			s.c.log.Warn("cannot read log file", "path", s.path, "err", err)
		}
		// After an error the file is looked at again on the next scan;
		// a file with nothing to read is remembered at its size then.
		s.abandon(f, err == nil)
		if err == nil {
			// Nothing to ship: a record this collector had of the file (it
			// waited for it) is released.
			s.c.own.closed(s.id.ID, true)
		}
		return
	}
	if s.id.ID != s.id.Both && s.id.HasBoth {
		s.c.log.Info("log file keeps the id of its first line (shipped while it had one line, or by an older version)", "path", s.path, "source_id", s.id.ID)
	}
	s.c.log.Info("reading log file", "path", s.path, "site", s.src.Site, "source_id", s.id.ID, "offset", start, "how", how, "gzip", s.id.Gzip)
	if err := s.c.ins.RecordSource(ctx, s.src.Site, s.id.ID, s.path); err != nil {
		s.c.log.Warn("cannot record the source's path", "path", s.path, "err", err)
	}
	go s.send(ctx)
	s.read(ctx)
}

// open positions the reader where the source's shipping resumes: after its
// last committed line, at the start a start_at: end first start chose for it,
// or at its beginning. read is false when nothing of the file is to be read
// (read before, or history a start_at: end first start left out).
func (s *shipper) open(ctx context.Context, f *os.File) (start int64, how string, read bool, err error) {
	c := s.c
	r := s.reader
	how = "from the beginning"
	// A file shipped while it had one line has its record under its first
	// line's id (asked next).
	off, ok, err := c.settle(ctx, s.path, s.id.ID, s.id.First)
	if err != nil {
		return 0, "", false, err
	}
	if !ok && s.id.ID != s.id.First {
		// Shipped while it had one line, or by a version that knew files by
		// their first line alone: it keeps that id. Unless another present
		// file starts with the same line: what was shipped under it may be
		// that file's, and this one is known by its two lines.
		off1, ok1, err := c.settle(ctx, s.path, s.id.First)
		if err != nil {
			return 0, "", false, err
		}
		_, inFlight := c.positions.getInFlight(s.id.First)
		if ok1 || inFlight {
			others, err := c.sharingFirstLine(ctx, s)
			if err != nil {
				return 0, "", false, err
			}
			switch {
			case len(others) > 0:
				c.log.Info("log files start with the same line; this one is known by its first two lines", "path", s.path, "others", others, "source_id", s.id.ID)
			case !c.rekey(s, s.id.First):
				return 0, "", false, errNotNow
			default:
				off, ok = off1, ok1
			}
		}
	}
	hint, hinted := c.positions.hint(s.id.ID, s.id.First)
	switch {
	case ok:
		found, err := r.SeekAfterLine(off)
		if err != nil {
			return 0, "", false, err
		}
		if !found {
			// Shorter than what was committed: a copy taken before lines
			// that were shipped from the original. Nothing left to read.
			return 0, "", false, nil
		}
		start, how = r.Offset(), "after the last committed line"
	case hinted && hint == skippedWhole:
		// History a first start with start_at: end left out: still out.
		return 0, "", false, nil
	case hinted || s.endStart >= 0:
		start, how = s.endStart, "at its end (start_at: end)"
		if s.endStart < 0 {
			start, how = hint, "at the position chosen when first seen"
		}
		if err := r.SeekTo(start); err != nil {
			return 0, "", false, err
		}
	}
	// The in-flight record is written before every insert and cleared once
	// the store acknowledged it: it exists only for a batch whose outcome the
	// previous process never learnt.
	span, ok := c.positions.getInFlight(s.id.ID)
	if !ok {
		return start, how, true, nil
	}
	// The span in the log: what a line missing after a crash is checked
	// against.
	how += fmt.Sprintf(", batch in flight [%d, %d]", span.First, span.Last)
	// Whatever follows reads the batch's lines again to be the same block,
	// or to skip what the store holds: never again under another format,
	// and with the formats that parsed it (prepare), not a fresh detection.
	s.noRecutBefore = max(span.Last+1, start)
	if s.replay = c.positions.getFormats(s.id.ID); len(s.replay) > 0 {
		s.replayEnd = span.Last
	}
	x, isX := c.ins.(interface{ Exclusive() bool })
	exclusive := isX && x.Exclusive()
	switch {
	case exclusive && c.dedup && span.First <= start:
		// No other process inserts into this store, and nothing has since
		// the crash: the identical batch is still inside the deduplication
		// window. The store keeps what it has and fills what the crash cut
		// short (a view's part after the table's). Even when ingest_progress
		// counts the batch: it is a view too, and its part may have landed
		// while another's did not (found by the chaos harness: hits_1m
		// short after kill -9s).
		if err := r.SeekTo(span.First); err == nil {
			start, how = span.First, how+", replaying the batch in flight"
			s.replayUntil, s.replayRejectsAt = span.Last, span.RejectsAt
		}
	case span.Last >= start:
		// Elsewhere a window may have passed: ask the tables what they hold
		// of the batch, and send only the rest.
		h, err := c.ins.Holds(ctx, s.id.ID, span)
		if err != nil {
			return 0, "", false, fmt.Errorf("what the store holds of the batch in flight: %w", err)
		}
		s.held = h.Hits
		for off := range h.Rejects {
			s.held[off] = true
		}
		how += fmt.Sprintf(", %d lines of the batch in flight already stored", len(s.held))
		if span.First < start {
			// The committed offset is inside the batch: its hits committed
			// (ingest_progress took their last, fed by both inserts) and
			// its rejects, a second insert, may not have. The rejects
			// before that last hit are behind the resume offset: the batch
			// is read from its first line, and what the store holds is
			// read past (found while chasing a loss the adversary of issue
			// 17 reported: on a server without deduplication, the rejects
			// before a batch's last hit were stored nowhere after a stop
			// between its two inserts; loss17_integration_test.go).
			if err := r.SeekTo(span.First); err != nil {
				return 0, "", false, err
			}
			// To its last line, its rejects stamped as they were: the same
			// rejects block as the one in flight, which a replicated table
			// drops should that insert still commit on a replica (as
			// below, and as a batch read again for its rejects only).
			start = span.First
			s.replayUntil, s.replayRejectsAt = span.Last, span.RejectsAt
			how += ", reading the batch in flight again from its first line"
		}
		if len(s.held) == 0 && start == span.First {
			// Read again as the same block, rejects' stamp included: an
			// insert of it the previous process started may still commit
			// on another replica after Holds looked, and a replicated
			// table then drops the second by its checksum (issue 16,
			// finding 5: the rejects were stamped anew and doubled).
			s.replayUntil, s.replayRejectsAt = span.Last, span.RejectsAt
		}
	case span.First < start:
		// The committed offset, read from hits, is past the whole batch, but
		// its rejects are a second insert that a stop between the two leaves
		// out (found by the chaos harness in CI: a line dated 1969 in
		// neither table). Read the batch again for the rejects the table
		// lacks; its hits are committed.
		h, err := c.ins.Holds(ctx, s.id.ID, span)
		if err != nil {
			return 0, "", false, fmt.Errorf("what the store holds of the batch in flight: %w", err)
		}
		if err := r.SeekTo(span.First); err != nil {
			return 0, "", false, err
		}
		s.held, s.rejectsOnlyBefore = h.Rejects, start
		// The same block as the one in flight, its rejects' stamp
		// included: a rejects insert of it may still commit on a replica
		// that was paused (found by the adversary of issue 16: the line
		// was in rejects twice, on both replicas).
		s.replayUntil, s.replayRejectsAt = span.Last, span.RejectsAt
		how += ", reading the batch in flight again for the rejects it may lack"
		start = span.First
	}
	return start, how, true, nil
}

// abandon gives the file up before reading it. seen: remember it at the size
// it had when opened, so the scan leaves it alone until it changes.
func (s *shipper) abandon(f *os.File, seen bool) {
	f.Close()
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(s)
	if seen {
		c.seen[s.key] = fileStat{size: s.openedAs.Size(), mtime: s.openedAs.ModTime(), ids: [2]uint64{s.id.ID, s.id.First}, path: s.path}
	}
}

// forget removes a shipper from the collector's view of open files; c.mu is
// held.
func (c *Collector) forget(s *shipper) {
	delete(c.open, s.id.ID)
	delete(c.openInode, s.key)
	delete(c.committed, s.id.ID)
	if !s.live {
		c.openRotated--
	}
}

// errNotNow: another file holds the id this one turned out to have; it is
// looked at again on a later scan.
var errNotNow = errors.New("its source id is being read under another name")

// rekey moves s to the id it is known by in the store, unless another open
// file holds that id: a copy of that file (copytruncate), read once the
// original is finished; or two files that share a first line and were both
// shipped under it, which the log says once.
func (c *Collector) rekey(s *shipper, id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if other, busy := c.open[id]; busy && other != s {
		return false
	}
	delete(c.open, s.id.ID)
	s.id.ID = id
	c.open[id] = s
	return true
}

// sharingFirstLine lists the other present files that start with s's first
// line, as the scan that opened s saw them once it had met every file.
func (c *Collector) sharingFirstLine(ctx context.Context, s *shipper) ([]string, error) {
	select {
	case <-s.scanned:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for key, path := range c.firsts[s.id.First] {
		if key != s.key {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out, nil
}

// sameHead reports whether the file s reads starts now as the file of id
// does: its first two lines.
func (s *shipper) sameHead(id tailer.Identity) bool {
	cur, err := tailer.Fingerprint(s.reader.File(), s.src.Site)
	return err == nil && cur.HasBoth && cur.Both == id.Both
}
