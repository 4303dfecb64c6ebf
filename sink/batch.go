package sink

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/hitcount/hitcount/parser"
)

// Batch is one insert: rows of a single source, a contiguous run of its lines,
// held column by column so the driver can append whole columns at once (the
// only way the design measured to keep up with clickhouse-client).
//
// Columns hold no pointers (string values are bytes plus end offsets, times
// are Unix seconds), so the garbage collector never scans a batch however many
// rows it holds; the string views the driver needs exist only during an
// insert. A Batch is reused: Reset keeps its memory.
type Batch struct {
	Site     string
	SourceID uint64
	// First and Last are the offsets of the first and last line in the batch;
	// Next is the offset just after the last line. Lines in between that did
	// not parse are in Rejects, not in the rows.
	First, Last, Next int64

	ts          []int64
	host        strCol
	method      strCol
	path        strCol
	query       strCol
	protocol    strCol
	status      []uint16
	bytes       []uint64
	referer     strCol
	userAgent   strCol
	client      strCol
	remoteUser  strCol
	requestTime []uint32
	offset      []uint64
	// visitor is the hash of each row's (client, user agent), from the
	// client as logged (visitor.go).
	visitor []uint64

	// Clients says how the batch's client addresses are stored and
	// hashed; Reset clears it, the shipper sets it for its source.
	Clients Clients
	scratch []byte // visitorHash's and AnonymizeClient's buffer

	Rejects []Reject
	// RejectedLines counts every rejected line of the batch; Rejects holds a
	// sample of them.
	RejectedLines int
	// unsampled are the offsets of the rejected lines past the sample, so
	// that the pieces of a split batch count their own (see Split).
	unsampled []int64
	// skipped are the offsets of the format's own directive lines (W3C's
	// "#Fields:"): read, neither a row nor a reject (see AddSkipped).
	skipped []int64
	// gen tells apart sends of the batch's lines that must not share an id:
	// a re-send the store dropped as a duplicate though it does not hold the
	// lines (Renew), a refused line sent again as a reject (Refuse).
	gen int
	// Lines counts every line of the batch, parsed or not.
	Lines int
	// ReadAt is when the batch's first line was read, for the age of the
	// oldest unshipped line.
	ReadAt time.Time
}

// strCol is a string column without per-value pointers.
type strCol struct {
	buf  []byte
	ends []uint32
}

func (c *strCol) add(v []byte) {
	c.buf = append(c.buf, v...)
	c.ends = append(c.ends, uint32(len(c.buf)))
}

func (c *strCol) reset() {
	c.buf = c.buf[:0]
	c.ends = c.ends[:0]
}

// views returns the values as strings aliasing the column's bytes, valid
// until the column is next written. The driver copies them into its block.
func (c *strCol) views() []string {
	out := make([]string, len(c.ends))
	start := uint32(0)
	for i, end := range c.ends {
		if end > start {
			out[i] = unsafe.String(&c.buf[start], int(end-start))
		}
		start = end
	}
	return out
}

// Reject is a line that did not parse, kept as a sample for operators.
type Reject struct {
	Offset int64
	Reason string
	Line   string
}

// NewBatch returns an empty batch with room for rows rows.
func NewBatch(rows int) *Batch {
	b := &Batch{
		ts: make([]int64, 0, rows), status: make([]uint16, 0, rows), bytes: make([]uint64, 0, rows),
		requestTime: make([]uint32, 0, rows), offset: make([]uint64, 0, rows), visitor: make([]uint64, 0, rows),
	}
	for _, c := range b.strCols() {
		c.ends = make([]uint32, 0, rows)
	}
	return b
}

func (b *Batch) strCols() []*strCol {
	return []*strCol{&b.host, &b.method, &b.path, &b.query, &b.protocol, &b.referer, &b.userAgent, &b.client, &b.remoteUser}
}

