package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/hitcount/hitcount/internal/lines"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A file's format: the source's, or with format: auto the one Detect picks
// from the file's first lines; checked as the file is read.
//
//   - Detection (prepare) runs once per open file, before its first line is
//     parsed, on up to detectLines lines or detectBytes from that line on,
//     read beside the reader (ReadAt, or a gzip stream of its own), which
//     then parses them itself: the bytes detection read are shipped by the
//     reader from the same offset, exactly as with a fixed format. A live
//     file with fewer lines waits up to DetectWait for more, then is
//     detected on what it has.
//   - A W3C log names its columns in a "#Fields:" line at its top (and again
//     after each restart of the server): a file resumed after that line
//     gets its header lines back first (headersBefore), read from before
//     the resume offset; a Cloud Storage log, its CSV header (the first
//     line).
//   - A watch (formatWatch) says when a file rejects nearly all of its
//     lines: 90% of the last 500 to 1000 (at least 50), or 50 in a row
//     (a format changed after a long run of good lines shows at once, not
//     after 1000 lines). The collector then warns once, naming the format
//     that would accept the rejected lines, sets
//     hitcount_collector_format_mismatch, and with auto detects again and
//     switches. The switch reads again the run of rejects that ends at the
//     current line (every one of them refused by the old format, so no line
//     it accepted is parsed anew), but only as far as it is in the batch in
//     hand, which was never sent (the batch is cut there,
//     sink.Batch.TruncateAt); lines handed to the sender stay as they were
//     parsed. While the format is wrong (or guessed: none accepted the
//     first lines), the newest run of rejects is also detected again before
//     each batch is handed on (redetect), so a file that turns into a real
//     log switches while its first good lines are unsent. Both detections
//     and the switch start from the header block in force in the file at
//     the lines detected (headersAt), not the parser's: a W3C block the
//     fallback rejected still names the columns of the rows after it.
//   - A batch a previous process left in flight is read again with the
//     formats that parsed it (the in-flight record keeps them: formats.record,
//     positions), switching where it did (replayFormat, formatDue), and is
//     never cut or switched by the watch (noRecutBefore, replayEnd): it is
//     read again to be the same block. Detection and the watch resume past
//     it.

// detectLines and detectBytes bound the lines detection looks at.
const (
	detectLines = 200
	detectBytes = 64 << 10
)

// Rejects that say the format is wrong: watchMin in a row, or at least
// watchMin lines of which at least 90% were rejected within the last
// watchHalf to 2*watchHalf.
const (
	watchHalf = 500
	watchMin  = 50
	// watchKeep rejected lines (each up to watchLineMax bytes) are kept to
	// ask Detect which format would accept them.
	watchKeep    = 200
	watchLineMax = 16 << 10
)

// headersWait: a file with only header lines so far waits this many
// DetectWaits for a request line before it is detected on what it has.
const headersWait = 10

// fallbackFormat parses a file with format: auto that no format accepts:
// its lines become rejects with the reason combined gives, and the watch
// detects again as lines come.
const fallbackFormat = "combined"

// parseSpan is where a file started to be parsed with a format and the
// header lines known there, so that a line read back from the file
// (rawLine), or a batch read again after a restart (the in-flight record,
// positions.go), is parsed as it was. HeadersAt is where the block of
// Headers starts in the file (-1: none, or not known).
type parseSpan struct {
	From      int64    `json:"from"`
	Format    string   `json:"format"`
	Headers   [][]byte `json:"headers,omitempty"`
	HeadersAt int64    `json:"headers_at"`
}

// maxSpans bounds a file's spans, which are pruned as batches are
// acknowledged (acked): only a file with thousands of header blocks in
// two batches reaches it, and a line older than the oldest span left is
// then read back as the oldest's.
const maxSpans = 1024

// formats is what the sender needs of a file's formats; the reader writes it.
type formats struct {
	mu    sync.Mutex
	spans []parseSpan
}

// set records that lines from span.From on are parsed with its format after
// its headers. Spans from there on are dropped: their lines are read again
// (a switch of format re-reads a run of rejects).
func (f *formats) set(span parseSpan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.spans)
	for i > 0 && f.spans[i-1].From >= span.From {
		i--
	}
	f.spans = append(f.spans[:i], span)
	if len(f.spans) > maxSpans {
		f.spans = slices.Delete(f.spans, 0, 1)
	}
}

