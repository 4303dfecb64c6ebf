package collector

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// The header block in force at an offset is the last run of '#' lines
// before it, however far back within the bound, else the file's first; and
// a stream (a gzipped file) gives the same.
func TestHeaderBlock(t *testing.T) {
	data := func(parts ...string) string { return strings.Join(parts, "") }
	h1 := "#Software: IIS\n#Version: 1.0\n#Fields: date time cs-uri-stem sc-status\n"
	h2 := "#Software: IIS\n#Version: 1.0\n#Date: 2026-11-23 00:00:00\n#Fields: date time cs-method cs-uri-stem sc-status\n"
	row := func(i int) string { return fmt.Sprintf("2026-11-22 10:00:%02d /p%d 200\n", i%60, i) }
	rows := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			b.WriteString(row(i))
		}
		return b.String()
	}
	long := rows(0, 3000) // ~90 KiB: more than one chunk back
	t.Run("far back", func(t *testing.T) { headerBlockFar(t, h1, h2, rows) })
	cases := []struct {
		name string
		file string
		at   string // the offset is where this text starts in file
		want string
	}{
		{"the top block, a few lines on", data(h1, rows(0, 5)), row(3), h1},
		{"the top block, chunks away", data(h1, long, "END\n"), "END\n", h1},
		{"a second block wins", data(h1, rows(0, 5), h2, rows(5, 5)), row(7), h2},
		{"a second block chunks back", data(h1, rows(0, 5), h2, long, "END\n"), "END\n", h2},
		{"right after a block", data(h1, rows(0, 5), h2, "END\n"), "END\n", h2},
		{"between blocks: the first", data(h1, rows(0, 5), "MID\n", rows(5, 5), h2, rows(10, 2)), "MID\n", h1},
		{"at a block's second line: its first line", data(h1, rows(0, 2), h2), h2[strings.Index(h2, "#Version"):], "#Software: IIS\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			off := int64(strings.Index(c.file, c.at))
			if off < 0 {
				t.Fatalf("%q not in the file", c.at)
			}
			if c.name == "at a block's second line: its first line" {
				off = int64(strings.LastIndex(c.file, c.at))
			}
			got, at, err := headerBlockAt(strings.NewReader(c.file), off, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(bytes.Join(got, nil)); s != c.want || !strings.HasPrefix(c.file[at:], c.want) {
				t.Errorf("at %d: %q from %d, want %q", off, s, at, c.want)
			}
			got, at2, err := headerBlockStream(strings.NewReader(c.file[:off]), 0)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(bytes.Join(got, nil)); s != c.want || at2 != at {
				t.Errorf("stream to %d: %q from %d, want %q from %d", off, s, at2, c.want, at)
			}
		})
	}
}

