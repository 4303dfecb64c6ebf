package parser

import (
	"bytes"
	"math"
	"slices"
	"time"
)

// Formats other web servers, proxies and cloud services write by default, each
// parsed by hand in its own file (caddy.go, traefik.go, w3c.go, aws.go,
// haproxy.go, squid.go) through Parser.custom. This file holds what they share:
// the table New consults, a cursor over space-separated fields, zone-less
// times, and the decoders of their escapes.

// serverFormats are the names New accepts for these formats, in the order
// Formats lists them; the comments name GoAccess's predefined format for the
// same log.
var serverFormats = [...]struct {
	name  string
	build func(p *Parser)
}{
	{"caddy", func(p *Parser) { p.custom = parseCaddy }},                                            // CADDY
	{"traefik", func(p *Parser) { p.custom = parseTraefik }},                                        // TRAEFIKCLF
	{"w3c", func(p *Parser) { p.srv = newColumns(modeW3C); p.custom = parseColumns }},               // W3C (IIS)
	{"cloudfront", func(p *Parser) { p.srv = newColumns(modeCloudFront); p.custom = parseColumns }}, // CLOUDFRONT
	{"alb", func(p *Parser) { p.custom = parseALB }},                                                // AWSALB
	{"elb", func(p *Parser) { p.custom = parseELB }},                                                // AWSELB (classic)
	{"s3", func(p *Parser) { p.custom = parseS3 }},                                                  // AWSS3
	{"gcs", func(p *Parser) { p.srv = newColumns(modeGCS); p.custom = parseColumns }},               // CLOUDSTORAGE
	{"haproxy", func(p *Parser) { p.custom = parseHAProxy }},
	{"squid", func(p *Parser) { p.custom = parseSquid }}, // SQUID
}

// serverFormatNames lists the names of serverFormats, for Formats.
func serverFormatNames() []string {
	out := make([]string, len(serverFormats))
	for i, f := range serverFormats {
		out[i] = f.name
	}
	return out
}

// newServerParser builds the Parser of a server format, or returns nil when
// name is not one.
func newServerParser(name string) *Parser {
	for _, f := range serverFormats {
		if f.name == name {
			p := &Parser{format: name}
			f.build(p)
			return p
		}
	}
	return nil
}

// Directives reports whether the format's files carry header lines that name
// their columns (W3C's and CloudFront's "#Fields:", the CSV header of Cloud
// Storage usage logs). A Parser of such a format reads a file that is resumed
// part way only if it was first primed with the file's earlier header lines;
// see Prime.
func (p *Parser) Directives() bool { return p.srv != nil }

// Prime feeds the Parser one line from before the point where reading resumes
// and reports whether it was a header line, which the Parser then applies as
// Parse would have (Parse returns ErrDirective for it). Any other line is
// skipped without being parsed, cheaply, so a caller can hand it every line up
// to the resume offset. Only formats whose Directives is true have header
// lines; for others Prime is always false.
func (p *Parser) Prime(line []byte) bool {
	if p.srv == nil {
		return false
	}
	line = trimEOL(line)
	if !p.srv.isDirective(line) {
		return false
	}
	p.directive(line)
	return true
}

// directive applies a header line. The time cache is dropped: a header
// may change how the same date and time read (#GMT-Offset).
func (p *Parser) directive(line []byte) {
	p.srv.directive(line)
	p.lastLen = 0
}

// cursor walks the fields of a line separated by single spaces.
type cursor struct {
	line []byte
	pos  int
}

// word returns the field at the cursor, up to the next space or the end of the
// line, and moves past the space. An absent or empty field is an error naming
// the field: the line has fewer fields than the format.
func (c *cursor) word(name string) ([]byte, error) {
	start := c.pos
	if start >= len(c.line) {
		return nil, errAt(name, start, "missing: the line ends before it")
	}
	rest := c.line[start:]
	end := bytes.IndexByte(rest, ' ')
	if end < 0 {
		c.pos = len(c.line)
		return rest, nil
	}
	if end == 0 {
		return nil, errAt(name, start, "empty (two spaces in a row)")
	}
	c.pos = start + end + 1
	return rest[:end], nil
}

