package sink

import (
	"fmt"
	"testing"
	"time"
)

// Drop leaves exactly the rows and reject samples the store does not hold,
// each with all of its columns: the batch that remains is the one that
// would have been built from those lines alone.
func TestDropKeepsWhatTheStoreLacks(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()
	build := func(keep func(i int) bool) *Batch {
		b := NewBatch(16)
		b.Reset("www", 7)
		for i := range 10 {
			off := int64(i * 100)
			if !keep(i) {
				continue
			}
			if i%4 == 3 {
				b.AddReject(off, off+100, "bad", []byte(fmt.Sprintf("garbage %d", i)))
				continue
			}
			h := testHit(base + int64(i))
			h.Path = []byte(fmt.Sprintf("/page/%d/%s", i, string(make([]byte, i))))
			h.UserAgent = []byte(fmt.Sprintf("agent %d", i))
			b.Add(h, off, off+100)
		}
		return b
	}
	for name, held := range map[string]func(i int) bool{
		"none":        func(int) bool { return false },
		"all":         func(int) bool { return true },
		"a prefix":    func(i int) bool { return i < 4 },
		"a suffix":    func(i int) bool { return i >= 6 },
		"every other": func(i int) bool { return i%2 == 0 },
	} {
		b := build(func(int) bool { return true })
		h := Held{Hits: map[int64]bool{}, Rejects: map[int64]bool{}}
		for i := range 10 {
			if held(i) {
				h.Hits[int64(i*100)] = i%4 != 3
				h.Rejects[int64(i*100)] = i%4 == 3
			}
		}
		first, last := b.First, b.Last
		b.Drop(h)
		want := build(func(i int) bool { return !held(i) })
		if got, w := string(b.AppendTSV(nil)), string(want.AppendTSV(nil)); got != w {
			t.Errorf("%s held: rows left\n%q\nwant\n%q", name, got, w)
		}
		if len(b.Rejects) != len(want.Rejects) {
			t.Errorf("%s held: %d reject samples left, want %d", name, len(b.Rejects), len(want.Rejects))
		}
		if b.First != first || b.Last != last {
			t.Errorf("%s held: the batch now stands for [%d, %d], want [%d, %d]", name, b.First, b.Last, first, last)
		}
	}
}

func TestSpan(t *testing.T) {
	b := NewBatch(4)
	b.Reset("www", 1)
	if s := b.Span(); s.MaxTS != 0 {
		t.Errorf("empty batch: %+v, want MaxTS 0 (unknown)", s)
	}
	for i, ts := range []int64{1_800_000_050, 1_800_000_010, 1_800_000_090} {
		b.Add(testHit(ts), int64(i*10), int64(i*10+10))
	}
	b.ReadAt = time.Unix(1_800_000_100, 500_000_000)
	if s := b.Span(); s != (Span{First: 0, Last: 20, MinTS: 1_800_000_010, MaxTS: 1_800_000_090, RejectsAt: 1_800_000_100}) {
		t.Errorf("span %+v", s)
	}
	if at := b.Span().RejectsAt; at != b.RejectsTime().Unix() {
		t.Errorf("span's rejects' stamp %d, the batch stamps them %d: a batch read again from its record would differ", at, b.RejectsTime().Unix())
	}
}
