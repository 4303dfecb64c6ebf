package sink

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/hitcount/hitcount/parser"
)

// Batch is one insert: rows of a single source, a contiguous run of its lines,
// held column by column so the driver can append whole columns at once (the
// only way the design measured to keep up with clickhouse-client).
//
// String values are copied into one arena per batch and exposed as strings
// that alias it, instead of one allocation per value: at hundreds of thousands
// of rows a second the per-value allocations would dominate. The arena is only
// rewritten by Reset, after the driver has copied the columns into its block.
type Batch struct {
	Site     string
	SourceID uint64
	// First and Last are the offsets of the first and last line in the batch;
	// Next is the offset just after the last line. Lines in between that did
	// not parse are in Rejects, not in the rows.
	First, Last, Next int64

	arena []byte

	ts          []time.Time
	host        []string
	method      []string
	path        []string
	query       []string
	protocol    []string
	status      []uint16
	bytes       []uint64
	referer     []string
	userAgent   []string
	client      []string
	remoteUser  []string
	requestTime []uint32
	offset      []uint64

	Rejects []Reject
	// RejectedLines counts every rejected line of the batch; Rejects holds a
	// sample of them.
	RejectedLines int
	// Lines counts every line of the batch, parsed or not.
	Lines int
	// ReadAt is when the batch's first line was read, for the age of the
	// oldest unshipped line.
	ReadAt time.Time
}

// Reject is a line that did not parse, kept as a sample for operators.
type Reject struct {
	Offset int64
	Reason string
	Line   string
}

// NewBatch returns an empty batch with room for rows rows.
func NewBatch(rows int) *Batch {
	b := &Batch{}
	b.grow(rows)
	return b
}

func (b *Batch) grow(n int) {
	b.arena = make([]byte, 0, n*160)
	b.ts = make([]time.Time, 0, n)
	b.host = make([]string, 0, n)
	b.method = make([]string, 0, n)
	b.path = make([]string, 0, n)
	b.query = make([]string, 0, n)
	b.protocol = make([]string, 0, n)
	b.status = make([]uint16, 0, n)
	b.bytes = make([]uint64, 0, n)
	b.referer = make([]string, 0, n)
	b.userAgent = make([]string, 0, n)
	b.client = make([]string, 0, n)
	b.remoteUser = make([]string, 0, n)
	b.requestTime = make([]uint32, 0, n)
	b.offset = make([]uint64, 0, n)
}

// Reset empties the batch for reuse, keeping its memory.
func (b *Batch) Reset(site string, source uint64) {
	b.Site, b.SourceID = site, source
	b.First, b.Last, b.Next = -1, -1, -1
	b.arena = b.arena[:0]
	b.ts = b.ts[:0]
	b.host = b.host[:0]
	b.method = b.method[:0]
	b.path = b.path[:0]
	b.query = b.query[:0]
	b.protocol = b.protocol[:0]
	b.status = b.status[:0]
	b.bytes = b.bytes[:0]
	b.referer = b.referer[:0]
	b.userAgent = b.userAgent[:0]
	b.client = b.client[:0]
	b.remoteUser = b.remoteUser[:0]
	b.requestTime = b.requestTime[:0]
	b.offset = b.offset[:0]
	b.Rejects = b.Rejects[:0]
	b.RejectedLines = 0
	b.Lines = 0
	b.ReadAt = time.Time{}
}

// Rows is the number of parsed rows.
func (b *Batch) Rows() int { return len(b.ts) }

// ID is the batch's deterministic identity: the same lines of the same source
// always make the same id. It is the insert's query_id (so a re-send while the
// first attempt still runs is refused by the server) and, where the server has
// it, its insert_deduplication_token.
func (b *Batch) ID() string {
	return fmt.Sprintf("hitcount-%016x-%d-%d", b.SourceID, b.First, b.Last)
}

// str copies v into the arena and returns a string aliasing the copy. When the
// arena is full a new one is started; strings into the old one keep it alive,
// so none is ever overwritten while referenced.
func (b *Batch) str(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if len(b.arena)+len(v) > cap(b.arena) {
		b.arena = make([]byte, 0, max(2*cap(b.arena), len(v)))
	}
	start := len(b.arena)
	b.arena = append(b.arena, v...)
	return unsafe.String(&b.arena[start], len(v))
}

// mark records a line (parsed or not) at offset off ending at next.
func (b *Batch) mark(off, next int64) {
	if b.First < 0 {
		b.First = off
	}
	b.Last, b.Next = off, next
	b.Lines++
}

// Add appends a parsed line at offset off; next is the offset after it.
func (b *Batch) Add(h *parser.Hit, off, next int64) {
	b.mark(off, next)
	b.ts = append(b.ts, time.Unix(h.Unix, 0))
	b.host = append(b.host, b.str(h.Host))
	b.method = append(b.method, b.str(h.Method))
	b.path = append(b.path, b.str(h.Path))
	b.query = append(b.query, b.str(h.Query))
	b.protocol = append(b.protocol, b.str(h.Protocol))
	b.status = append(b.status, h.Status)
	b.bytes = append(b.bytes, uint64(max(h.Bytes, 0)))
	b.referer = append(b.referer, b.str(h.Referer))
	b.userAgent = append(b.userAgent, b.str(h.UserAgent))
	b.client = append(b.client, b.str(h.RemoteAddr))
	b.remoteUser = append(b.remoteUser, b.str(h.RemoteUser))
	b.requestTime = append(b.requestTime, uint32(min(h.RequestTime.Microseconds(), 1<<32-1)))
	b.offset = append(b.offset, uint64(off))
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
	}
}
