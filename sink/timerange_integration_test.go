package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A line whose time the stores cannot hold is a reject with the reason, from
// Batch.Add itself; every other line is stored with its exact time, in hits
// and in the rollups; nothing wraps, and the batch is never refused (a
// refused batch would be retried forever and block its file). Lines go
// through the real parser, then into both stores.
func TestTimesOutsideTheStoreAreRejects(t *testing.T) {
	t.Parallel()
	type line struct {
		logged string // $time_local
		unix   int64  // UTC seconds
		stored bool
	}
	utc := func(s string) int64 {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.Unix()
	}
	lines := []line{
		{"01/Jan/1960:00:00:00 +0000", utc("1960-01-01T00:00:00Z"), false},
		{"31/Dec/1969:23:59:59 +0000", -1, false},
		{"01/Jan/1970:00:00:00 +0000", 0, true},
		{"01/Jan/1970:01:00:00 +0100", 0, true}, // the same second, logged in another zone
		{"31/Dec/1969:23:59:59 -0100", 3599, true},
		{"01/Jan/1970:00:01:40 +0000", 100, true},                         // a Unix time of 3 digits
		{"08/Sep/2001:00:00:00 +0000", utc("2001-09-08T00:00:00Z"), true}, // 9 digits
		{"22/Nov/2026:10:00:00 +0000", utc("2026-11-22T10:00:00Z"), true}, // today's 10
		{"05/Feb/2106:23:59:59 +0000", sink.MaxUnix, true},                // the last second held
		{"06/Feb/2106:00:00:00 +0000", sink.MaxUnix + 1, false},           // 18.16 wraps its day in zones east of UTC
		{"07/Feb/2106:08:28:15 +0200", 1<<32 - 1, false},                  // UInt32's last second
		{"07/Feb/2106:06:28:16 +0000", 1 << 32, false},
		{"01/Jan/2200:00:00:00 +0000", utc("2200-01-01T00:00:00Z"), false},
	}
	p, err := parser.New("combined")
	if err != nil {
		t.Fatal(err)
	}
	b := sink.NewBatch(len(lines))
	b.Reset("www", 0x7173e)
	var h parser.Hit
	off := int64(0)
	for i, l := range lines {
		text := fmt.Sprintf("203.0.113.%d - - [%s] \"GET /t%d HTTP/1.1\" 200 %d \"-\" \"test\"\n", i, l.logged, i, i)
		if err := p.Parse([]byte(text), &h); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if h.Unix != l.unix {
			t.Fatalf("%s: parsed as %d, want %d", text, h.Unix, l.unix)
		}
		b.Add(&h, off, off+int64(len(text)))
		lines[i].logged = fmt.Sprint(off)
		off += int64(len(text))
	}
	want := 0
	for _, l := range lines {
		if l.stored {
			want++
		}
	}
	if b.Rows() != want || b.RejectedLines != len(lines)-want || b.Lines != len(lines) {
		t.Fatalf("batch: %d rows, %d rejected of %d lines; want %d rows", b.Rows(), b.RejectedLines, b.Lines, want)
	}

	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := d.Open(t)
		if err := st.Insert(ctx, b); err != nil {
			t.Fatalf("insert: %v", err) // the batch must never be refused
		}
		stored := map[uint64]uint64{} // offset -> toUInt32(ts)
		err := st.Select(ctx, "SELECT offset, toUInt32(ts) FROM "+d.Name+".hits", nil, func(scan func(...any) error) error {
			var o uint64
			var ts uint32
			if err := scan(&o, &ts); err != nil {
				return err
			}
			stored[o] = uint64(ts)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reasons := map[uint64]string{}
		err = st.Select(ctx, "SELECT offset, reason, line FROM "+d.Name+".rejects", nil, func(scan func(...any) error) error {
			var o uint64
			var reason, text string
			if err := scan(&o, &reason, &text); err != nil {
				return err
			}
			reasons[o] = reason + " | " + text
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			var o uint64
			fmt.Sscan(l.logged, &o)
			ts, isRow := stored[o]
			reason, isReject := reasons[o]
			switch {
			case l.stored && (!isRow || ts != uint64(l.unix) || isReject):
				t.Errorf("%s: stored %v at %d, rejected %v (%s); want stored at exactly %d",
					time.Unix(l.unix, 0).UTC().Format(time.RFC3339), isRow, ts, isReject, reason, l.unix)
			case !l.stored && (isRow || !isReject):
				t.Errorf("%s: stored %v at %d (%s), rejected %v; want a reject",
					time.Unix(l.unix, 0).UTC().Format(time.RFC3339), isRow, ts, time.Unix(int64(ts), 0).UTC().Format(time.RFC3339), isReject)
			case !l.stored:
				wantReason := "time " + time.Unix(l.unix, 0).UTC().Format(time.RFC3339) + " is outside what the store can hold (1970-01-01T00:00:00Z to 2106-02-05T23:59:59Z)"
				if !strings.HasPrefix(reason, wantReason+" | ") || !strings.Contains(reason, "GET /t") {
					t.Errorf("reject at %d: %q; want reason %q and the request in the line", o, reason, wantReason)
				}
			}
		}
		// The rollups agree: each row in its minute and its (UTC) day,
		// none wrapped to 1970.
		minutes, days := map[string]uint64{}, map[string]uint64{}
		err = st.Select(ctx, "SELECT path, toUInt32(minute), sum(hits) FROM "+d.Name+".hits_1m GROUP BY path, minute", nil, func(scan func(...any) error) error {
			var path string
			var m uint32
			var n uint64
			if err := scan(&path, &m, &n); err != nil {
				return err
			}
			minutes[path] = uint64(m) + n<<32
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Select(ctx, "SELECT path, toUInt16(day), sum(hits) FROM "+d.Name+".hits_1d GROUP BY path, day", nil, func(scan func(...any) error) error {
			var path string
			var day uint16
			var n uint64
			if err := scan(&path, &day, &n); err != nil {
				return err
			}
			days[path] = uint64(day) + n<<32
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(minutes) != want || len(days) != want {
			t.Errorf("rollups: %d paths by minute, %d by day; want %d", len(minutes), len(days), want)
		}
		for i, l := range lines {
			if !l.stored {
				continue
			}
			path := fmt.Sprintf("/t%d", i)
			if got, w := minutes[path], uint64(l.unix/60*60)+1<<32; got != w {
				t.Errorf("hits_1m of %s: minute %d, %d hits; want minute %d, 1 hit", path, uint32(got), got>>32, l.unix/60*60)
			}
			if got, w := days[path], uint64(l.unix/86400)+1<<32; got != w {
				t.Errorf("hits_1d of %s: day %d, %d hits; want day %d, 1 hit", path, uint16(got), got>>32, l.unix/86400)
			}
		}
	})
}

// Times the stores hold are stored exactly whatever their number of digits:
// the embedded engine reads a bare Unix time only with exactly 10 digits
// (before 2001-09-09 there are fewer), and refused such batches whole.
func TestTimesBefore2001AreStored(t *testing.T) {
	t.Parallel()
	times := []int64{0, 1, 59, 86400, 19700101, 99999999, 999999999, 1000000000, sink.MaxUnix}
	b := sink.NewBatch(len(times))
	b.Reset("www", 0x2001)
	for i, ts := range times {
		b.Add(&parser.Hit{Unix: ts, Method: []byte("GET"), Path: []byte(fmt.Sprint("/", i)), Status: 200}, int64(i), int64(i+1))
	}
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st := d.Open(t)
		if err := st.Insert(ctx, b); err != nil {
			t.Fatalf("insert: %v", err)
		}
		var got []string
		err := st.Select(ctx, "SELECT toUInt32(ts) FROM "+d.Name+".hits ORDER BY offset", nil, func(scan func(...any) error) error {
			var ts uint32
			err := scan(&ts)
			got = append(got, fmt.Sprint(ts))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Trim(fmt.Sprint(times), "[]"); strings.Join(got, " ") != want {
			t.Errorf("stored times %v, want %s", got, want)
		}
	})
}
