package collector_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
)

// jsonLines are n lines as nginx writes them with a log_format ...
// escape=json, one second apart from start.
func jsonLines(n int, start time.Time) []byte {
	var out []byte
	for i := range n {
		out = fmt.Appendf(out, `{"time":%q,"remote_addr":"203.0.113.%d","request":"GET /p/%d HTTP/1.1","status":200,"body_bytes_sent":%d,"http_host":"shop.example.com","request_time":"0.012"}`+"\n",
			start.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%250, i, i)
	}
	return out
}

// metricValue reads one series of a gauge or counter; -1 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// autoCollector runs a collector with format: auto on glob, its log and
// metrics kept for the test.
func autoCollector(t *testing.T, st *store, glob, format string) (logs *lockedBuffer, reg *prometheus.Registry, stop func()) {
	logs, reg = &lockedBuffer{}, prometheus.NewRegistry()
	stop = startCollector(t, st, glob, func(o *collector.Options) {
		o.Sources[0].Format = format
		o.Metrics = collector.NewMetrics(reg)
		o.DetectWait = 200 * time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	return logs, reg, stop
}

// With format: auto a file is parsed in the format its first lines have,
// and when its lines change format (a web server given a new log format),
// the collector says so once, detects the new one, and reads again the
// lines it rejected that were not sent yet: every line is stored once, as
// a hit or (sent before the change showed) a reject.
func TestAutoFormatFollowsAChange(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		// The lines of the new format are in the first batch, never sent.
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "access.log")
		// One write: the change is in the first batch, never sent.
		data := append(logLines(1, 300, base), jsonLines(300, base.Add(time.Minute))...)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		logs, reg, _ := autoCollector(t, st, path, parser.Auto)
		st.assertExactlyOnce(t, 600)
		if n := st.count(t, "SELECT count() FROM "+st.db+".rejects"); n != 0 {
			t.Errorf("%d rejects, want 0: the rejected lines were in the batch in hand", n)
		}
		if n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE host = 'shop.example.com' AND request_time_us = 12000"); n != 300 {
			t.Errorf("%d hits with the JSON lines' host and request time, want 300", n)
		}
		checkSaid(t, logs, map[string]int{
			`msg="log format detected" path=` + path:      1,
			"format=combined":                             -1,
			"nearly every line of a log file is rejected": 1,
			`would_accept="json accepts`:                  1,
			"log format detected again":                   1,
		})
		if v := metricValue(t, reg, "hitcount_collector_format_mismatch", map[string]string{"path": path}); v > 0 {
			t.Errorf("format_mismatch %v after the switch, want 0", v)
		}
	})
}

// As above, with the first lines of the new format sent (as rejects)
// before there were enough of them to show the change.
func TestAutoFormatFollowsAChangePartlySent(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "access.log")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Write(logLines(1, 300, base))
		logs, _, _ := autoCollector(t, st, path, parser.Auto)
		st.waitRows(t, 300, 60*time.Second)
		// 30 lines in the new format are sent as rejects (too few to
		// say the format changed), then 270 more show it.
		f.Write(jsonLines(30, base.Add(time.Minute)))
		waitCount(t, st, "SELECT count() FROM "+st.db+".rejects", 30, 60*time.Second)
		f.Write(jsonLines(270, base.Add(2*time.Minute)))
		st.assertExactlyOnce(t, 570)
		if n := st.count(t, "SELECT count() FROM "+st.db+".rejects"); n != 30 {
			t.Errorf("%d rejects, want the 30 sent before the change showed", n)
		}
		if n := st.count(t, "SELECT uniqExact(offset) FROM (SELECT offset FROM "+st.db+".hits UNION ALL SELECT offset FROM "+st.db+".rejects)"); n != 600 {
			t.Errorf("%d distinct offsets in hits and rejects, want 600: every line once", n)
		}
		checkSaid(t, logs, map[string]int{"nearly every line of a log file is rejected": 1, "log format detected again": 1})
	})
}

