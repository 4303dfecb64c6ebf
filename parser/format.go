package parser

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Named formats, written as the nginx log_format strings they are equivalent to.
var named = map[string]string{
	// nginx's predefined "combined", identical to Apache's combined (%l is always "-").
	"combined": `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
	"common":   `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`,
	// Apache's vhost_combined: "%v:%p %h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\"".
	"vhost_combined": `$host:$server_port $remote_addr $remote_ident $remote_user [$time_local] "$request" $status $bytes_sent "$http_referer" "$http_user_agent"`,
}

// Formats lists the names New accepts besides a log_format string.
func Formats() []string {
	return append([]string{"combined", "common", "vhost_combined", "json"}, serverFormatNames()...)
}

type field uint8

const (
	fIgnore field = iota
	fRemoteAddr
	fRemoteUser
	fTime // $time_local, or any of the time forms in JSON
	fTimeISO
	fMsec
	fRequest
	fMethod
	fRequestURI // path and query
	fURI        // path only
	fArgs
	fProtocol
	fStatus
	fBytes
	fReferer
	fUserAgent
	fHost
	fRequestTime
)

// variables maps nginx variable names to fields; any other variable is parsed
// (so the line still has to match) and ignored.
var variables = map[string]field{
	"remote_addr":     fRemoteAddr,
	"remote_user":     fRemoteUser,
	"time_local":      fTime,
	"time_iso8601":    fTimeISO,
	"msec":            fMsec,
	"request":         fRequest,
	"request_method":  fMethod,
	"request_uri":     fRequestURI,
	"uri":             fURI,
	"document_uri":    fURI,
	"args":            fArgs,
	"query_string":    fArgs,
	"server_protocol": fProtocol,
	"status":          fStatus,
	"body_bytes_sent": fBytes,
	"bytes_sent":      fBytes,
	"http_referer":    fReferer,
	"http_user_agent": fUserAgent,
	"host":            fHost,
	"http_host":       fHost,
	"server_name":     fHost,
	"request_time":    fRequestTime,
}

// fieldNames are the names errors use, the nginx variable where there is one.
var fieldNames = [...]string{
	fIgnore: "field", fRemoteAddr: "remote_addr", fRemoteUser: "remote_user",
	fTime: "time_local", fTimeISO: "time_iso8601", fMsec: "msec", fRequest: "request",
	fMethod: "request_method", fRequestURI: "request_uri", fURI: "uri", fArgs: "args",
	fProtocol: "server_protocol", fStatus: "status", fBytes: "body_bytes_sent",
	fReferer: "http_referer", fUserAgent: "http_user_agent", fHost: "host",
	fRequestTime: "request_time",
}

// token is one piece of a compiled format: a literal to match, or a variable
// whose value runs up to the next literal (stop) or to the end of the line.
type token struct {
	lit    []byte
	field  field
	name   string // variable name, for errors
	stop   []byte // literal after the variable; nil when it ends the line
	quoted bool   // between '"' literals: ends at the first unescaped quote
}

// Options tune a Parser beyond its format.
type Options struct {
	// Location is the zone of times logged without one (HAProxy's accept
	// date, W3C's date and time when a server writes local time); UTC when nil.
	Location *time.Location
}

// Parser parses lines of one format. It is not safe for concurrent use; give each
// goroutine its own (New is cheap).
type Parser struct {
	format  string
	tokens  []token
	json    bool
	scratch []byte
	opts    Options

	// custom parses the line for a format the token model cannot express
	// (nested JSON, a header that names the columns); nil for token formats.
	custom func(p *Parser, line []byte, h *Hit) error
	// srv is the column list of a format whose header lines name them (w3c,
	// cloudfront, gcs: servers.go); nil for the others.
	srv *columns

	// The last time field and what it parsed to: consecutive lines mostly share
	// their second, and this turns the date arithmetic into one comparison.
	lastTime  [40]byte
	lastLen   int
	lastField field
	lastUnix  int64
	lastNanos int32
	lastOff   int32
}

// New compiles a format: "combined", "common", "vhost_combined", "json", or an
// nginx log_format string such as
// `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent $request_time`.
func New(format string) (*Parser, error) { return NewWith(format, Options{}) }

// NewWith is New with options.
func NewWith(format string, opts Options) (*Parser, error) {
	if opts.Location == nil {
		opts.Location = time.UTC
	}
	p, err := newParser(format)
	if err != nil {
		return nil, err
	}
	p.opts = opts
	return p, nil
}

func newParser(format string) (*Parser, error) {
	if p := newServerParser(format); p != nil {
		return p, nil
	}
	if format == "json" {
		return &Parser{format: format, json: true}, nil
	}
	spec, ok := named[format]
	if !ok {
		if !strings.Contains(format, "$") {
			return nil, fmt.Errorf("format %q: not one of %s, and no $variable in it for a log_format string",
				format, strings.Join(Formats(), ", "))
		}
		spec = format
	}
	tokens, err := compile(spec)
	if err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err)
	}
	if !hasTime(tokens) {
		// Windows and rollups are by request time; the time a line was read
		// would shift every hit of a backfill into the present.
		return nil, fmt.Errorf("format %q: no time variable ($time_local, $time_iso8601 or $msec)", format)
	}
	return &Parser{format: format, tokens: tokens}, nil
}

// Format returns the format the Parser was built from.
func (p *Parser) Format() string { return p.format }

func hasTime(toks []token) bool {
	for _, t := range toks {
		if t.lit == nil && (t.field == fTime || t.field == fTimeISO || t.field == fMsec) {
			return true
		}
	}
	return false
}

func isVarChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func compile(spec string) ([]token, error) {
	var toks []token
	var lit []byte
	for i := 0; i < len(spec); {
		if spec[i] != '$' {
			lit = append(lit, spec[i])
			i++
			continue
		}
		var name string
		if i+1 < len(spec) && spec[i+1] == '{' {
			end := strings.IndexByte(spec[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ${ at offset %d", i)
			}
			name = spec[i+2 : i+end]
			i += end + 1
		} else {
			j := i + 1
			for j < len(spec) && isVarChar(spec[j]) {
				j++
			}
			name = spec[i+1 : j]
			i = j
		}
		if name == "" {
			return nil, fmt.Errorf("a $ with no variable name")
		}
		if len(lit) > 0 {
			toks = append(toks, token{lit: lit})
			lit = nil
		} else if len(toks) > 0 && toks[len(toks)-1].lit == nil {
			return nil, fmt.Errorf("$%s follows $%s with nothing between them: no way to tell where one ends", name, toks[len(toks)-1].name)
		}
		toks = append(toks, token{field: variables[name], name: name})
	}
	if len(lit) > 0 {
		toks = append(toks, token{lit: lit})
	}
	for i := range toks {
		if toks[i].lit != nil {
			continue
		}
		if i+1 < len(toks) {
			toks[i].stop = toks[i+1].lit
		}
		toks[i].quoted = i > 0 && bytes.HasSuffix(toks[i-1].lit, []byte{'"'}) &&
			toks[i].stop != nil && toks[i].stop[0] == '"'
	}
	return toks, nil
}

// trimEOL drops the line terminator, LF or CRLF.
func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
	}
	return line
}

// Parse parses one line (with or without its line terminator) into h. On error h
// holds whatever was parsed before the failing field.
func (p *Parser) Parse(line []byte, h *Hit) error {
	h.reset()
	line = trimEOL(line)
	if len(line) == 0 {
		return errAt("line", 0, "empty line")
	}
	// Unescaped values are appended to scratch and never outgrow their escaped
	// form, so with room for the whole line no append reallocates and earlier
	// fields aliasing scratch stay valid.
	if cap(p.scratch) < len(line) {
		p.scratch = make([]byte, 0, 2*len(line))
	}
	p.scratch = p.scratch[:0]
	if p.json {
		return p.parseJSON(line, h)
	}
	if p.custom != nil {
		return p.custom(p, line, h)
	}
	pos := 0
	for i := range p.tokens {
		t := &p.tokens[i]
		if t.lit != nil {
			if !bytes.HasPrefix(line[pos:], t.lit) {
				return errAt(p.fieldAt(i), pos, fmt.Sprintf("expected %q", t.lit))
			}
			pos += len(t.lit)
			continue
		}
		var end int
		switch {
		case t.stop == nil:
			end = len(line)
		case t.quoted:
			end = closingQuote(line[pos:])
			if end < 0 {
				return errAt(t.name, pos, "no closing quote")
			}
			end += pos
		case len(t.stop) == 1:
			end = bytes.IndexByte(line[pos:], t.stop[0])
			if end < 0 {
				return errAt(t.name, pos, fmt.Sprintf("no %q after it", t.stop))
			}
			end += pos
		default:
			end = bytes.Index(line[pos:], t.stop)
			if end < 0 {
				return errAt(t.name, pos, fmt.Sprintf("no %q after it", t.stop))
			}
			end += pos
		}
		val := line[pos:end]
		if t.quoted && bytes.IndexByte(val, '\\') >= 0 {
			n := len(p.scratch)
			p.scratch = unescapeLog(p.scratch, val)
			val = p.scratch[n:]
		}
		if err := p.set(t.field, val, h); err != nil {
			return withColumn(err, t.name, pos)
		}
		pos = end
	}
	if pos != len(line) {
		return errAt("line", pos, "unexpected data after the end of the format")
	}
	return nil
}

// fieldAt names the variable next to literal i, for "expected ..." errors: the
// one before it, whose value the literal was to end, else the one after.
func (p *Parser) fieldAt(i int) string {
	if i > 0 {
		return p.tokens[i-1].name
	}
	if i+1 < len(p.tokens) {
		return p.tokens[i+1].name
	}
	return "line"
}

// valueError is what set returns: a reason at an offset within the value, turned
// into an *Error with the line column by withColumn.
type valueError struct {
	off    int
	reason string
}

func (e *valueError) Error() string { return e.reason }

func withColumn(err error, name string, pos int) error {
	if ve, ok := err.(*valueError); ok {
		return errAt(name, pos+ve.off, ve.reason)
	}
	return err
}

func bad(off int, reason string) error { return &valueError{off: off, reason: reason} }

func dash(v []byte) bool { return len(v) == 1 && v[0] == '-' }

// set stores one variable's value in h.
func (p *Parser) set(f field, v []byte, h *Hit) error {
	switch f {
	case fIgnore:
	case fRemoteAddr:
		if len(v) == 0 {
			return bad(0, "empty client address")
		}
		h.RemoteAddr = v
	case fRemoteUser:
		if !dash(v) {
			h.RemoteUser = v
		}
	case fTime, fTimeISO, fMsec:
		return p.setTime(f, v, h)
	case fRequest:
		splitRequest(v, h)
	case fMethod:
		h.Method = v
	case fRequestURI:
		setTarget(v, h)
	case fURI:
		h.Path = v
	case fArgs:
		if !dash(v) {
			h.Query = v
		}
	case fProtocol:
		h.Protocol = v
	case fStatus:
		if len(v) != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' {
			return bad(0, "expected a three-digit status")
		}
		h.Status = uint16(v[0]-'0')*100 + uint16(v[1]-'0')*10 + uint16(v[2]-'0')
		h.Has |= HasStatus
	case fBytes:
		if dash(v) { // Apache's %b for an empty body
			return nil
		}
		n, ok := uint63(v)
		if !ok {
			return bad(0, "expected a byte count")
		}
		h.Bytes = n
		h.Has |= HasBytes
	case fReferer:
		if len(v) > 0 && !dash(v) {
			h.Referer = v
			h.Has |= HasReferer
		}
	case fUserAgent:
		if len(v) > 0 && !dash(v) {
			h.UserAgent = v
			h.Has |= HasUserAgent
		}
	case fHost:
		if len(v) > 0 && !dash(v) {
			h.Host = v
			h.Has |= HasHost
		}
	case fRequestTime:
		if dash(v) {
			return nil
		}
		d, ok := seconds(v)
		if !ok {
			return bad(0, "expected seconds such as 0.123")
		}
		h.RequestTime = d
		h.Has |= HasRequestTime
	}
	return nil
}

func (p *Parser) setTime(f field, v []byte, h *Hit) error {
	if len(v) <= len(p.lastTime) && p.lastLen == len(v) && p.lastField == f && bytes.Equal(p.lastTime[:p.lastLen], v) {
		h.Unix, h.Nanos, h.ZoneOffset = p.lastUnix, p.lastNanos, p.lastOff
		h.Has |= HasTime
		return nil
	}
	var ok bool
	switch f {
	case fTime:
		ok = parseTimeLocal(v, h)
		if !ok && len(v) > 0 {
			ok = parseISO8601(v, h) || parseMsec(v, h) // JSON "time" keys hold any form
		}
	case fTimeISO:
		ok = parseISO8601(v, h)
	case fMsec:
		ok = parseMsec(v, h)
	}
	if !ok {
		return bad(0, "not a time in the expected form")
	}
	h.Has |= HasTime
	if len(v) <= len(p.lastTime) {
		p.lastLen = copy(p.lastTime[:], v)
		p.lastField, p.lastUnix, p.lastNanos, p.lastOff = f, h.Unix, h.Nanos, h.ZoneOffset
	}
	return nil
}

// uint63 parses a non-negative decimal that fits an int64.
func uint63(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// seconds parses "1.234" (nginx $request_time) into a duration.
func seconds(v []byte) (d time.Duration, ok bool) {
	i := 0
	var s int64
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if i >= 9 {
			return 0, false
		}
		s = s*10 + int64(v[i]-'0')
	}
	if i == 0 {
		return 0, false
	}
	var ns int64
	if i < len(v) && v[i] == '.' {
		i++
		scale := int64(100_000_000)
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			ns += int64(v[i]-'0') * scale
			scale /= 10
		}
	}
	if i != len(v) {
		return 0, false
	}
	return time.Duration(s*1e9 + ns), true
}
