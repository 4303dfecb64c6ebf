package parser

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// serverNames are the formats of servers.go; each has a golden file of the
// same name.
func serverNames() []string { return serverFormatNames() }

func TestServerFormatsAreListedAndBuilt(t *testing.T) {
	for _, name := range serverNames() {
		if !slices.Contains(Formats(), name) {
			t.Errorf("Formats() lacks %q", name)
		}
		p, err := New(name)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if p.Format() != name {
			t.Errorf("Format() = %q, want %q", p.Format(), name)
		}
		wantDirectives := name == "w3c" || name == "cloudfront" || name == "gcs"
		if p.Directives() != wantDirectives {
			t.Errorf("%s: Directives() = %v, want %v", name, p.Directives(), wantDirectives)
		}
	}
}

// Times logged without a zone are read in Options.Location: HAProxy's accept
// date, W3C's date and time from a writer that logs local time, Caddy's
// "wall" time format. Zoned times ignore it.
func TestServerZonelessTimesUseLocation(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, format, line string
		loc                *time.Location
		want               string // RFC 3339 in the zone the hit carries
	}{
		{"haproxy utc by default", "haproxy",
			`10.0.1.2:33317 [06/Feb/2009:12:14:14.655] fe be/s 1/0/0/1/2 200 1 - - ---- 0/0/0/0/0 0/0 "GET / HTTP/1.1"`,
			nil, "2009-02-06T12:14:14.655Z"},
		{"haproxy winter", "haproxy",
			`10.0.1.2:33317 [06/Feb/2009:12:14:14.655] fe be/s 1/0/0/1/2 200 1 - - ---- 0/0/0/0/0 0/0 "GET / HTTP/1.1"`,
			berlin, "2009-02-06T12:14:14.655+01:00"},
		{"haproxy summer", "haproxy",
			`10.0.1.2:33317 [06/Jul/2009:12:14:14.655] fe be/s 1/0/0/1/2 200 1 - - ---- 0/0/0/0/0 0/0 "GET / HTTP/1.1"`,
			berlin, "2009-07-06T12:14:14.655+02:00"},
		{"w3c local time", "w3c",
			`2026-07-01 10:00:00 10.0.0.5 GET / - 80 - 192.0.2.1 curl/8 - 200 0 0 1`,
			berlin, "2026-07-01T10:00:00+02:00"},
		{"caddy wall", "caddy",
			`{"ts":"2026/01/15 10:00:00","request":{"remote_ip":"::1","method":"GET","uri":"/"},"status":200}`,
			berlin, "2026-01-15T10:00:00+01:00"},
		{"caddy rfc3339 ignores the location", "caddy",
			`{"ts":"2026-01-15T10:00:00Z","request":{"remote_ip":"::1","method":"GET","uri":"/"},"status":200}`,
			berlin, "2026-01-15T10:00:00Z"},
		{"squid epoch ignores the location", "squid",
			`1286536308.779    180 192.168.0.224 TCP_MISS/200 411 GET http://a.example/ - DIRECT/192.0.2.1 text/plain`,
			berlin, "2010-10-08T11:11:48.779Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewWith(c.format, Options{Location: c.loc})
			if err != nil {
				t.Fatal(err)
			}
			var h Hit
			// Twice: the second parse comes from the time cache.
			for range 2 {
				if err := p.Parse([]byte(c.line), &h); err != nil {
					t.Fatal(err)
				}
				if got := h.Time().Format(time.RFC3339Nano); got != c.want {
					t.Errorf("time %s, want %s", got, c.want)
				}
			}
		})
	}
}

