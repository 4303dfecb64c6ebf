package collector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/hitcount/hitcount/internal/lines"
	"github.com/hitcount/hitcount/internal/tailer"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A shipper owns one open file, and a line goes through it top-down:
//
//   - read() (tail and batch) yields each line with its offset, takes a batch
//     from the collector's pool only with a line in hand, and hands the batch
//     on when it is full, old (BatchDelay) or the file is finished. It never
//     goes back in the file: what the store holds is settled in send().
//   - send() (commit, see commit.go) holds one batch in flight for the
//     source: idle -> inserting -> acked -> idle. Before inserting it records
//     the batch durably (positions.InFlight) and clears the record on ack, so
//     a record exists only for a batch whose outcome is unknown. On a
//     transient error: unknown -> resolve (the identical batch again where
//     the store drops it, else only what hits and rejects lack); on a
//     permanent one the batch is split, a line refused alone becomes a
//     reject; after an identical re-send, what the store holds is verified.
//
// A batch read after a failure waits for the one in flight, so lines are
// committed in order; after a failure during shutdown nothing later is sent.
type shipper struct {
	c    *Collector
	src  *Source
	id   tailer.Identity
	key  [2]uint64
	path string
	live bool
	// openedAs is the file as the scan opened it.
	openedAs os.FileInfo
	// endStart, when >= 0, is where a start_at: end first start begins
	// this live file (its end then), in case there is no positions file
	// to keep it.
	endStart int64
	// scanned is closed when the scan that opened the file has met every
	// candidate (see Collector.sharingFirstLine).
	scanned chan struct{}
	// literal: the configured path itself, which may be a symlink to the
	// file (see tailer.OpenLog).
	literal bool
	reader  *tailer.Reader
	// parser parses the file's lines in format: nil until prepare (at the
	// first line) makes it, for the source's format or the one detected
	// (format.go). Both belong to the read goroutine; formats tells the
	// sender which format parsed a line.
	parser  *parser.Parser
	format  string
	formats formats
	// headers are the header lines the parser took as its own last (W3C's
	// "#Fields:"), inHeader whether the last line was one, and headerAt
	// where their block starts.
	headers  [][]byte
	inHeader bool
	headerAt int64
	// watch follows the rejects; recheck: checkFormat is due.
	watch   formatWatch
	recheck bool
	// blocks: the header block found in force at a line (format.go).
	blocks headerMemo
	// noRecutBefore: lines before it are never read again under another
	// format (the batch a previous process left in flight is read again to
	// be the same block); lastRecut is the last offset read again.
	noRecutBefore int64
	lastRecut     int64
	// replay is how the batch a previous process left in flight was parsed
	// (positions.InFlightFormats) and replayEnd its last line (-1: no
	// replay): its lines are parsed exactly so, switching format where it
	// did (at nextSwitch; math.MaxInt64: no switch due), and the format is
	// neither detected nor checked before replayEnd is passed.
	replay     []parseSpan
	replayEnd  int64
	nextSwitch int64
	// replayUntil, when >= 0, is the last line of a batch that was in flight
	// when the previous process stopped, on a store only this process
	// inserts into: the first batch is read to exactly that line, whatever
	// the batch size, so it is identical and carries the same id.
	replayUntil int64
	// replayRejectsAt is the replayed batch's rejects' stamp (Unix seconds,
	// 0: unknown), so that it is the same block as the one in flight.
	replayRejectsAt int64
	// held are lines of a batch in flight when the previous process
	// stopped that the store turned out to hold: read past, not sent again.
	held map[int64]bool
	// rejectsOnlyBefore: lines before this offset are read again only for
	// the rejects they may lack (see open); the others are committed.
	rejectsOnlyBefore int64

	sendCh chan *sink.Batch
	// committing: the sender has a batch of this file (take then waits
	// for a second one fairly: acquireSecond).
	committing atomic.Bool
	readFailed bool          // the last read failed or the file was truncated: do not remember it as finished
	sent       chan struct{} // closed when send() has returned
	// yielded: another collector ships the file (owners.go); read() stops
	// at its next batch.
	yielded atomic.Bool
	// endAt is where the reader last found the end of the written data
	// (owners.go: caughtUp).
	endAt atomic.Int64
}

// yield tells read() to stop: another collector claimed the file first.
func (s *shipper) yield() { s.yielded.Store(true) }

