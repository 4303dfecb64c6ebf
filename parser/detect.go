package parser

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Auto is the format that is not one: detect it from the log's lines
// (Detect). New refuses it; the collector and -check-log resolve it first.
const Auto = "auto"

// detectPreferred are the formats Detect tries first, most specific first:
// the order breaks the ties that remain when two formats accept the same
// lines and keep as many fields (see Detect). Names a build of the parser
// does not know, and format strings it does not compile, are left out; every
// other name in Formats() is tried after these.
var detectPreferred = []string{
	"vhost_combined",
	// The official nginx image's main: combined plus "$http_x_forwarded_for".
	"main",
	// Apache's combined with %D (microseconds) or %T (seconds) appended, as
	// operators add them for response times; before the nginx string below,
	// which reads an integer as seconds where Apache's %D means
	// microseconds, and rejects nothing an integer.
	`%h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i" %D`,
	`%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %D`,
	`%h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i" %T`,
	// nginx combined with $request_time, the usual addition.
	`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time`,
	// Named nginx formats with more after combined, which combined accepts
	// and loses. upstreaminfo before timed_combined: timed_combined's lenient
	// tail also takes ingress lines (with $request_length where its request
	// time is, which its $request_time refuses: nginx writes a point).
	"upstreaminfo",
	"timed_combined",
	// After main: on a file whose quoted last field is always "-" both
	// accept the same lines, and main is far more common.
	"compression",
	"combined",
	"common",
	"json",
	// CloudFront's files are W3C with tabs, which w3c reads too, without
	// decoding the user agent; cloudfront takes no line IIS writes (spaces).
	"cloudfront",
	"w3c",
}

// DetectFormats lists the formats Detect tries, in its order of preference.
func DetectFormats() []string {
	var out []string
	for _, f := range detectPreferred {
		if _, err := newParser(f); err == nil {
			out = append(out, f)
		}
	}
	for _, f := range Formats() {
		if !slices.Contains(out, f) {
			if _, err := newParser(f); err == nil {
				out = append(out, f)
			}
		}
	}
	return out
}

// Candidate is what one format made of Detect's lines.
type Candidate struct {
	Format string `json:"format"`
	// Accepted lines parsed into a hit, Rejected did not, Directives were
	// the format's own header lines (ErrDirective: neither).
	Accepted   int `json:"accepted"`
	Rejected   int `json:"rejected"`
	Directives int `json:"directives,omitempty"`
	// Fields counts the fields the accepted lines filled, over all of them:
	// of two formats that accept the same lines, the one that keeps more.
	Fields int `json:"-"`
	// Reason is why the first rejected line was refused.
	Reason string `json:"reason,omitempty"`
}

// String is "main accepts 200 of 200" (directive lines left out of both).
func (c Candidate) String() string {
	return fmt.Sprintf("%s accepts %d of %d", c.Format, c.Accepted, c.Accepted+c.Rejected)
}

// Detection is Detect's verdict.
type Detection struct {
	// Format is the format chosen: the candidate that accepts the most
	// lines; "" when none accepts any. Header lines alone choose nothing:
	// a format may take lines for its headers that are not (Cloud
	// Storage's CSV header is any line that starts with a letter), and
	// would then skip them without a reject.
	Format string
	// Lines is how many lines were looked at.
	Lines int
	// Candidates are every format tried, best first.
	Candidates []Candidate
}

// Best is the chosen format's candidate; ok is false when none was chosen.
func (d Detection) Best() (c Candidate, ok bool) {
	if d.Format == "" || len(d.Candidates) == 0 {
		return Candidate{}, false
	}
	return d.Candidates[0], true
}