// Reset empties the batch for reuse, keeping its memory.
func (b *Batch) Reset(site string, source uint64) {
	b.Site, b.SourceID = site, source
	b.First, b.Last, b.Next = -1, -1, -1
	b.ts = b.ts[:0]
	for _, c := range b.strCols() {
		c.reset()
	}
	b.status = b.status[:0]
	b.bytes = b.bytes[:0]
	b.requestTime = b.requestTime[:0]
	b.offset = b.offset[:0]
	b.visitor = b.visitor[:0]
	b.Clients = Clients{}
	b.Rejects = b.Rejects[:0]
	b.RejectedLines = 0
	b.unsampled = b.unsampled[:0]
	b.skipped = b.skipped[:0]
	b.gen = 0
	b.Lines = 0
	b.ReadAt = time.Time{}
}

// Rows is the number of parsed rows.
func (b *Batch) Rows() int { return len(b.ts) }

// ID is the batch's deterministic identity: the same lines of the same source
// always make the same id. It is the insert's query_id (so a re-send while the
// first attempt still runs is refused by the server) and, where the server has
// it, its insert_deduplication_token. A batch renewed (see gen) has a -gN
// suffix: the same lines sent again under another token.
func (b *Batch) ID() string {
	if b.gen > 0 {
		return fmt.Sprintf("hitcount-%016x-%d-%d-g%d", b.SourceID, b.First, b.Last, b.gen)
	}
	return fmt.Sprintf("hitcount-%016x-%d-%d", b.SourceID, b.First, b.Last)
}

// mark records a line (parsed or not) at offset off ending at next.
func (b *Batch) mark(off, next int64) {
	if b.First < 0 {
		b.First = off
	}
	b.Last, b.Next = off, next
	b.Lines++
}

// The times a row may carry: DateTime is UInt32 seconds on both stores, but
// what a store holds is more than the column. Measured here:
//   - the 18.16 server stores any UInt32 in the column, but its date functions
//     (toDate, toYYYYMM: hits_1d, the partition key, text output) wrap to 1970
//     from 2106-02-07 00:00:00 in the server's zone on; a time it is sent
//     outside 0..2^32-1 wraps in the column itself;
//   - the embedded engine (26.x) holds up to 2106-02-07 06:28:15 and silently
//     clamps text times outside 1970..2106 to the bounds; bare numbers it
//     reads as Unix times only with exactly 10 digits (see AppendTSV).
//
// So a row must lie in [MinUnix, MaxUnix]: 1970-01-01 00:00:00 UTC (0, the
// column's zero, held as such by both) to 2106-02-05 23:59:59 UTC, a day
// short of where 18.16 wraps so that no server zone (up to UTC+24h) puts a
// row on the day it cannot hold. A line outside is a reject.
const (
	MinUnix int64 = 0
	MaxUnix int64 = 4294857599 // 2106-02-05T23:59:59Z
)

// Add appends a parsed line at offset off; next is the offset after it. A
// line whose time the stores cannot hold (see MaxUnix) becomes a reject
// instead, with the reason; its sample line is rebuilt from the parsed
// fields (AddLine keeps the raw line).
func (b *Batch) Add(h *parser.Hit, off, next int64) { b.AddLine(h, off, next, nil) }

// AddLine is Add with the raw line, kept as the reject sample when the line's
// time is out of range.
func (b *Batch) AddLine(h *parser.Hit, off, next int64, line []byte) {
	if h.Unix < MinUnix || h.Unix > MaxUnix {
		b.rejectTime(h, off, next, line)
		return
	}
	b.mark(off, next)
	b.ts = append(b.ts, h.Unix)
	b.host.add(h.Host)
	b.method.add(h.Method)
	b.path.add(h.Path)
	b.query.add(h.Query)
	b.protocol.add(h.Protocol)
	b.status = append(b.status, h.Status)
	b.bytes = append(b.bytes, uint64(max(h.Bytes, 0)))
	b.referer.add(h.Referer)
	b.userAgent.add(h.UserAgent)
	// The visitor from the address as logged, before it is truncated.
	b.visitor = append(b.visitor, visitorHash(b.Clients.Key, h.RemoteAddr, h.UserAgent, &b.scratch))
	if b.Clients.Anonymize {
		b.scratch = AnonymizeClient(b.scratch[:0], h.RemoteAddr)
		b.client.add(b.scratch)
	} else {
		b.client.add(h.RemoteAddr)
	}
	b.remoteUser.add(h.RemoteUser)
	b.requestTime = append(b.requestTime, uint32(min(h.RequestTime.Microseconds(), 1<<32-1)))
	b.offset = append(b.offset, uint64(off))
}

