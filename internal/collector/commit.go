package collector

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// The commit stage of a shipper: one batch in flight per source, taken from
// idle to acked by commit.
//
//   - Before the first insert the batch is recorded durably
//     (positions.InFlight: its whole span), and the record is cleared once
//     all of it is acked; only then does the committed offset move.
//   - A transient error leaves the outcome unknown. Where the store drops an
//     identical block (a token, a replicated table) the identical batch is
//     sent again until acked, which also completes a materialized view a
//     failure cut short. Elsewhere, once no insert of the source runs, the
//     lines hits and rejects hold (not a view written after them) are
//     dropped from the batch and the rest sent: never a line twice.
//   - A permanent error (sink.Permanent: the store refuses these rows for
//     good) is never sent again as it is, which would stall the file
//     forever. What hits and rejects took before the refusal stays (a view
//     may refuse after hits took the rows); the rest is cut in two halves
//     (sink.Batch.Split: deterministic, each with its own id), committed in
//     order the same way, each retried or split again. A line refused alone
//     becomes a reject, reason "store refused: ...".
//   - After an unknown outcome settled by an identical re-send, or the replay
//     at reopen of a batch a previous process left in flight, on a store
//     that deduplicates: the store drops a block whose id is in its
//     deduplication log even when its rows are not in the table (a server
//     killed between the two, a part removed by a mutation), so hits and
//     rejects are asked what they hold of the batch, and what is missing is
//     sent under a new id until they hold it all (sink.Batch.Renew; such a
//     batch is never sent again identically: a store deduplicating by a
//     checksum takes it without deduplication). Never on the normal path.

// delivery is what committing one batch went through, for what follows.
type delivery struct {
	// unknown: on a store that deduplicates, an insert's outcome was
	// unknown (or the batch is the replay of one a previous process left in
	// flight): what the store holds is verified once all is acked.
	unknown bool
	// resolved: lines were settled from hits and rejects, so ingest_progress
	// (a view) may lag behind the batch.
	resolved bool
	// rows acknowledged by inserts.
	rows int
	// gone are lines the store refused even as rejects: stored nowhere, not
	// sent again.
	gone map[int64]bool
}

// send commits batches in order until read() closes sendCh.
func (s *shipper) send(ctx context.Context) {
	defer close(s.sent)
	// Inserts outlive ctx so a shutdown flushes what was read; each is still
	// bounded by the insert timeout.
	insertCtx := context.WithoutCancel(ctx)
	stopped := false
	for b := range s.sendCh {
		if stopped {
			s.c.countBatch("discarded")
			s.c.release(b)
			continue
		}
		s.committing.Store(true)
		if err := s.commit(ctx, insertCtx, b); err != nil {
			// Shutting down with the outcome unknown: the record stays for
			// the next start, and nothing after this batch may land before
			// it (the committed offset would pass lines not in the store).
			s.c.log.Warn("stopping with a batch whose outcome is unknown; the next start settles it", "path", s.path, "batch", b.ID(), "err", err)
			stopped = true
		}
		s.committing.Store(false) // before release wakes the reader
		s.c.release(b)
	}
}