// A fixed format that rejects every line is said once, loudly, with the
// format that would accept the lines, and shown by a gauge; the lines are
// still shipped, as rejects.
func TestWrongFormatSaidOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "access.log")
		if err := os.WriteFile(path, jsonLines(400, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)), 0o644); err != nil {
			t.Fatal(err)
		}
		logs, reg, _ := autoCollector(t, st, path, "combined")
		waitCount(t, st, "SELECT count(DISTINCT offset) FROM "+st.db+".rejects", 100, 60*time.Second) // the sample of one batch
		deadline := time.Now().Add(30 * time.Second)
		for metricValue(t, reg, "hitcount_collector_lines_rejected_total", nil) < 400 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if v := metricValue(t, reg, "hitcount_collector_lines_rejected_total", nil); v != 400 {
			t.Errorf("lines_rejected_total %v, want 400", v)
		}
		if n := st.count(t, "SELECT count() FROM "+st.db+".hits"); n != 0 {
			t.Errorf("%d hits, want 0", n)
		}
		checkSaid(t, logs, map[string]int{
			"nearly every line of a log file is rejected": 1,
			`format=combined`:                          -1,
			`would_accept="json accepts`:               1,
			"set sources[].format to one that accepts": 1,
			"log format detected":                      0,
		})
		if v := metricValue(t, reg, "hitcount_collector_format_mismatch", map[string]string{"path": path}); v != 1 {
			t.Errorf("format_mismatch %v, want 1", v)
		}
	})
}

// checkSaid checks how many times each text is in the log (-1: at least
// once).
func checkSaid(t *testing.T, logs *lockedBuffer, want map[string]int) {
	t.Helper()
	out := logs.Bytes()
	for text, n := range want {
		got := bytes.Count(out, []byte(text))
		if (n < 0 && got == 0) || (n >= 0 && got != n) {
			t.Errorf("%q said %d times, want %d:\n%s", text, got, n, out)
		}
	}
}