// spaces skips a run of spaces: Squid pads its fields to a width.
func (c *cursor) spaces() {
	for c.pos < len(c.line) && c.line[c.pos] == ' ' {
		c.pos++
	}
}

// quoted returns the content of the '"'-quoted field at the cursor (a quote
// escaped with a backslash does not end it; escapes are decoded into scratch)
// and moves past the space after it.
func (c *cursor) quoted(p *Parser, name string) ([]byte, error) {
	start := c.pos
	if start >= len(c.line) || c.line[start] != '"' {
		if start >= len(c.line) {
			return nil, errAt(name, start, "missing: the line ends before it")
		}
		return nil, errAt(name, start, `expected '"'`)
	}
	end := closingQuote(c.line[start+1:])
	if end < 0 {
		return nil, errAt(name, start, "no closing quote")
	}
	end += start + 1
	v := c.line[start+1 : end]
	if err := c.after(name, end+1); err != nil {
		return nil, err
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		n := len(p.scratch)
		p.scratch = unescapeLog(p.scratch, v)
		v = p.scratch[n:]
	}
	return v, nil
}

// bracketed returns the content of the field "[...]" at the cursor.
func (c *cursor) bracketed(name string) ([]byte, error) {
	start := c.pos
	if start >= len(c.line) || c.line[start] != '[' {
		return nil, errAt(name, start, "expected '['")
	}
	end := bytes.IndexByte(c.line[start:], ']')
	if end < 0 {
		return nil, errAt(name, start, "no closing ']'")
	}
	end += start
	if err := c.after(name, end+1); err != nil {
		return nil, err
	}
	return c.line[start+1 : end], nil
}

// after moves the cursor to i, which must be the end of the line or a space
// separating the next field.
func (c *cursor) after(name string, i int) error {
	switch {
	case i >= len(c.line):
		c.pos = len(c.line)
	case c.line[i] == ' ':
		c.pos = i + 1
	default:
		return errAt(name, i, "expected a space after it")
	}
	return nil
}

// end reports an error unless the cursor consumed the whole line.
func (c *cursor) end() error {
	if c.pos < len(c.line) {
		return errAt("line", c.pos, "unexpected data after the last field")
	}
	return nil
}

// Time kinds of the server formats, kept apart from format.go's fields in the
// per-Parser cache of the last time parsed.
const (
	tkHAProxy field = 100 + iota
	tkW3C
	tkCaddy    // ts as a JSON number
	tkCaddyStr // ts as a JSON string: "0" is not 0 (a string is read by its form)
	tkMicros
)

// cachedTime fills h from the cache when v is the time the Parser parsed last
// in the same form.
func (p *Parser) cachedTime(kind field, v []byte, h *Hit) bool {
	if p.lastField == kind && p.lastLen == len(v) && len(v) <= len(p.lastTime) && bytes.Equal(p.lastTime[:p.lastLen], v) {
		h.Unix, h.Nanos, h.ZoneOffset = p.lastUnix, p.lastNanos, p.lastOff
		h.Has |= HasTime
		return true
	}
	return false
}

// storeTime checks that h's time is one the store can hold, marks it present
// and remembers it for cachedTime.
func (p *Parser) storeTime(kind field, v []byte, h *Hit) error {
	if h.Unix < 0 || h.Unix > maxStoreUnix {
		return bad(0, "time outside 1970-2106, which the store cannot hold")
	}
	h.Has |= HasTime
	if len(v) <= len(p.lastTime) {
		p.lastLen = copy(p.lastTime[:], v)
		p.lastField, p.lastUnix, p.lastNanos, p.lastOff = kind, h.Unix, h.Nanos, h.ZoneOffset
	}
	return nil
}

