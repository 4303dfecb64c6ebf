package sink

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/parser"
)

// line is one line of a test batch: a row, or a reject when bad.
type line struct {
	off int64
	bad bool
}

// buildBatch adds lines 100 bytes apart, every kind at its offset.
func buildBatch(lines []line) *Batch {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()
	b := NewBatch(len(lines))
	b.Reset("www", 7)
	b.ReadAt = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, l := range lines {
		if l.bad {
			b.AddReject(l.off, l.off+100, "bad", fmt.Appendf(nil, "garbage at %d", l.off))
			continue
		}
		h := testHit(base + l.off)
		h.Path = fmt.Appendf(nil, "/page/%d", l.off)
		b.Add(h, l.off, l.off+100)
	}
	return b
}

func lines(n int, bad func(i int) bool) []line {
	var ls []line
	for i := range n {
		ls = append(ls, line{off: int64(i * 100), bad: bad(i)})
	}
	return ls
}

// sent lists a batch's rows and reject samples by offset, in order.
func sent(b *Batch) []int64 {
	var offs []int64
	for _, o := range b.offset {
		offs = append(offs, int64(o))
	}
	for _, r := range b.Rejects {
		offs = append(offs, r.Offset)
	}
	slices.Sort(offs)
	return offs
}

// A split batch's pieces hold every line of it once, in two contiguous runs
// of about half the lines to send each, with distinct ids, bounds that meet,
// and counts of their own; the same batch always splits the same way.
func TestSplit(t *testing.T) {
	never := func(int) bool { return false }
	for _, tc := range []struct {
		name  string
		build func() *Batch
		fresh bool // Lines = Rows + RejectedLines, and the pieces' sum to it
	}{
		{"two rows", func() *Batch { return buildBatch(lines(2, never)) }, true},
		{"rows, even", func() *Batch { return buildBatch(lines(10, never)) }, true},
		{"rows, odd (101 months)", func() *Batch { return buildBatch(lines(101, never)) }, true},
		{"rows and rejects", func() *Batch { return buildBatch(lines(23, func(i int) bool { return i%3 == 1 })) }, true},
		{"rejects first and last", func() *Batch { return buildBatch(lines(9, func(i int) bool { return i == 0 || i == 8 })) }, true},
		{"rejects only", func() *Batch { return buildBatch(lines(7, func(int) bool { return true })) }, true},
		{"rejects past the sample", func() *Batch { return buildBatch(lines(300, func(i int) bool { return i%2 == 0 })) }, true},
		{"after a drop", func() *Batch {
			b := buildBatch(lines(20, func(i int) bool { return i%5 == 4 }))
			h := Held{Hits: map[int64]bool{0: true, 100: true, 700: true}, Rejects: map[int64]bool{400: true}}
			b.Drop(h)
			return b
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.build()
			before := string(b.AppendTSV(nil))
			lo, hi, ok := b.Split()
			if !ok {
				t.Fatal("not split")
			}
			if string(b.AppendTSV(nil)) != before {
				t.Error("Split changed the batch")
			}
			// Every line once, in order: rows, samples, and rejects past the sample.
			if got, want := string(lo.AppendTSV(nil))+string(hi.AppendTSV(nil)), before; got != want {
				t.Errorf("rows of the pieces\n%q\nwant\n%q", got, want)
			}
			if got := append(slices.Clone(lo.Rejects), hi.Rejects...); !slices.Equal(got, b.Rejects) {
				t.Errorf("reject samples of the pieces %v, want %v", got, b.Rejects)
			}
			if got := append(slices.Clone(lo.unsampled), hi.unsampled...); !slices.Equal(got, b.unsampled) {
				t.Errorf("rejects past the sample of the pieces %v, want %v", got, b.unsampled)
			}
			n := len(sent(b))
			if len(sent(lo)) != n/2 || len(sent(hi)) != n-n/2 {
				t.Errorf("pieces send %d and %d lines of %d, want %d and %d", len(sent(lo)), len(sent(hi)), n, n/2, n-n/2)
			}
			// Bounds: lo from the batch's first line to the cut, hi from the
			// cut to the batch's last line; each piece's lines inside its own.
			if lo.First != b.First || hi.Last != b.Last || hi.Next != b.Next || lo.Next != hi.First {
				t.Errorf("lo [%d, %d] next %d, hi [%d, %d] next %d; batch [%d, %d] next %d",
					lo.First, lo.Last, lo.Next, hi.First, hi.Last, hi.Next, b.First, b.Last, b.Next)
			}
			for _, p := range []*Batch{lo, hi} {
				offs := append(sent(p), p.unsampled...)
				if slices.Min(offs) < p.First || slices.Max(offs) > p.Last || p.Last >= p.Next {
					t.Errorf("piece [%d, %d] next %d holds lines %d..%d", p.First, p.Last, p.Next, slices.Min(offs), slices.Max(offs))
				}
				if p.Lines != p.Rows()+p.RejectedLines || p.RejectedLines != len(p.Rejects)+len(p.unsampled) {
					t.Errorf("piece lines %d, rows %d, rejected %d (%d sampled)", p.Lines, p.Rows(), p.RejectedLines, len(p.Rejects))
				}
				if !p.ReadAt.Equal(b.ReadAt) || p.Site != b.Site || p.SourceID != b.SourceID {
					t.Errorf("piece read at %v, site %q, source %d; want the batch's", p.ReadAt, p.Site, p.SourceID)
				}
			}
			if lo.Last >= hi.First {
				t.Errorf("lo ends at %d, hi starts at %d", lo.Last, hi.First)
			}
			if tc.fresh {
				if lo.Lines+hi.Lines != b.Lines || lo.RejectedLines+hi.RejectedLines != b.RejectedLines {
					t.Errorf("pieces count %d+%d lines (%d+%d rejected), want %d (%d)", lo.Lines, hi.Lines, lo.RejectedLines, hi.RejectedLines, b.Lines, b.RejectedLines)
				}
			}
			// Deterministic: the same pieces, ids included, every time.
			lo2, hi2, _ := tc.build().Split()
			if lo2.ID() != lo.ID() || hi2.ID() != hi.ID() || string(hi2.AppendTSV(nil)) != string(hi.AppendTSV(nil)) {
				t.Errorf("a second split gives %s and %s, the first %s and %s", lo2.ID(), hi2.ID(), lo.ID(), hi.ID())
			}
		})
	}
}

