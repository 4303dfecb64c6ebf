package sink

// TimeRange is the earliest and latest time of the batch's rows (Unix
// seconds); max is 0 for a batch without rows.
func (b *Batch) TimeRange() (lo, hi int64) {
	for i, t := range b.ts {
		if i == 0 || t < lo {
			lo = t
		}
		if t > hi {
			hi = t
		}
	}
	return lo, hi
}

// Span is the batch's lines as the store is asked about them.
func (b *Batch) Span() Span {
	lo, hi := b.TimeRange()
	return Span{First: b.First, Last: b.Last, MinTS: lo, MaxTS: hi, RejectsAt: b.RejectsTime().Unix()}
}

// Drop removes the rows and reject samples the store already holds, so the
// rest can be sent again where the store does not drop a repeated block:
// a block insert is atomic per partition, so after an unknown outcome any
// subset of a batch may be there. A line is held in either table: a row
// the store refused alone is in rejects (see Refuse). First and Last stay:
// they still bound the lines the batch stands for.
func (b *Batch) Drop(h Held) {
	keep := make([]bool, len(b.offset))
	for i, off := range b.offset {
		keep[i] = !h.Hits[int64(off)] && !h.Rejects[int64(off)]
	}
	b.ts = keepRows(b.ts, keep)
	for _, c := range b.strCols() {
		c.keep(keep)
	}
	b.status = keepRows(b.status, keep)
	b.bytes = keepRows(b.bytes, keep)
	b.requestTime = keepRows(b.requestTime, keep)
	b.offset = keepRows(b.offset, keep)
	b.visitor = keepRows(b.visitor, keep)
	rejects := b.Rejects[:0]
	for _, r := range b.Rejects {
		if !h.Rejects[r.Offset] && !h.Hits[r.Offset] {
			rejects = append(rejects, r)
		}
	}
	b.Rejects = rejects
}

func keepRows[T any](s []T, keep []bool) []T {
	n := 0
	for i, v := range s {
		if keep[i] {
			s[n] = v
			n++
		}
	}
	return s[:n]
}

// keep compacts the column to the values whose keep is set, in place.
func (c *strCol) keep(keep []bool) {
	var w, start uint32
	n := 0
	for i, end := range c.ends {
		if keep[i] {
			copy(c.buf[w:], c.buf[start:end])
			w += end - start
			c.ends[n] = w
			n++
		}
		start = end
	}
	c.buf = c.buf[:w]
	c.ends = c.ends[:n]
}