// setTimeStored is setTime (a form format.go parses: CLF, ISO 8601, $msec)
// followed by the check that the store can hold the time.
func (p *Parser) setTimeStored(f field, v []byte, h *Hit) error {
	if err := p.setTime(f, v, h); err != nil {
		return err
	}
	if h.Unix < 0 || h.Unix > maxStoreUnix {
		h.Has &^= HasTime
		return bad(0, "time outside 1970-2106, which the store cannot hold")
	}
	return nil
}

// maxStoreUnix is the last second a ClickHouse DateTime holds (2106-02-07).
const maxStoreUnix = 1<<32 - 1

// setLocalTime sets h to a wall-clock time logged without a zone, read in the
// Parser's Options.Location (UTC unless configured).
func (p *Parser) setLocalTime(y, mo, d int, secs int64, nanos int32, h *Hit) {
	loc := p.opts.Location
	if loc == nil || loc == time.UTC {
		h.Unix = daysFromCivil(y, mo, d)*86400 + secs
		h.Nanos, h.ZoneOffset = nanos, 0
		return
	}
	// time.Date resolves the zone's offset at that wall time (DST included)
	// without allocating.
	t := time.Date(y, time.Month(mo), d, 0, 0, int(secs), int(nanos), loc)
	_, off := t.Zone()
	h.Unix, h.Nanos, h.ZoneOffset = t.Unix(), nanos, int32(off)
}

// fraction parses the digits of a fractional second at b[i:] ("655" of
// "14.655") and returns nanoseconds and the index after them.
func fraction(b []byte, i int) (int32, int) {
	var ns int32
	scale := int32(100_000_000)
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		ns += int32(b[i]-'0') * scale
		scale /= 10
	}
	return ns, i
}

// epoch sets h from a decimal count since the Unix epoch with an optional
// fraction, in units of 10^-scale seconds (0 seconds, 3 milliseconds, 6
// microseconds, 9 nanoseconds).
func epoch(v []byte, scale int, h *Hit) bool {
	var u uint64
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if i >= 19 {
			return false
		}
		u = u*10 + uint64(v[i]-'0')
	}
	if i == 0 || u > math.MaxInt64 {
		return false
	}
	n := int64(u)
	unit := int64(1)
	for range scale {
		unit *= 10
	}
	h.Unix = n / unit
	ns := (n % unit) * (1_000_000_000 / unit)
	if i < len(v) && v[i] == '.' {
		// The fraction is of the unit, not of a second.
		frac, j := fraction(v, i+1)
		if j == i+1 {
			return false
		}
		ns += int64(frac) / unit
		i = j
	}
	if i != len(v) {
		return false
	}
	h.Nanos, h.ZoneOffset = int32(ns), 0
	return true
}