// Split all the way down, every piece has an id of its own: each is sent
// under its own token where the store deduplicates.
func TestSplitIDsAreDistinct(t *testing.T) {
	b := buildBatch(lines(101, func(i int) bool { return i%7 == 3 }))
	ids := map[string]bool{b.ID(): true}
	var walk func(p *Batch) int
	walk = func(p *Batch) int {
		lo, hi, ok := p.Split()
		if !ok {
			return len(sent(p))
		}
		for _, q := range []*Batch{lo, hi} {
			if ids[q.ID()] {
				t.Fatalf("id %s given twice", q.ID())
			}
			ids[q.ID()] = true
		}
		return walk(lo) + walk(hi)
	}
	if n := walk(b); n != 101 {
		t.Errorf("single lines %d, want 101", n)
	}
	if _, _, ok := buildBatch(lines(1, func(int) bool { return false })).Split(); ok {
		t.Error("a batch of one line was split")
	}
	// A renewed batch's pieces are renewed too: no id of an earlier send.
	b.Renew()
	lo, hi, _ := b.Split()
	if !strings.HasSuffix(b.ID(), "-g1") || !strings.HasSuffix(lo.ID(), "-g1") || !strings.HasSuffix(hi.ID(), "-g1") {
		t.Errorf("renewed ids %s, %s, %s; want a -g1 suffix", b.ID(), lo.ID(), hi.ID())
	}
}

// A row the store refuses alone becomes a reject of that line, with the
// raw line when the log still holds it, under a new id.
func TestRefuse(t *testing.T) {
	const reason = "store refused: Code: 395. Value passed to 'throwIf' function is non zero"
	single := func() *Batch { return buildBatch([]line{{off: 500}}) }
	rowHit := func(b *Batch) *parser.Hit {
		var h parser.Hit
		b.rowHit(0, &h)
		h.ZoneOffset = 3600 // logged in another zone: the same time
		return &h
	}
	for _, tc := range []struct {
		name     string
		raw      func(b *Batch) func(int64) ([]byte, *parser.Hit)
		wantLine func(b *Batch) string
	}{
		{"raw line read back", func(b *Batch) func(int64) ([]byte, *parser.Hit) {
			h := rowHit(b)
			return func(off int64) ([]byte, *parser.Hit) {
				if off != 500 {
					t.Errorf("raw line asked at %d, want 500", off)
				}
				return []byte("the raw line"), h
			}
		}, func(*Batch) string { return "the raw line" }},
		{"the log holds another line there", func(b *Batch) func(int64) ([]byte, *parser.Hit) {
			h := rowHit(b)
			h.Path = []byte("/elsewhere")
			return func(int64) ([]byte, *parser.Hit) { return []byte("another line"), h }
		}, described},
		{"no raw line", func(*Batch) func(int64) ([]byte, *parser.Hit) { return nil }, described},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := single()
			id := b.ID()
			want := tc.wantLine(b)
			if !b.Refuse(reason, tc.raw(b)) {
				t.Fatal("not refused")
			}
			if b.Rows() != 0 || len(b.Rejects) != 1 || b.RejectedLines != 1 || b.Lines != 1 || b.First != 500 || b.Last != 500 {
				t.Fatalf("rows %d, rejects %v, rejected %d, lines %d, [%d, %d]", b.Rows(), b.Rejects, b.RejectedLines, b.Lines, b.First, b.Last)
			}
			if r := b.Rejects[0]; r.Offset != 500 || r.Reason != reason || r.Line != want {
				t.Errorf("reject %+v, want line %q", r, want)
			}
			if b.ID() == id {
				t.Errorf("id %s unchanged", id)
			}
		})
	}
	for name, b := range map[string]*Batch{
		"two rows":   buildBatch(lines(2, func(int) bool { return false })),
		"a reject":   buildBatch(lines(1, func(int) bool { return true })),
		"row+reject": buildBatch(lines(2, func(i int) bool { return i == 1 })),
	} {
		if b.Refuse(reason, nil) {
			t.Errorf("%s: refused", name)
		}
	}
}

func described(b *Batch) string {
	var h parser.Hit
	b.rowHit(0, &h)
	return string(describe(&h))
}