// at is the span the line at off was parsed in.
func (f *formats) at(off int64) (parseSpan, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.spans) - 1; i >= 0; i-- {
		if f.spans[i].From <= off || i == 0 {
			return f.spans[i], true
		}
	}
	return parseSpan{}, false
}

// record is how the lines from first to last were parsed: the span in
// force at first (From set to first), then each span that starts in
// between. Nil when nothing is known.
func (f *formats) record(first, last int64) []parseSpan {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []parseSpan
	for i, sp := range f.spans {
		switch {
		case sp.From > last:
			return out
		case sp.From > first:
			out = append(out, sp)
		case i+1 == len(f.spans) || f.spans[i+1].From > first:
			sp.From = first
			out = append(out, sp)
		}
	}
	return out
}

// acked forgets the spans of lines up to last, which the store holds:
// only the one in force after it stays.
func (f *formats) acked(last int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := 0
	for i+1 < len(f.spans) && f.spans[i+1].From <= last+1 {
		i++
	}
	f.spans = slices.Delete(f.spans, 0, i)
}

// bucket counts half of the watch's lines.
type bucket struct {
	lines, rejects int
}

// formatWatch follows one file's rejects (read goroutine only).
type formatWatch struct {
	cur, prev bucket
	// run counts the rejects since the last parsed line, the first at
	// runStart.
	run      int
	runStart int64
	// seen counts every line the watch was told of; recheckAt is when a
	// file still rejecting nearly everything is detected again (auto).
	seen, recheckAt int64
	every           int64 // lines between two detections while it lasts
	kept            [][]byte
	keptAt          []int64 // where each line of kept is in the file
	next            int     // where the next rejected line goes in kept
	reason          string
	// guessed: no format accepted the lines detection looked at (the
	// fallback parses them).
	guessed  bool
	mismatch bool // the gauge says so
	warned   bool // once per open file
}

func newFormatWatch() formatWatch {
	return formatWatch{every: 2 * watchHalf}
}

// line counts a parsed line. The hot path: a store, an add and a compare.
func (w *formatWatch) line() (check bool) {
	w.run = 0
	w.cur.lines++
	if w.cur.lines < watchHalf {
		return false
	}
	return w.roll()
}

// reject counts a rejected line and keeps a copy; check says the format
// must be looked at (checkFormat).
func (w *formatWatch) reject(off int64, line []byte, reason string) (check bool) {
	w.cur.lines++
	w.cur.rejects++
	if w.run == 0 {
		w.runStart = off
	}
	w.run++
	w.reason = reason
	if len(line) <= watchLineMax {
		if len(w.kept) < watchKeep {
			w.kept = append(w.kept, nil)
			w.keptAt = append(w.keptAt, 0)
		}
		w.kept[w.next] = append(w.kept[w.next][:0], line...)
		w.keptAt[w.next] = off
		w.next = (w.next + 1) % watchKeep
	}
	check = !w.mismatch && w.high()
	if w.cur.lines >= watchHalf {
		check = w.roll() || check
	}
	return check
}

// roll starts a new half; check: a mismatch may have ended, or a file
// with auto is due for another detection.
func (w *formatWatch) roll() (check bool) {
	w.seen += int64(w.cur.lines)
	w.prev, w.cur = w.cur, bucket{}
	return w.mismatch
}

// counts are the lines and rejects the watch covers.
func (w *formatWatch) counts() (lines, rejects int) {
	return w.prev.lines + w.cur.lines, w.prev.rejects + w.cur.rejects
}

// high: watchMin rejects in a row, or at least watchMin lines with 90% of
// them rejected.
func (w *formatWatch) high() bool {
	n, r := w.counts()
	return w.run >= watchMin || n >= watchMin && r*10 >= n*9
}

// recent is the last n rejected lines kept (fewer if fewer are), oldest
// first.
func (w *formatWatch) recent(n int) [][]byte {
	n = min(n, len(w.kept))
	out := make([][]byte, 0, n)
	for i := range n {
		out = append(out, w.kept[(w.next-n+i+len(w.kept))%len(w.kept)])
	}
	return out
}