// millis parses a whole number of milliseconds, the unit of IIS's time-taken,
// HAProxy's timers, Squid's elapsed and S3's total time. HAProxy marks a value
// cut short by logasap with '+'; ok is false for -1 (no value) and garbage.
func millis(v []byte) (d time.Duration, ok bool) {
	if len(v) > 0 && v[0] == '+' {
		v = v[1:]
	}
	n, ok := uint63(v)
	if !ok || n > 1<<40 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// stripPort drops a ":port" suffix from an address or host ("10.0.1.2:33317",
// "example.com:443", "[2001:db8::1]:443"). A bare IPv6 address keeps its last
// group unless the caller knows a port follows (withPort), as in HAProxy's,
// ELB's and ALB's "client:port" where IPv6 is written without brackets.
func stripPort(v []byte, withPort bool) []byte {
	i := bytes.LastIndexByte(v, ':')
	if i < 0 || i == len(v)-1 {
		return v
	}
	for _, c := range v[i+1:] {
		if c < '0' || c > '9' {
			return v
		}
	}
	switch {
	case v[0] == '[' && v[i-1] == ']':
		return v[1 : i-1]
	case withPort || bytes.IndexByte(v[:i], ':') < 0:
		return v[:i]
	}
	return v
}

// hostOnly drops a ":port" suffix from a Host header's value; an IPv6
// literal keeps its brackets, as in the header ("[2001:db8::1]:8443" gives
// "[2001:db8::1]").
func hostOnly(v []byte) []byte {
	if len(v) > 0 && v[0] == '[' {
		if i := bytes.IndexByte(v, ']'); i > 0 {
			return v[:i+1]
		}
		return v
	}
	return stripPort(v, false)
}

// urlHost returns the host of an absolute URL ("http://www.example.com:80/a"
// gives www.example.com), or nil when target is not one.
func urlHost(target []byte) []byte {
	i := bytes.Index(target, []byte("://"))
	if i <= 0 || i > 5 {
		return nil
	}
	rest := target[i+3:]
	if j := bytes.IndexAny(rest, "/? "); j >= 0 {
		rest = rest[:j]
	}
	if len(rest) == 0 {
		return nil
	}
	return hostOnly(rest)
}

// unescapeW3C appends src to dst with, when percent is set, %XX escapes
// decoded (CloudFront's user agents: "Mozilla/5.0%20(Windows...") and, when
// plus is set, '+' read as a space (IIS writes a user agent's spaces as '+').
// An invalid escape is kept as written. CloudFront has also written user
// agents encoded twice ("Mozilla/5.0%2520(Windows...", 2016 logs; GoAccess
// has --double-decode for them): %25 followed by two hex digits is that
// escape's byte, so both kinds of file decode to the user agent sent. The
// cost is a user agent that held a literal "%20" itself, which no browser's
// does.
func unescapeW3C(dst, src []byte, percent, plus bool) []byte {
	n := len(dst)
	dst = slices.Grow(dst, len(src)) // a no-op with the scratch's room for the line
	out := dst[n : n+len(src)]
	j := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '+' && plus:
			c = ' '
		case c == '%' && percent && i+2 < len(src):
			hi, ok1 := unhex(src[i+1])
			lo, ok2 := unhex(src[i+2])
			if !ok1 || !ok2 {
				break
			}
			c = hi<<4 | lo
			i += 2
			if c == '%' && i+2 < len(src) {
				// "%2520": the escape of an escape.
				if hi, ok1 = unhex(src[i+1]); ok1 {
					if lo, ok2 = unhex(src[i+2]); ok2 {
						c = hi<<4 | lo
						i += 2
					}
				}
			}
		}
		out[j] = c
		j++
	}
	return dst[:n+j]
}

// durationMicros converts microseconds (Cloud Storage's time_taken_micros).
func durationMicros(n int64) time.Duration {
	if n > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Microsecond
}

// setStatus parses a three-digit status code into h. "-", "000" (no response:
// CloudFront, Squid) and "-1" (HAProxy) leave it absent.
func setStatus(v []byte, h *Hit) error {
	if len(v) == 0 || dash(v) || string(v) == "000" || string(v) == "-1" || string(v) == "0" {
		return nil
	}
	if len(v) != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' {
		return bad(0, "expected a three-digit status")
	}
	h.Status = uint16(v[0]-'0')*100 + uint16(v[1]-'0')*10 + uint16(v[2]-'0')
	h.Has |= HasStatus
	return nil
}

// setBytes parses a byte count into h; "-" leaves it absent.
func setBytes(v []byte, h *Hit) error {
	if len(v) == 0 || dash(v) {
		return nil
	}
	if len(v) > 0 && v[0] == '+' { // HAProxy: a count cut short by logasap
		v = v[1:]
	}
	n, ok := uint63(v)
	if !ok {
		return bad(0, "expected a byte count")
	}
	h.Bytes = n
	h.Has |= HasBytes
	return nil
}

// needRequest is the last check of every server format: a line without a time
// and a request is not a hit, however much else parsed.
func needRequest(h *Hit) error {
	if h.Has&HasTime == 0 {
		return errAt("time", 0, "the line has no time")
	}
	if h.Has&HasRequest == 0 && h.BadRequest == nil {
		return errAt("request", 0, "the line has no request")
	}
	return nil
}