// read parses lines into batches and hands them to send() until the file is
// finished or ctx ends.
func (s *shipper) read(ctx context.Context) {
	defer s.finish()
	defer close(s.sendCh)
	var b *sink.Batch
	idleSince := time.Time{}
	var h parser.Hit
	stop, switched := false, false
	progress := s.startBackfill()
	defer func() {
		if progress != nil {
			progress.Done()
		}
	}()
	wake := s.c.newWaker(s.reader.File(), s.path)
	defer wake.Close() // before finish closes the file
	for {
		if ctx.Err() != nil {
			s.handOff(b)
			return
		}
		if s.yielded.Load() {
			// Another collector ships the file: the batches handed to
			// send() complete, the lines read since are left to it (it
			// reads them from where the store's lines end).
			s.drop(b)
			s.readFailed = true // not finished here: looked at again
			return
		}
		line, off, err := s.reader.Next()
		if err == nil && s.parser == nil {
			if err := s.prepare(ctx, off, line, wake); err != nil {
				if ctx.Err() == nil {
					s.c.log.Error("cannot make the log's parser; the file will be reopened", "path", s.path, "err", err)
					s.readFailed = true
				}
				s.handOff(b)
				return
			}
		}
		if off >= s.nextSwitch && s.parser != nil {
			s.formatDue(off)
		}
		var tooLong *lines.TooLongError
		switch {
		case err == nil && s.stored(line, off):
			idleSince = time.Time{}
			if b, stop = s.replayEnds(b, off); stop {
				return
			}
			continue
		case err == nil:
			idleSince = time.Time{}
			// A batch is taken only with a line in hand: a file with nothing
			// to read holds none, so any number of files, busy or idle,
			// share MaxPending batches without starving each other.
			if b, err = s.take(ctx, b); err != nil {
				return
			}
			s.addLine(b, &h, line, off)
			if s.recheck {
				if b, err = s.checkFormat(b); err != nil {
					s.c.log.Error("read failed; the file will be reopened", "path", s.path, "err", err)
					s.readFailed = true
					s.handOff(b)
					return
				}
			}
			if s.replayUntil >= 0 {
				if b, stop = s.replayEnds(b, off); stop {
					return
				}
				continue
			}
			if b.Lines >= s.c.opts.BatchRows || (b.Lines&1023 == 0 && s.c.opts.Now().Sub(b.ReadAt) >= s.c.opts.BatchDelay) {
				if progress != nil {
					progress.Set(s.reader.Offset())
				}
				if b, switched, stop = s.beforeShip(b); stop {
					return
				} else if switched {
					continue // lines read again under another format
				}
				if b = s.ship(b); b == nil && s.replaced() {
					return
				}
			}
			continue
		case errors.As(err, &tooLong) && !tooLong.Partial:
			idleSince = time.Time{}
			if s.held[off] {
				// A reject stored before a crash hid its outcome, as any
				// other line (found by the adversary of issue 17: the
				// over-long last line of a batch in flight was sent again).
				delete(s.held, off)
			} else {
				if b, err = s.take(ctx, b); err != nil {
					return
				}
				s.markRead(b)
				b.AddReject(off, off+tooLong.Length, tooLong.Error(), tooLong.Head)
			}
			// An over-long line can be the last of the batch replayed: the
			// replay ends there too, or it reads on past the batch, which
			// is then another block with another id, and its lines land
			// twice.
			if b, stop = s.replayEnds(b, off); stop {
				return
			}
			continue
		case errors.As(err, &tooLong):
			// An over-long line still being written: read it again once whole.
			if err := s.reader.SeekTo(s.reader.Offset()); err != nil {
				s.c.log.Error("cannot re-read a long line", "path", s.path, "err", err)
				return
			}
		case err == io.EOF && s.replayUntil >= 0 && off == s.replayUntil && len(line) > 0:
			// The batch in flight ended with this line, taken then as a
			// finished file's last line without a newline (takeTail). The
			// replay takes it the same way, or the batch would ship short,
			// under another id, and its lines again (found by the chaos
			// harness: a rotated file's end doubled, or its views never
			// filled). The file was finished then: it is now.
			if !s.stored(line, off) {
				if b, err = s.take(ctx, b); err != nil {
					return
				}
				s.addLine(b, &h, line, off)
			}
			s.replayUntil = -1
			s.handOff(b)
			return
		case err == io.EOF:
			// line holds any partial last line: kept in the reader until it
			// is complete, or taken as it is when the file is finished.
		default:
			s.c.log.Error("read failed; the file will be reopened", "path", s.path, "err", err)
			s.readFailed = true
			s.handOff(b)
			return
		}
		// At the end of what is written so far.
		s.endAt.Store(s.reader.Offset())
		s.replayUntil = -1
		if progress != nil {
			progress.Set(s.reader.Offset())
			progress.Done()
			progress = nil
		}
		if b != nil && b.Lines > 0 && s.c.opts.Now().Sub(b.ReadAt) >= s.c.opts.BatchDelay {
			if b, switched, stop = s.beforeShip(b); stop {
				return
			} else if switched {
				continue // lines read again under another format
			}
			if b = s.ship(b); b == nil && s.replaced() {
				return
			}
			continue
		}
		if idleSince.IsZero() {
			idleSince = s.c.opts.Now()
		}
		switch s.finished(idleSince) {
		case notFinished:
		case truncated:
			s.handOff(b)
			s.readFailed = true // what follows is another file's: not read here
			return
		case finished:
			// Nothing more will be written: a last line without a newline
			// is a line like the others (the committed offset is its start;
			// a reopen finds it incomplete and reads nothing more).
			if b, err = s.takeTail(ctx, b, &h, wake); err != nil {
				if ctx.Err() == nil {
					s.c.log.Error("cannot make the log's parser; the file will be reopened", "path", s.path, "err", err)
					s.readFailed = true
				}
				s.handOff(b)
				return
			}
			s.handOff(b)
			return
		}
		if b != nil && b.Lines > 0 {
			// The batch in hand ships when due with what was written by
			// then: a change need not wake it.
			wake.Sleep(ctx, min(s.c.opts.Poll, s.c.opts.BatchDelay-s.c.opts.Now().Sub(b.ReadAt)))
		} else {
			// Woken when the file changes; Poll bounds the wait, as a
			// change can go unseen.
			wake.Wait(ctx, s.c.opts.Poll)
		}
	}
}