// firstOf is where the oldest of the last n rejected lines kept is in the
// file (recent(n)'s first line; n = len(kept): rejected()'s), -1 when none
// is kept.
func (w *formatWatch) firstOf(n int) int64 {
	n = min(n, len(w.kept))
	if n == 0 {
		return -1
	}
	return w.keptAt[(w.next-n+len(w.kept))%len(w.kept)]
}

// keptSince is how many of the last n rejected lines kept are at or after
// off in the file.
func (w *formatWatch) keptSince(off int64, n int) int {
	n = min(n, len(w.kept))
	for i := range n {
		if w.keptAt[(w.next-1-i+2*len(w.kept))%len(w.kept)] < off {
			return i
		}
	}
	return n
}

// rejected is the kept rejected lines, oldest first.
func (w *formatWatch) rejected() [][]byte {
	if len(w.kept) < watchKeep {
		return w.kept
	}
	return append(slices.Clone(w.kept[w.next:]), w.kept[:w.next]...)
}

// restart forgets the lines counted, after a switch of format.
func (w *formatWatch) restart() {
	w.seen += int64(w.cur.lines)
	w.prev, w.cur = bucket{}, bucket{}
	w.run = 0
	w.kept, w.keptAt, w.next = w.kept[:0], w.keptAt[:0], 0
	w.mismatch, w.guessed = false, false
	w.every = 2 * watchHalf
}

func (s *shipper) parserOptions() parser.Options {
	return parser.Options{Location: s.src.Location}
}

// prepare makes the parser for the file's lines from off on: the source's
// format, or (auto) the one detected on the lines from off; either is first
// given the header lines before off (headersBefore). line is the line at off,
// the sample when nothing else can be read. Lines of a batch a previous
// process left in flight are parsed as it parsed them instead (replayFormat).
func (s *shipper) prepare(ctx context.Context, off int64, line []byte, wake waker) error {
	if s.replayEnd >= 0 {
		switch {
		case off > s.replayEnd:
			s.replay, s.replayEnd = nil, -1
		case off < s.replay[0].From:
			// Lines before the batch: as any; the batch's from its first.
			s.nextSwitch = s.replay[0].From
		default:
			err := s.replayFormat(off)
			if err == nil {
				return nil
			}
			s.c.log.Warn("cannot parse the batch in flight with the format that parsed it; its format is detected again", "path", s.path, "err", err)
			s.replay, s.replayEnd, s.nextSwitch = nil, -1, math.MaxInt64
		}
	}
	headers, at, err := s.headersBefore(off)
	if err != nil {
		s.c.log.Warn("cannot read the log's header lines before the resume offset", "path", s.path, "offset", off, "err", err)
	} else {
		m := &s.blocks
		m.ok, m.upTo, m.lines, m.at = true, off, headers, at
	}
	format := s.src.Format
	if format == parser.Auto {
		det, err := s.detect(ctx, off, line, headers, wake)
		if err != nil {
			return err
		}
		if det.Format == "" {
			format = fallbackFormat
			s.watch.guessed = true
			s.c.log.Warn("no known format parses the first lines of a log file: they are rejected (sampled in the rejects table) until one does",
				"path", s.path, "site", s.src.Site, "lines", det.Lines, "reason", firstReason(det), "tried", det.Summary(4))
		} else {
			format = det.Format
			s.c.log.Info("log format detected", "path", s.path, "site", s.src.Site, "format", format, "offset", off,
				"lines", det.Lines, "candidates", det.Summary(4))
		}
	}
	p, err := parser.NewWith(format, s.parserOptions())
	if err != nil {
		return fmt.Errorf("format %q: %w", format, err)
	}
	if off > 0 && len(headers) == 0 && p.Directives() {
		// A header that is not a '#' line: Cloud Storage's CSV header, the
		// file's first line.
		if first, err := s.firstLine(); err == nil && p.Prime(first) {
			headers, at = [][]byte{first}, 0
		}
	}
	s.headerAt = at
	s.use(p, off, headers)
	return nil
}

