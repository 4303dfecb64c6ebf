package parser

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func detLines(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, l := range s {
		out[i] = []byte(l + "\n")
	}
	return out
}

const (
	detCombined = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /pricing HTTP/1.1" 200 5123 "https://example.com/" "Mozilla/5.0"`
	detCommon   = `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`
	detVhost    = `www.example.com:443 203.0.113.9 - - [22/Nov/2026:08:00:01 +0000] "GET /pricing HTTP/1.1" 200 20480 "-" "curl/8"`
	detJSON     = `{"time":"2026-11-22T13:55:36+01:00","remote_addr":"203.0.113.7","request":"GET /pricing HTTP/1.1","status":200}`
	detRT       = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /slow HTTP/1.1" 504 0 "-" "curl/8" 60.001`
	detMain     = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /pricing HTTP/1.1" 200 5123 "-" "Mozilla/5.0" "198.51.100.4, 10.0.0.1"`
	detMainNone = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /pricing HTTP/1.1" 200 5123 "-" "Mozilla/5.0" "-"`
	detGzip     = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /pricing HTTP/1.1" 200 5123 "-" "Mozilla/5.0" "3.21"`
	detTimed    = `203.0.113.7 - - [22/Nov/2026:13:55:36 +0100] "GET /api HTTP/1.1" 200 88 "-" "Mozilla/5.0" 0.012 0.010 .`
	detIngress  = `10.244.0.1 - - [22/Nov/2026:10:00:00 +0000] "GET /api HTTP/1.1" 200 88 "-" "curl/8" 389 0.012 [default-api-80] [] 10.244.1.7:80 88 0.010 200 2c1b8f0e9d7a6b5c4d3e2f1a0b9c8d7e`
)

func TestDetect(t *testing.T) {
	rtFormat := `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time`
	cases := []struct {
		name  string
		lines [][]byte
		want  string
		// wantAccepted is the chosen format's count.
		wantAccepted int
	}{
		{"combined", detLines(detCombined, detCombined, detCombined), "combined", 3},
		{"common", detLines(detCommon, detCommon), "common", 2},
		{"vhost_combined", detLines(detVhost, detVhost), "vhost_combined", 2},
		{"json", detLines(detJSON), "json", 1},
		{"combined with request_time", detLines(detRT, detRT), rtFormat, 2},
		{"a few bad lines do not change the verdict", detLines(detCombined, "garbage", detCombined, detCombined), "combined", 3},
		{"one line is detected on what it has", detLines(detVhost), "vhost_combined", 1},
		{"the majority wins", detLines(detVhost, detVhost, detVhost, detJSON), "vhost_combined", 3},
		{"nothing parses", detLines("garbage", "more garbage"), "", 0},
		{"no lines", nil, "", 0},
		{"header-like lines alone choose nothing", detLines("#Version: 1.0", "#Fields: date time"), "", 0},
		{"main with forwarded clients", detLines(detMain, detMainNone), "main", 2},
		{"main without any forwarded client is main, not compression", detLines(detMainNone, detMainNone), "main", 2},
		{"gzip ratios are not forwarded clients", detLines(detGzip, detMainNone, detGzip), "compression", 3},
		{"a number among addresses leaves main", detLines(detMain, detGzip), "main", 2},
		{"timed_combined keeps its request time", detLines(detTimed, detTimed), "timed_combined", 2},
		{"ingress-nginx upstreaminfo", detLines(detIngress, detIngress), "upstreaminfo", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Detect(c.lines, Options{})
			if d.Format != c.want {
				t.Fatalf("format %q, want %q (%s)", d.Format, c.want, d.Summary(20))
			}
			if d.Lines != len(c.lines) {
				t.Errorf("lines %d, want %d", d.Lines, len(c.lines))
			}
			best, ok := d.Best()
			if ok != (c.want != "") || best.Accepted != c.wantAccepted {
				t.Errorf("best %+v ok %v, want %d accepted", best, ok, c.wantAccepted)
			}
			// Every format is reported, with every line counted once.
			if len(d.Candidates) != len(DetectFormats()) {
				t.Errorf("%d candidates, want %d", len(d.Candidates), len(DetectFormats()))
			}
			for _, cand := range d.Candidates {
				if cand.Accepted+cand.Rejected+cand.Directives != len(c.lines) {
					t.Errorf("%s: %d+%d+%d lines, want %d", cand.Format, cand.Accepted, cand.Rejected, cand.Directives, len(c.lines))
				}
				if cand.Rejected > 0 && cand.Reason == "" {
					t.Errorf("%s rejects %d lines and gives no reason", cand.Format, cand.Rejected)
				}
			}
		})
	}
}