// stored reports whether the line at off is one the store held when the
// file was reopened after a batch's outcome was lost, and so is not sent
// again: a line of the batch in flight that hits has when the committed
// offset is past the batch (only its rejects may be missing), or one
// Holds found stored. The last line of a finished file without a newline
// is such a line too (found by a test: the tail of a rotated file sent
// twice to the server).
func (s *shipper) stored(line []byte, off int64) bool {
	if off < s.rejectsOnlyBefore && s.isHit(line) {
		return true
	}
	if s.held[off] {
		delete(s.held, off)
		return true
	}
	return false
}

// beforeShip detects the format again before b is handed on, when it is
// wrong (redetect); a switch reads lines of b again, so b is not handed on
// yet. stop: reading failed, read() returns.
func (s *shipper) beforeShip(b *sink.Batch) (_ *sink.Batch, switched, stop bool) {
	if !s.watch.mismatch && !s.watch.guessed {
		return b, false, false
	}
	b, switched, err := s.redetect(b)
	if err != nil {
		s.c.log.Error("read failed; the file will be reopened", "path", s.path, "err", err)
		s.readFailed = true
		s.handOff(b)
		return nil, false, true
	}
	return b, switched, false
}

// replayEnds ends the replay of the batch a previous process left in flight
// once the line at off is its last, whatever became of that line (parsed,
// rejected, over-long, or skipped as stored): the batch in hand is handed
// on as it is. stop: the file was replaced (ship), read() returns.
func (s *shipper) replayEnds(b *sink.Batch, off int64) (_ *sink.Batch, stop bool) {
	if s.replayUntil < 0 || off < s.replayUntil {
		return b, false
	}
	s.replayUntil = -1
	if b == nil || b.Lines == 0 {
		return b, false
	}
	if b = s.ship(b); b == nil && s.replaced() {
		return nil, true
	}
	return b, false
}

// take returns b, or a free batch for this source when b is nil.
func (s *shipper) take(ctx context.Context, b *sink.Batch) (*sink.Batch, error) {
	if b != nil {
		return b, nil
	}
	b, err := s.c.acquireSecond(ctx, &s.committing)
	if err != nil {
		return nil, err
	}
	b.Reset(s.src.Site, s.id.ID)
	b.Clients = s.src.Clients
	return b, nil
}