func waitCount(t *testing.T, st *store, q string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n uint64
	for time.Now().Before(deadline) {
		if n = st.count(t, q); n >= want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %d after %v, want %d", q, n, timeout, want)
}

// w3cBlock is an IIS header block naming fields.
func w3cBlock(date time.Time, fields string) string {
	return "#Software: Microsoft Internet Information Services 10.0\n#Version: 1.0\n#Date: " +
		date.Format("2006-01-02 15:04:05") + "\n#Fields: " + fields + "\n"
}

// w3cRows are n IIS lines for the fields of w3cFieldsA or w3cFieldsB, paths
// /w/from.. on, each taking 15 ms.
func w3cRows(fields string, from, n int, start time.Time) string {
	var b bytes.Buffer
	for i := from; i < from+n; i++ {
		ts := start.Add(time.Duration(i) * time.Second)
		d, tm := ts.Format("2006-01-02"), ts.Format("15:04:05")
		switch fields {
		case w3cFieldsA:
			fmt.Fprintf(&b, "%s %s 203.0.113.%d GET /w/%d - 200 %d 15 Mozilla/5.0+(X11)\n", d, tm, i%250, i, 100+i)
		case w3cFieldsB:
			fmt.Fprintf(&b, "%s %s 15 /w/%d 200 GET 203.0.113.%d\n", d, tm, i, i%250)
		}
	}
	return b.String()
}

const (
	w3cFieldsA = "date time c-ip cs-method cs-uri-stem cs-uri-query sc-status sc-bytes time-taken cs(User-Agent)"
	// After a restart of the server, another selection in another order.
	w3cFieldsB = "date time time-taken cs-uri-stem sc-status cs-method c-ip"
)

// A W3C extended log (IIS) ships with format: auto: its header lines
// ("#Fields:" names the columns) move the offset on without a row or a
// reject, and a file resumed after them, at a restart, gets them back first:
// every line once with its fields, whichever header block it is under.
func TestW3CHeaderLinesAcrossRestarts(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "u_ex261124.log")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		write := func(s string) {
			if _, err := f.WriteString(s); err != nil {
				t.Fatal(err)
			}
		}
		write(w3cBlock(base, w3cFieldsA) + w3cRows(w3cFieldsA, 0, 100, base))
		logs, reg, stop := autoCollector(t, st, path, parser.Auto)
		st.waitRows(t, 100, 60*time.Second)
		stop()
		// Resumed after the header block.
		write(w3cRows(w3cFieldsA, 100, 50, base))
		logs2, _, stop := autoCollector(t, st, path, parser.Auto)
		st.waitRows(t, 150, 60*time.Second)
		// The server restarts: a new block, other columns.
		write(w3cBlock(base.Add(time.Hour), w3cFieldsB) + w3cRows(w3cFieldsB, 150, 50, base))
		st.waitRows(t, 200, 60*time.Second)
		stop()
		// Resumed after the second block, far from the first.
		write(w3cRows(w3cFieldsB, 200, 20, base))
		logs3, _, _ := autoCollector(t, st, path, parser.Auto)
		st.assertExactlyOnce(t, 220)
		if n := st.count(t, "SELECT count() FROM "+st.db+".rejects"); n != 0 {
			t.Errorf("%d rejects, want 0", n)
		}
		if n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE path = concat('/w/', toString(toUInt32(ts) - toUInt32(toDateTime('2026-11-24 10:00:00', 'UTC')))) AND status = 200 AND method = 'GET' AND request_time_us = 15000 AND startsWith(client, '203.0.113.')"); n != 220 {
			t.Errorf("%d hits with every field right, want 220", n)
		}
		if v := metricValue(t, reg, "hitcount_collector_lines_skipped_total", nil); v != 4 {
			t.Errorf("lines_skipped_total %v in the first run, want the 4 header lines", v)
		}
		for _, l := range []*lockedBuffer{logs, logs2, logs3} {
			checkSaid(t, l, map[string]int{"format=w3c": -1, "nearly every line": 0})
		}
	})
}

// A Cloud Storage usage log names its columns in a CSV header, its first
// line: resumed after it, the file is read with those columns, not the
// documented default order.
func TestCSVHeaderAcrossARestart(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	// The default order with cs_uri and c_ip swapped, sc_status last.
	header := `"time_micros","cs_uri","c_ip_type","c_ip_region","cs_method","c_ip","cs_bytes","sc_bytes","time_taken_micros","cs_host","cs_referer","cs_user_agent","s_request_id","cs_operation","cs_bucket","cs_object","sc_status"` + "\n"
	rows := func(from, n int) string {
		var b bytes.Buffer
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, `"%d","/o/%d","1","","GET","203.0.113.%d","0","%d","15000","b.example","","curl/8","id%d","GET_Object","b","o/%d","200"`+"\n",
				base.Add(time.Duration(i)*time.Second).UnixMicro(), i, i%250, 100+i, i, i)
		}
		return b.String()
	}
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		path := filepath.Join(t.TempDir(), "usage_2026_11_24.csv")
		if err := os.WriteFile(path, []byte(header+rows(0, 50)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, stop := autoCollector(t, st, path, "gcs")
		st.waitRows(t, 50, 60*time.Second)
		stop()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(rows(50, 20))
		f.Close()
		autoCollector(t, st, path, "gcs")
		st.assertExactlyOnce(t, 70)
		if n := st.count(t, "SELECT count() FROM "+st.db+".rejects"); n != 0 {
			t.Errorf("%d rejects, want 0", n)
		}
		if n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE path = concat('/o/', toString(toUInt32(ts) - toUInt32(toDateTime('2026-11-24 10:00:00', 'UTC')))) AND status = 200 AND startsWith(client, '203.0.113.') AND request_time_us = 15000"); n != 70 {
			t.Errorf("%d hits with every field right, want 70", n)
		}
	})
}
