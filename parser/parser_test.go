package parser

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustNew(t testing.TB, format string) *Parser {
	t.Helper()
	p, err := New(format)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The guarantees operators rely on, one tricky real-world line each.
func TestParseFields(t *testing.T) {
	cases := []struct {
		name, format, line string
		check              func(t *testing.T, h *Hit)
	}{
		{"ipv6 client", "combined", `2001:db8::1 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`,
			func(t *testing.T, h *Hit) { eq(t, "addr", h.RemoteAddr, "2001:db8::1") }},
		{"dash bytes is absent, not zero", "common", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "HEAD / HTTP/1.1" 200 -`,
			func(t *testing.T, h *Hit) {
				if h.Has&HasBytes != 0 || h.Bytes != 0 {
					t.Errorf("bytes: has=%v %d, want absent", h.Has&HasBytes != 0, h.Bytes)
				}
			}},
		{"apache escaped quote in user agent", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "a \"b\" \\c"`,
			func(t *testing.T, h *Hit) { eq(t, "ua", h.UserAgent, `a "b" \c`) }},
		{"nginx hex escapes decoded", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /caf\xC3\xA9 HTTP/1.1" 200 1 "-" "q\x22"`,
			func(t *testing.T, h *Hit) { eq(t, "path", h.Path, "/café"); eq(t, "ua", h.UserAgent, `q"`) }},
		{"percent-encoding kept as logged", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a%2Fb?x=%20 HTTP/1.1" 200 1 "-" "-"`,
			func(t *testing.T, h *Hit) { eq(t, "path", h.Path, "/a%2Fb"); eq(t, "query", h.Query, "x=%20") }},
		{"over-long url", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /` + strings.Repeat("x", 100_000) + ` HTTP/1.1" 414 0 "-" "-"`,
			func(t *testing.T, h *Hit) {
				if len(h.Path) != 100_001 {
					t.Errorf("path length %d, want 100001", len(h.Path))
				}
			}},
		{"invalid utf-8 kept byte for byte", "combined", "1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] \"GET /\xff\xfe HTTP/1.1\" 200 1 \"-\" \"\xc3\"",
			func(t *testing.T, h *Hit) { eq(t, "path", h.Path, "/\xff\xfe"); eq(t, "ua", h.UserAgent, "\xc3") }},
		{"tls handshake on a plain port is a logged request", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "\x16\x03\x01\x00\xa5\x01" 400 157 "-" "-"`,
			func(t *testing.T, h *Hit) {
				eq(t, "bad_request", h.BadRequest, "\x16\x03\x01\x00\xa5\x01")
				if h.Method != nil || h.Path != nil || h.Status != 400 {
					t.Errorf("method %q path %q status %d", h.Method, h.Path, h.Status)
				}
			}},
		{"crlf ending", "combined", "1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] \"GET /x HTTP/1.1\" 200 1 \"-\" \"ua\"\r\n",
			func(t *testing.T, h *Hit) { eq(t, "ua", h.UserAgent, "ua") }},
		{"time zone kept", "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 -0930] "GET / HTTP/1.1" 200 1 "-" "-"`,
			func(t *testing.T, h *Hit) {
				if h.ZoneOffset != -(9*3600+30*60) || h.Time().UTC().Hour() != 19 || h.Time().UTC().Minute() != 30 {
					t.Errorf("time %v offset %d", h.Time(), h.ZoneOffset)
				}
			}},
		{"vhost", "vhost_combined", `blog.example.com:443 1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`,
			func(t *testing.T, h *Hit) { eq(t, "host", h.Host, "blog.example.com") }},
		{"request time", `$remote_addr [$time_local] "$request" $status $request_time`, `1.2.3.4 [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 0.250`,
			func(t *testing.T, h *Hit) {
				if h.RequestTime != 250*time.Millisecond {
					t.Errorf("request time %v", h.RequestTime)
				}
			}},
		{"json escapes", "json", `{"time":"2026-11-22T10:00:00Z","request":"GET /\u00e9\"x HTTP/1.1","status":200}`,
			func(t *testing.T, h *Hit) { eq(t, "path", h.Path, `/é"x`) }},
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

func eq(t *testing.T, name string, got []byte, want string) {
	t.Helper()
	if string(got) != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

// A line that does not parse says which field and where.
func TestParseErrorNamesFieldAndColumn(t *testing.T) {
	cases := []struct {
		format, line, field string
		col                 int
	}{
		{"combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 2x0 1 "-" "-"`, "status", 59},
		{"combined", `1.2.3.4 - - [32/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`, "time_local", 14},
		// A named format ignores what follows a space after its last field;
		// anything else after it, or anything after a format string, is a reject.
		{"combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"extra`, "line", 72},
		{`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`,
			`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" extra`, "line", 72},
		{"combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] 200 1 "-" "-"`, "time_local", 40},
		{"combined", `1.2.3.4 - - "GET / HTTP/1.1" 200 1 "-" "-"`, "remote_user", 11},
		{`%h %l %u %t "%r" %>s %b`, `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 20 1`, "%>s", 59},
		{`%h %{%Y-%m-%d %T}t "%r" %>s`, `1.2.3.4 2026-11-22 10:0:00 "GET / HTTP/1.1" 200`, "%{%Y-%m-%d %T}t", 23},
		{`%h %t "%r" %>s %D`, `1.2.3.4 [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 0.5`, "%D", 59},
		{"combined", "", "line", 1},
		{"json", `{"time":"2026-11-22T10:00:00Z","status":"abc"}`, "status", 42},
		{"json", `{"time":"2026-11-22T10:00:00Z"`, "json", 31},
	}
	for _, c := range cases {
		var h Hit
		err := mustNew(t, c.format).Parse([]byte(c.line), &h)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: err = %v, want *Error", c.line, err)
			continue
		}
		if pe.Field != c.field || pe.Column != c.col {
			t.Errorf("%q: error %q names %s at %d, want %s at %d", c.line, err, pe.Field, pe.Column, c.field, c.col)
		}
	}
}

func TestNewRejectsBadFormats(t *testing.T) {
	for _, f := range []string{"", "nginx", "$remote_addr$status [$time_local]", "${unclosed [$time_local]", "$remote_addr $status"} {
		if _, err := New(f); err == nil {
			t.Errorf("New(%q) accepted a format it cannot parse", f)
		}
	}
}

// Our hand-written date arithmetic agrees with the standard library over a wide
// span of random instants and zones, through the per-parser cache too.
func TestTimeMatchesStdlib(t *testing.T) {
	p := mustNew(t, `[$time_local] $remote_addr`)
	iso := mustNew(t, `$time_iso8601 $remote_addr`)
	rng := rand.New(rand.NewPCG(1, 2))
	var h Hit
	for i := 0; i < 20000; i++ {
		sec := rng.Int64N(int64(200*365*86400)) - int64(30*365*86400)
		zone := time.FixedZone("", (rng.IntN(28*4)-14*4)*15*60)
		want := time.Unix(sec, 0).In(zone)
		for _, c := range []struct {
			p    *Parser
			line string
		}{
			{p, "[" + want.Format("02/Jan/2006:15:04:05 -0700") + "] 1.2.3.4"},
			{iso, want.Format("2006-01-02T15:04:05-07:00") + " 1.2.3.4"},
		} {
			for range 2 { // the second parse comes from the cache
				if err := c.p.Parse([]byte(c.line), &h); err != nil {
					t.Fatalf("%s: %v", c.line, err)
				}
				if got := h.Time(); !got.Equal(want) || h.ZoneOffset != int32(offset(want)) {
					t.Fatalf("%s: got %v, want %v", c.line, got, want)
				}
			}
		}
	}
}

func offset(t time.Time) int { _, off := t.Zone(); return off }

// A Parser reused across lines gives the same result as a fresh one: nothing
// of one line leaks into the next.
func TestReuseMatchesFresh(t *testing.T) {
	lines := sampleLines(500, 1)
	p := mustNew(t, "combined")
	var a, b Hit
	for _, l := range lines {
		errA := p.Parse(l, &a)
		errB := mustNew(t, "combined").Parse(l, &b)
		if fmt.Sprint(errA) != fmt.Sprint(errB) || render(&a) != render(&b) {
			t.Fatalf("%q: reused %v %s, fresh %v %s", l, errA, render(&a), errB, render(&b))
		}
	}
}

var samplePaths = []string{"/", "/pricing", "/blog/post-1", "/blog/post-2?utm_source=news", "/api/v1/items/12345", "/static/app.3f9a1c.js", "/checkout", "/search?q=red+shoes&page=2"}
var sampleUAs = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1",
	"curl/8.5.0",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
}

// sampleLines generates realistic combined lines: many requests per second, as a
// busy server logs them.
func sampleLines(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600))
	out := make([][]byte, n)
	for i := range out {
		ts := base.Add(time.Duration(i/50) * time.Second)
		out[i] = []byte(fmt.Sprintf(`203.0.%d.%d - - [%s] "GET %s HTTP/1.1" %d %d "https://www.example.com/" "%s"`,
			rng.IntN(256), rng.IntN(256), ts.Format("02/Jan/2006:15:04:05 -0700"),
			samplePaths[rng.IntN(len(samplePaths))], []int{200, 200, 200, 304, 404, 500}[rng.IntN(6)],
			rng.IntN(100000), sampleUAs[rng.IntN(len(sampleUAs))]))
	}
	return out
}