// replayFormat makes the parser the batch a previous process left in
// flight had at off: its format and header lines there (the in-flight
// record), and sets when the next of its formats is due.
func (s *shipper) replayFormat(off int64) error {
	i := 0
	for i+1 < len(s.replay) && s.replay[i+1].From <= off {
		i++
	}
	sp := s.replay[i]
	p, err := parser.NewWith(sp.Format, s.parserOptions())
	if err != nil {
		return fmt.Errorf("format %q: %w", sp.Format, err)
	}
	// A switch is made after a rejected line, never inside a header block.
	s.inHeader, s.headerAt = false, sp.HeadersAt
	s.use(p, off, sp.Headers)
	s.nextSwitch = s.replayEnd + 1
	if i+1 < len(s.replay) {
		s.nextSwitch = s.replay[i+1].From
	}
	return nil
}

// formatDue is called at the first line at or past nextSwitch: the next
// format of the batch in flight being replayed, or, past the batch, the
// source's (with auto, the one the batch ended with, checked by the watch
// from here on, as the previous process would have).
//
//go:noinline
func (s *shipper) formatDue(off int64) {
	if s.replayEnd >= 0 && off <= s.replayEnd {
		if err := s.replayFormat(off); err != nil {
			s.c.log.Warn("cannot parse the batch in flight with the format that parsed it; the lines from the offset on are parsed with the current one", "path", s.path, "offset", off, "err", err)
			s.replay, s.replayEnd, s.nextSwitch = nil, -1, math.MaxInt64
		}
		return
	}
	s.replay, s.replayEnd, s.nextSwitch = nil, -1, math.MaxInt64
	if s.src.Format == parser.Auto || s.src.Format == s.format {
		return
	}
	// The configuration changed since the batch was parsed.
	p, err := parser.NewWith(s.src.Format, s.parserOptions())
	if err != nil {
		s.c.log.Error("cannot make the source's parser; the lines are parsed with the batch in flight's", "path", s.path, "err", err)
		return
	}
	s.use(p, off, s.headers)
}

// firstLine reads the file's first line (up to detectBytes).
func (s *shipper) firstLine() ([]byte, error) {
	r, err := s.contentFrom(0)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, detectBytes)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
		return buf[:i+1], nil
	}
	return nil, errors.New("no complete first line within its bound")
}

// use makes p the file's parser from off on, after the header lines.
func (s *shipper) use(p *parser.Parser, off int64, headers [][]byte) {
	var h parser.Hit
	for _, l := range headers {
		p.Parse(l, &h) // a directive sets the columns; anything else is no matter
	}
	s.parser, s.format, s.headers = p, p.Format(), headers
	at := int64(-1)
	if len(headers) > 0 {
		at = s.headerAt
	}
	s.formats.set(parseSpan{From: off, Format: s.format, Headers: headers, HeadersAt: at})
	if m := s.c.m; m != nil {
		m.FormatMismatch.WithLabelValues(s.src.Site, s.path).Set(0)
	}
}

func firstReason(d parser.Detection) string {
	for _, c := range d.Candidates {
		if c.Reason != "" {
			return c.Format + ": " + c.Reason
		}
	}
	return ""
}

// detect detects the format of the lines from off on (line is the first),
// after the header lines before off: on up to detectLines or detectBytes,
// waiting up to DetectWait for a live file to have that many, and up to
// headersWait times as long while its lines are only header lines (a W3C
// log whose server has not logged a request yet).
func (s *shipper) detect(ctx context.Context, off int64, line []byte, headers [][]byte, wake waker) (parser.Detection, error) {
	start := s.c.opts.Now()
	for {
		sample, full, err := s.readSample(off)
		if err != nil {
			return parser.Detection{}, fmt.Errorf("read the lines to detect the format: %w", err)
		}
		if len(sample) == 0 {
			sample = [][]byte{bytes.Clone(line)}
		}
		det := parser.Detect(append(slices.Clone(headers), sample...), s.parserOptions())
		waited := s.c.opts.Now().Sub(start)
		grows := s.live && !s.id.Gzip
		switch {
		case grows && det.HeadersOnly() && waited < headersWait*s.c.opts.DetectWait:
		case !grows || full || len(sample) >= detectLines || waited >= s.c.opts.DetectWait:
			return det, nil
		}
		wake.Wait(ctx, s.c.opts.Poll)
		if ctx.Err() != nil {
			return parser.Detection{}, ctx.Err()
		}
	}
}