// Summary names the best candidates and their counts, for a log line:
// "main 200/200, combined 200/200, common 0/200" (up to n of them).
func (d Detection) Summary(n int) string {
	var sb strings.Builder
	for i, c := range d.Candidates {
		if i == n {
			fmt.Fprintf(&sb, ", %d more", len(d.Candidates)-n)
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %d/%d", c.Format, c.Accepted, c.Accepted+c.Rejected)
	}
	return sb.String()
}

// Detect tries every format of DetectFormats on lines (in order, each with a
// parser of its own, so a W3C parser reads the columns a "#Fields:" line
// names before the lines under it) and ranks them: most lines accepted,
// then fewest rejected (a format that takes a header line as its own
// directive beats one that rejects it), then most fields kept (nginx main
// over combined, which ignores what follows the user agent), then
// DetectFormats' order. It is meant for the first lines of a file (a few
// hundred): each format costs a parser and a pass over the lines.
func Detect(lines [][]byte, opts Options) Detection {
	return DetectAmong(DetectFormats(), lines, opts)
}

// DetectAmong is Detect over the given formats, in that order of preference.
func DetectAmong(formats []string, lines [][]byte, opts Options) Detection {
	d := Detection{Lines: len(lines)}
	var h Hit
	for _, f := range formats {
		p, err := NewWith(f, opts)
		if err != nil {
			continue
		}
		c := Candidate{Format: f}
		unit := p.intDurationUnit()
		var ints intDurations
		xff := p.hasField(fForwardedFor)
		var fwd forwardedValues
		for _, line := range lines {
			switch err := p.Parse(line, &h); {
			case err == nil:
				c.Accepted++
				c.Fields += h.fields()
				if unit != fIgnore && h.Has&HasRequestTime != 0 {
					ints.add(unit, h.RequestTime)
				}
				if xff && h.ForwardedFor != nil {
					fwd.add(h.ForwardedFor)
				}
			case errors.Is(err, ErrDirective):
				c.Directives++
			default:
				if c.Rejected == 0 {
					c.Reason = err.Error()
				}
				c.Rejected++
			}
		}
		why := ints.wrongUnit(unit)
		if why == "" {
			why = fwd.notAddresses()
		}
		if why != "" && c.Accepted > 0 {
			// Out of the ranking: the lines parse, but a number would be
			// stored in a unit they may not be in, or a field that is not
			// one as the forwarded client.
			c.Reason = why
			c.Rejected += c.Accepted
			c.Accepted, c.Fields = 0, 0
		}
		d.Candidates = append(d.Candidates, c)
	}
	// Stable: DetectFormats' order breaks the last ties.
	slices.SortStableFunc(d.Candidates, func(a, b Candidate) int {
		switch {
		case a.Accepted != b.Accepted:
			return b.Accepted - a.Accepted
		case a.Rejected != b.Rejected:
			return a.Rejected - b.Rejected
		default:
			return b.Fields - a.Fields
		}
	})
	if len(d.Candidates) > 0 && d.Candidates[0].Accepted > 0 {
		d.Format = d.Candidates[0].Format
	}
	return d
}

// intDurationUnit is the field of p's trailing request time when it may be
// a bare integer: Apache's %D (microseconds), %T (seconds), or nginx's
// $request_time (seconds, which nginx always writes with a fraction, so an
// integer there is someone else's); fIgnore when p has none.
func (p *Parser) intDurationUnit() field {
	for i := len(p.tokens) - 1; i >= 0; i-- {
		switch f := p.tokens[i].field; f {
		case fDurationS, fDurationUS:
			return f
		case fRequestTime:
			if p.flex {
				return fIgnore // a named format takes only nginx's, with its point
			}
			return f
		}
	}
	return fIgnore
}

// hasField reports whether p's format has a variable read into f.
func (p *Parser) hasField(f field) bool {
	for i := range p.tokens {
		if p.tokens[i].lit == nil && p.tokens[i].field == f {
			return true
		}
	}
	return false
}

// forwardedValues tells, over the lines Detect reads, whether a format's
// X-Forwarded-For field holds addresses. main's "$http_x_forwarded_for"
// is a quoted field after combined's user agent, as is the compression
// format's "$gzip_ratio" (2.75): a field of plain decimal numbers, in every
// line that has one, is not a list of addresses (an IPv4 address has three
// points), and would be kept as the forwarded client.
type forwardedValues struct {
	n, numbers int
	example    string
}

func (f *forwardedValues) add(v []byte) {
	f.n++
	points, digits := 0, 0
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return
		}
	}
	if digits > 0 && points <= 1 {
		f.numbers++
		if f.example == "" {
			f.example = string(v)
		}
	}
}