// The watch says a file's format is wrong at the first 50 lines of which
// 90% were rejected, not before and not for fewer rejects; the rejected
// lines it keeps are the last ones, oldest first.
func TestFormatWatch(t *testing.T) {
	cases := []struct {
		name string
		// pattern repeats: r a rejected line, . a parsed one.
		pattern string
		lines   int
		// want is the line (1-based) at which the watch first says to
		// check; 0: never.
		want int
	}{
		{"all rejected", "r", 200, watchMin},
		{"nine in ten rejected: at a reject", "rrrrrrrrr.", 200, watchMin + 1},
		{"eight in ten rejected", "rrrrrrrr..", 3000, 0},
		{"all parsed", ".", 3000, 0},
		{"rejects after good lines: 50 in a row", strings.Repeat(".", 2000) + strings.Repeat("r", 2000), 4000, 2000 + watchMin},
		{"40 in a row, again and again", strings.Repeat("r", 40) + strings.Repeat(".", 10), 3000, 0},
		{"fewer than 50 lines", "r", 49, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newFormatWatch()
			got := 0
			for i := range c.lines {
				var check bool
				if c.pattern[i%len(c.pattern)] == 'r' {
					check = w.reject(int64(i*10), fmt.Appendf(nil, "line %d\n", i), "bad")
				} else {
					check = w.line()
				}
				if check && !w.mismatch {
					got = i + 1
					break
				}
			}
			if got != c.want {
				t.Errorf("said to check at line %d, want %d", got, c.want)
			}
		})
	}
	w := newFormatWatch()
	for i := range watchKeep + 10 {
		w.reject(int64(i), fmt.Appendf(nil, "line %d\n", i), "bad")
	}
	kept := w.rejected()
	if len(kept) != watchKeep || string(kept[0]) != "line 10\n" || string(kept[len(kept)-1]) != fmt.Sprintf("line %d\n", watchKeep+9) {
		t.Errorf("kept %d lines, %q .. %q", len(kept), kept[0], kept[len(kept)-1])
	}
	// Each kept line's offset (here its number) goes with it.
	if at, recent := w.firstOf(len(kept)), w.firstOf(3); at != 10 || recent != watchKeep+7 || w.firstOf(0) != -1 {
		t.Errorf("first of the kept lines at %d, of the last 3 at %d; want 10 and %d", at, recent, watchKeep+7)
	}
	if a, b, c := w.keptSince(watchKeep+5, 50), w.keptSince(0, 50), w.keptSince(watchKeep+10, 50); a != 5 || b != 50 || c != 0 {
		t.Errorf("kept since: %d, %d, %d; want 5, 50, 0", a, b, c)
	}
	if w.run != watchKeep+10 || w.runStart != 0 {
		t.Errorf("run of %d from %d, want %d from 0", w.run, w.runStart, watchKeep+10)
	}
}

// BenchmarkAddLine is the collector's per-line work (parse, the format
// watch, the batch), against the same without the watch (addLine as it was
// before it): the watch's cost per line, which must stay a few
// instructions and no allocation.
func BenchmarkAddLine(b *testing.B) {
	g := loggen.New(loggen.Options{Seed: 7})
	var lines [][]byte
	for i := range 4096 {
		l, _ := g.Line(nil, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Millisecond))
		lines = append(lines, l)
	}
	p, err := parser.New("combined")
	if err != nil {
		b.Fatal(err)
	}
	c := &Collector{opts: Options{Now: time.Now}, unshipped: map[*sink.Batch]time.Time{}}
	s := &shipper{c: c, parser: p, format: "combined", watch: newFormatWatch()}
	const rows = 4096 // a batch that stays in cache: the difference is the watch, not memory
	batch := sink.NewBatch(rows)
	run := func(b *testing.B, add func(bt *sink.Batch, h *parser.Hit, line []byte, off int64)) {
		b.ReportAllocs()
		var h parser.Hit
		var off int64
		i := 0
		for b.Loop() {
			if i%rows == 0 {
				batch.Reset("www", 1)
			}
			l := lines[i&4095]
			add(batch, &h, l, off)
			off += int64(len(l))
			i++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/line")
	}
	b.Run("addLine", func(b *testing.B) { run(b, s.addLine) })
	b.Run("without-watch", func(b *testing.B) {
		run(b, func(bt *sink.Batch, h *parser.Hit, line []byte, off int64) {
			s.markRead(bt)
			next := off + int64(len(line))
			if err := p.Parse(line, h); err != nil {
				bt.AddReject(off, next, err.Error(), bytes.TrimRight(line, "\r\n"))
				return
			}
			bt.AddLine(h, off, next, bytes.TrimRight(line, "\r\n"))
		})
	})
}

// floorReader fails a read of anything before floor: what a search must not
// read.
type floorReader struct {
	r     *strings.Reader
	floor int64
}

func (f floorReader) ReadAt(p []byte, off int64) (int, error) {
	if off < f.floor {
		return 0, fmt.Errorf("read at %d, before %d", off, f.floor)
	}
	return f.r.ReadAt(p, off)
}