// readSample reads the complete lines from off on, up to detectLines and
// detectBytes (full: the bytes are all there), without moving the reader.
func (s *shipper) readSample(off int64) (sample [][]byte, full bool, err error) {
	r, err := s.contentFrom(off)
	if err != nil {
		return nil, false, err
	}
	buf := make([]byte, detectBytes)
	n, err := io.ReadFull(r, buf)
	switch {
	case err == nil:
		full = true
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = nil
	default:
		return nil, false, err
	}
	// A gzipped file is all there: its last line counts without a newline.
	return parser.SplitLines(buf[:n], detectLines, s.id.Gzip && !full), full, nil
}

// contentFrom reads the file's content from off, beside the reader.
func (s *shipper) contentFrom(off int64) (io.Reader, error) {
	f := s.reader.File()
	if !s.id.Gzip {
		return io.NewSectionReader(f, off, 1<<62), nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if _, err := io.CopyN(io.Discard, zr, off); err != nil {
		return nil, fmt.Errorf("gunzip: skip to %d: %w", off, err)
	}
	return zr, nil
}

// headersBefore returns the block of header lines ("#..." lines, as W3C
// extended logs have) in force at off, and where it starts (-1: none): the
// last such block before it. Nothing for a file that does not start with
// '#', which is every format but W3C's, at the cost of one byte read.
//
// The search back from off stops at the last line the store acknowledged
// to this collector, where the block in force is known (positions:
// HeadersAt); without that record it goes back as far as it takes, to the
// top of the file: a bound would silently parse with another block's
// columns (found by the adversary of issue 17: resumed 18 MiB after its
// "#Fields:" line, a file was read with its first block's).
func (s *shipper) headersBefore(off int64) ([][]byte, int64, error) {
	if off <= 0 {
		return nil, -1, nil
	}
	r, err := s.contentFrom(0)
	if err != nil {
		return nil, -1, err
	}
	var first [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil || first[0] != '#' {
		return nil, -1, nil
	}
	if s.id.Gzip {
		// A stream: read up to off (as the reader's own seek does).
		r, err := s.contentFrom(0)
		if err != nil {
			return nil, -1, err
		}
		return headerBlockStream(io.LimitReader(r, off), s.src.MaxLine)
	}
	floor, known := int64(0), int64(-1)
	if acked, at, ok := s.c.positions.getHeaders(s.id.ID); ok && acked < off && at >= 0 && at <= acked {
		floor, known = acked, at
	}
	if m := &s.blocks; m.ok && m.at >= 0 && m.upTo <= off && m.upTo > floor {
		floor, known = m.upTo, m.at
	}
	return headerBlockAt(s.reader.File(), off, floor, known)
}

// headerMemo is the block of header lines in force at a line of the file
// (upTo), as headersBefore found it there, and the last '#' line the
// reader read (lastHash, -1: none). While no '#' line was read from upTo
// on, it is the block in force at every line read since: a detection while
// the format is wrong asks it instead of searching the file again before
// every batch (a gzipped file is searched from its top). A search of a
// plain file from a later line starts at upTo (headersBefore).
type headerMemo struct {
	ok       bool
	upTo     int64
	lines    [][]byte
	at       int64
	lastHash int64
}

func newHeaderMemo() headerMemo { return headerMemo{lastHash: -1} }

// sawHeader is told of each '#' line the reader hands the parser.
func (m *headerMemo) sawHeader(off int64) { m.lastHash = max(m.lastHash, off) }

// headersAt is the block of header lines in force at off, a line the
// reader has read, and where it starts, taken from the file: a line the
// current parser rejected may be a header line of the format the lines
// are detected to be (a W3C block read while the file was guessed to be
// combined, found by the adversary of issue 17: its rows were rejected
// until the server wrote another block). A file that does not start with
// '#' has none there (headersBefore): the header lines the parser took are
// used then, as is the case when the file cannot be read.
func (s *shipper) headersAt(off int64) ([][]byte, int64) {
	m := &s.blocks
	if !(m.ok && m.upTo <= off && m.lastHash < m.upTo) {
		lines, at, err := s.headersBefore(off)
		if err != nil {
			s.c.log.Warn("cannot read the log's header lines before a line detected again; the ones last parsed are used", "path", s.path, "offset", off, "err", err)
			return s.headers, s.headerAt
		}
		m.ok, m.upTo, m.lines, m.at = true, off, lines, at
	}
	if len(m.lines) == 0 {
		return s.headers, s.headerAt
	}
	return slices.Clip(m.lines), m.at
}

// headerBlockStream returns the last block of '#' lines in r, and where it
// starts (-1: none).
func headerBlockStream(r io.Reader, maxLine int) ([][]byte, int64, error) {
	lr := lines.NewReader(r, 0, maxLine)
	var block [][]byte
	at := int64(-1)
	inBlock := false
	for {
		line, off, err := lr.Next()
		var tooLong *lines.TooLongError
		switch {
		case errors.As(err, &tooLong):
			inBlock = false
			continue
		case errors.Is(err, io.EOF):
			return block, at, nil
		case err != nil:
			return nil, -1, err
		}
		if len(line) > 0 && line[0] == '#' {
			if !inBlock {
				block, inBlock, at = block[:0], true, off
			}
			block = append(block, bytes.Clone(line))
		} else {
			inBlock = false
		}
	}
}

// headerBlockAt returns the block of '#' lines in force at off in r, and
// where it starts: the one holding the last '#' line in [floor, off), else
// the block known to start at known (>= 0: the one in force at floor), else
// the file's first.
func headerBlockAt(r io.ReaderAt, off, floor, known int64) ([][]byte, int64, error) {
	const chunk = 64 << 10
	buf := make([]byte, chunk+1)
	last := int64(-1) // start of the last '#' line before off
	for end := off; end > floor && last < 0; {
		start := max(floor, end-chunk)
		// One byte more, so that a line start at start is seen with the
		// newline before it.
		from := max(0, start-1)
		n, err := r.ReadAt(buf[:end-from], from)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, -1, err
		}
		b := buf[:n]
		if i := bytes.LastIndex(b, []byte("\n#")); i >= 0 {
			last = from + int64(i) + 1
		} else if from == 0 && len(b) > 0 && b[0] == '#' {
			last = 0
		}
		end = start
	}
	if last < 0 && known >= 0 {
		// The block the record names: read there, nothing searched.
		if block, err := blockFrom(r, known, off); err != nil || len(block) > 0 {
			return block, known, err
		}
		// Not a header block there (not the file the record was of):
		// searched for as far as it takes.
		return headerBlockAt(r, off, 0, -1)
	}
	last = max(last, 0)
	// Walk back to the block's first line, then read it forward.
	start := last
	for start > 0 && last-start < detectBytes {
		from := max(0, start-chunk)
		n, err := r.ReadAt(buf[:start-from], from)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, -1, err
		}
		b := buf[:n]
		// b ends with the newline of the line before start.
		prev := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1 // 0 when none in b
		if prev == 0 && from > 0 {
			break // a line longer than a chunk: not a header line
		}
		if b[prev] != '#' {
			break
		}
		start = from + int64(prev)
	}
	block, err := blockFrom(r, start, off)
	if err != nil || len(block) == 0 {
		return nil, -1, err
	}
	return block, start, nil
}