// On a tie in accepted lines, the format that keeps more fields wins,
// whatever the order of preference; on a full tie, the order decides.
func TestDetectTieBreaks(t *testing.T) {
	ignores := `$remote_addr [$time_local] "$request" $status $size`
	keeps := `$remote_addr [$time_local] "$request" $status $body_bytes_sent`
	ls := detLines(`192.0.2.1 [22/Nov/2026:13:55:36 +0100] "GET / HTTP/1.1" 200 512`,
		`192.0.2.2 [22/Nov/2026:13:55:37 +0100] "GET /a HTTP/1.1" 404 0`)
	for _, order := range [][]string{{ignores, keeps}, {keeps, ignores}} {
		if d := DetectAmong(order, ls, Options{}); d.Format != keeps {
			t.Errorf("order %q: chose %q, want the one that keeps the byte count", order, d.Format)
		}
	}
	same := `$remote_addr [$time_local] "$request" $status $x`
	for _, order := range [][]string{{ignores, same}, {same, ignores}} {
		if d := DetectAmong(order, ls, Options{}); d.Format != order[0] {
			t.Errorf("order %q: chose %q, want the first", order, d.Format)
		}
	}
}

func TestDetectionSummary(t *testing.T) {
	d := Detect(detLines(detCombined, "garbage"), Options{})
	s := d.Summary(2)
	if !strings.HasPrefix(s, "combined 1/2, ") || !strings.HasSuffix(s, " more") {
		t.Errorf("summary %q", s)
	}
	best, _ := d.Best()
	if got := best.String(); got != "combined accepts 1 of 2" {
		t.Errorf("candidate %q", got)
	}
}

func TestDetectFormatsAreUsable(t *testing.T) {
	fs := DetectFormats()
	seen := map[string]bool{}
	for _, f := range fs {
		if seen[f] {
			t.Errorf("%q twice", f)
		}
		seen[f] = true
		if _, err := New(f); err != nil {
			t.Errorf("%q: %v", f, err)
		}
	}
	for _, f := range Formats() {
		if !seen[f] {
			t.Errorf("named format %q is not tried", f)
		}
	}
	if _, err := New(Auto); err == nil {
		t.Errorf("New(%q) must be refused: it is resolved by Detect first", Auto)
	}
}

func TestSplitLines(t *testing.T) {
	cases := []struct {
		data  string
		max   int
		final bool
		want  []string
	}{
		{"a\nb\nc", 10, false, []string{"a\n", "b\n"}},
		{"a\nb\nc", 10, true, []string{"a\n", "b\n", "c"}},
		{"a\nb\nc\n", 2, true, []string{"a\n", "b\n"}},
		{"", 10, true, nil},
		{"partial", 10, false, nil},
	}
	for _, c := range cases {
		got := SplitLines([]byte(c.data), c.max, c.final)
		if len(got) != len(c.want) {
			t.Errorf("%q: %q, want %q", c.data, got, c.want)
			continue
		}
		for i := range got {
			if string(got[i]) != c.want[i] {
				t.Errorf("%q: %q, want %q", c.data, got, c.want)
			}
		}
	}
}

// BenchmarkDetect is the cost of one detection (a file's first 200 lines
// against every format), paid once per file opened with format: auto.
func BenchmarkDetect(b *testing.B) {
	ls := benchLines("combined", 200)
	b.ReportAllocs()
	for b.Loop() {
		if d := Detect(ls, Options{}); d.Format != "combined" {
			b.Fatal(d.Summary(5))
		}
	}
}

