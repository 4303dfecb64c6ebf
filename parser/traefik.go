package parser

// Traefik's access log in its default "common" format
// (https://doc.traefik.io/traefik/observability/access-logs/): combined plus
// three fields of its own and the duration,
//
//	<client> - <user> [<time>] "<method> <path> <protocol>" <status> <size> "<referer>" "<user agent>" <requests since start> "<router>" "<server URL>" <duration>ms
//
// Traefik writes "-" for a status or size it does not have (a request that
// never reached a server); the router and server URL have no place in a Hit.
// Traefik v2.1 wrote a missing router or server URL as a bare - (its
// default value, unquoted: traefik/traefik#6481, a /ping request served by
// Traefik itself); later versions write "-".

func parseTraefik(p *Parser, line []byte, h *Hit) error {
	c := cursor{line: line}
	v, err := c.word("remote_addr")
	if err != nil {
		return err
	}
	h.RemoteAddr = v
	if _, err := c.word("ident"); err != nil {
		return err
	}
	if v, err = c.word("remote_user"); err != nil {
		return err
	}
	if !dash(v) {
		h.RemoteUser = v
	}
	at := c.pos
	if v, err = c.bracketed("time"); err != nil {
		return err
	}
	if err := p.setTimeStored(fTime, v, h); err != nil {
		return withColumn(err, "time", at+1)
	}
	if v, err = c.quoted(p, "request"); err != nil {
		return err
	}
	splitRequest(v, h)
	at = c.pos
	if v, err = c.word("status"); err != nil {
		return err
	}
	if err := setStatus(v, h); err != nil {
		return withColumn(err, "status", at)
	}
	at = c.pos
	if v, err = c.word("size"); err != nil {
		return err
	}
	if err := setBytes(v, h); err != nil {
		return withColumn(err, "size", at)
	}
	if v, err = c.quoted(p, "referer"); err != nil {
		return err
	}
	_ = p.set(fReferer, v, h) // cannot fail for this field; "-" or empty is absent
	if v, err = c.quoted(p, "user_agent"); err != nil {
		return err
	}
	_ = p.set(fUserAgent, v, h) // cannot fail for this field; "-" or empty is absent
	at = c.pos
	if v, err = c.word("request_count"); err != nil {
		return err
	}
	if _, ok := uint63(v); !ok && !dash(v) {
		return errAt("request_count", at, "expected a count of requests")
	}
	if err = c.quotedOrDash(p, "router"); err != nil {
		return err
	}
	if err = c.quotedOrDash(p, "server_url"); err != nil {
		return err
	}
	at = c.pos
	if v, err = c.word("duration"); err != nil {
		return err
	}
	n := len(v)
	if n < 3 || v[n-2] != 'm' || v[n-1] != 's' {
		return errAt("duration", at, "expected milliseconds such as 12ms")
	}
	d, ok := millis(v[:n-2])
	if !ok {
		return errAt("duration", at, "expected milliseconds such as 12ms")
	}
	h.RequestTime = d
	h.Has |= HasRequestTime
	if err := c.end(); err != nil {
		return err
	}
	return needRequest(h)
}

// quotedOrDash skips a quoted field, or the bare "-" Traefik v2.1 wrote for
// a missing router or server URL.
func (c *cursor) quotedOrDash(p *Parser, name string) error {
	if c.pos < len(c.line) && c.line[c.pos] == '-' {
		return c.after(name, c.pos+1)
	}
	_, err := c.quoted(p, name)
	return err
}
