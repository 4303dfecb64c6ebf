package parser

import "bytes"

// HAProxy's HTTP log format ("option httplog", configuration manual section
// 8.2.3), as syslog wrote it to a file or as HAProxy writes it itself:
//
//	Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1
//	  10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"
//
// Whatever comes before the client (a syslog header, "haproxy[pid]:", nothing)
// is skipped. The accept date has no zone: it is read in Options.Location,
// HAProxy's local time. The last timer (Tt, or Ta since 1.8) is the request
// time in milliseconds. The captured header blocks are optional; what they
// hold depends on "capture request header" lines this parser cannot see, so
// they are not read. Fields after the request ("option httpslog") are ignored.

func parseHAProxy(p *Parser, line []byte, h *Hit) error {
	open := haproxyDate(line)
	if open < 0 {
		return errAt("accept_date", 0, "no [06/Feb/2009:12:14:14.655] date: not an HAProxy HTTP log line")
	}
	if open < 2 || line[open-1] != ' ' {
		return errAt("client", open, "no client address before the date")
	}
	start := bytes.LastIndexByte(line[:open-1], ' ') + 1
	h.RemoteAddr = stripPort(line[start:open-1], true)
	c := cursor{line: line, pos: open}
	v, err := c.bracketed("accept_date")
	if err != nil {
		return err
	}
	if err := p.haproxyTime(v, h); err != nil {
		return withColumn(err, "accept_date", open+1)
	}
	if _, err = c.word("frontend_name"); err != nil {
		return err
	}
	if _, err = c.word("backend_name/server_name"); err != nil {
		return err
	}
	at := c.pos
	if v, err = c.word("timers"); err != nil {
		return err
	}
	if err := haproxyTimers(v, h); err != nil {
		return withColumn(err, "timers", at)
	}
	at = c.pos
	if v, err = c.word("status_code"); err != nil {
		return err
	}
	if err := setStatus(v, h); err != nil {
		return withColumn(err, "status_code", at)
	}
	at = c.pos
	if v, err = c.word("bytes_read"); err != nil {
		return err
	}
	if err := setBytes(v, h); err != nil {
		return withColumn(err, "bytes_read", at)
	}
	for _, name := range [5]string{"captured_request_cookie", "captured_response_cookie", "termination_state", "actconn/feconn/beconn/srv_conn/retries", "srv_queue/backend_queue"} {
		if _, err = c.word(name); err != nil {
			return err
		}
	}
	for c.pos < len(line) && line[c.pos] == '{' {
		end := bytes.IndexByte(line[c.pos:], '}')
		if end < 0 {
			return errAt("captured_headers", c.pos, "no closing '}'")
		}
		if err := c.after("captured_headers", c.pos+end+1); err != nil {
			return err
		}
	}
	if c.pos >= len(line) || line[c.pos] != '"' {
		return errAt("http_request", c.pos, `expected '"' and the request`)
	}
	// HAProxy writes a quote inside the request as #22, so the next quote ends
	// it; none at all is a line cut at the syslog length limit (1024 bytes by
	// default) in the middle of a long URL: the request is what is left.
	req := line[c.pos+1:]
	if end := bytes.IndexByte(req, '"'); end >= 0 {
		req = req[:end]
	}
	if len(req) == 0 {
		return errAt("http_request", c.pos, `"": no request was received (a timeout or a closed connection)`)
	}
	splitRequest(req, h)
	return needRequest(h)
}

// haproxyDate finds the '[' of the date "[06/Feb/2009:12:14:14.655]", past any
// syslog header (whose "haproxy[14389]:" has a '[' too).
func haproxyDate(line []byte) int {
	off := 0
	for {
		i := bytes.IndexByte(line[off:], '[')
		if i < 0 {
			return -1
		}
		i += off
		if i+22 <= len(line) && line[i+3] == '/' && line[i+7] == '/' && line[i+12] == ':' {
			return i
		}
		off = i + 1
	}
}

// haproxyTime parses "06/Feb/2009:12:14:14.655" in Options.Location.
func (p *Parser) haproxyTime(v []byte, h *Hit) error {
	if p.cachedTime(tkHAProxy, v, h) {
		return nil
	}
	if len(v) < 20 || v[2] != '/' || v[6] != '/' || v[11] != ':' {
		return bad(0, "expected a date such as 06/Feb/2009:12:14:14.655")
	}
	d, ok1 := digits(v, 0, 2)
	mo := month(v[3:6])
	y, ok2 := digits(v, 7, 4)
	secs, ok3 := clock(v, 12)
	if !ok1 || !ok2 || !ok3 || !validDate(y, mo, d) {
		return bad(0, "expected a date such as 06/Feb/2009:12:14:14.655")
	}
	var nanos int32
	if len(v) > 20 {
		var end int
		nanos, end = fraction(v, 21)
		if v[20] != '.' || end == 21 || end != len(v) {
			return bad(20, "expected milliseconds after the seconds")
		}
	}
	p.setLocalTime(y, mo, d, secs, nanos, h)
	return p.storeTime(tkHAProxy, v, h)
}

// haproxyTimers checks "10/0/30/69/109" and keeps the last, the total time in
// milliseconds. An HTTP log line has five timers (four before 1.3); a TCP log
// line ("option tcplog") three, and no request.
func haproxyTimers(v []byte, h *Hit) error {
	n := bytes.Count(v, []byte{'/'}) + 1
	if n < 4 {
		return bad(0, "fewer than four timers: a TCP log line (option tcplog), not an HTTP one")
	}
	for _, ch := range v {
		if (ch < '0' || ch > '9') && ch != '/' && ch != '-' && ch != '+' {
			return bad(0, "expected timers such as 10/0/30/69/109")
		}
	}
	last := v[bytes.LastIndexByte(v, '/')+1:]
	if d, ok := millis(last); ok {
		h.RequestTime = d
		h.Has |= HasRequestTime
	}
	return nil
}
