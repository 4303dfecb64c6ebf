package parser

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

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
	fForwardedFor
	fPeerAddr   // the TCP peer (Apache %{c}a, nginx $realip_remote_addr): the client only when nothing better is logged
	fHostPort   // a virtual host with an optional ":port" (Apache %v:%p as vhost_combined writes it)
	fBytesTotal // bytes with headers ($bytes_sent, %O): the byte count only when the body's is not logged
	fQueryQ     // Apache %q: "?query" or nothing
	fDurationS  // whole seconds (Apache %T)
	fDurationMS // milliseconds (%{ms}T)
	fDurationUS // microseconds (%D, %{us}T)
	fEpochS     // seconds since the epoch (Apache %{sec}t)
	fEpochMS    // milliseconds since the epoch (%{msec}t)
	fEpochUS    // microseconds since the epoch (%{usec}t)
	fFracMS     // the millisecond part of the time (%{msec_frac}t)
	fFracUS     // the microsecond part (%{usec_frac}t)
	fStrftime   // Apache %{format}t: parsed by the token's layout
	fIsArgs     // nginx $is_args, only ever between $uri and $args
)

// fieldNames are the names errors use, the nginx variable where there is one.
var fieldNames = [...]string{
	fIgnore: "field", fRemoteAddr: "remote_addr", fRemoteUser: "remote_user",
	fTime: "time_local", fTimeISO: "time_iso8601", fMsec: "msec", fRequest: "request",
	fMethod: "request_method", fRequestURI: "request_uri", fURI: "uri", fArgs: "args",
	fProtocol: "server_protocol", fStatus: "status", fBytes: "body_bytes_sent",
	fReferer: "http_referer", fUserAgent: "http_user_agent", fHost: "host",
	fRequestTime: "request_time", fForwardedFor: "http_x_forwarded_for",
	fPeerAddr: "realip_remote_addr", fHostPort: "host", fBytesTotal: "bytes_sent",
	fQueryQ: "args", fDurationS: "request_time", fDurationMS: "request_time",
	fDurationUS: "request_time", fEpochS: "time", fEpochMS: "time", fEpochUS: "time",
	fFracMS: "time", fFracUS: "time", fStrftime: "time", fIsArgs: "is_args",
}

// textField reports whether f holds text as the client sent it, which both
// servers escape (\" \\ \xHH) wherever it is written, quoted or not.
func textField(f field) bool {
	switch f {
	case fRemoteUser, fRequest, fMethod, fRequestURI, fURI, fArgs, fQueryQ, fProtocol,
		fReferer, fUserAgent, fHost, fHostPort, fForwardedFor:
		return true
	}
	return false
}

// timeField reports whether f gives the line its time (alone, or with others).
func timeField(f field) bool {
	switch f {
	case fTime, fTimeISO, fMsec, fEpochS, fEpochMS, fEpochUS, fStrftime:
		return true
	}
	return false
}

// partField reports whether f is parsed into Parser.tp and assembled after
// the last token (a time written in pieces).
func partField(f field) bool {
	switch f {
	case fEpochS, fEpochMS, fEpochUS, fFracMS, fFracUS, fStrftime:
		return true
	}
	return false
}

// scan is how a variable's value ends.
type scan uint8

const (
	scanEOL    scan = iota // at the end of the line
	scanByte               // at the first stop[0]
	scanBytes              // at the first stop
	scanQuoted             // at the first unescaped '"'
	scanFixed              // after n bytes ($time_local followed by a space)
	scanList               // at a space that does not separate list items ("a, b", "a : b")
	scanLayout             // where its strftime layout ends
	scanWord               // at the first space, or the end of the line
)

// token is one piece of a compiled format: a literal to match, or a variable
// whose value runs up to the next literal (stop) or to the end of the line.
type token struct {
	lit []byte
	// flexTail: a literal ending in a space in a format that allows padding
	// also takes the spaces after it.
	flexTail bool

	field field
	name  string // variable name, for errors
	stop  []byte // literal after the variable; nil when it ends the line
	key   []byte // what scanByte and scanBytes search for: stop, or its start
	// takeStop: the search was for the whole stop, so the value's end is
	// where the literal after it matched; stopFlexTail: that literal ends in
	// a space and padding may follow.
	takeStop, stopFlexTail bool
	dashFast               bool // "-" then the stop is taken without a search
	set                    bool // the value is stored (not ignored, not a layout's)
	quoted                 bool // between '"' literals: ends at the first unescaped quote
	scan                   scan
	n                      int  // scanFixed's length
	trim                   bool // padding may precede stop: trim trailing spaces off the value
	unescape               bool // decode the server's escapes in the value
	dashOK                 bool // "-" means absent (Apache's conditional %400,501{...}i)
	layout                 *layout
}

