// Package loggen writes realistic combined-format access-log traffic: a skewed
// mix of pages (a few hot, a long tail), real user agents, status codes and
// referers. Benchmarks use it for their input files and the demo for live
// traffic.
package loggen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// Options shape the traffic.
type Options struct {
	Seed  uint64
	Start time.Time     // time of the first line
	Step  time.Duration // log time between consecutive lines (ignored when live)
	// BadEvery makes every BadEvery-th line malformed (0: none), to exercise
	// reject handling.
	BadEvery int
	// Paths is the page population; a Zipf distribution picks among them so a
	// few pages get most hits, as on a real site.
	Paths []string
}

// DefaultPaths is a small site: the first pages are the hot ones.
var DefaultPaths = []string{
	"/", "/pricing", "/blog/launch", "/docs/getting-started", "/signup", "/checkout",
	"/blog/how-we-count", "/docs/api", "/about", "/careers", "/blog/release-notes",
	"/static/app.js", "/static/app.css", "/favicon.ico", "/robots.txt", "/search",
}

var userAgents = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_2) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
	"curl/8.5.0",
}

var referers = []string{"-", "-", "https://www.google.com/", "https://news.ycombinator.com/", "https://www.example.com/"}

// Generator produces lines. It is not safe for concurrent use.
type Generator struct {
	opts Options
	rng  *rand.Rand
	zipf *rand.Zipf
	n    int64
	buf  []byte
}

// New returns a generator.
func New(opts Options) *Generator {
	if len(opts.Paths) == 0 {
		opts.Paths = DefaultPaths
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	return &Generator{opts: opts, rng: rng, zipf: rand.NewZipf(rng, 1.2, 1, uint64(len(opts.Paths)-1))}
}

// Line appends the next line, newline included, for the given time, and
// reports whether it is a well-formed line.
func (g *Generator) Line(dst []byte, t time.Time) ([]byte, bool) {
	g.n++
	if g.opts.BadEvery > 0 && g.n%int64(g.opts.BadEvery) == 0 {
		return append(dst, fmt.Sprintf("malformed line %d \x00\xff\n", g.n)...), false
	}
	path := g.opts.Paths[g.zipf.Uint64()]
	status := 200
	switch r := g.rng.IntN(100); {
	case r < 5:
		status = 404
	case r < 7:
		status = 304
	case r < 8:
		status = 500
	}
	dst = strconv.AppendInt(dst, int64(g.rng.IntN(223)+1), 10)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, int64(g.rng.IntN(256)), 10)
	dst = append(dst, ".0."...)
	dst = strconv.AppendInt(dst, int64(g.rng.IntN(256)), 10)
	dst = append(dst, " - - ["...)
	dst = t.AppendFormat(dst, "02/Jan/2006:15:04:05 -0700")
	dst = append(dst, `] "GET `...)
	dst = append(dst, path...)
	if g.rng.IntN(4) == 0 {
		dst = append(dst, "?utm_source=newsletter&id="...)
		dst = strconv.AppendInt(dst, int64(g.rng.IntN(1000)), 10)
	}
	dst = append(dst, ` HTTP/1.1" `...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(g.rng.IntN(50000)+200), 10)
	dst = append(dst, ` "`...)
	dst = append(dst, referers[g.rng.IntN(len(referers))]...)
	dst = append(dst, `" "`...)
	dst = append(dst, userAgents[g.rng.IntN(len(userAgents))]...)
	dst = append(dst, "\"\n"...)
	return dst, true
}

// WriteN writes n lines with log times from opts.Start in opts.Step increments
// and returns how many were well formed.
func (g *Generator) WriteN(w io.Writer, n int) (good int, err error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	t := g.opts.Start
	for i := 0; i < n; i++ {
		var ok bool
		g.buf, ok = g.Line(g.buf[:0], t)
		if ok {
			good++
		}
		if _, err := bw.Write(g.buf); err != nil {
			return good, fmt.Errorf("write log: %w", err)
		}
		t = t.Add(g.opts.Step)
	}
	if err := bw.Flush(); err != nil {
		return good, fmt.Errorf("write log: %w", err)
	}
	return good, nil
}

// Live writes about rate lines per second, stamped with the current time, until
// ctx ends; each batch is written with one Write so a tailer never sees half a
// line from it. It returns the number of lines written.
func (g *Generator) Live(ctx context.Context, w io.Writer, rate int, now func() time.Time) (int64, error) {
	const tick = 100 * time.Millisecond
	perTick := max(1, rate/10)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var total int64
	for {
		select {
		case <-ctx.Done():
			return total, nil
		case <-ticker.C:
		}
		g.buf = g.buf[:0]
		t := now()
		for i := 0; i < perTick; i++ {
			g.buf, _ = g.Line(g.buf, t)
		}
		if _, err := w.Write(g.buf); err != nil {
			return total, fmt.Errorf("write log: %w", err)
		}
		total += int64(perTick)
	}
}
