package parser

import (
	"fmt"
	"testing"
	"time"
)

// benchFormats are the formats measured, by benchmark name: every kind of
// token the parser has (named CLF, nginx and Apache format strings, pasted
// directives, strftime times, lists, JSON escapes).
var benchFormats = []struct{ name, format string }{
	{"combined", "combined"},
	{"common", "common"},
	{"vhost_combined", "vhost_combined"},
	{"json", "json"},
	{"log_format", `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time`},
	{"main", "main"},
	{"apache_combined_D", `LogFormat "%h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\" %D" combined_D`},
	{"apache_strftime", `[%{%d/%b/%Y %T}t.%{msec_frac}t %{%z}t] %h "%m %U%q %H" %>s %b %{us}T`},
	{"nginx_upstream", "log_format timed '$remote_addr - $remote_user [$time_local] \"$request\" '\n" +
		"  '$status $body_bytes_sent \"$http_referer\" \"$http_user_agent\" $request_time $upstream_response_time';"},
	{"nginx_escape_json", `log_format j escape=json '$remote_addr [$time_local] "$request" $status "$http_user_agent"';`},
	{"timed_combined", "timed_combined"},
	{"upstreaminfo", "upstreaminfo"},
	{"compression", "compression"},
}

// benchLines renders the sample traffic in each format so that every format is
// measured on the same requests.
func benchLines(name string, n int) [][]byte {
	out := sampleLines(n, 7)
	if name == "combined" {
		return out
	}
	p, _ := New("combined")
	var h Hit
	for i, l := range out {
		if err := p.Parse(l, &h); err != nil {
			panic(err)
		}
		ts := h.Time()
		clf := ts.Format("02/Jan/2006:15:04:05 -0700")
		target := string(h.Path)
		if len(h.Query) > 0 {
			target += "?" + string(h.Query)
		}
		req := h.Method
		switch name {
		case "common":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes)
		case "vhost_combined":
			out[i] = fmt.Appendf(nil, `www.example.com:443 %s - - [%s] "%s %s %s" %d %d "%s" "%s"`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent)
		case "json":
			out[i] = fmt.Appendf(nil, `{"time":"%s","remote_addr":"%s","request":"%s %s %s","status":%d,"body_bytes_sent":%d,"http_referer":"%s","http_user_agent":"%s","request_time":"0.004"}`,
				ts.Format(time.RFC3339), h.RemoteAddr, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent)
		case "log_format":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" 0.004`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent)
		case "main":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" "203.0.113.%d, 10.0.0.1"`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent, i%250)
		case "apache_combined_D":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" %d`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent, 100+i%5000)
		case "apache_strftime":
			out[i] = fmt.Appendf(nil, `[%s.%03d %s] %s "%s %s %s" %d %d %d`, ts.Format("02/Jan/2006 15:04:05"), i%1000, ts.Format("-0700"), h.RemoteAddr, req, target, h.Protocol, h.Status, h.Bytes, 100+i%5000)
		case "nginx_upstream":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" 0.004 0.001, 0.003`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent)
		case "nginx_escape_json":
			out[i] = fmt.Appendf(nil, `%s [%s] "%s %s %s" %d "%s"`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.UserAgent)
		case "timed_combined":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" 0.%03d 0.%03d %c`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent, 4+i%500, 3+i%500, ".p"[i%2])
		case "upstreaminfo":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" %d 0.%03d [default-web-80] [] 10.244.1.%d:80 %d 0.%03d %d %032x`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes, h.Referer, h.UserAgent,
				300+i%200, 4+i%500, 1+i%250, h.Bytes, 3+i%500, h.Status, i*7919)
		case "compression":
			out[i] = fmt.Appendf(nil, `%s - - [%s] "%s %s %s" %d %d "%s" "%s" "%d.%02d"`, h.RemoteAddr, clf, req, target, h.Protocol, h.Status, h.Bytes+230, h.Referer, h.UserAgent, 1+i%4, i%100)
		default:
			panic("no sample lines for " + name)
		}
	}
	return out
}

// BenchmarkParse reports ns, bytes and allocations per line for every format.
// The target for combined is >= 3 million lines per second per core (<= 333
// ns/op) with 0 allocs/op; the lines/s metric reports it directly. Every
// format must stay at 0 allocs/op.
func BenchmarkParse(b *testing.B) {
	for _, f := range benchFormats {
		b.Run(f.name, func(b *testing.B) {
			lines := benchLines(f.name, 4096)
			p, err := New(f.format)
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			for _, l := range lines {
				size += int64(len(l))
			}
			b.SetBytes(size / int64(len(lines)))
			b.ReportAllocs()
			var h Hit
			i := 0
			for b.Loop() {
				if err := p.Parse(lines[i&4095], &h); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// Every format parses its benchmark lines without an allocation: the
// benchmarks report it, this fails the suite when it stops being true.
func TestNoAllocations(t *testing.T) {
	for _, f := range benchFormats {
		lines := benchLines(f.name, 64)
		p := mustNew(t, f.format)
		var h Hit
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			if err := p.Parse(lines[i%len(lines)], &h); err != nil {
				t.Fatalf("%s: %v", f.name, err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per line, want 0", f.name, allocs)
		}
	}
}
