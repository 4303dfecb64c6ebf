package parser

import (
	"bytes"
	"time"
)

// Caddy v2's JSON access log (https://caddyserver.com/docs/logging), one object
// per line with the request nested:
//
//	{"level":"info","ts":1646861401.5241024,"logger":"http.log.access","msg":"handled request",
//	 "request":{"remote_ip":"127.0.0.1","remote_port":"41342","client_ip":"127.0.0.1","proto":"HTTP/2.0",
//	 "method":"GET","host":"localhost","uri":"/","headers":{"User-Agent":["curl/7.82.0"]}},
//	 "bytes_read":0,"user_id":"","duration":0.000929675,"size":10900,"status":200}
//
// ts is a float of Unix seconds by default, or what the encoder's time_format
// makes it (milliseconds, nanoseconds, RFC 3339, ISO 8601, "wall" local time,
// common_log); duration is seconds by default, integer nanoseconds or a Go
// duration string. request.client_ip (the client behind trusted proxies) wins
// over remote_ip; versions before 2.5 wrote remote_addr with the port.

// caddyFound collects the request's addresses while the object is read, to
// choose between them at the end.
type caddyFound struct {
	client, remote, remoteAddr []byte
	// logger and msg tell the access logger's lines from the other lines
	// of Caddy's log that carry a request (reverse_proxy's "upstream
	// roundtrip", rewrite's "rewrote request" at debug level): those would
	// count the request twice. hasLogger/hasMsg: the key was there.
	logger, msg       []byte
	hasLogger, hasMsg bool
}

func parseCaddy(p *Parser, line []byte, h *Hit) error {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errAt("json", i, "expected '{': a Caddy access log line is a JSON object")
	}
	var f caddyFound
	end, err := p.caddyObject(line, i, 0, h, &f)
	if err != nil {
		return err
	}
	if j := skipWS(line, end); j != len(line) {
		return errAt("json", j, "unexpected data after the object")
	}
	switch {
	case len(f.client) > 0:
		h.RemoteAddr = f.client
	case len(f.remote) > 0:
		h.RemoteAddr = f.remote
	case len(f.remoteAddr) > 0:
		h.RemoteAddr = stripPort(f.remoteAddr, false)
	}
	if h.Has&HasTime == 0 {
		return errAt("ts", 0, "no ts key: not a Caddy access log entry")
	}
	if h.Has&HasRequest == 0 {
		return errAt("request", 0, "no request.uri: not a Caddy access log entry (a runtime log line?)")
	}
	// An access line is the http.log.access logger's (named loggers are
	// http.log.access.NAME) or says "handled request"; an encoder with
	// both keys turned off (logger_key/message_key) leaves nothing to tell
	// by, so such a line is taken as an access line.
	switch {
	case f.hasLogger && bytes.HasPrefix(f.logger, []byte("http.log.access")):
	case f.hasMsg && string(f.msg) == "handled request":
	case !f.hasLogger && !f.hasMsg:
	default:
		return errAt("logger", 0, "not the access logger's line (logger http.log.access, msg \"handled request\"): a debug line about a request is not a hit")
	}
	return nil
}

// Levels of the objects caddyObject reads.
const (
	caddyTop = iota
	caddyRequest
	caddyHeaders
)