// blockFrom reads the '#' lines of r from start on, before off.
func blockFrom(r io.ReaderAt, start, off int64) ([][]byte, error) {
	sr := io.NewSectionReader(r, start, off-start)
	lr := lines.NewReader(sr, start, detectBytes)
	var block [][]byte
	for {
		line, _, err := lr.Next()
		var tooLong *lines.TooLongError
		switch {
		case errors.Is(err, io.EOF) || errors.As(err, &tooLong):
			return block, nil
		case err != nil:
			return nil, err
		case len(line) == 0 || line[0] != '#':
			return block, nil
		}
		block = append(block, bytes.Clone(line))
	}
}

// checkFormat looks at the file's format when the watch says so: at the
// first sign of a mismatch it warns (once), sets the gauge and, with auto,
// detects the format of the rejected lines and switches to it; when the
// rejects stop, it clears the gauge. It returns the batch in hand, cut
// where lines are read again.
func (s *shipper) checkFormat(b *sink.Batch) (*sink.Batch, error) {
	s.recheck = false
	if s.replayEnd >= 0 {
		// Replaying a batch in flight: parsed as it was, whatever the
		// watch says; checked again past it.
		return b, nil
	}
	w := &s.watch
	if w.mismatch && !w.high() {
		w.mismatch = false
		w.every = 2 * watchHalf
		if m := s.c.m; m != nil {
			m.FormatMismatch.WithLabelValues(s.src.Site, s.path).Set(0)
		}
		s.c.log.Info("log file parses again", "path", s.path, "format", s.format)
		return b, nil
	}
	if !w.high() {
		return b, nil
	}
	if w.mismatch && (s.src.Format != parser.Auto || w.seen < w.recheckAt) {
		return b, nil
	}
	n, rejects := w.counts()
	sample := w.rejected()
	det := parser.Detect(append(s.detectHeaders(w.firstOf(len(sample))), sample...), s.parserOptions())
	alt, ok := det.Best()
	better := ok && alt.Format != s.format && alt.Accepted*2 > alt.Accepted+alt.Rejected
	would := "no known format accepts them"
	if ok {
		would = alt.String()
	}
	if !w.warned {
		w.warned = true
		action := "set sources[].format to one that accepts them"
		if s.src.Format == parser.Auto {
			action = "format: auto detects the format again"
		}
		s.c.log.Warn("nearly every line of a log file is rejected: it is not in the format it is parsed with",
			"path", s.path, "site", s.src.Site, "format", s.format, "rejected", rejects, "of", n,
			"reason", w.reason, "would_accept", would, "action", action)
	}
	if !w.mismatch {
		w.mismatch = true
		if m := s.c.m; m != nil {
			m.FormatMismatch.WithLabelValues(s.src.Site, s.path).Set(1)
		}
	}
	// Detected again after another every lines, twice as many each time:
	// a file no format reads costs a detection per thousands of lines.
	w.recheckAt = w.seen + w.every
	w.every *= 2
	if s.src.Format != parser.Auto || !better {
		return b, nil
	}
	return s.switchFormat(b, alt.Format, det)
}