// escaping is how the server escaped variables: nginx's log_format escape=.
type escaping uint8

const (
	escDefault escaping = iota // \xHH (nginx), \" \\ \xHH \n ... (Apache)
	escJSON                    // nginx escape=json
	escNone                    // nginx escape=none: values written raw
)

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

	// flex lets one space in the format match a run of spaces (servers that
	// pad fields); tail accepts and ignores data after a space at the end of
	// the line (fields appended to a conventional format). Both are for the
	// named formats: a format string says exactly what each line holds.
	flex, tail bool
	esc        escaping
	// parts: some time field is assembled in tp after the last token.
	parts bool
	tp    timeParts

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

// New compiles a format: one of Formats() ("combined", "main", "json", ...),
// an nginx log_format string such as
// `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent $request_time`,
// an Apache LogFormat string such as `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %D`,
// or either directive pasted whole from the server's configuration
// (`log_format main '...' '...';`, `LogFormat "%h ... \"%r\" ..." combined`).
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
	if nf, ok := lookupNamed(format); ok {
		return compileNamed(format, nf)
	}
	if why, ok := timeless[format]; ok {
		return nil, fmt.Errorf("format %q: %s", format, why)
	}
	spec, esc, err := unwrap(format)
	if err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err)
	}
	if spec.named != "" { // CustomLog path nickname
		nf, ok := lookupNamed(spec.named)
		if !ok {
			return nil, fmt.Errorf("format %q: %w", format, unknownFormat(spec.named))
		}
		return compileNamed(format, nf)
	}
	var toks []token
	switch dialectOf(spec.text) {
	case nginx:
		toks, err = compileNginx(spec.text)
	case apache:
		toks, err = compileApache(spec.text)
	default:
		return nil, unknownFormat(format)
	}
	if err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err)
	}
	p := &Parser{format: format, esc: esc}
	if err := p.setTokens(toks); err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err)
	}
	return p, nil
}

// compileNamed builds a Parser for a named format: its spec, with padding
// and trailing fields allowed.
func compileNamed(format string, nf NamedFormat) (*Parser, error) {
	toks, err := compileNginx(nf.Spec)
	if err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err) // a bug in the table; tests compile every name
	}
	p := &Parser{format: format, flex: true, tail: true}
	if err := p.setTokens(toks); err != nil {
		return nil, fmt.Errorf("format %q: %w", format, err)
	}
	return p, nil
}

// Format returns the format the Parser was built from.
func (p *Parser) Format() string { return p.format }

func isVarChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// setTokens checks a dialect's token list and fills in how each value ends.
func (p *Parser) setTokens(raw []token) error {
	toks, err := joinTokens(raw)
	if err != nil {
		return err
	}
	hasTime := false
	for i := range toks {
		t := &toks[i]
		if t.lit != nil {
			t.flexTail = p.flex && t.lit[len(t.lit)-1] == ' '
			continue
		}
		if timeField(t.field) && (t.field != fStrftime || t.layout.date || t.layout.epoch) {
			hasTime = true
		}
		if partField(t.field) {
			p.parts = true
		}
		if i+1 < len(toks) {
			t.stop = toks[i+1].lit
			t.stopFlexTail = p.flex && t.stop[len(t.stop)-1] == ' '
		}
		t.unescape = textField(t.field) && p.esc != escNone
		t.set = t.field != fIgnore && t.field != fStrftime
		t.quoted = i > 0 && bytes.HasSuffix(toks[i-1].lit, []byte{'"'}) &&
			t.stop != nil && t.stop[0] == '"'
		switch {
		case t.field == fStrftime:
			t.scan = scanLayout
		case t.quoted:
			t.scan = scanQuoted
		case t.stop == nil && p.tail:
			// The last field of a named format: whatever a server appended
			// after it starts at the next space.
			t.scan = scanWord
		case t.stop == nil:
			t.scan = scanEOL
		case t.field == fTime && t.stop[0] == ' ':
			// An unbracketed $time_local holds a space of its own.
			t.scan, t.n = scanFixed, len("10/Oct/2000:13:55:36 -0700")
		case listField(t.field, t.name) && t.stop[0] == ' ':
			t.scan = scanList
		default:
			t.key = t.stop
			if p.flex {
				// Padding may widen the literal's inner spaces: search for
				// what comes before the first ("]" of "] \""), and let the
				// literal's own match take the spaces.
				if j := bytes.IndexByte(t.key[1:], ' '); j >= 0 {
					t.key = t.key[:j+1]
				}
				t.trim = t.key[0] == ' '
			}
			t.scan = scanBytes
			if len(t.key) == 1 {
				t.scan = scanByte
			}
			t.takeStop = len(t.key) == len(t.stop)
		}
		t.dashFast = t.scan == scanQuoted || (t.scan == scanByte || t.scan == scanBytes) && t.key[0] != '-'
	}
	if !hasTime {
		// Windows and rollups are by request time; the time a line was read
		// would shift every hit of a backfill into the present.
		return fmt.Errorf("no time field ($time_local, $time_iso8601, $msec; Apache %%t, %%{...}t)")
	}
	p.tokens = toks
	return nil
}