// takeTail adds the bytes after a finished file's last newline to b, as a
// line or, when over the limit, a reject.
func (s *shipper) takeTail(ctx context.Context, b *sink.Batch, h *parser.Hit, wake waker) (*sink.Batch, error) {
	line, off, err := s.reader.Next()
	var tooLong *lines.TooLongError
	switch {
	case err == io.EOF && len(line) > 0 && s.stored(line, off):
	case err == io.EOF && len(line) > 0:
		if s.parser == nil {
			if err := s.prepare(ctx, off, line, wake); err != nil {
				return b, err
			}
		}
		if off >= s.nextSwitch {
			s.formatDue(off)
		}
		if b, err = s.take(ctx, b); err != nil {
			return b, err
		}
		s.addLine(b, h, line, off)
	case errors.As(err, &tooLong):
		if b, err = s.take(ctx, b); err != nil {
			return b, err
		}
		s.markRead(b)
		b.AddReject(off, off+tooLong.Length, tooLong.Error(), tooLong.Head)
	}
	return b, nil
}

// startBackfill starts following the read when the backlog is large.
func (s *shipper) startBackfill() Progress {
	if s.c.opts.Backfill == nil || s.id.Gzip {
		return nil
	}
	fi, err := s.reader.File().Stat()
	if err != nil || fi.Size()-s.reader.Offset() < BackfillMin {
		return nil
	}
	return s.c.opts.Backfill(s.path, s.reader.Offset(), fi.Size())
}

func (s *shipper) markRead(b *sink.Batch) {
	if b.Lines == 0 {
		b.ReadAt = s.c.opts.Now()
		if s.replayUntil >= 0 && s.replayRejectsAt > 0 {
			b.ReadAt = time.Unix(s.replayRejectsAt, 0)
		}
		s.c.mu.Lock()
		s.c.unshipped[b] = b.ReadAt
		s.c.mu.Unlock()
	}
}

// addLine parses one line into the batch. This is the hot path: line counts
// go to the metrics per batch (countRead), not per line.
func (s *shipper) addLine(b *sink.Batch, h *parser.Hit, line []byte, off int64) {
	s.markRead(b)
	next := off + int64(len(line))
	if err := s.parser.Parse(line, h); err != nil {
		s.notParsed(b, line, off, next, err)
		return
	}
	s.inHeader = false
	if s.watch.line() {
		s.recheck = true
	}
	// The raw line is the reject sample should its time be out of range.
	b.AddLine(h, off, next, bytes.TrimRight(line, "\r\n"))
}

// notParsed records a line the parser refused: a header line of the
// format's own (a directive: in the batch's span, neither a row nor a
// reject), or a reject, which the format watch counts.
//
//go:noinline
func (s *shipper) notParsed(b *sink.Batch, line []byte, off, next int64, err error) {
	if len(line) > 0 && line[0] == '#' {
		s.blocks.sawHeader(off)
	}
	if errors.Is(err, parser.ErrDirective) {
		b.AddSkipped(off, next)
		s.noteDirective(off, line)
		return
	}
	s.inHeader = false
	reason := err.Error()
	raw := bytes.TrimRight(line, "\r\n")
	b.AddReject(off, next, reason, raw)
	if s.watch.reject(off, line, reason) {
		s.recheck = true
	}
}

// countRead adds a batch's lines to the read/parsed/rejected counters, once,
// when it leaves the reader (handed off or discarded).
func (s *shipper) countRead(b *sink.Batch) {
	s.c.rejected.Add(uint64(b.RejectedLines))
	if m := s.c.m; m != nil && b.Lines > 0 {
		m.LinesRead.WithLabelValues(s.src.Site).Add(float64(b.Lines))
		m.LinesParsed.WithLabelValues(s.src.Site).Add(float64(b.Rows()))
		m.LinesRejected.WithLabelValues(s.src.Site).Add(float64(b.RejectedLines))
		if n := b.Skipped(); n > 0 {
			m.LinesSkipped.WithLabelValues(s.src.Site).Add(float64(n))
		}
	}
}

// ship hands a full batch to send() and returns nil: the next line takes a
// new one. If the file's content no longer matches its identity
// (copytruncate), the batch may hold lines of the new content: it is
// dropped, and the file finished; its old content is read from the rotated
// copy, the new as a new source.
func (s *shipper) ship(b *sink.Batch) *sink.Batch {
	s.countRead(b)
	if s.replaced() {
		s.c.countBatch("discarded")
		s.c.release(b)
		return nil
	}
	s.sendCh <- b
	return nil
}

