package sink

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/parser"
)

func testHit(unix int64) *parser.Hit {
	return &parser.Hit{
		Unix: unix, RemoteAddr: []byte("203.0.113.7"), Method: []byte("GET"), Path: []byte("/pricing"),
		Query: []byte("a=1"), Protocol: []byte("HTTP/1.1"), Status: 200, Bytes: 512,
		Referer: []byte("-"), UserAgent: []byte("Mozilla/5.0"), Host: []byte("www.example.com"),
	}
}

// Add is the collector's hot path: it must not allocate for a line the
// stores hold, once the batch has grown.
func TestAddDoesNotAllocate(t *testing.T) {
	const rows = 1000
	b := NewBatch(rows)
	h := testHit(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix())
	fill := func() {
		b.Reset("www", 1)
		for i := range rows {
			b.Add(h, int64(i*100), int64(i*100+100))
		}
	}
	fill() // the string columns' byte buffers grow once
	if n := testing.AllocsPerRun(20, fill); n != 0 {
		t.Errorf("%v allocations per %d-line batch; want 0", n, rows)
	}
}

// Out-of-range times become rejects with a reason naming the time and the
// bounds, through Add (the line rebuilt from the hit) and AddLine (the raw
// line kept).
func TestAddRejectsTimesOutOfRange(t *testing.T) {
	b := NewBatch(4)
	b.Reset("www", 1)
	b.Add(testHit(MinUnix-1), 0, 10)
	b.AddLine(testHit(MaxUnix+1), 10, 20, []byte("the raw line"))
	b.Add(testHit(MinUnix), 20, 30)
	b.Add(testHit(MaxUnix), 30, 40)
	if b.Rows() != 2 || b.RejectedLines != 2 || b.Lines != 4 || b.First != 0 || b.Last != 30 || b.Next != 40 {
		t.Fatalf("rows %d, rejected %d, lines %d, first %d, last %d, next %d", b.Rows(), b.RejectedLines, b.Lines, b.First, b.Last, b.Next)
	}
	r := b.Rejects
	if r[0].Offset != 0 || r[0].Reason != "time 1969-12-31T23:59:59Z is outside what the store can hold (1970-01-01T00:00:00Z to 2106-02-05T23:59:59Z)" {
		t.Errorf("reject 0: %+v", r[0])
	}
	if want := `203.0.113.7 [1969-12-31T23:59:59Z] "GET /pricing?a=1 HTTP/1.1" 200 host=www.example.com`; r[0].Line != want {
		t.Errorf("reject 0 line %q, want %q", r[0].Line, want)
	}
	if r[1].Offset != 10 || !strings.HasPrefix(r[1].Reason, "time 2106-02-06T00:00:00Z is outside") || r[1].Line != "the raw line" {
		t.Errorf("reject 1: %+v", r[1])
	}
	// The rows' times, as the embedded engine reads them: 10 digits each.
	tsv := b.AppendTSV(nil)
	for i, want := range []string{"0000000000\t", "4294857599\t"} {
		row := bytes.Split(tsv, []byte("\n"))[i]
		if !bytes.HasPrefix(row, []byte(want)) {
			t.Errorf("TSV row %d: %q, want it to start %q", i, row, want)
		}
	}
}

// Every send of a batch carries the same reject rows: stamped with when the
// batch was read, not when it is sent.
func TestRejectsAreStampedOnce(t *testing.T) {
	b := NewBatch(2)
	b.Reset("www", 1)
	b.AddReject(0, 5, "bad", []byte("junk"))
	first := b.AppendRejectsTSV(nil)
	at := b.RejectsTime()
	time.Sleep(1100 * time.Millisecond)
	if again := b.AppendRejectsTSV(nil); !bytes.Equal(first, again) || !b.RejectsTime().Equal(at) {
		t.Errorf("a second send differs: %q then %q", first, again)
	}
	b.Reset("www", 1)
	read := time.Date(2026, 11, 22, 10, 0, 0, 500, time.UTC)
	b.ReadAt = read
	b.AddReject(0, 5, "bad", []byte("junk"))
	if got := b.RejectsTime(); !got.Equal(read.Truncate(time.Second)) {
		t.Errorf("rejects stamped %v, want the read time %v", got, read)
	}
	if got := string(b.AppendRejectsTSV(nil)); !strings.HasPrefix(got, "1795341600\twww\t1\t0\tbad\tjunk\n") {
		t.Errorf("rejects TSV %q", got)
	}
}

func BenchmarkBatchAdd(b *testing.B) {
	const rows = 50000
	batch := NewBatch(rows)
	h := testHit(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix())
	batch.Reset("www", 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%rows == 0 {
			batch.Reset("www", 1)
		}
		batch.Add(h, int64(i)*100, int64(i)*100+100)
	}
}
