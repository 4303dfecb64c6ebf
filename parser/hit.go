// Package parser turns one access-log line into a Hit.
//
// Parsing is the collector's hot path (millions of lines per second per core), so
// it is written by hand: a Parser reuses its own scratch memory, a Hit's byte
// fields point into the line or into that scratch memory, and a valid line costs
// no allocation. A Hit is therefore only valid until the next call to Parse on the
// same Parser; copy what must outlive it.
package parser

import "time"

// Field presence bits, so that "absent" and "zero" stay distinct (a common-format
// line has no referer; a status of 0 never occurs in a real log).
const (
	HasTime uint32 = 1 << iota
	HasStatus
	HasBytes
	HasRequestTime
	HasHost
	HasReferer
	HasUserAgent
	HasRequest
)

// Hit is one parsed request. Byte slices alias the parsed line or the Parser's
// scratch buffer.
type Hit struct {
	// Unix is the request time in seconds since the epoch; Nanos the sub-second
	// part when the log has it ($msec, ISO 8601 with a fraction).
	Unix  int64
	Nanos int32
	// ZoneOffset is the logged time zone as seconds east of UTC.
	ZoneOffset int32

	RemoteAddr []byte
	RemoteUser []byte
	// Method, Path, Query and Protocol come from the request line ("GET /a?b HTTP/1.1"
	// gives GET, /a, b, HTTP/1.1). Path keeps its percent-encoding as logged. A
	// request line that is not "METHOD TARGET [PROTOCOL]" (a TLS handshake sent to a
	// plain-text port, garbage from a scanner) is still a request the server logged:
	// Method and Path stay empty and BadRequest holds the raw text.
	Method     []byte
	Path       []byte
	Query      []byte
	Protocol   []byte
	BadRequest []byte

	Status      uint16
	Bytes       int64
	Referer     []byte
	UserAgent   []byte
	Host        []byte
	RequestTime time.Duration
	// ForwardedFor is the X-Forwarded-For header as logged (nginx main's
	// "$http_x_forwarded_for", Apache's %{X-Forwarded-For}i): a list of
	// addresses, the client's first. Nil when the format has no such field or
	// it was "-".
	ForwardedFor []byte

	// Has is a set of Has* bits naming the fields the line carried.
	Has uint32
}

// Time returns the request time in the zone it was logged in.
func (h *Hit) Time() time.Time {
	t := time.Unix(h.Unix, int64(h.Nanos))
	if h.ZoneOffset == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", int(h.ZoneOffset)))
}

// reset clears h for the next line without giving up its identity.
func (h *Hit) reset() { *h = Hit{} }