// W3C's header lines are the w3c format's own (neither accepted nor
// rejected, so w3c ranks first), and header lines alone choose nothing
// yet: the request lines that follow tell.
func TestDetectHeaderLines(t *testing.T) {
	header := []string{"#Software: Microsoft Internet Information Services 10.0", "#Version: 1.0",
		"#Date: 2026-11-24 10:00:00", "#Fields: date time c-ip cs-method cs-uri-stem sc-status time-taken"}
	row := "2026-11-24 10:00:01 203.0.113.7 GET /pricing 200 15"
	d := Detect(detLines(append(header, row, row)...), Options{})
	best, _ := d.Best()
	if d.Format != "w3c" || best.Accepted != 2 || best.Directives != 4 || best.Rejected != 0 || d.HeadersOnly() {
		t.Errorf("IIS log: %q %+v headers-only %v (%s)", d.Format, best, d.HeadersOnly(), d.Summary(5))
	}
	d = Detect(detLines(header...), Options{})
	if d.Format != "" || !d.HeadersOnly() {
		t.Errorf("header lines alone: %q headers-only %v (%s)", d.Format, d.HeadersOnly(), d.Summary(5))
	}
	if d := Detect(detLines(detCombined), Options{}); d.HeadersOnly() {
		t.Errorf("a combined line is no header")
	}
}

// An integer appended to combined is Apache's %T (seconds) or %D
// (microseconds); Detect reads it only when the values tell which.
func TestDetectIntegerRequestTime(t *testing.T) {
	line := func(tail string) string { return detCombined + " " + tail }
	cases := []struct {
		name, tails string
		// want is the request time of the first line, 0 for none kept.
		want time.Duration
	}{
		{"zeros and small values: seconds (%T)", "2 0 0 1 0 5", 2 * time.Second},
		{"no zero, tens and hundreds: microseconds (%D)", "475 239 118 242 67", 475 * time.Microsecond},
		{"a millisecond or more: microseconds", "1500 30 12", 1500 * time.Microsecond},
		{"only 1 to 9: neither", "2 3 1 4", 0},
		{"a zero and 1000 up: neither", "0 4000", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ls []string
			for _, v := range strings.Fields(c.tails) {
				ls = append(ls, line(v))
			}
			d := Detect(detLines(ls...), Options{})
			p, err := New(d.Format)
			if err != nil {
				t.Fatalf("format %q: %v (%s)", d.Format, err, d.Summary(6))
			}
			var h Hit
			if err := p.Parse([]byte(ls[0]), &h); err != nil {
				t.Fatal(err)
			}
			got := time.Duration(0)
			if h.Has&HasRequestTime != 0 {
				got = h.RequestTime
			}
			if got != c.want {
				t.Errorf("chose %q (%s): request time %v, want %v", d.Format, d.Summary(6), got, c.want)
			}
		})
	}
}

// Detect on every golden log (the lines its format accepts, and its header
// lines) chooses a format that makes the same hit of each line: the file's
// own, or one that keeps as much. A log only a format string reads (Apache
// times in pieces, ISO 8601 first, escape=json) may get no format, never a
// wrong one; a log in a named format must get one.
func TestDetectGoldenLogs(t *testing.T) {
	logs, err := filepath.Glob("testdata/golden/*.log")
	if err != nil || len(logs) == 0 {
		t.Fatalf("no golden logs: %v", err)
	}
	for _, path := range logs {
		name := strings.TrimSuffix(filepath.Base(path), ".log")
		t.Run(name, func(t *testing.T) {
			format, err := os.ReadFile(strings.TrimSuffix(path, ".log") + ".format")
			if err != nil {
				t.Fatal(err)
			}
			own := strings.TrimRight(string(format), "\n")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p := mustNew(t, own)
			var lines [][]byte
			var want []string
			var h Hit
			for _, l := range SplitLines(data, 1000, true) {
				switch err := p.Parse(l, &h); {
				case err == nil:
					lines, want = append(lines, l), append(want, render(&h))
				case errors.Is(err, ErrDirective):
					lines, want = append(lines, l), append(want, "header")
				}
			}
			d := Detect(lines, Options{})
			if d.Format == "" {
				if _, named := lookupNamed(own); named || slices.Contains(Formats(), own) {
					t.Fatalf("no format chosen for a log in %q (%s)", own, d.Summary(4))
				}
				return
			}
			q := mustNew(t, d.Format)
			for i, l := range lines {
				got := ""
				switch err := q.Parse(l, &h); {
				case err == nil:
					got = render(&h)
				case errors.Is(err, ErrDirective):
					got = "header"
				default:
					got = err.Error()
				}
				if got != want[i] {
					t.Errorf("Detect chose %q (%s); line %q\n got: %s\nwant: %s (%q)", d.Format, d.Summary(3), l, got, want[i], own)
				}
			}
		})
	}
}