// detectHeaders are the header lines a detection of rejected lines from
// off on starts from (a copy): the block in force there in the file
// (headersAt), as the lines may be a W3C log's rows after a block the
// parser rejected; the parser's own when off is not known.
func (s *shipper) detectHeaders(off int64) [][]byte {
	if off < 0 {
		return slices.Clone(s.headers)
	}
	headers, _ := s.headersAt(off)
	return slices.Clone(headers)
}

// shipMin is the fewest rejects in a row a detection before a batch is
// handed on looks at (redetect).
const shipMin = 5

// redetect runs before the batch in hand is handed on, with auto, while
// the file is parsed with a format found wrong (the watch's mismatch) or
// guessed (no format accepted its first lines): the newest run of rejects
// in the batch in hand (up to watchMin lines, at least shipMin) is
// detected again, and when another format accepts most of it, the run is
// read again under it, never sent. Only the unsent rejects are asked: they
// are the lines a switch reads again, and rejects sent before (a W3C
// block and garbage shipped as combined's rejects) would outvote the first
// few rows of each batch (found with the adversary of issue 17: 20 of 300
// rows lost in batches of 10 after 34 such rejects). Without it a file that turned into a real
// log after a wrong start waited for the watch's next detection, thousands
// of lines on, and shipped its lines as rejects meanwhile (found by the
// adversary of issue 17: 740 of 1600 JSON lines after 250 lines of a
// program's output). At most one detection per batch, only while the
// format is wrong. switched: the reader was moved back, b cut; b is not
// handed on yet.
func (s *shipper) redetect(b *sink.Batch) (_ *sink.Batch, switched bool, err error) {
	w := &s.watch
	if s.src.Format != parser.Auto || !(w.mismatch || w.guessed) || w.run < shipMin || s.replayEnd >= 0 || b == nil {
		return b, false, nil
	}
	n := w.keptSince(b.First, min(w.run, watchMin))
	if n < shipMin {
		return b, false, nil
	}
	sample := w.recent(n)
	det := parser.Detect(append(s.detectHeaders(w.firstOf(len(sample))), sample...), s.parserOptions())
	alt, ok := det.Best()
	if !ok || alt.Format == s.format || alt.Accepted*2 <= alt.Accepted+alt.Rejected {
		return b, false, nil
	}
	at := s.reader.Offset()
	b, err = s.switchFormat(b, alt.Format, det)
	return b, s.reader.Offset() != at, err
}

