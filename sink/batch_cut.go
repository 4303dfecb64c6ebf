package sink

// AddSkipped records a line that is part of the log's format, not a request
// (parser.ErrDirective: W3C's "#Version:" and "#Fields:"): it belongs to the
// batch's span of lines, so the offset moves past it, but it is neither a
// row nor a reject. A batch of such lines alone inserts nothing; a resume
// from the last row before them reads them again, which stores nothing.
func (b *Batch) AddSkipped(off, next int64) {
	b.mark(off, next)
	b.skipped = append(b.skipped, off)
}

// Skipped is how many of the batch's lines were directives (AddSkipped).
func (b *Batch) Skipped() int { return len(b.skipped) }

// TruncateAt drops the lines at offset cut and after, so that they can be
// read again (the collector found their format was not the one it parsed
// them with). Only for a batch never sent: its id, made of its first and
// last line, changes. The batch keeps its read time; cut empties it when it
// is at or before its first line.
func (b *Batch) TruncateAt(cut int64) {
	if b.First < 0 || cut > b.Last {
		return
	}
	n := 0
	for n < len(b.offset) && int64(b.offset[n]) < cut {
		n++
	}
	keep := make([]bool, len(b.offset))
	for i := range n {
		keep[i] = true
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
	before := func(offs []int64) []int64 {
		k := 0
		for k < len(offs) && offs[k] < cut {
			k++
		}
		return offs[:k]
	}
	r := 0
	for r < len(b.Rejects) && b.Rejects[r].Offset < cut {
		r++
	}
	b.Rejects = b.Rejects[:r]
	b.unsampled = before(b.unsampled)
	b.skipped = before(b.skipped)
	b.RejectedLines = len(b.Rejects) + len(b.unsampled)
	b.Lines = len(b.ts) + b.RejectedLines + len(b.skipped)
	if b.Lines == 0 {
		b.First, b.Last, b.Next = -1, -1, -1
		return
	}
	last := b.lastLine()
	if n := len(b.skipped); n > 0 {
		last = max(last, b.skipped[n-1])
	}
	b.Last, b.Next = last, cut
}
