package parser

import (
	"bytes"
	"unicode/utf8"
)

// JSON lines, as nginx writes them with log_format ... escape=json. The keys are
// the operator's choice, so the usual names map to fields (jsonKeys) and any
// other key is skipped. A hand-written scanner rather than encoding/json: it
// costs no allocation per line, and nginx's escape=json passes bytes >= 0x80
// through unchecked, so values may be invalid UTF-8, which it keeps as is.

var jsonKeys = map[string]field{
	"time": fTime, "time_local": fTime, "time_iso8601": fTime, "timestamp": fTime,
	"@timestamp": fTime, "ts": fTime, "msec": fMsec,
	"remote_addr": fRemoteAddr, "client": fRemoteAddr, "client_ip": fRemoteAddr,
	"clientip": fRemoteAddr, "ip": fRemoteAddr, "remote_ip": fRemoteAddr,
	"remote_user": fRemoteUser, "user": fRemoteUser,
	"request": fRequest,
	"method":  fMethod, "request_method": fMethod,
	"request_uri": fRequestURI, "url": fRequestURI,
	"uri": fURI, "path": fURI, "document_uri": fURI,
	"args": fArgs, "query_string": fArgs, "query": fArgs,
	"protocol": fProtocol, "server_protocol": fProtocol,
	"status":          fStatus,
	"body_bytes_sent": fBytes, "bytes_sent": fBytes, "bytes": fBytes, "size": fBytes,
	"http_referer": fReferer, "http_referrer": fReferer, "referer": fReferer, "referrer": fReferer,
	"http_user_agent": fUserAgent, "user_agent": fUserAgent, "agent": fUserAgent, "ua": fUserAgent,
	"host": fHost, "http_host": fHost, "server_name": fHost, "vhost": fHost,
	"request_time": fRequestTime,
}

// JSONKeys lists the keys a json-format line may use for each field, for docs
// and -check-log output.
func JSONKeys() map[string]string {
	out := make(map[string]string, len(jsonKeys))
	for k, f := range jsonKeys {
		out[k] = fieldNames[f]
	}
	return out
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func (p *Parser) parseJSON(line []byte, h *Hit) error {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errAt("json", i, "expected '{'")
	}
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return errAt("json", i, "empty object")
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return errAt("json", i, "expected a key")
		}
		keyStart := i + 1
		end := closingQuote(line[keyStart:])
		if end < 0 {
			return errAt("json", i, "unterminated key")
		}
		key := line[keyStart : keyStart+end]
		i = skipWS(line, keyStart+end+1)
		if i >= len(line) || line[i] != ':' {
			return errAt("json", i, "expected ':'")
		}
		i = skipWS(line, i+1)
		f := jsonKeys[string(key)] // map lookup with a []byte->string key does not allocate
		name := fieldNames[f]
		if f == fIgnore {
			name = "json"
		}
		valStart := i
		var val []byte
		var err error
		switch {
		case i >= len(line):
			return errAt(name, i, "missing value")
		case line[i] == '"':
			val, i, err = p.jsonString(line, i)
			if err != nil {
				return err
			}
			if len(val) == 0 {
				// nginx writes "" for a variable with no value, e.g. an absent
				// referer; that is absence, not a malformed field.
				break
			}
			if err := p.set(f, val, h); err != nil {
				return withColumn(err, name, valStart+1)
			}
		case line[i] == '{' || line[i] == '[':
			i, err = skipNested(line, i)
			if err != nil {
				return err
			}
		default:
			j := i
			for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ' ' && line[j] != '\t' {
				j++
			}
			val = line[i:j]
			if !jsonScalar(val) {
				return errAt(name, i, "not a JSON value")
			}
			i = j
			if f != fIgnore && !bytes.Equal(val, []byte("null")) {
				if err := p.set(f, val, h); err != nil {
					return withColumn(err, name, valStart)
				}
			}
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return errAt("json", i, "unterminated object")
		}
		if line[i] == '}' {
			if j := skipWS(line, i+1); j != len(line) {
				return errAt("json", j, "unexpected data after the object")
			}
			if h.Has&HasTime == 0 {
				return errAt("time", 0, "no time key (time, time_local, time_iso8601, timestamp, @timestamp, ts or msec)")
			}
			// A time alone is any structured application log (slog, zap,
			// Docker's json-file wrapper): without a request it is not a
			// hit (issue 17).
			if h.Has&HasRequest == 0 && h.BadRequest == nil {
				return errAt("request", 0, "no request key (request, request_uri, url, uri, path or document_uri): not an access-log line")
			}
			return nil
		}
		if line[i] != ',' {
			return errAt("json", i, "expected ',' or '}'")
		}
		i = skipWS(line, i+1)
	}
}

// jsonScalar accepts the unquoted JSON values: numbers, true, false, null.
func jsonScalar(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch string(v) {
	case "true", "false", "null":
		return true
	}
	for k, c := range v {
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && !(c == '-' && (k == 0 || v[k-1] == 'e' || v[k-1] == 'E')) {
			return false
		}
	}
	return true
}

// jsonString decodes the string starting at line[i] == '"' and returns it with
// the index after its closing quote. Without escapes it aliases the line.
func (p *Parser) jsonString(line []byte, i int) ([]byte, int, error) {
	start := i + 1
	end := closingQuote(line[start:])
	if end < 0 {
		return nil, 0, errAt("json", i, "unterminated string")
	}
	raw := line[start : start+end]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, start + end + 1, nil
	}
	n := len(p.scratch)
	out, bad := unescapeJSON(p.scratch, raw)
	if bad >= 0 {
		return nil, 0, errAt("json", start+bad, "bad escape")
	}
	p.scratch = out
	return out[n:], start + end + 1, nil
}

// unescapeJSON appends the decoded raw string to dst (which has room: a JSON
// escape never decodes to more bytes than it takes). It returns the offset of a
// bad escape, or -1.
func unescapeJSON(dst, raw []byte) ([]byte, int) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i+1 >= len(raw) {
			return dst, i
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, i+1)
			if !ok {
				return dst, i - 1
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo, ok := hex4(raw, i+3); ok && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r) // a lone surrogate becomes U+FFFD
		default:
			return dst, i - 1
		}
	}
	return dst, -1
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		v, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// skipNested skips an object or array value starting at line[i], strings and
// all, and returns the index after it.
func skipNested(line []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(line); j++ {
		switch line[j] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		case '"':
			end := closingQuote(line[j+1:])
			if end < 0 {
				return 0, errAt("json", j, "unterminated string")
			}
			j += end + 1
		}
	}
	return 0, errAt("json", i, "unterminated nested value")
}