// switchFormat parses the file with format from the first of the current
// run of rejects on, as far as it is in the batch in hand (never sent); the
// lines before stay as they were parsed.
func (s *shipper) switchFormat(b *sink.Batch, format string, det parser.Detection) (*sink.Batch, error) {
	p, err := parser.NewWith(format, s.parserOptions())
	if err != nil {
		return b, nil // not a format Detect would return
	}
	// Every line from the run's first on was rejected (or a directive, or
	// too long): none the old format accepted is parsed anew. Each switch
	// reads again only from past where the last one did, so formats that
	// flip back and forth cannot loop over the same lines; and never
	// within a batch a previous process left in flight.
	cut := s.reader.Offset()
	if b != nil && b.Lines > 0 && s.watch.run > 0 {
		if from := max(s.watch.runStart, b.First); from >= s.noRecutBefore && from > s.lastRecut {
			cut = from
		}
	}
	from := s.format
	if cut < s.reader.Offset() {
		s.inHeader = false // the line before cut was a reject
		b.TruncateAt(cut)
		if err := s.reader.SeekTo(cut); err != nil {
			return b, fmt.Errorf("read again under format %q: %w", format, err)
		}
		s.lastRecut = cut
	}
	// The header lines in force at cut, from the file: those the old
	// parser took are none when it rejected the block (a W3C log guessed
	// to be combined).
	headers, at := s.headersAt(cut)
	s.headerAt = at
	s.use(p, cut, headers)
	s.watch.restart()
	s.c.log.Info("log format detected again: lines from the offset on are parsed with it", "path", s.path, "site", s.src.Site,
		"from", from, "format", format, "offset", cut, "candidates", det.Summary(4))
	return b, nil
}

// noteDirective records a header line the parser took as its own: the
// block it starts or continues is what a line read back after it is parsed
// with (rawLine), and what a re-detection starts from.
func (s *shipper) noteDirective(off int64, line []byte) {
	if !s.inHeader {
		s.inHeader, s.headerAt = true, off
		s.headers = nil
	}
	s.headers = appendHeader(s.headers, line)
	s.formats.set(parseSpan{From: s.headerAt, Format: s.format, Headers: slices.Clone(s.headers), HeadersAt: s.headerAt})
}

// maxHeaderLines bounds the lines of a header block kept whole: a file of
// nothing but '#' lines must not grow the in-flight record without bound.
const maxHeaderLines = 64

// appendHeader adds line to a header block. Past maxHeaderLines only the
// directives a parser reads from a block are kept, the last of each kind:
// the block still parses as the reader parsed it (found by the adversary of
// issue 17: a #Fields line at line 70 of a block was dropped, and the batch
// in flight replayed after a crash turned 50 hits into rejects as well).
func appendHeader(block [][]byte, line []byte) [][]byte {
	if len(block) < maxHeaderLines {
		return append(block, bytes.Clone(line))
	}
	kind := parser.HeaderDirective(line)
	if kind == "" {
		return block
	}
	for i := maxHeaderLines; i < len(block); i++ {
		if parser.HeaderDirective(block[i]) == kind {
			block[i] = bytes.Clone(line)
			return block
		}
	}
	return append(block, bytes.Clone(line))
}

// parserAt is a new parser for the line at off, as the reader parsed it:
// the format and header lines in force there.
func (s *shipper) parserAt(off int64) (*parser.Parser, error) {
	span, ok := s.formats.at(off)
	if !ok {
		return nil, errors.New("no format yet")
	}
	p, err := parser.NewWith(span.Format, s.parserOptions())
	if err != nil {
		return nil, err
	}
	var h parser.Hit
	for _, l := range span.Headers {
		p.Parse(l, &h)
	}
	return p, nil
}