// commit takes one batch from idle to acked, or returns ctx's error when
// the collector stops before its outcome is known.
func (s *shipper) commit(ctx, insertCtx context.Context, b *sink.Batch) error {
	d := delivery{unknown: s.c.dedup && s.replaying(b)}
	if err := s.c.positions.setInFlight(b.SourceID, b.Span(), s.formats.record(b.First, b.Last)); err != nil {
		s.c.log.Warn("cannot record the batch in flight", "err", err)
	}
	if err := s.deliver(ctx, insertCtx, b, &d); err != nil {
		return err
	}
	if d.unknown && s.c.dedup {
		if err := s.verify(ctx, insertCtx, b, &d); err != nil {
			return err
		}
	}
	// After an identical re-send the store may have dropped the block as a
	// duplicate of one whose views never ran (a replica killed between hits
	// and its views: 18.16 runs no view for a dropped block), so
	// ingest_progress may lack the batch: a reopen would resume before it
	// and ship its lines again (found by the chaos harness's cluster store,
	// CHAOS_SEED=46: 273 lines twice after a copytruncate reopened the file).
	if d.resolved || d.unknown {
		if err := s.markProgress(ctx, insertCtx, b); err != nil {
			return err
		}
	}
	s.c.ack(b)
	s.c.setReady(true)
	headersAt := int64(-1)
	if span, ok := s.formats.at(b.Last); ok && len(span.Headers) > 0 {
		headersAt = span.HeadersAt
	}
	if err := s.c.positions.clearInFlight(b.SourceID, b.Site, b.Last, headersAt); err != nil {
		s.c.log.Warn("cannot clear the record of the batch in flight", "err", err)
	}
	s.formats.acked(b.Last)
	if m := s.c.m; m != nil {
		m.RowsInserted.WithLabelValues(s.src.Site).Add(float64(d.rows))
	}
	s.c.countBatch("ok")
	return nil
}

// replaying reports whether b is the batch a previous process left in
// flight, read again to the same lines at reopen (see consider): its first
// send may be dropped as a duplicate of a block the store does not hold.
func (s *shipper) replaying(b *sink.Batch) bool {
	span, ok := s.c.positions.getInFlight(b.SourceID)
	return ok && span.First == b.First && span.Last == b.Last
}

