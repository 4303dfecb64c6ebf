package parser

import (
	"bytes"
	"time"
)

// Amazon's load balancer and S3 access logs.
//
// alb (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-access-logs.html):
//
//	type time elb client:port target:port request_processing_time target_processing_time response_processing_time
//	elb_status_code target_status_code received_bytes sent_bytes "request" "user_agent" ssl_cipher ssl_protocol ...
//
// elb, the Classic Load Balancer
// (https://docs.aws.amazon.com/elasticloadbalancing/latest/classic/access-log-collection.html):
// the same without the type and with nothing after ssl_protocol. The request is
// "METHOD absolute-URL PROTOCOL": the Hit takes its host and path. The time is
// when the load balancer answered; the request time is the sum of the three
// processing times (-1 in any of them: the request reached no target, and the
// total is unknown). Fields ALB adds after the user agent (target group, trace,
// domain, certificate, rule, actions, classification) have no place in a Hit.

func parseALB(p *Parser, line []byte, h *Hit) error { return p.parseLoadBalancer(line, h, true) }
func parseELB(p *Parser, line []byte, h *Hit) error { return p.parseLoadBalancer(line, h, false) }

func (p *Parser) parseLoadBalancer(line []byte, h *Hit, alb bool) error {
	c := cursor{line: line}
	var v []byte
	var err error
	if alb {
		at := c.pos
		if v, err = c.word("type"); err != nil {
			return err
		}
		if len(v) > 0 && v[0] >= '0' && v[0] <= '9' {
			return errAt("type", at, "expected the request type (http, https, h2, grpcs, ws, wss): a Classic Load Balancer line? (format elb)")
		}
	}
	at := c.pos
	if v, err = c.word("time"); err != nil {
		return err
	}
	if err := p.setTimeStored(fTimeISO, v, h); err != nil {
		return withColumn(err, "time", at)
	}
	if _, err = c.word("elb"); err != nil {
		return err
	}
	if v, err = c.word("client:port"); err != nil {
		return err
	}
	h.RemoteAddr = stripPort(v, true)
	if _, err = c.word("target:port"); err != nil {
		return err
	}
	var total time.Duration
	known := true
	for _, name := range [3]string{"request_processing_time", "target_processing_time", "response_processing_time"} {
		at = c.pos
		if v, err = c.word(name); err != nil {
			return err
		}
		if string(v) == "-1" {
			known = false
			continue
		}
		d, ok := seconds(v)
		if !ok {
			return errAt(name, at, "expected seconds such as 0.001")
		}
		total += d
	}
	if known {
		h.RequestTime = total
		h.Has |= HasRequestTime
	}
	at = c.pos
	if v, err = c.word("elb_status_code"); err != nil {
		return err
	}
	if err := setStatus(v, h); err != nil {
		return withColumn(err, "elb_status_code", at)
	}
	if _, err = c.word("target_status_code"); err != nil {
		return err
	}
	if _, err = c.word("received_bytes"); err != nil {
		return err
	}
	at = c.pos
	if v, err = c.word("sent_bytes"); err != nil {
		return err
	}
	if err := setBytes(v, h); err != nil {
		return withColumn(err, "sent_bytes", at)
	}
	at = c.pos
	if v, err = c.quoted(p, "request"); err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimRight(v, " "), []byte("- - -")) {
		// A TCP or SSL listener's connection: nothing of HTTP was seen.
		return errAt("request", at, `"- - - ": a TCP listener's connection, not an HTTP request`)
	}
	if len(v) > 2 && v[0] == '-' && v[1] == ' ' {
		// ALB's entry for a request it could not parse:
		// "- http://host:80- -". Logged, answered (400), not a page.
		h.BadRequest = v
	} else {
		splitRequest(v, h)
		if h.Method != nil {
			if host := urlHost(v[len(h.Method)+1:]); host != nil {
				h.Host = host
				h.Has |= HasHost
			}
		}
	}
	if !alb && c.pos >= len(line) {
		// Classic entries before May 2015 end after the request: no user
		// agent, no TLS fields.
		return needRequest(h)
	}
	if v, err = c.quoted(p, "user_agent"); err != nil {
		return err
	}
	_ = p.set(fUserAgent, v, h) // cannot fail for this field; "-" or empty is absent
	// ssl_cipher, ssl_protocol and, for ALB, the fields it keeps adding: not
	// read, so that a line with next year's fields still parses.
	return needRequest(h)
}