// listField reports whether a variable's value is a list whose items a
// space separates after a comma or around a colon: nginx's upstream
// variables ("0.004, 0.002 : 0.001") and an unquoted X-Forwarded-For.
func listField(f field, name string) bool {
	return f == fForwardedFor || strings.HasPrefix(name, "upstream_")
}

// joinTokens merges adjacent literals, turns a path directly followed by its
// query ($uri$is_args$args, Apache %U%q) into one request target, and refuses
// other adjacent variables: nothing would say where one ends.
func joinTokens(raw []token) ([]token, error) {
	var toks []token
	for i := 0; i < len(raw); i++ {
		t := raw[i]
		if t.lit != nil {
			if n := len(toks); n > 0 && toks[n-1].lit != nil {
				toks[n-1].lit = append(toks[n-1].lit[:len(toks[n-1].lit):len(toks[n-1].lit)], t.lit...)
				continue
			}
			toks = append(toks, t)
			continue
		}
		if t.field == fURI && i+1 < len(raw) {
			switch {
			case raw[i+1].field == fQueryQ && raw[i+1].lit == nil:
				t.field, t.name = fRequestURI, t.name+raw[i+1].name
				i++
			case raw[i+1].field == fIsArgs && raw[i+1].lit == nil && i+2 < len(raw) && raw[i+2].field == fArgs && raw[i+2].lit == nil:
				t.field, t.name = fRequestURI, "uri$is_args$args"
				i += 2
			}
		}
		if t.field == fIsArgs {
			return nil, fmt.Errorf("$is_args only makes sense as $uri$is_args$args")
		}
		if n := len(toks); n > 0 && toks[n-1].lit == nil && toks[n-1].field != fStrftime {
			return nil, fmt.Errorf("%s follows %s with nothing between them: no way to tell where one ends", varName(t.name), varName(toks[n-1].name))
		}
		toks = append(toks, t)
	}
	return toks, nil
}