// deliver inserts b until the store has all of it (see the top of this
// file), or returns ctx's error.
func (s *shipper) deliver(ctx, insertCtx context.Context, b *sink.Batch, d *delivery) error {
	bo := newBackoff()
	for {
		t0 := time.Now()
		err := s.c.ins.Insert(insertCtx, b)
		if err == nil {
			d.rows += b.Rows()
			if m := s.c.m; m != nil {
				m.InsertSeconds.Observe(time.Since(t0).Seconds())
			}
			return nil
		}
		s.c.countBatch("failed")
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if sink.Permanent(err) {
			return s.refused(ctx, insertCtx, b, err, d)
		}
		s.c.storeFailed(err)
		wait := bo.NextBackOff()
		// A renewed batch may be taken without deduplication (see
		// sink.Batch.Renew): settled from the tables, as where the store
		// keeps repeated blocks, and verified at the end.
		identical := s.c.dedup && !b.Renewed()
		if identical {
			s.c.logStoreErr("insert failed; sending the identical batch again", err, "path", s.path, "batch", b.ID(), "retry_in", wait)
		} else {
			s.c.logStoreErr("insert failed; its outcome is unknown until the store settles", err, "path", s.path, "batch", b.ID(), "retry_in", wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		d.unknown = d.unknown || s.c.dedup
		if identical {
			continue
		}
		done, err := s.settleBatch(ctx, b, d, bo, false)
		if err != nil {
			return err
		}
		d.resolved = true
		if done {
			return nil
		}
	}
}

// refused handles a batch the store refused for good: cut in two, or, a
// line alone, recorded as a reject.
func (s *shipper) refused(ctx, insertCtx context.Context, b *sink.Batch, cause error, d *delivery) error {
	// A view may refuse the rows after hits took them: what the tables
	// hold stays, only the rest is sent again.
	done, err := s.settleBatch(ctx, b, d, newBackoff(), false)
	if err != nil {
		return err
	}
	d.resolved = true
	if done {
		s.c.log.Warn("the store refused a batch for good after hits took all of its lines (a view refused them): the lines are stored once, the view's table lacks them",
			"path", s.path, "batch", b.ID(), "err", cause)
		return nil
	}
	lo, hi, ok := b.Split()
	if !ok {
		return s.refuseLine(ctx, insertCtx, b, cause, d)
	}
	s.c.countBatch("split")
	s.c.log.Warn("the store refused a batch for good; sending it in two halves", "path", s.path, "batch", b.ID(),
		"rows", b.Rows(), "rejects", len(b.Rejects), "err", cause, "first_half", lo.ID(), "second_half", hi.ID())
	// Each half is recorded as the batch in flight before it is sent:
	// after a restart it is read again as that same block, which an insert
	// of it still pending on a replica that was paused then duplicates, and
	// a replicated table drops (found by the adversary of issue 16: the
	// whole batch's record made the rest of the file one new, larger block,
	// and the paused replica's half landed as well: five lines twice).
	for _, half := range []*sink.Batch{lo, hi} {
		if err := s.c.positions.setInFlight(half.SourceID, half.Span(), s.formats.record(half.First, half.Last)); err != nil {
			s.c.log.Warn("cannot record the batch in flight", "err", err)
		}
		if err := s.deliver(ctx, insertCtx, half, d); err != nil {
			return err
		}
	}
	return nil
}

// refuseLine records a line the store refused alone as a reject, or, when
// the rejects table refused it too, says so loudly: it is stored nowhere.
func (s *shipper) refuseLine(ctx, insertCtx context.Context, b *sink.Batch, cause error, d *delivery) error {
	if !b.Refuse(sink.RefusedReason(cause), s.rawLine) {
		off := b.First
		if len(b.Rejects) > 0 {
			off = b.Rejects[0].Offset
		}
		if d.gone == nil {
			d.gone = map[int64]bool{}
		}
		d.gone[off] = true
		s.c.log.Error("the store refused a line even as a reject: it is stored nowhere (the log file still has it)", "path", s.path, "offset", off, "err", cause)
		s.c.countRefused(b.Site, "lost")
		return nil
	}
	off := b.Rejects[0].Offset
	s.c.log.Warn("the store refused a line for good; it is recorded as a reject", "path", s.path, "offset", off, "err", cause)
	lost := len(d.gone)
	if err := s.deliver(ctx, insertCtx, b, d); err != nil {
		return err
	}
	if len(d.gone) == lost {
		s.c.countRefused(b.Site, "rejected")
	}
	return nil
}

// verify makes sure the store holds every line of b once an identical send
// followed an unknown outcome on a store that deduplicates: what hits and
// rejects lack is sent again under a new id (Batch.Renew), until they hold
// it all.
//
// A replica that lacks parts no live replica has (cluster mode) cannot say:
// the batch is then taken as stored. The replicated table acknowledged it,
// written or dropped as a duplicate of a block Keeper registered, so its
// rows are in a part some replica committed, as those of every batch
// acknowledged before it; waiting for that replica would hold the batch out
// of the pool, and a few such batches stall every other file (found by the
// adversary of issue 16).
func (s *shipper) verify(ctx, insertCtx context.Context, b *sink.Batch, d *delivery) error {
	for {
		done, err := s.settleBatch(ctx, b, d, newBackoff(), true)
		if err != nil || done {
			return err
		}
		b.Renew()
		d.resolved = true
		s.c.countBatch("resent")
		s.c.log.Warn("the store dropped a batch sent again as a duplicate though it does not hold its lines (the block's id outlived its rows); sending the missing lines under a new id",
			"path", s.path, "batch", b.ID(), "rows", b.Rows(), "rejects", len(b.Rejects))
		if err := s.deliver(ctx, insertCtx, b, d); err != nil {
			return err
		}
	}
}

// settleBatch drops from b what hits and rejects hold of it (and the lines
// stored nowhere), retrying until the store answers or ctx ends. done:
// nothing is left to send. acked: b was acknowledged (see verify), and a
// replica that lacks parts answers done.
func (s *shipper) settleBatch(ctx context.Context, b *sink.Batch, d *delivery, bo *backoff.ExponentialBackOff, acked bool) (done bool, err error) {
	for {
		done, err := s.resolve(ctx, b, d.gone)
		if err == nil {
			return done, nil
		}
		if acked && errors.As(err, new(*sink.IncompleteError)) {
			s.c.log.Warn("cannot verify what the store holds of an acknowledged batch while its replica lacks parts; taken as stored", "path", s.path, "batch", b.ID(), "err", err)
			return true, nil
		}
		s.c.storeFailed(err)
		wait := bo.NextBackOff()
		s.c.logStoreErr("cannot learn what the store holds of the batch yet; retrying", err, "path", s.path, "batch", b.ID(), "retry_in", wait)
		if err := sleep(ctx, wait); err != nil {
			return false, err
		}
	}
}

// resolve, once no insert of the source runs, drops from b what hits and
// rejects hold, and the lines in gone. done: nothing is left to send.
func (s *shipper) resolve(ctx context.Context, b *sink.Batch, gone map[int64]bool) (done bool, err error) {
	if _, _, err := s.c.ins.Settle(ctx, b.SourceID); err != nil {
		return false, err
	}
	held, err := s.c.ins.Holds(ctx, b.SourceID, b.Span())
	if err != nil {
		return false, err
	}
	rows, rejects := b.Rows(), len(b.Rejects)
	b.Drop(held)
	if len(gone) > 0 {
		b.Drop(sink.Held{Hits: gone, Rejects: gone})
	}
	s.c.log.Info("resolved what the store holds of a batch", "path", s.path, "batch", b.ID(),
		"rows_held", rows-b.Rows(), "rows_to_send", b.Rows(), "rejects_held", rejects-len(b.Rejects))
	return b.Rows() == 0 && len(b.Rejects) == 0, nil
}

// markProgress records the source committed up to b's last line: what hits
// held may have missed ingest_progress (a view before it failed), and the
// resume point must not fall behind the batch.
func (s *shipper) markProgress(ctx, insertCtx context.Context, b *sink.Batch) error {
	bo := newBackoff()
	for {
		err := s.c.ins.MarkProgress(insertCtx, b.Site, b.SourceID, b.Last)
		if err == nil {
			return nil
		}
		s.c.logStoreErr("cannot record the committed offset of a settled batch; retrying", err, "path", s.path, "batch", b.ID())
		if err := sleep(ctx, bo.NextBackOff()); err != nil {
			return err
		}
	}
}

// rawLineMax bounds the read of a refused line back from its file: enough
// for any line a sample keeps and most whole lines.
const rawLineMax = 64 << 10

// rawLine reads the line at off back from the open file, and its parse, for
// the reject sample of a line the store refused (sink.Batch.Refuse checks
// it is the same line). nil for a gzipped file, or a line not read whole.
func (s *shipper) rawLine(off int64) ([]byte, *parser.Hit) {
	if s.id.Gzip {
		return nil, nil
	}
	buf := make([]byte, rawLineMax)
	n, err := s.reader.File().ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil
	}
	line := buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i+1]
	} else if err == nil {
		return nil, nil // longer than rawLineMax
	}
	// A parser of its own, in the format (and after the header lines) the
	// reader parsed the line with: read() uses the shipper's meanwhile, and
	// may have detected another format since.
	p, err := s.parserAt(off)
	if err != nil {
		return nil, nil
	}
	var h parser.Hit
	if p.Parse(line, &h) != nil {
		return nil, nil
	}
	return bytes.TrimRight(line, "\r\n"), &h
}

// sleep waits d, or returns ctx's error when it ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Collector) countBatch(result string) {
	if c.m != nil {
		c.m.Batches.WithLabelValues(result).Inc()
	}
}

// countRefused counts a line the store refused for good, by what became of
// it: rejected (recorded in rejects) or lost (the rejects table refused it
// too).
func (c *Collector) countRefused(site, outcome string) {
	if c.m != nil {
		c.m.LinesRefused.WithLabelValues(site, outcome).Inc()
	}
}