// caddyObject reads the object at line[i] == '{' and returns the index after
// it. Keys it does not know are skipped, whatever their values.
func (p *Parser) caddyObject(line []byte, i, level int, h *Hit, f *caddyFound) (int, error) {
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return 0, errAt("json", i, "expected a key")
		}
		end := closingQuote(line[i+1:])
		if end < 0 {
			return 0, errAt("json", i, "unterminated key")
		}
		key := line[i+1 : i+1+end]
		i = skipWS(line, i+2+end)
		if i >= len(line) || line[i] != ':' {
			return 0, errAt("json", i, "expected ':'")
		}
		i = skipWS(line, i+1)
		if i >= len(line) {
			return 0, errAt("json", i, "missing value")
		}
		var err error
		switch level {
		case caddyTop:
			i, err = p.caddyTopValue(line, i, key, h, f)
		case caddyRequest:
			i, err = p.caddyRequestValue(line, i, key, h, f)
		default:
			i, err = p.caddyHeader(line, i, key, h)
		}
		if err != nil {
			return 0, err
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return 0, errAt("json", i, "unterminated object")
		}
		if line[i] == '}' {
			return i + 1, nil
		}
		if line[i] != ',' {
			return 0, errAt("json", i, "expected ',' or '}'")
		}
		i = skipWS(line, i+1)
	}
}

func (p *Parser) caddyTopValue(line []byte, i int, key []byte, h *Hit, f *caddyFound) (int, error) {
	switch string(key) {
	case "request":
		if line[i] != '{' {
			return 0, errAt("request", i, "expected an object")
		}
		return p.caddyObject(line, i, caddyRequest, h, f)
	case "ts":
		v, str, next, err := p.jsonValue(line, i)
		if err != nil {
			return 0, err
		}
		if err := p.caddyTime(v, str, h); err != nil {
			return 0, withColumn(err, "ts", i)
		}
		return next, nil
	case "status":
		v, _, next, err := p.jsonValue(line, i)
		if err != nil {
			return 0, err
		}
		// 0: the client went away before a response was written.
		if err := setStatus(v, h); err != nil {
			return 0, withColumn(err, "status", i)
		}
		return next, nil
	case "size":
		v, _, next, err := p.jsonValue(line, i)
		if err != nil {
			return 0, err
		}
		if err := setBytes(v, h); err != nil {
			return 0, withColumn(err, "size", i)
		}
		return next, nil
	case "duration":
		v, str, next, err := p.jsonValue(line, i)
		if err != nil {
			return 0, err
		}
		d, ok := caddyDuration(v, str)
		if !ok {
			return 0, errAt("duration", i, "expected seconds, nanoseconds or a duration such as 6.31ms")
		}
		h.RequestTime = d
		h.Has |= HasRequestTime
		return next, nil
	case "logger", "msg":
		v, _, next, err := p.jsonValue(line, i)
		if err != nil {
			return 0, err
		}
		if key[0] == 'l' {
			f.logger, f.hasLogger = v, true
		} else {
			f.msg, f.hasMsg = v, true
		}
		return next, nil
	case "user_id":
		v, _, next, err := p.jsonValue(line, i)
		if err == nil && len(v) > 0 {
			h.RemoteUser = v
		}
		return next, err
	}
	return skipJSONValue(line, i)
}

func (p *Parser) caddyRequestValue(line []byte, i int, key []byte, h *Hit, f *caddyFound) (int, error) {
	if string(key) == "headers" {
		if line[i] != '{' {
			return 0, errAt("request.headers", i, "expected an object")
		}
		return p.caddyObject(line, i, caddyHeaders, h, nil)
	}
	var dst *[]byte
	switch string(key) {
	case "client_ip":
		dst = &f.client
	case "remote_ip":
		dst = &f.remote
	case "remote_addr":
		dst = &f.remoteAddr
	case "method", "host", "uri", "proto":
	default:
		return skipJSONValue(line, i)
	}
	v, str, next, err := p.jsonValue(line, i)
	if err != nil {
		return 0, err
	}
	if !str {
		return 0, errAt("request."+string(key), i, "expected a string")
	}
	if dst != nil {
		*dst = v
		return next, nil
	}
	switch string(key) {
	case "method":
		h.Method = v
	case "host":
		if len(v) > 0 {
			h.Host = hostOnly(v)
			h.Has |= HasHost
		}
	case "uri":
		setTarget(v, h)
	case "proto":
		h.Protocol = v
	}
	return next, nil
}