// varName is a token's name as the format wrote it.
func varName(name string) string {
	if strings.HasPrefix(name, "%") {
		return name
	}
	return "$" + name
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
	if p.parts {
		p.tp = timeParts{}
	}
	pos := 0
	toks := p.tokens
	for i := 0; i < len(toks); i++ {
		t := &toks[i]
		if t.lit != nil {
			switch {
			case bytes.HasPrefix(line[pos:], t.lit):
				pos += len(t.lit)
			case p.flex:
				n := flexPrefix(line[pos:], t.lit)
				if n < 0 {
					return errAt(p.fieldAt(i), pos, fmt.Sprintf("expected %q", t.lit))
				}
				pos += n
			default:
				return errAt(p.fieldAt(i), pos, fmt.Sprintf("expected %q", t.lit))
			}
			if t.flexTail {
				for pos < len(line) && line[pos] == ' ' {
					pos++
				}
			}
			continue
		}
		var end int
		switch {
		// "-" is what both servers write for a value they do not have
		// (ident, user, referer): most lines have several, taken without a
		// search.
		case t.dashFast && pos+1 < len(line) && line[pos] == '-' &&
			(t.scan == scanQuoted && line[pos+1] == '"' || t.scan != scanQuoted && bytes.HasPrefix(line[pos+1:], t.key)):
			end = pos + 1
		case t.scan == scanQuoted:
			end = closingQuote(line[pos:])
			if end < 0 {
				return errAt(t.name, pos, "no closing quote")
			}
			end += pos
		case t.scan == scanByte:
			end = bytes.IndexByte(line[pos:], t.key[0])
			if end < 0 {
				return errAt(t.name, pos, fmt.Sprintf("no %q after it", t.stop))
			}
			end += pos
		case t.scan == scanBytes:
			end = bytes.Index(line[pos:], t.key)
			if end < 0 {
				return errAt(t.name, pos, fmt.Sprintf("no %q after it", t.stop))
			}
			end += pos
		case t.scan == scanEOL:
			end = len(line)
		case t.scan == scanWord:
			end = bytes.IndexByte(line[pos:], ' ')
			if end < 0 {
				end = len(line)
			} else {
				end += pos
			}
		case t.scan == scanFixed:
			end = pos + t.n
			if end > len(line) {
				return errAt(t.name, pos, "not a time in the expected form")
			}
		case t.scan == scanList:
			end = pos + listEnd(line[pos:])
		case t.scan == scanLayout:
			n, err := t.layout.parse(line[pos:], &p.tp)
			if err != nil {
				return withColumn(err, t.name, pos)
			}
			end = pos + n
		}
		if t.set {
			val := line[pos:end]
			if t.trim {
				for len(val) > 0 && val[len(val)-1] == ' ' {
					val = val[:len(val)-1]
				}
			}
			if t.unescape && bytes.IndexByte(val, '\\') >= 0 {
				val = p.unescape(val)
			}
			if !(t.dashOK && dash(val)) {
				if err := p.set(t.field, val, h); err != nil {
					return withColumn(err, t.name, pos)
				}
			}
		}
		pos = end
		// The literal after the value is where the search stopped: take it
		// here rather than match it again.
		if t.takeStop || t.scan == scanQuoted && bytes.HasPrefix(line[pos:], t.stop) {
			pos += len(t.stop)
			i++
			if t.stopFlexTail {
				for pos < len(line) && line[pos] == ' ' {
					pos++
				}
			}
		}
	}
	if pos != len(line) && !(p.tail && line[pos] == ' ') {
		return errAt("line", pos, "unexpected data after the end of the format")
	}
	if p.parts {
		if err := p.tp.finish(h, p.opts.Location); err != nil {
			return err
		}
	}
	if h.RemoteAddr == nil && h.ForwardedFor != nil {
		// A format logging X-Forwarded-For in place of the client (Apache
		// behind a load balancer: "%{X-Forwarded-For}i %l %u %t ..."): the
		// client is the list's first address.
		h.RemoteAddr = firstAddr(h.ForwardedFor)
	}
	return nil
}

// firstAddr is the first address of an X-Forwarded-For list ("a, b, c").
func firstAddr(list []byte) []byte {
	if i := bytes.IndexByte(list, ','); i >= 0 {
		list = list[:i]
	}
	return bytes.TrimSpace(list)
}

// unescape decodes val into scratch and returns the decoded value.
func (p *Parser) unescape(val []byte) []byte {
	n := len(p.scratch)
	if p.esc == escJSON {
		out, bad := unescapeJSON(p.scratch, val)
		if bad >= 0 {
			// Not what nginx writes; keep the value as logged.
			p.scratch = p.scratch[:n]
			return val
		}
		p.scratch = out
		return out[n:]
	}
	p.scratch = unescapeLog(p.scratch, val)
	return p.scratch[n:]
}

// flexPrefix matches lit at the start of b, a space in lit matching one or
// more spaces in b; it returns the bytes matched or -1.
func flexPrefix(b, lit []byte) int {
	i := 0
	for _, c := range lit {
		if i >= len(b) || b[i] != c {
			return -1
		}
		i++
		if c == ' ' {
			for i < len(b) && b[i] == ' ' {
				i++
			}
		}
	}
	return i
}