// handOff sends a last, non-empty batch (at shutdown or when finished).
func (s *shipper) handOff(b *sink.Batch) {
	if b == nil {
		return
	}
	s.countRead(b)
	if b.Lines == 0 || s.replaced() {
		s.c.release(b)
		return
	}
	s.sendCh <- b
}

// drop gives back a batch that is not to be sent.
func (s *shipper) drop(b *sink.Batch) {
	if b == nil {
		return
	}
	s.countRead(b)
	if b.Lines > 0 {
		s.c.countBatch("discarded")
	}
	s.c.release(b)
}

// replaced reports whether the open file's first line is no longer the one
// that gave it its identity: truncated and rewritten.
func (s *shipper) replaced() bool {
	if s.id.Gzip {
		return false
	}
	id, err := tailer.Fingerprint(s.reader.File(), s.src.Site)
	if errors.Is(err, tailer.ErrNotReady) {
		return true
	}
	return err == nil && !id.Has(s.id.ID)
}

// ending says whether a file at the end of its written data is done.
type ending int

const (
	notFinished ending = iota
	finished           // nothing more will be written: read to its very end
	truncated          // its content was replaced: what follows is not its own
)

// finished decides, at the end of the written data, whether the file is done:
// a gzipped file at its end; a truncated one; one that left its live path, or
// a rotated sibling, idle for RotatedIdle.
func (s *shipper) finished(idleSince time.Time) ending {
	if s.id.Gzip {
		return finished
	}
	fi, err := s.reader.File().Stat()
	if err != nil {
		return truncated
	}
	if fi.Size() < s.reader.Offset() || s.replaced() {
		s.c.log.Info("log file was truncated; its remaining lines are read from the rotated copy", "path", s.path)
		return truncated
	}
	// Idle for RotatedIdle: since this reader reached the end, or since the
	// file was last written (a rotated file read to its end before a
	// restart is done at once, not after another wait holding one of the
	// few places rotated files have: found by the chaos long run, where
	// files waiting for a place were deleted by rotation meanwhile).
	idle := notFinished
	if now := s.c.opts.Now(); now.Sub(idleSince) >= s.c.opts.RotatedIdle || now.Sub(fi.ModTime()) >= s.c.opts.RotatedIdle {
		idle = finished
	}
	if !s.live {
		return idle
	}
	// Whether the path still names the open file. Only a literally configured
	// path is followed, as when it was opened: re-pointing that symlink is a
	// rotation. Nothing is read here, so no check beyond the policy is needed.
	stat := os.Lstat
	if s.literal {
		stat = os.Stat
	}
	cur, err := stat(s.path)
	if err == nil {
		if key, ok := statKey(cur); ok && key == s.key {
			return notFinished // still the live file
		}
	}
	return idle
}

// finish closes the file once send() is done with it. Until then the source
// stays open in the collector's view: a copy of the same content (copytruncate)
// must not be opened while this source's last batch is still being inserted,
// or it would resume from before that batch.
func (s *shipper) finish() {
	<-s.sent // sendCh was closed by a deferred call that ran before this one
	fi, statErr := s.reader.File().Stat()
	s.reader.File().Close()
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(s)
	// A file is remembered as read only at a size it was read to: one left
	// after a read error (a gzip still being written), truncated and
	// rewritten (its new lines are another source's), or grown since the
	// last read, is looked at again on the next scan. Remembered at its size
	// now, the lines it gained meanwhile would be skipped for as long as the
	// file does not change again (found by review: 50 lines written in one
	// go after a truncation never shipped).
	readToEnd := s.id.Gzip || (statErr == nil && fi.Size() == s.reader.Offset())
	if statErr == nil && !s.readFailed && readToEnd {
		c.seen[s.key] = fileStat{size: fi.Size(), mtime: fi.ModTime(), ids: [2]uint64{s.id.ID, s.id.First}, path: s.path}
	}
	c.own.closed(s.id.ID, statErr == nil && !s.readFailed && readToEnd)
	if c.m != nil {
		c.m.BytesBehind.DeleteLabelValues(s.src.Site, s.path)
		c.m.FormatMismatch.DeleteLabelValues(s.src.Site, s.path)
	}
	c.log.Info("finished log file", "path", s.path, "offset", s.reader.Offset())
}

// isHit reports whether line becomes a row of hits (it parses, and its time
// is one the store holds), not a reject.
func (s *shipper) isHit(line []byte) bool {
	var h parser.Hit
	return s.parser.Parse(line, &h) == nil && h.Unix >= sink.MinUnix && h.Unix <= sink.MaxUnix
}