// s3, the S3 server access log (https://docs.aws.amazon.com/AmazonS3/latest/userguide/LogFormat.html):
//
//	bucket_owner bucket [time] remote_ip requester request_id operation key "request_uri" status error_code
//	bytes_sent object_size total_time turn_around_time "referer" "user_agent" version_id host_id
//	signature_version cipher_suite authentication_type host_header tls_version ...
//
// "-" in bytes_sent is zero, as documented. A record with "-" as its
// request_uri (an operation S3 did itself, such as a lifecycle expiry) has no
// request and is a reject. host_header is the Hit's host; the bucket is not
// kept. Older records end after user_agent or version_id;
// fields after host_header are not read.
func parseS3(p *Parser, line []byte, h *Hit) error {
	c := cursor{line: line}
	var v []byte
	var err error
	if _, err = c.word("bucket_owner"); err != nil {
		return err
	}
	if _, err = c.word("bucket"); err != nil {
		return err
	}
	at := c.pos
	if v, err = c.bracketed("time"); err != nil {
		return err
	}
	if err := p.setTimeStored(fTime, v, h); err != nil {
		return withColumn(err, "time", at+1)
	}
	if v, err = c.word("remote_ip"); err != nil {
		return err
	}
	if !dash(v) {
		h.RemoteAddr = v
	}
	if v, err = c.word("requester"); err != nil {
		return err
	}
	if !dash(v) {
		h.RemoteUser = v
	}
	for _, name := range [3]string{"request_id", "operation", "key"} {
		if _, err = c.word(name); err != nil {
			return err
		}
	}
	if c.pos < len(line) && line[c.pos] == '-' {
		return errAt("request_uri", c.pos, `"-": an operation S3 did itself (such as a lifecycle expiry), not a request`)
	}
	if v, err = c.quoted(p, "request_uri"); err != nil {
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
	if _, err = c.word("error_code"); err != nil {
		return err
	}
	at = c.pos
	if v, err = c.word("bytes_sent"); err != nil {
		return err
	}
	if dash(v) {
		h.Has |= HasBytes // documented: "-" if zero
	} else if err := setBytes(v, h); err != nil {
		return withColumn(err, "bytes_sent", at)
	}
	if _, err = c.word("object_size"); err != nil {
		return err
	}
	at = c.pos
	if v, err = c.word("total_time"); err != nil {
		return err
	}
	if !dash(v) {
		d, ok := millis(v)
		if !ok {
			return errAt("total_time", at, "expected milliseconds")
		}
		h.RequestTime = d
		h.Has |= HasRequestTime
	}
	if _, err = c.word("turn_around_time"); err != nil {
		return err
	}
	if v, err = c.quoted(p, "referer"); err != nil {
		return err
	}
	_ = p.set(fReferer, v, h) // cannot fail for this field; "-" or empty is absent
	if v, err = c.quoted(p, "user_agent"); err != nil {
		return err
	}
	_ = p.set(fUserAgent, v, h) // cannot fail for this field; "-" or empty is absent
	// Optional on older records: version_id host_id signature_version
	// cipher_suite authentication_type host_header.
	for _, name := range [6]string{"version_id", "host_id", "signature_version", "cipher_suite", "authentication_type", "host_header"} {
		if c.pos >= len(line) {
			break
		}
		if v, err = c.word(name); err != nil {
			return err
		}
		if name == "host_header" && !dash(v) {
			h.Host = v
			h.Has |= HasHost
		}
	}
	return needRequest(h)
}
