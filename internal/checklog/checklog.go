// Package checklog parses a whole access log (plain or gzipped) and reports
// what a collector would make of it: how many lines parse, why the others do
// not, and the most requested paths. Operators run it to test a format before
// deploying; benchmarks run it to compare with other tools.
package checklog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hitcount/hitcount/internal/lines"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Options tune a check.
type Options struct {
	Format      string // a parser format; "" or "auto" detects it from the first lines
	MaxLine     int    // longest line accepted, lines.DefaultLimit when 0
	TopN        int    // how many paths to report, 20 when 0
	MaxRejects  int    // how many rejects to sample, 10 when 0
	MaxDistinct int    // distinct paths counted exactly, 1,000,000 when 0
	// Location is the zone of times logged without one (parser.Options).
	Location *time.Location
}

// Reject is one sampled line that did not parse.
type Reject struct {
	Line   int64  `json:"line"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
	Text   string `json:"text"`
}

// Report is what Check prints, as one JSON object.
type Report struct {
	File     string `json:"file"`
	Format   string `json:"format"`
	Detected bool   `json:"format_detected,omitempty"`
	// Detection is what each format made of the first lines, best first,
	// when the format was detected.
	Detection *Detection `json:"detection,omitempty"`
	Lines     int64      `json:"lines"`
	Parsed    int64      `json:"parsed"`
	Rejected  int64      `json:"rejected"`
	// Directives are the format's own header lines (W3C's "#Fields:"):
	// neither parsed nor rejected.
	Directives int64 `json:"directives,omitempty"`
	// RejectedParseAs is, when many lines are rejected, the format that
	// accepts most of them (asked of a sample of them).
	RejectedParseAs *Suggestion    `json:"rejected_lines_parse_as,omitempty"`
	FirstRejects    []Reject       `json:"first_rejects"`
	TopPaths        [][2]any       `json:"top_paths"`
	DistinctPaths   int            `json:"distinct_paths"`
	PathsExact      bool           `json:"paths_exact"`
	Status          map[string]int `json:"status"`
	FirstTime       string         `json:"first_time,omitempty"`
	LastTime        string         `json:"last_time,omitempty"`
	Bytes           int64          `json:"bytes"`
	Seconds         float64        `json:"seconds"`
	LinesPerSec     float64        `json:"lines_per_sec"`
}

// Detection is the detection's verdict: how many lines it looked at and
// each format's counts.
type Detection struct {
	Lines      int                `json:"lines"`
	Candidates []parser.Candidate `json:"candidates"`
}

// Suggestion is a format that accepts the rejected lines.
type Suggestion struct {
	Format   string `json:"format"`
	Accepted int    `json:"accepted"`
	Of       int    `json:"of"`
}

// detectLines is how many leading lines format detection looks at.
const detectLines = 200

// rejectSample is how many rejected lines (each up to rejectSampleMax
// bytes) are kept to ask which format would accept them, once rejected
// lines are at least manyRejected of all.
const (
	rejectSample    = 200
	rejectSampleMax = 16 << 10
	manyRejected    = 0.1
)

// File checks the log at path.
func File(ctx context.Context, path string, opts Options) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("check log: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var r io.Reader = br
	// Rotated logs are gzipped by logrotate; recognise them by content, not name.
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("check log %s: gzip: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	rep, err := Check(ctx, r, opts)
	if err != nil {
		return nil, fmt.Errorf("check log %s: %w", path, err)
	}
	rep.File = path
	return rep, nil
}

// Check reads r to its end.
func Check(ctx context.Context, r io.Reader, opts Options) (*Report, error) {
	if opts.TopN <= 0 {
		opts.TopN = 20
	}
	if opts.MaxRejects <= 0 {
		opts.MaxRejects = 10
	}
	if opts.MaxDistinct <= 0 {
		opts.MaxDistinct = 1_000_000
	}
	rep := &Report{Format: opts.Format, Status: map[string]int{}, FirstRejects: []Reject{}, TopPaths: [][2]any{}}
	br := bufio.NewReaderSize(r, 256<<10)
	popts := parser.Options{Location: opts.Location}
	if opts.Format == "" || opts.Format == parser.Auto {
		head, err := br.Peek(256 << 10)
		d := parser.Detect(parser.SplitLines(head, detectLines, err != nil), popts)
		rep.Format, rep.Detected = d.Format, true
		rep.Detection = &Detection{Lines: d.Lines, Candidates: d.Candidates}
		if rep.Format == "" {
			// Nothing parses: report the lines as the default format
			// rejects them, and which format accepts the most (none).
			rep.Format = "combined"
		}
	}
	p, err := parser.NewWith(rep.Format, popts)
	if err != nil {
		return nil, err
	}
	var rejected [][]byte // a sample of rejected lines, for RejectedParseAs
	start := time.Now()
	lr := lines.NewReader(br, 0, opts.MaxLine)
	t := tally{counts: make(map[string]*int64), maxDistinct: opts.MaxDistinct}
	var h parser.Hit
	for {
		if rep.Lines%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line, off, err := lr.Next()
		var tooLong *lines.TooLongError
		switch {
		case errors.As(err, &tooLong):
			rep.Lines++
			rep.Rejected++
			rep.addReject(opts.MaxRejects, off, tooLong.Error(), tooLong.Head)
			if tooLong.Partial {
				return rep.finish(start, lr.Offset()+tooLong.Length, &t, opts.TopN), nil
			}
			continue
		case err == io.EOF && len(line) == 0:
			rep.suggest(rejected, popts)
			return rep.finish(start, lr.Offset(), &t, opts.TopN), nil
		case err != nil && err != io.EOF:
			return nil, err
		}
		rep.Lines++
		if perr := p.Parse(line, &h); errors.Is(perr, parser.ErrDirective) {
			rep.Directives++
		} else if perr != nil {
			rep.Rejected++
			rep.addReject(opts.MaxRejects, off, perr.Error(), line)
			if len(rejected) < rejectSample && len(line) <= rejectSampleMax {
				rejected = append(rejected, bytes.Clone(line))
			}
		} else if h.Unix < sink.MinUnix || h.Unix > sink.MaxUnix {
			// A collector rejects it too (sink.Batch.AddLine): the stores
			// cannot hold the time, so it is no hit here either.
			rep.Rejected++
			rep.addReject(opts.MaxRejects, off, sink.TimeRangeReason(h.Unix), line)
		} else {
			rep.Parsed++
			t.add(&h)
		}
		if err == io.EOF { // a final line without its newline
			rep.suggest(rejected, popts)
			return rep.finish(start, lr.Offset()+int64(len(line)), &t, opts.TopN), nil
		}
	}
}

func (rep *Report) addReject(max int, off int64, reason string, text []byte) {
	if len(rep.FirstRejects) >= max {
		return
	}
	text = bytes.TrimRight(text, "\r\n")
	if len(text) > 200 {
		text = text[:200]
	}
	rep.FirstRejects = append(rep.FirstRejects, Reject{Line: rep.Lines, Offset: off, Reason: reason, Text: printable(text)})
}

// printable renders a line sample so that binary garbage stays readable in JSON
// and on a terminal: invalid UTF-8 and control bytes are shown as \xHH.
func printable(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if (r == utf8.RuneError && n == 1) || r < 0x20 || r == 0x7f {
			fmt.Fprintf(&sb, `\x%02X`, b[0])
		} else {
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}

// noPath stands for requests with no path: a TLS handshake on a plain port, "-".
var noPath = []byte("(no path)")

// tally counts parsed hits: per path, per status class, and their time span.
type tally struct {
	counts      map[string]*int64
	maxDistinct int
	other       int64 // hits on paths beyond maxDistinct
	status      [10]int
	minT, maxT  int64
}

func (t *tally) add(h *parser.Hit) {
	if h.Has&parser.HasStatus != 0 {
		t.status[h.Status/100]++
	}
	if t.minT == 0 || h.Unix < t.minT {
		t.minT = h.Unix
	}
	if h.Unix > t.maxT {
		t.maxT = h.Unix
	}
	path := h.Path
	if len(path) == 0 {
		path = noPath
	}
	if c, ok := t.counts[string(path)]; ok { // a lookup that does not allocate
		*c++
	} else if len(t.counts) < t.maxDistinct {
		n := int64(1)
		t.counts[string(path)] = &n
	} else {
		t.other++
	}
}

func (rep *Report) finish(start time.Time, size int64, t *tally, topN int) *Report {
	rep.Seconds = time.Since(start).Seconds()
	if rep.Seconds > 0 {
		rep.LinesPerSec = float64(rep.Lines) / rep.Seconds
	}
	rep.Bytes = size
	for i, n := range t.status {
		if n > 0 {
			rep.Status[fmt.Sprintf("%dxx", i)] = n
		}
	}
	if rep.Parsed > 0 {
		rep.FirstTime = time.Unix(t.minT, 0).UTC().Format(time.RFC3339)
		rep.LastTime = time.Unix(t.maxT, 0).UTC().Format(time.RFC3339)
	}
	type pc struct {
		path string
		n    int64
	}
	all := make([]pc, 0, len(t.counts))
	for p, n := range t.counts {
		all = append(all, pc{p, *n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].path < all[j].path
	})
	rep.DistinctPaths = len(t.counts)
	rep.PathsExact = t.other == 0
	for _, e := range all[:min(topN, len(all))] {
		rep.TopPaths = append(rep.TopPaths, [2]any{e.path, e.n})
	}
	if t.other > 0 {
		rep.TopPaths = append(rep.TopPaths, [2]any{"(paths beyond the distinct limit)", t.other})
	}
	return rep
}

// suggest names the format that accepts most of the rejected lines, when
// they are many (manyRejected of all lines) and it accepts more than half
// of them.
func (rep *Report) suggest(rejected [][]byte, opts parser.Options) {
	if rep.Rejected == 0 || float64(rep.Rejected) < manyRejected*float64(rep.Lines-rep.Directives) {
		return
	}
	best, ok := parser.Detect(rejected, opts).Best()
	if ok && best.Format != rep.Format && best.Accepted*2 > best.Accepted+best.Rejected {
		rep.RejectedParseAs = &Suggestion{Format: best.Format, Accepted: best.Accepted, Of: best.Accepted + best.Rejected}
	}
}