// A block any distance back is found (no bound that would fall back to the
// file's first block: issue 17's adversary resumed 18 MiB after one); with
// the block known at the last acknowledged line (positions' HeadersAt), the
// search reads nothing before that line except the block itself.
func headerBlockFar(t *testing.T, h1, h2 string, rows func(from, n int) string) {
	far := rows(0, 700_000) // ~20 MiB
	file := h1 + rows(0, 5) + h2 + far + "END\n"
	off := int64(strings.Index(file, "END\n"))
	second := int64(strings.Index(file, h2))
	acked := off - 1000 // a line the store acknowledged, past h2
	for _, c := range []struct {
		name         string
		r            io.ReaderAt
		floor, known int64
		want         string
		wantAt       int64
	}{
		{"no record: searched to the block", strings.NewReader(file), 0, -1, h2, second},
		{"the record's block, nothing else read before the acked line",
			&blockOnly{floorReader{strings.NewReader(file), acked - 1}, second, int64(len(h2))}, acked, second, h2, second},
		{"a block after the acked line wins", strings.NewReader(h1 + rows(0, 5) + "ACK\n" + h2 + "END\n"),
			int64(len(h1 + rows(0, 5))), 0, h2, int64(len(h1 + rows(0, 5) + "ACK\n"))},
		{"a record that is not a block: searched for", strings.NewReader(file), acked, second + 3, h2, second},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := off
			if c.name == "a block after the acked line wins" {
				s := h1 + rows(0, 5) + "ACK\n" + h2 + "END\n"
				o = int64(strings.Index(s, "END\n"))
			}
			got, at, err := headerBlockAt(c.r, o, c.floor, c.known)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(bytes.Join(got, nil)); s != c.want || at != c.wantAt {
				t.Errorf("%q from %d, want %q from %d", s, at, c.want, c.wantAt)
			}
		})
	}
}

// blockOnly lets the reads of the block at [at, at+n) (and the line end
// before it) through below floor.
type blockOnly struct {
	floorReader
	at, n int64
}

func (b *blockOnly) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.at-1 && off < b.at+b.n {
		return b.r.ReadAt(p, off)
	}
	return b.floorReader.ReadAt(p, off)
}

// A batch's record of formats is the span in force at its first line, from
// that line, then each span that starts within it; a switch that reads
// lines again drops the spans past it; an ack forgets all but the span in
// force after the acknowledged line.
func TestFormatsRecord(t *testing.T) {
	hdr := [][]byte{[]byte("#Fields: date time\n")}
	sp := func(from int64, format string) parseSpan { return parseSpan{From: from, Format: format, HeadersAt: -1} }
	var f formats
	f.set(sp(0, "combined"))
	f.set(sp(500, "json"))
	f.set(parseSpan{From: 900, Format: "w3c", Headers: hdr, HeadersAt: 900})
	f.set(sp(1200, "main"))
	f.set(sp(1000, "combined")) // read again from 1000: 1200's is gone
	cases := []struct {
		name        string
		first, last int64
		want        []parseSpan
	}{
		{"inside one span", 100, 400, []parseSpan{sp(100, "combined")}},
		{"across a switch", 100, 600, []parseSpan{sp(100, "combined"), sp(500, "json")}},
		{"from a switch on", 500, 899, []parseSpan{sp(500, "json")}},
		{"with header lines", 950, 1500, []parseSpan{{From: 950, Format: "w3c", Headers: hdr, HeadersAt: 900}, sp(1000, "combined")}},
		{"past every switch", 1100, 1300, []parseSpan{sp(1100, "combined")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := f.record(c.first, c.last)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("record(%d, %d) = %v, want %v", c.first, c.last, got, c.want)
			}
		})
	}
	f.acked(950)
	if got := f.record(951, 951); len(got) != 1 || got[0].Format != "w3c" || len(f.spans) != 2 {
		t.Errorf("after the ack of 950: spans %v, record %v", f.spans, got)
	}
	f.acked(999) // the line at 1000 starts the next span
	if len(f.spans) != 1 || f.spans[0].From != 1000 {
		t.Errorf("after the ack of 999: spans %v", f.spans)
	}
}