// caddyHeader reads one request header, an array of its values, keeping the
// first value of the ones a hit has a place for.
func (p *Parser) caddyHeader(line []byte, i int, key []byte, h *Hit) (int, error) {
	var dst *[]byte
	var bit uint32
	switch {
	case bytes.EqualFold(key, []byte("User-Agent")):
		dst, bit = &h.UserAgent, HasUserAgent
	case bytes.EqualFold(key, []byte("Referer")):
		dst, bit = &h.Referer, HasReferer
	case bytes.EqualFold(key, []byte("X-Forwarded-For")):
		dst = &h.ForwardedFor
	default:
		return skipJSONValue(line, i)
	}
	if line[i] != '[' {
		return 0, errAt("request.headers."+string(key), i, "expected an array")
	}
	j := skipWS(line, i+1)
	if j < len(line) && line[j] == '"' {
		v, _, err := p.jsonString(line, j)
		if err != nil {
			return 0, err
		}
		if len(v) > 0 {
			*dst = v
			h.Has |= bit
		}
	}
	return skipNested(line, i)
}

// jsonValue reads a string or scalar value at line[i]: a string decoded (str
// is true), a number, true, false or null as written; objects and arrays are
// errors here, where a scalar belongs.
func (p *Parser) jsonValue(line []byte, i int) (v []byte, str bool, next int, err error) {
	switch line[i] {
	case '"':
		v, next, err = p.jsonString(line, i)
		return v, true, next, err
	case '{', '[':
		return nil, false, 0, errAt("json", i, "expected a string or a number")
	}
	j := i
	for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ']' && line[j] != ' ' && line[j] != '\t' {
		j++
	}
	v = line[i:j]
	if !jsonScalar(v) {
		return nil, false, 0, errAt("json", i, "not a JSON value")
	}
	if string(v) == "null" {
		v = nil
	}
	return v, false, j, nil
}

// skipJSONValue returns the index after the value at line[i].
func skipJSONValue(line []byte, i int) (int, error) {
	switch line[i] {
	case '{', '[':
		return skipNested(line, i)
	case '"':
		end := closingQuote(line[i+1:])
		if end < 0 {
			return 0, errAt("json", i, "unterminated string")
		}
		return i + end + 2, nil
	}
	j := i
	for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ']' && line[j] != ' ' && line[j] != '\t' {
		j++
	}
	if !jsonScalar(line[i:j]) {
		return 0, errAt("json", i, "not a JSON value")
	}
	return j, nil
}

// caddyTime parses ts in any of the encoder's time_format forms.
func (p *Parser) caddyTime(v []byte, str bool, h *Hit) error {
	if len(v) == 0 {
		return bad(0, "empty time")
	}
	kind := tkCaddy
	if str {
		kind = tkCaddyStr
	}
	if p.cachedTime(kind, v, h) {
		return nil
	}
	ok := false
	if !str || v[0] >= '0' && v[0] <= '9' && len(v) >= 5 && v[4] != '-' && v[4] != '/' && v[2] != '/' {
		// unix_seconds_float (the default), unix_milli_float, unix_nano:
		// told apart by the number of digits before the point.
		n := 0
		for n < len(v) && v[n] >= '0' && v[n] <= '9' {
			n++
		}
		switch {
		case n <= 10:
			ok = epoch(v, 0, h)
		case n <= 13:
			ok = epoch(v, 3, h)
		case n <= 16:
			ok = epoch(v, 6, h)
		default:
			ok = epoch(v, 9, h)
		}
	} else {
		ok = parseISO8601(v, h) || parseISOShortZone(v, h) || parseTimeLocal(v, h) || p.parseWall(v, h)
	}
	if !ok {
		return bad(0, "not a time Caddy writes (Unix seconds, RFC 3339, ISO 8601, wall, common_log)")
	}
	return p.storeTime(kind, v, h)
}