// A W3C file resumed part way through is read with the columns its header
// named only if the Parser was primed with that header.
func TestPrimeAppliesHeaderLines(t *testing.T) {
	file := []string{
		"#Software: Microsoft Internet Information Services 10.0",
		"#Version: 1.0",
		"#Date: 2026-11-22 10:00:00",
		"#Fields: date time c-ip cs-method cs-uri-stem sc-status cs-host",
		"2026-11-22 10:00:00 192.0.2.1 GET /first 200 www.example.com",
	}
	resumed := []byte("2026-11-22 10:00:01 192.0.2.2 GET /second 404 www.example.com\n")

	var h Hit
	fresh := mustNew(t, "w3c")
	var pe *Error
	if err := fresh.Parse(resumed, &h); !errors.As(err, &pe) || pe.Field != "line" {
		t.Fatalf("an unprimed parser read the line with IIS's default columns: %v", err)
	}

	primed := mustNew(t, "w3c")
	var directives int
	for _, l := range file {
		if primed.Prime([]byte(l + "\n")) {
			directives++
		}
	}
	if directives != 4 {
		t.Errorf("Prime took %d lines as headers, want 4", directives)
	}
	if err := primed.Parse(resumed, &h); err != nil {
		t.Fatal(err)
	}
	eq(t, "path", h.Path, "/second")
	eq(t, "host", h.Host, "www.example.com")
	if h.Status != 404 {
		t.Errorf("status %d", h.Status)
	}

	// Parse on a header line is the same as Prime, and says so.
	parsed := mustNew(t, "w3c")
	for _, l := range file[:4] {
		if err := parsed.Parse([]byte(l), &h); !errors.Is(err, ErrDirective) {
			t.Fatalf("Parse(%q) = %v, want ErrDirective", l, err)
		}
	}
	if err := parsed.Parse(resumed, &h); err != nil {
		t.Fatal(err)
	}

	// Cloud Storage's header is a CSV line, not a '#' line.
	gcs := mustNew(t, "gcs")
	if !gcs.Prime([]byte(`"time_micros","c_ip","cs_method","cs_uri","sc_status"`)) {
		t.Error("the gcs header was not taken as one")
	}
	if err := gcs.Parse([]byte(`"1734524400000000","192.0.2.1","GET","/x","200"`), &h); err != nil {
		t.Error(err)
	}

	// Formats without headers have nothing to prime.
	if mustNew(t, "combined").Prime([]byte("#Fields: date time")) || mustNew(t, "haproxy").Prime([]byte("#x")) {
		t.Error("Prime took a line as a header for a format without headers")
	}
	if primed.Prime(resumed) {
		t.Error("Prime took a data line as a header")
	}
}