// listEnd returns the length of the list at the start of b: up to the first
// space that neither follows a comma ("a, b") nor surrounds a colon ("a : b").
func listEnd(b []byte) int {
	i := 0
	for {
		j := bytes.IndexByte(b[i:], ' ')
		if j < 0 {
			return len(b)
		}
		j += i
		switch {
		case j > 0 && b[j-1] == ',':
			i = j + 1
		case j+2 < len(b) && b[j+1] == ':' && b[j+2] == ' ':
			i = j + 3
		default:
			return j
		}
	}
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
		// No address holds a control byte or a quote: a run of NULs a
		// crash left before the line, or the pieces of a quoted list.
		for k, c := range v {
			if c < 0x20 || c == 0x7f || c == '"' {
				return bad(k, "not a client address: a control byte or '\"' in it")
			}
		}
		h.RemoteAddr = v
	case fPeerAddr:
		if h.RemoteAddr == nil && len(v) > 0 && !dash(v) {
			h.RemoteAddr = v
		}
	case fRemoteUser:
		if dash(v) {
			return nil
		}
		// A named format's user runs up to " [", so more words before the
		// time than the format has (a client list "a, b, c - - [", a
		// vhost_combined line read as combined, two lines run together)
		// would all land here. Neither server writes a space or a quote
		// in it unescaped in practice: such a line is the wrong format.
		if p.flex {
			if k := bytes.IndexAny(v, " \""); k >= 0 {
				return bad(k, "a space or '\"' in the user: more fields before the time than the format has (a client list, a virtual host, another format?)")
			}
		}
		h.RemoteUser = v
	case fTime, fTimeISO, fMsec:
		return p.setTime(f, v, h)
	case fRequest:
		splitRequest(v, h)
	case fMethod:
		if len(v) > 0 && !dash(v) {
			h.Method = v
		}
	case fRequestURI:
		if len(v) > 0 && !dash(v) {
			setTarget(v, h)
		}
	case fURI:
		if len(v) > 0 && !dash(v) {
			h.Path = v
			h.Has |= HasRequest
		}
	case fArgs:
		if !dash(v) {
			h.Query = v
		}
	case fQueryQ:
		if len(v) > 0 && v[0] == '?' {
			h.Query = v[1:]
		}
	case fProtocol:
		if len(v) > 0 && !dash(v) {
			h.Protocol = v
		}
	case fStatus:
		if dash(v) {
			// Apache's %>s for a request that got no status (pfmt writes
			// "-" for a status <= 0): the request was still logged.
			return nil
		}
		if len(v) != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' {
			return bad(0, "expected a three-digit status")
		}
		h.Status = uint16(v[0]-'0')*100 + uint16(v[1]-'0')*10 + uint16(v[2]-'0')
		h.Has |= HasStatus
	case fBytes, fBytesTotal:
		if dash(v) { // Apache's %b for an empty body
			return nil
		}
		n, ok := uint63(v)
		if !ok {
			return bad(0, "expected a byte count")
		}
		if f == fBytesTotal && h.Has&HasBytes != 0 {
			return nil // the body's count is the one kept
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
	case fHostPort:
		v = hostOnly(v)
		if len(v) > 0 && !dash(v) {
			h.Host = v
			h.Has |= HasHost
		}
	case fForwardedFor:
		if len(v) > 0 && !dash(v) {
			h.ForwardedFor = v
		}
	case fRequestTime:
		if dash(v) {
			return nil
		}
		// $upstream_response_time style lists never reach here; a request
		// time is one number of seconds with a fraction.
		d, ok := seconds(v)
		if !ok {
			return bad(0, "expected seconds such as 0.123")
		}
		if p.flex && bytes.IndexByte(v, '.') < 0 {
			// nginx writes $request_time with its milliseconds, always: in
			// a named format an integer there is another field (ingress's
			// $request_length read as timed_combined's request time).
			return bad(0, "expected nginx's $request_time, seconds with milliseconds such as 0.123")
		}
		h.RequestTime = d
		h.Has |= HasRequestTime
	case fDurationS, fDurationMS, fDurationUS:
		if dash(v) {
			return nil
		}
		n, ok := uint63(v)
		if !ok {
			return bad(0, "expected a whole number")
		}
		unit := time.Second
		switch f {
		case fDurationMS:
			unit = time.Millisecond
		case fDurationUS:
			unit = time.Microsecond
		}
		if n > int64(1<<62)/int64(unit) {
			return bad(0, "duration out of range")
		}
		h.RequestTime = time.Duration(n) * unit
		h.Has |= HasRequestTime
	case fEpochS, fEpochMS, fEpochUS:
		n, ok := uint63(v)
		if !ok {
			return bad(0, "expected a whole number of seconds since 1970")
		}
		switch f {
		case fEpochS:
			p.tp.epoch, p.tp.epochNanos = n, 0
		case fEpochMS:
			p.tp.epoch, p.tp.epochNanos = n/1e3, int32(n%1e3)*1e6
		case fEpochUS:
			p.tp.epoch, p.tp.epochNanos = n/1e6, int32(n%1e6)*1e3
		}
		p.tp.hasEpoch = true
	case fFracMS, fFracUS:
		want := 3
		if f == fFracUS {
			want = 6
		}
		n, ok := digits(v, 0, want)
		if !ok || len(v) != want {
			return bad(0, fmt.Sprintf("expected %d digits of a second", want))
		}
		if f == fFracMS {
			n *= 1e6
		} else {
			n *= 1e3
		}
		p.tp.frac, p.tp.hasFrac = int32(n), true
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