// parseISOShortZone parses Caddy's iso8601 time_format,
// "2006-01-02T15:04:05.000Z0700": a zone without a colon.
func parseISOShortZone(b []byte, h *Hit) bool {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != ' ') {
		return false
	}
	y, ok1 := digits(b, 0, 4)
	m, ok2 := digits(b, 5, 2)
	d, ok3 := digits(b, 8, 2)
	secs, ok4 := clock(b, 11)
	if !ok1 || !ok2 || !ok3 || !ok4 || !validDate(y, m, d) {
		return false
	}
	i := 19
	var nanos int32
	if b[i] == '.' {
		var end int
		nanos, end = fraction(b, i+1)
		if end == i+1 {
			return false
		}
		i = end
	}
	off, n, ok := zone(b, i, false)
	if !ok || i+n != len(b) {
		return false
	}
	h.Unix = daysFromCivil(y, m, d)*86400 + secs - int64(off)
	h.Nanos, h.ZoneOffset = nanos, off
	return true
}

// parseWall parses Caddy's wall time formats, "2006/01/02 15:04:05" with an
// optional fraction, in the Parser's Options.Location (Caddy writes UTC unless
// time_local is set).
func (p *Parser) parseWall(b []byte, h *Hit) bool {
	if len(b) < 19 || b[4] != '/' || b[7] != '/' || b[10] != ' ' {
		return false
	}
	y, ok1 := digits(b, 0, 4)
	m, ok2 := digits(b, 5, 2)
	d, ok3 := digits(b, 8, 2)
	secs, ok4 := clock(b, 11)
	if !ok1 || !ok2 || !ok3 || !ok4 || !validDate(y, m, d) {
		return false
	}
	var nanos int32
	if len(b) > 19 {
		var end int
		nanos, end = fraction(b, 20)
		if b[19] != '.' || end == 20 || end != len(b) {
			return false
		}
	}
	p.setLocalTime(y, m, d, secs, nanos, h)
	return true
}

// caddyDuration parses duration as the encoder's duration_format writes it:
// seconds with a fraction (the default), whole nanoseconds, or a Go duration
// string ("6.31ms", "1m32.05s").
func caddyDuration(v []byte, str bool) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	if str {
		return goDuration(v)
	}
	if bytes.IndexByte(v, '.') >= 0 || bytes.IndexByte(v, 'e') >= 0 {
		return seconds(v)
	}
	n, ok := uint63(v)
	return time.Duration(n), ok
}

// goDuration parses what time.Duration.String writes, without the allocation
// of converting to a string for time.ParseDuration.
func goDuration(v []byte) (time.Duration, bool) {
	var total float64
	i := 0
	for i < len(v) {
		start := i
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			i++
		}
		if i == start {
			return 0, false
		}
		num, ok := decimal(v[start:i])
		if !ok {
			return 0, false
		}
		u := i
		for i < len(v) && (v[i] < '0' || v[i] > '9') && v[i] != '.' {
			i++
		}
		var unit float64
		switch string(v[u:i]) {
		case "ns":
			unit = 1
		case "us", "µs", "μs":
			unit = 1e3
		case "ms":
			unit = 1e6
		case "s":
			unit = 1e9
		case "m":
			unit = 60e9
		case "h":
			unit = 3600e9
		default:
			return 0, false
		}
		total += num * unit
	}
	if total > 1<<62 {
		return 0, false
	}
	return time.Duration(total), true
}

// decimal parses "12.5" into a float64.
func decimal(v []byte) (float64, bool) {
	var n, scale float64 = 0, 0
	seen := false
	for _, c := range v {
		switch {
		case c == '.':
			if scale != 0 {
				return 0, false
			}
			scale = 1
		case c >= '0' && c <= '9':
			n = n*10 + float64(c-'0')
			if scale != 0 {
				scale *= 10
			}
			seen = true
		default:
			return 0, false
		}
	}
	if !seen {
		return 0, false
	}
	if scale > 1 {
		n /= scale
	}
	return n, true
}