// notAddresses says why the values are not forwarded clients, or "".
func (f forwardedValues) notAddresses() string {
	if f.n == 0 || f.numbers < f.n {
		return ""
	}
	return fmt.Sprintf("the forwarded-client field holds numbers (%s, %d of %d lines), not addresses: nginx's compression format's $gzip_ratio?", f.example, f.numbers, f.n)
}

// intDurations sums up the request times a candidate read, to tell
// seconds from microseconds: an integer appended to combined is Apache's
// %T or %D, and nothing on the line says which.
type intDurations struct {
	n, zeros int
	max      int64
	frac     bool // some value had a fraction: not an integer column
}

func (d *intDurations) add(unit field, t time.Duration) {
	var v int64
	switch unit {
	case fDurationUS:
		v = int64(t / time.Microsecond)
	default:
		if t%time.Second != 0 {
			d.frac = true
		}
		v = int64(t / time.Second)
	}
	d.n++
	if v == 0 {
		d.zeros++
	}
	d.max = max(d.max, v)
}

// wrongUnit says why the integers d saw are not in unit's unit, or "".
// The fastest request of a real site's sample takes 0 whole seconds but
// never 0 microseconds (Apache counts from reading the request to logging
// it: tens of µs at least), and no request takes 1000 s (17 minutes) while
// a millisecond is 1000 µs. So: a 0 and nothing from 1000 up is %T; no 0
// and something from 10 up is %D; anything else (a 0 and a 1000, or only
// values 1 to 9) does not tell, and neither reading is taken: a request
// time lost is better than one stored a million times off (issue 17, D2).
func (d intDurations) wrongUnit(unit field) string {
	if d.n == 0 || unit == fIgnore || unit == fRequestTime && d.frac {
		return ""
	}
	seconds := d.zeros > 0 && d.max < 1000
	micros := d.zeros == 0 && d.max >= 10
	switch {
	case unit == fDurationUS && !micros:
		return fmt.Sprintf("the trailing integers (%d of them, up to %d, %d zero) may not be microseconds (%%D); %s", d.n, d.max, d.zeros, unitHint(seconds))
	case unit != fDurationUS && !seconds:
		return fmt.Sprintf("the trailing integers (%d of them, up to %d, %d zero) may not be seconds (%%T); %s", d.n, d.max, d.zeros, unitHint(micros))
	}
	return ""
}

func unitHint(other bool) string {
	if other {
		return "they read as the other unit"
	}
	return "they do not tell seconds from microseconds: give the format string"
}

// HeadersOnly reports whether no format accepts a line but one takes every
// line for its header lines: a W3C log whose server wrote its header block
// and no request yet. The lines that follow tell.
func (d Detection) HeadersOnly() bool {
	if len(d.Candidates) == 0 {
		return false
	}
	c := d.Candidates[0]
	return c.Accepted == 0 && c.Rejected == 0 && c.Directives > 0
}

// fields counts the fields h holds, for Detect's "keeps more" tie-break.
func (h *Hit) fields() int {
	n := 0
	for _, v := range [...][]byte{h.RemoteAddr, h.RemoteUser, h.Method, h.Path, h.Query, h.Protocol,
		h.Referer, h.UserAgent, h.Host, h.ForwardedFor} {
		if len(v) > 0 {
			n++
		}
	}
	for bits := h.Has &^ (HasReferer | HasUserAgent | HasHost | HasRequest); bits != 0; bits &= bits - 1 {
		n++ // time, status, bytes, request time: present, whatever their value
	}
	return n
}

// SplitLines cuts data into its complete lines (each with its newline), at
// most max of them; a last line without a newline is left out unless final
// says data is all there is.
func SplitLines(data []byte, max int, final bool) [][]byte {
	var out [][]byte
	for len(data) > 0 && len(out) < max {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if final {
				out = append(out, data)
			}
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}
