package parser

import "bytes"

// Squid's native access.log, squid.conf's predefined
//
//	logformat squid %ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt
//
// (https://wiki.squid-cache.org/Features/LogFormat):
//
//	1286536308.779    180 192.168.0.224 TCP_MISS/200 411 GET http://www.google.com/ - DIRECT/74.125.45.104 text/html
//
// The time is Unix seconds (when the transaction ended), the elapsed time is
// milliseconds padded to six columns. A proxy's URL is absolute: the Hit takes
// its host and path; a CONNECT's is "host:port". Status 000 means no reply was
// sent. With log_mime_hdrs Squid appends the headers in brackets; they are not
// read.

func parseSquid(p *Parser, line []byte, h *Hit) error {
	c := cursor{line: line}
	c.spaces()
	at := c.pos
	v, err := c.word("time")
	if err != nil {
		return err
	}
	if err := p.setTimeStored(fMsec, v, h); err != nil {
		return withColumn(err, "time", at)
	}
	c.spaces()
	at = c.pos
	if v, err = c.word("elapsed"); err != nil {
		return err
	}
	d, ok := millis(v)
	if !ok {
		return errAt("elapsed", at, "expected milliseconds")
	}
	h.RequestTime = d
	h.Has |= HasRequestTime
	if v, err = c.word("remotehost"); err != nil {
		return err
	}
	h.RemoteAddr = v
	at = c.pos
	if v, err = c.word("code/status"); err != nil {
		return err
	}
	slash := bytes.IndexByte(v, '/')
	if slash < 0 {
		return errAt("code/status", at, "expected a result code and status such as TCP_MISS/200")
	}
	if err := setStatus(v[slash+1:], h); err != nil {
		return withColumn(err, "code/status", at+slash+1)
	}
	at = c.pos
	if v, err = c.word("bytes"); err != nil {
		return err
	}
	if err := setBytes(v, h); err != nil {
		return withColumn(err, "bytes", at)
	}
	var method []byte
	if method, err = c.word("method"); err != nil {
		return err
	}
	var url []byte
	if url, err = c.word("url"); err != nil {
		return err
	}
	switch {
	case string(method) == "NONE" || !isMethod(method):
		// No request was parsed ("NONE error:invalid-request").
		h.BadRequest = url
	default:
		h.Method = method
		if host := urlHost(url); host != nil {
			h.Host = host
			h.Has |= HasHost
		} else if string(method) == "CONNECT" {
			h.Host = hostOnly(url)
			h.Has |= HasHost
		}
		setTarget(url, h)
	}
	if v, err = c.word("rfc931"); err != nil {
		return err
	}
	if !dash(v) {
		h.RemoteUser = v
	}
	if _, err = c.word("peerstatus/peerhost"); err != nil {
		return err
	}
	if _, err = c.word("type"); err != nil {
		return err
	}
	if c.pos < len(line) && line[c.pos] != '[' {
		return errAt("line", c.pos, "unexpected data after the content type")
	}
	return needRequest(h)
}