// validGoldenLines returns, for a format, the lines of its golden log that
// parse, with the header lines before each (to prime a fresh Parser).
func validGoldenLines(t testing.TB, format string) (lines, headers [][][]byte) {
	input, err := os.ReadFile(filepath.Join("testdata", "golden", format+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p := mustNew(t, format)
	var seen [][]byte
	var h Hit
	for _, l := range bytes.Split(input, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		err := p.Parse(l, &h)
		if errors.Is(err, ErrDirective) {
			seen = append(seen, l)
			continue
		}
		if err == nil {
			lines = append(lines, [][]byte{l})
			headers = append(headers, slices.Clone(seen))
		}
	}
	return lines, headers
}

// Every valid line of every server format costs no allocation, in UTC and in
// a zone with DST, from the time cache and without it.
func TestServerFormatsAllocateNothing(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range serverNames() {
		lines, headers := validGoldenLines(t, name)
		if len(lines) < 3 {
			t.Fatalf("%s: only %d valid golden lines", name, len(lines))
		}
		for _, loc := range []*time.Location{nil, berlin} {
			for i, l := range lines {
				p, err := NewWith(name, Options{Location: loc})
				if err != nil {
					t.Fatal(err)
				}
				for _, hl := range headers[i] {
					p.Prime(hl)
				}
				var h Hit
				line := l[0]
				if n := testing.AllocsPerRun(50, func() {
					if err := p.Parse(line, &h); err != nil {
						t.Fatal(err)
					}
				}); n != 0 {
					t.Errorf("%s: %.1f allocations for %q", name, n, line)
				}
			}
		}
	}
}

// One check per format of what the golden files cannot show: the fields a
// test names, and that the documented line keeps parsing into them.
func TestServerFields(t *testing.T) {
	cases := []struct {
		name, format, line string
		check              func(t *testing.T, h *Hit)
	}{
		{"caddy client_ip wins over remote_ip", "caddy",
			`{"ts":1,"request":{"remote_ip":"10.0.0.2","client_ip":"198.51.100.4","method":"GET","uri":"/"}}`,
			func(t *testing.T, h *Hit) { eq(t, "addr", h.RemoteAddr, "198.51.100.4") }},
		{"caddy header names in any case", "caddy",
			`{"ts":1,"request":{"remote_ip":"::1","method":"GET","uri":"/","headers":{"user-agent":["a"],"REFERER":["r"]}}}`,
			func(t *testing.T, h *Hit) { eq(t, "ua", h.UserAgent, "a"); eq(t, "referer", h.Referer, "r") }},
		{"caddy nanosecond ts and duration", "caddy",
			`{"ts":1646861401524102400,"request":{"method":"GET","uri":"/"},"duration":1500000}`,
			func(t *testing.T, h *Hit) {
				if h.Unix != 1646861401 || h.Nanos != 524102400 || h.RequestTime != 1500*time.Microsecond {
					t.Errorf("unix %d nanos %d duration %v", h.Unix, h.Nanos, h.RequestTime)
				}
			}},
		{"alb request time is the sum of its three times", "alb",
			`https 2018-07-02T22:23:00.186641Z app/lb/1 192.168.131.39:2817 10.0.0.1:80 0.086 0.048 0.037 200 200 0 57 "GET https://www.example.com:443/ HTTP/1.1" "curl/7.46.0" - -`,
			func(t *testing.T, h *Hit) {
				if h.RequestTime != 171*time.Millisecond {
					t.Errorf("request time %v", h.RequestTime)
				}
			}},
		{"cloudfront viewer host wins over the distribution", "cloudfront",
			"2019-12-13\t22:36:27\tSEA19-C1\t900\t192.0.2.200\tGET\td111111abcdef8.cloudfront.net\t/\t502\t-\tcurl/7\t-\t-\tError\tid\twww.example.com\thttp\t675\t0.102\t-\t-\t-\tError\tHTTP/1.1\t-\t-\t25260\t0.102\tOriginDnsError\ttext/html\t507\t-\t-",
			func(t *testing.T, h *Hit) { eq(t, "host", h.Host, "www.example.com") }},
		{"s3 dash bytes are zero", "s3",
			`o b [06/Feb/2019:00:01:57 +0000] 192.0.2.3 - id REST.PUT.OBJECT k "PUT /b/k HTTP/1.1" 200 - - 4406583 41754 28 "-" "S3Console/0.4" -`,
			func(t *testing.T, h *Hit) {
				if h.Has&HasBytes == 0 || h.Bytes != 0 {
					t.Errorf("bytes has=%v %d, want present 0", h.Has&HasBytes != 0, h.Bytes)
				}
			}},
		{"squid connect host", "squid",
			`1772446529.880 1843210 192.168.10.23 TCP_TUNNEL/200 48213 CONNECT [2001:db8::1]:443 - HIER_DIRECT/203.0.113.10 -`,
			func(t *testing.T, h *Hit) { eq(t, "host", h.Host, "[2001:db8::1]") }},
		{"haproxy ipv6 client keeps all its groups", "haproxy",
			`2001:db8::1:43210 [22/Nov/2026:10:00:00.001] fe be/s1 0/0/1/2/3 200 512 - - ---- 1/1/0/0/0 0/0 "GET / HTTP/1.1"`,
			func(t *testing.T, h *Hit) { eq(t, "addr", h.RemoteAddr, "2001:db8::1") }},
		{"w3c time-taken with a point is seconds", "w3c",
			`2026-11-22 10:00:00 10.0.0.5 GET / - 80 - 192.0.2.1 curl/8 - 200 0 0 0.25`,
			func(t *testing.T, h *Hit) {
				if h.RequestTime != 250*time.Millisecond {
					t.Errorf("request time %v", h.RequestTime)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h Hit
			if err := mustNew(t, c.format).Parse([]byte(c.line), &h); err != nil {
				t.Fatalf("parse: %v", err)
			}
			c.check(t, &h)
		})
	}
}

// A Caddy ts written as a string is read by its form, a number as Unix
// seconds: the time cache must not take "0" for 0 because the last line's
// number had the same bytes.
func TestCaddyTimeCacheKeepsStringAndNumberApart(t *testing.T) {
	const num = `{"ts":0,"request":{"remote_ip":"1.2.3.4","method":"GET","uri":"/","proto":"HTTP/1.1","host":"a"},"status":200,"size":1}`
	const str = `{"ts":"0","request":{"remote_ip":"1.2.3.4","method":"GET","uri":"/","proto":"HTTP/1.1","host":"a"},"status":200,"size":1}`
	var h Hit
	fresh, _ := New("caddy")
	wantErr := fresh.Parse([]byte(str), &h) != nil
	p, _ := New("caddy")
	if err := p.Parse([]byte(num), &h); err != nil {
		t.Fatalf("number ts: %v", err)
	}
	if gotErr := p.Parse([]byte(str), &h) != nil; gotErr != wantErr {
		t.Fatalf("string ts after a number ts: rejected=%v, a fresh parser: rejected=%v", gotErr, wantErr)
	}
}

// IIS Advanced Logging's date-local and time-local are the time when the
// header has no UTC date and time, and are ignored when it has.
func TestW3CLocalDateTime(t *testing.T) {
	cases := []struct{ name, fields, line, want string }{
		{"local only", "date-local time-local cs-uri-stem", "2012-08-15 17:00:00 /a", "2012-08-15T17:00:00Z"},
		{"UTC first", "date time date-local time-local cs-uri-stem", "2012-08-15 15:00:00 2012-08-15 17:00:00 /a", "2012-08-15T15:00:00Z"},
		{"local first", "date-local time-local date time cs-uri-stem", "2012-08-15 17:00:00 2012-08-15 15:00:00 /a", "2012-08-15T15:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustNew(t, "w3c")
			var h Hit
			if err := p.Parse([]byte("#Fields: "+c.fields), &h); !errors.Is(err, ErrDirective) {
				t.Fatalf("header: %v", err)
			}
			if err := p.Parse([]byte(c.line), &h); err != nil {
				t.Fatal(err)
			}
			if got := h.Time().UTC().Format(time.RFC3339); got != c.want {
				t.Errorf("time %s, want %s", got, c.want)
			}
		})
	}
}