// RejectsTime is what the batch's rejects are stamped with (their inserted
// column): when its first line was read (ReadAt), in whole seconds. Every
// send of the batch, a retry after an unknown outcome included, so carries
// the same rows, which a store deduplicating by content (replicated tables
// without a token) needs to drop the re-send. A batch without ReadAt gets
// it here, once.
func (b *Batch) RejectsTime() time.Time {
	if b.ReadAt.IsZero() {
		b.ReadAt = time.Now()
	}
	return b.ReadAt.Truncate(time.Second)
}

// maxRejectSample bounds the rejects kept per batch: a wrong format rejects
// every line, and the rejects table is for diagnosis, not a second copy of the log.
const maxRejectSample = 100

// maxRejectLine bounds the bytes of a rejected line kept in its sample.
const maxRejectLine = 2048

// AddReject records a line that did not parse.
func (b *Batch) AddReject(off, next int64, reason string, line []byte) {
	b.mark(off, next)
	b.RejectedLines++
	if len(b.Rejects) < maxRejectSample {
		if len(line) > maxRejectLine {
			line = line[:maxRejectLine]
		}
		b.Rejects = append(b.Rejects, Reject{Offset: off, Reason: reason, Line: string(line)})
		return
	}
	b.unsampled = append(b.unsampled, off)
}

// rejectTime records a parsed line whose time the stores cannot hold. Off
// the hot path: only here are the reason and sample built.
//
//go:noinline
func (b *Batch) rejectTime(h *parser.Hit, off, next int64, line []byte) {
	if line == nil {
		line = describe(h)
	}
	b.AddReject(off, next, TimeRangeReason(h.Unix), line)
}

// TimeRangeReason is the reject reason of a line logged at unix, outside
// [MinUnix, MaxUnix].
func TimeRangeReason(unix int64) string {
	return fmt.Sprintf("time %s is outside what the store can hold (%s to %s)",
		time.Unix(unix, 0).UTC().Format(time.RFC3339), time.Unix(MinUnix, 0).UTC().Format(time.RFC3339), time.Unix(MaxUnix, 0).UTC().Format(time.RFC3339))
}

// describe rebuilds a line from a hit's fields when the raw line is not at
// hand: enough to find it in the log (the reject also has its offset).
func describe(h *parser.Hit) []byte {
	var d []byte
	d = append(d, h.RemoteAddr...)
	d = append(d, " ["...)
	d = h.Time().AppendFormat(d, time.RFC3339)
	d = append(d, "] \""...)
	if len(h.Method) > 0 || len(h.Path) > 0 {
		d = append(d, h.Method...)
		d = append(d, ' ')
		d = append(d, h.Path...)
		if len(h.Query) > 0 {
			d = append(d, '?')
			d = append(d, h.Query...)
		}
		if len(h.Protocol) > 0 {
			d = append(d, ' ')
			d = append(d, h.Protocol...)
		}
	} else {
		d = append(d, h.BadRequest...)
	}
	d = append(d, '"', ' ')
	d = strconv.AppendUint(d, uint64(h.Status), 10)
	if len(h.Host) > 0 {
		d = append(d, " host="...)
		d = append(d, h.Host...)
	}
	return d
}
