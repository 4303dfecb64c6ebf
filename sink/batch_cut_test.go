package sink

import (
	"slices"
	"testing"
	"time"
)

// A batch cut at an offset keeps exactly its lines before it, of every kind
// (rows, reject samples, rejects past the sample, directive lines), with
// counts and bounds of its own; lines read again after the cut are added as
// to any batch.
func TestTruncateAt(t *testing.T) {
	kind := func(i int) string {
		switch {
		case i%50 == 0:
			return "skip"
		case i%3 == 0:
			return "reject"
		default:
			return "row"
		}
	}
	const n = 400 // over 100 rejects: some past the sample
	build := func() *Batch {
		base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()
		b := NewBatch(n)
		b.Reset("www", 7)
		for i := range n {
			off := int64(i * 100)
			switch kind(i) {
			case "skip":
				b.AddSkipped(off, off+100)
			case "reject":
				b.AddReject(off, off+100, "bad", []byte("garbage"))
			default:
				b.Add(testHit(base+off), off, off+100)
			}
		}
		return b
	}
	for _, c := range []struct {
		name string
		cut  int64
	}{
		{"middle", 17000},
		{"on a directive line", 20000},
		{"just past the first line", 100},
		{"at the first line", 0},
		{"before the first line", -5},
		{"at the last line", (n - 1) * 100},
		{"past the end", n * 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := build()
			b.TruncateAt(c.cut)
			var rows, rejects, skipped, last int64 = 0, 0, 0, -1
			for i := range n {
				off := int64(i * 100)
				if off >= c.cut {
					break
				}
				last = off
				switch kind(i) {
				case "skip":
					skipped++
				case "reject":
					rejects++
				default:
					rows++
				}
			}
			if c.cut > int64((n-1)*100) { // past the end: unchanged
				rows, rejects, skipped, last = int64(build().Rows()), int64(build().RejectedLines), int64(build().Skipped()), (n-1)*100
			}
			if int64(b.Rows()) != rows || int64(b.RejectedLines) != rejects || int64(b.Skipped()) != skipped || int64(b.Lines) != rows+rejects+skipped {
				t.Fatalf("rows %d rejects %d skipped %d lines %d, want %d %d %d", b.Rows(), b.RejectedLines, b.Skipped(), b.Lines, rows, rejects, skipped)
			}
			if b.Last != last {
				t.Errorf("last %d, want %d", b.Last, last)
			}
			if last < 0 && (b.First != -1 || b.Next != -1) {
				t.Errorf("empty batch: first %d next %d, want -1", b.First, b.Next)
			}
			for _, off := range sent(b) {
				if off >= c.cut {
					t.Errorf("line at %d kept past the cut %d", off, c.cut)
				}
			}
			if !slices.IsSorted(sent(b)) {
				t.Errorf("lines out of order: %v", sent(b))
			}
			// The lines are read again from the cut: the batch is whole.
			if c.cut >= 0 && c.cut <= int64((n-1)*100) {
				whole := build()
				base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()
				for i := int(c.cut / 100); i < n; i++ {
					off := int64(i * 100)
					switch kind(i) {
					case "skip":
						b.AddSkipped(off, off+100)
					case "reject":
						b.AddReject(off, off+100, "bad", []byte("garbage"))
					default:
						b.Add(testHit(base+off), off, off+100)
					}
				}
				if b.ID() != whole.ID() || b.Lines != whole.Lines || b.Rows() != whole.Rows() || b.RejectedLines != whole.RejectedLines ||
					!slices.Equal(sent(b), sent(whole)) {
					t.Errorf("read again: %s %d lines %d rows %d rejected, want %s %d %d %d",
						b.ID(), b.Lines, b.Rows(), b.RejectedLines, whole.ID(), whole.Lines, whole.Rows(), whole.RejectedLines)
				}
			}
		})
	}
}
