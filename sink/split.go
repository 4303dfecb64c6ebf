package sink

import (
	"bytes"
	"math"
	"sort"

	"github.com/hitcount/hitcount/parser"
)

// Split cuts a batch the store refused for good (Permanent) into two: lo
// holds the first half of the lines it would send (rows and reject samples,
// in file order), hi the rest; every line of the batch, sent or only
// counted (a reject past the sample), is in exactly one of them. The cut
// depends on the batch's content alone, so the same batch always gives the
// same pieces with the same ids: a piece sent again after a crash is the
// same block. Each piece keeps the batch's generation (an id not used
// before) and read time (its rejects' stamp). ok is false for a batch of
// fewer than two lines to send: nothing to cut.
//
// A piece is a new batch outside any pool, as big as its share of b.
func (b *Batch) Split() (lo, hi *Batch, ok bool) {
	n := len(b.ts) + len(b.Rejects)
	if n < 2 {
		return nil, nil, false
	}
	cut := b.lineAt(n / 2)
	lo = b.piece(-1, cut)
	lo.First, lo.Last, lo.Next = b.First, lo.lastLine(), cut
	hi = b.piece(cut, math.MaxInt64)
	hi.First, hi.Last, hi.Next = cut, b.Last, b.Next
	return lo, hi, true
}

// lineAt is the offset of the k-th (from 0) line to send: rows and reject
// samples merged in offset order, as both are appended in file order.
func (b *Batch) lineAt(k int) int64 {
	i, j := 0, 0
	for {
		row := i < len(b.offset) && (j >= len(b.Rejects) || int64(b.offset[i]) < b.Rejects[j].Offset)
		var off int64
		if row {
			off = int64(b.offset[i])
			i++
		} else {
			off = b.Rejects[j].Offset
			j++
		}
		if i+j == k+1 {
			return off
		}
	}
}

// piece is a new batch of b's lines at offsets in [from, to), counted as
// its own: Lines are its rows and rejected lines.
func (b *Batch) piece(from, to int64) *Batch {
	p := &Batch{Site: b.Site, SourceID: b.SourceID, ReadAt: b.ReadAt, gen: b.gen, Clients: b.Clients}
	in := func(off int64) bool { return off >= from && off < to }
	i := sort.Search(len(b.offset), func(i int) bool { return int64(b.offset[i]) >= from })
	j := sort.Search(len(b.offset), func(j int) bool { return int64(b.offset[j]) >= to })
	p.appendRows(b, i, j)
	for _, r := range b.Rejects {
		if in(r.Offset) {
			p.Rejects = append(p.Rejects, r)
		}
	}
	for _, off := range b.unsampled {
		if in(off) {
			p.unsampled = append(p.unsampled, off)
		}
	}
	p.RejectedLines = len(p.Rejects) + len(p.unsampled)
	p.Lines = len(p.ts) + p.RejectedLines
	return p
}

// lastLine is the offset of the piece's last line, sent or counted.
func (b *Batch) lastLine() int64 {
	last := int64(-1)
	if n := len(b.offset); n > 0 {
		last = int64(b.offset[n-1])
	}
	if n := len(b.Rejects); n > 0 {
		last = max(last, b.Rejects[n-1].Offset)
	}
	if n := len(b.unsampled); n > 0 {
		last = max(last, b.unsampled[n-1])
	}
	return last
}

// appendRows appends src's rows [i, j), every column.
func (b *Batch) appendRows(src *Batch, i, j int) {
	b.ts = append(b.ts, src.ts[i:j]...)
	b.status = append(b.status, src.status[i:j]...)
	b.bytes = append(b.bytes, src.bytes[i:j]...)
	b.requestTime = append(b.requestTime, src.requestTime[i:j]...)
	b.offset = append(b.offset, src.offset[i:j]...)
	b.visitor = append(b.visitor, src.visitor[i:j]...)
	dst, from := b.strCols(), src.strCols()
	for k := range dst {
		dst[k].appendRange(from[k], i, j)
	}
}

// appendRange appends src's values [i, j).
func (c *strCol) appendRange(src *strCol, i, j int) {
	if i >= j {
		return
	}
	start := uint32(0)
	if i > 0 {
		start = src.ends[i-1]
	}
	base := uint32(len(c.buf))
	c.buf = append(c.buf, src.buf[start:src.ends[j-1]]...)
	for _, end := range src.ends[i:j] {
		c.ends = append(c.ends, base+end-start)
	}
}

// Refuse turns a batch of one row, which the store refused for good even
// alone, into a reject of that line with reason (RefusedReason), under a
// new id: the line is recorded, never sent as a hit again. raw, if not nil,
// reads the line at an offset from the log and parses it: that raw line is
// the reject's sample when it is the row the batch holds (the file may
// have been rewritten since), else the row is described from its fields.
// Refuse reports false, changing nothing, for any other batch: a lone reject
// the store refused has nowhere left to go.
func (b *Batch) Refuse(reason string, raw func(off int64) ([]byte, *parser.Hit)) bool {
	if len(b.ts) != 1 || len(b.Rejects) != 0 {
		return false
	}
	off := int64(b.offset[0])
	var h parser.Hit
	b.rowHit(0, &h)
	line := describe(&h)
	if raw != nil {
		if l, rh := raw(off); l != nil && rh != nil && sameHit(rh, &h) {
			line = l
		}
	}
	if len(line) > maxRejectLine {
		line = line[:maxRejectLine]
	}
	b.Drop(Held{Hits: map[int64]bool{off: true}})
	b.Rejects = append(b.Rejects, Reject{Offset: off, Reason: reason, Line: string(line)})
	b.RejectedLines++
	b.gen++
	return true
}

// Renew gives the batch a new id for sending its lines again where the store
// dropped an identical send as a duplicate while it does not hold them (its
// block id in the deduplication log, the rows not in the table). A store
// that deduplicates by a checksum of the rows, not by id (replicated tables
// before 22.2), would drop them again: it takes a renewed batch without
// deduplication (Renewed), so its unknown outcome must be settled from the
// tables, never by sending it again identically.
func (b *Batch) Renew() { b.gen++ }

// Renewed reports whether the batch carries lines sent before under another
// id (Renew, Refuse): see Renew.
func (b *Batch) Renewed() bool { return b.gen > 0 }

// rowHit fills h with row i's fields, as far as the batch keeps them.
func (b *Batch) rowHit(i int, h *parser.Hit) {
	*h = parser.Hit{
		Unix: b.ts[i], Status: b.status[i],
		Host: b.host.value(i), Method: b.method.value(i), Path: b.path.value(i), Query: b.query.value(i),
		Protocol: b.protocol.value(i), RemoteAddr: b.client.value(i), RemoteUser: b.remoteUser.value(i),
		Referer: b.referer.value(i), UserAgent: b.userAgent.value(i),
	}
}

// value is the column's i-th value, aliasing its bytes.
func (c *strCol) value(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.buf[start:c.ends[i]]
}

// sameHit reports whether a line read back from the log parses to the row:
// its time, client, request, status and host.
func sameHit(read, row *parser.Hit) bool {
	r := *read
	// As the batch keeps it: whole seconds in UTC, no bad request text.
	r.Nanos, r.ZoneOffset, r.BadRequest = 0, 0, nil
	return bytes.Equal(describe(&r), describe(row))
}
