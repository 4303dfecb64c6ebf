package parser

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fuzzFormat fuzzes a format, seeded with testdata/golden/FORMAT.log when
// there is one and with seeds.
func fuzzFormat(f *testing.F, format string, seeds ...string) {
	var golden []string
	if _, err := os.Stat(filepath.Join("testdata", "golden", format+".log")); err == nil {
		golden = []string{format}
	}
	fuzzGolden(f, format, golden, seeds...)
}

// fuzzGolden checks, for any input, that Parse does not panic; that a
// failure is an *Error with a column inside the line; that a success leaves a
// hit with a time and a sane status, costs no allocation, and stays the same
// parse whatever the Parser did before (the same line twice, after another
// line, with a fresh Parser: the scratch buffer and the time cache leak
// nothing between lines); and, for a named format, that data appended after
// a space leaves the hit as it was. golden names testdata/golden/*.log files
// whose lines seed the corpus.
func fuzzGolden(f *testing.F, format string, golden []string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, g := range golden {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", g+".log"))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l)
		}
	}
	p, err := New(format)
	if err != nil {
		f.Fatal(err)
	}
	other := []byte(`9.9.9.9 - - [01/Jan/2001:00:00:00 +0000] "GET /other HTTP/1.0" 200 1 "-" "-"`)
	f.Fuzz(func(t *testing.T, line []byte) {
		var h1, h2, h3, h4 Hit
		err1 := p.Parse(line, &h1)
		r1 := render(&h1)
		err2 := p.Parse(line, &h2)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || r1 != render(&h2) {
			t.Fatalf("two parses differ: %v %s / %v %s", err1, r1, err2, render(&h2))
		}
		if errors.Is(err1, ErrDirective) {
			return // a header line (W3C's #Fields:): applied, neither hit nor reject
		}
		if err1 != nil {
			pe, ok := err1.(*Error)
			if !ok {
				t.Fatalf("error %T %v, want *Error", err1, err1)
			}
			if pe.Column < 1 || pe.Column > len(line)+1 {
				t.Fatalf("column %d outside a line of %d bytes", pe.Column, len(line))
			}
			return
		}
		if h1.Has&HasTime == 0 {
			t.Fatalf("parsed without a time: %s", r1)
		}
		if h1.Has&HasStatus != 0 && (h1.Status < 100 || h1.Status > 999) {
			t.Fatalf("status %d", h1.Status)
		}
		if allocs := testing.AllocsPerRun(2, func() { p.Parse(line, &h2) }); allocs != 0 {
			t.Fatalf("%.0f allocations parsing a valid line", allocs)
		}
		p.Parse(other, &h3)
		if err := p.Parse(line, &h3); err != nil || render(&h3) != r1 {
			t.Fatalf("after another line: %v %s, want %s", err, render(&h3), r1)
		}
		// A format whose header lines name its columns (W3C) parses by what
		// it read before; the others by the line alone.
		if fresh, _ := New(format); p.srv == nil {
			if err := fresh.Parse(line, &h4); err != nil || render(&h4) != r1 {
				t.Fatalf("fresh parser: %v %s, want %s", err, render(&h4), r1)
			}
		}
		if p.tail && bytes.IndexAny(line, "\r\n") < 0 {
			longer := append(bytes.Clone(line), " extra \"x\" [y]"...)
			if err := p.Parse(longer, &h4); err != nil || render(&h4) != r1 {
				t.Fatalf("with a field appended: %v %s, want %s", err, render(&h4), r1)
			}
		}
	})
}

func FuzzCombined(f *testing.F) {
	fuzzGolden(f, "combined", []string{"combined", "clf_variants", "nginx_combined", "apache_combined_D", "time_range"},
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 1 "r" "u\"a"`)
}

func FuzzCommon(f *testing.F) {
	fuzzGolden(f, "common", []string{"common", "apache_common"},
		`1.2.3.4 - u [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 -`)
}

func FuzzVhostCombined(f *testing.F) {
	fuzzGolden(f, "vhost_combined", []string{"vhost_combined", "apache_vhost_combined"},
		`h:443 1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`)
}

func FuzzMain(f *testing.F) {
	fuzzGolden(f, "main", []string{"nginx_main", "main_pasted"},
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" "203.0.113.7, 10.0.0.1"`)
}

func FuzzTimedCombined(f *testing.F) {
	fuzzFormat(f, "timed_combined",
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 502 1 "-" "-" 0.004 0.001, 0.002 : 0.003 p`)
}

func FuzzUpstreamInfo(f *testing.F) {
	fuzzFormat(f, "upstreaminfo",
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 502 1 "-" "-" 300 0.004 [a-b-80] [] 10.0.0.1:80, 10.0.0.2:80 0, 1 0.001, 0.002 502, 502 abc`)
}

func FuzzCompression(f *testing.F) {
	fuzzFormat(f, "compression",
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" "2.75"`)
}

func FuzzLogFormat(f *testing.F) {
	fuzzFormat(f, `$time_iso8601 $host $remote_addr "$request_method $request_uri $server_protocol" $status $bytes_sent $request_time "$http_user_agent"`,
		`2026-11-22T13:55:36+01:00 h 1.2.3.4 "GET /a?b HTTP/1.1" 200 9 0.001 "ua"`)
}

// An nginx log_format pasted whole: quoted pieces, upstream lists.
func FuzzNginxUpstream(f *testing.F) {
	format, err := os.ReadFile("testdata/golden/nginx_upstream.format")
	if err != nil {
		f.Fatal(err)
	}
	fuzzGolden(f, string(format), []string{"nginx_upstream"},
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 502 1 "-" "-" 0.004 0.001, 0.002 : 0.003 10.0.0.1:80, unix:/s 502, 200`)
}

func FuzzNginxEscapeJSON(f *testing.F) {
	format, err := os.ReadFile("testdata/golden/nginx_escape_json.format")
	if err != nil {
		f.Fatal(err)
	}
	fuzzGolden(f, string(format), []string{"nginx_escape_json"},
		`1.2.3.4 [22/Nov/2026:10:00:00 +0000] "GET /\u00e9\"x HTTP/1.1" 200 "a\\b" "-"`)
}

// An Apache LogFormat directive pasted whole, with %D.
func FuzzApacheCombinedD(f *testing.F) {
	fuzzGolden(f, `LogFormat "%h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\" %D" combined_D`, []string{"apache_combined_D"},
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /\xff\"x HTTP/1.1" 200 1 "-" "\\ua" 475`)
}

// Apache times in pieces and strftime, epochs, conditions, %U%q.
func FuzzApacheTimes(f *testing.F) {
	fuzzGolden(f, `[%{%d/%b/%Y %T}t.%{msec_frac}t %{%z}t] %{c}a %a "%m %U%q %H" %>s %b %{us}T %{%A %B %e %Y %I:%M %p %Z}t %{usec}t %!200s`,
		[]string{"apache_msec_frac", "apache_strftime", "apache_epoch"},
		`[25/Nov/2026 11:40:10.109 +0000] 10.0.0.1 127.0.0.1 "GET /a?b HTTP/1.1" 200 6 475 Sunday November  1 2026 01:05 PM GMT 1795606810123456 -`)
}

func FuzzJSON(f *testing.F) {
	fuzzGolden(f, "json", []string{"json"}, `{"time":"2026-11-22T10:00:00Z","request":"GET /\u00e9 HTTP/1.1","status":200,"x":[{"y":"}"}]}`)
}
