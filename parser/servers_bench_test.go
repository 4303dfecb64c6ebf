package parser

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serverBenchLines renders the sample traffic (the combined benchmark's
// requests) as each server format writes it, so that every format is measured
// on the same requests. header is the format's header line, to prime with.
func serverBenchLines(format string, n int) (lines [][]byte, header []byte) {
	src := sampleLines(n, 7)
	p, _ := New("combined")
	var h Hit
	out := make([][]byte, len(src))
	for i, l := range src {
		if err := p.Parse(l, &h); err != nil {
			panic(err)
		}
		ts := h.Time().UTC()
		target := string(h.Path)
		query := "-"
		if h.Query != nil {
			target += "?" + string(h.Query)
			query = string(h.Query)
		}
		js := func(s []byte) string { b, _ := json.Marshal(string(s)); return string(b) }
		var line string
		switch format {
		case "caddy":
			line = fmt.Sprintf(`{"level":"info","ts":%d.%07d,"logger":"http.log.access.log0","msg":"handled request","request":{"remote_ip":"%s","remote_port":"41342","client_ip":"%s","proto":"%s","method":"%s","host":"www.example.com","uri":%s,"headers":{"User-Agent":[%s],"Referer":[%s],"Accept":["*/*"],"Accept-Encoding":["gzip, deflate, br"]},"tls":{"resumed":false,"version":772,"cipher_suite":4865,"proto":"h2","server_name":"www.example.com"}},"bytes_read":0,"user_id":"","duration":0.000929675,"size":%d,"status":%d,"resp_headers":{"Server":["Caddy"],"Content-Type":["text/html; charset=utf-8"]}}`,
				ts.Unix(), i%10_000_000, h.RemoteAddr, h.RemoteAddr, h.Protocol, h.Method, js([]byte(target)), js(h.UserAgent), js(h.Referer), h.Bytes, h.Status)
		case "traefik":
			line = string(l) + ` 1234 "web@docker" "http://172.18.0.3:80" 2ms`
		case "w3c":
			header = []byte("#Fields: " + iisFields)
			line = fmt.Sprintf("%s 10.0.0.5 %s %s %s 443 - %s %s %s %d 0 0 15",
				ts.Format("2006-01-02 15:04:05"), h.Method, h.Path, query, h.RemoteAddr,
				strings.ReplaceAll(string(h.UserAgent), " ", "+"), h.Referer, h.Status)
		case "cloudfront":
			header = []byte("#Fields: " + cloudFrontFields)
			line = strings.Join([]string{ts.Format("2006-01-02"), ts.Format("15:04:05"), "LAX1", fmt.Sprint(h.Bytes), string(h.RemoteAddr),
				string(h.Method), "d111111abcdef8.cloudfront.net", string(h.Path), fmt.Sprint(h.Status), string(h.Referer),
				strings.ReplaceAll(url.PathEscape(string(h.UserAgent)), "%2F", "/"), query, "-", "Hit",
				"SOX4xwn4XV6Q4rgb7XiVGOHms_BGlTAC4KyHmureZmBNrjGdRLiNIQ==", "www.example.com", "https", "23", "0.001", "-",
				"TLSv1.3", "TLS_AES_128_GCM_SHA256", "Hit", "HTTP/2.0", "-", "-", "11040", "0.001", "Hit", "text/html", "78", "-", "-"}, "\t")
		case "alb":
			line = fmt.Sprintf(`https %s app/my-loadbalancer/50dc6c495c0c9188 %s:2817 10.0.0.1:80 0.000 0.001 0.000 %d %d 34 %d "%s https://www.example.com:443%s %s" %s ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:us-east-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067 "Root=1-58337262-36d228ad5d99923122bbe354" "www.example.com" "arn:aws:acm:us-east-2:123456789012:certificate/12345678-1234-1234-1234-123456789012" 0 %s "forward" "-" "-" "10.0.0.1:80" "200" "-" "-" TID_1234abcd5678ef90`,
				ts.Format("2006-01-02T15:04:05.000000Z"), h.RemoteAddr, h.Status, h.Status, h.Bytes, h.Method, target, h.Protocol, js(h.UserAgent), ts.Add(-time.Millisecond).Format("2006-01-02T15:04:05.000000Z"))
		case "elb":
			line = fmt.Sprintf(`%s my-loadbalancer %s:2817 10.0.0.1:80 0.000073 0.001048 0.000057 %d %d 0 %d "%s https://www.example.com:443%s %s" %s DHE-RSA-AES128-SHA TLSv1.2`,
				ts.Format("2006-01-02T15:04:05.000000Z"), h.RemoteAddr, h.Status, h.Status, h.Bytes, h.Method, target, h.Protocol, js(h.UserAgent))
		case "s3":
			line = fmt.Sprintf(`79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be awsexamplebucket1 [%s] %s - 3E57427F3EXAMPLE WEBSITE.GET.OBJECT key "%s %s %s" %d - %d 4406583 41 28 "%s" %s - s9lzHYrFp76ZVxRcpX9+5cjAnEH2ROuNkd2BHfIa6UkFVdtjf5mKR3/eTPFvsiP/XV/VLi31234= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader awsexamplebucket1.s3.us-west-1.amazonaws.com TLSv1.2`,
				ts.Format("02/Jan/2006:15:04:05 -0700"), h.RemoteAddr, h.Method, target, h.Protocol, h.Status, h.Bytes, h.Referer, js(h.UserAgent))
		case "gcs":
			header = []byte(`"time_micros","c_ip","c_ip_type","c_ip_region","cs_method","cs_uri","sc_status","cs_bytes","sc_bytes","time_taken_micros","cs_host","cs_referer","cs_user_agent","s_request_id","cs_operation","cs_bucket","cs_object"`)
			line = fmt.Sprintf(`"%d","%s","1","","%s","%s","%d","0","%d","488000","storage.googleapis.com","%s","%s","ADPycduvHuLfdAtc-f-Uyl-AONU9elsqMfPUaul2F0vpty","GET_Object","bucket","object"`,
				ts.UnixMicro(), h.RemoteAddr, h.Method, target, h.Status, h.Bytes, h.Referer, strings.ReplaceAll(string(h.UserAgent), `"`, `""`))
		case "haproxy":
			line = fmt.Sprintf(`%s lb haproxy[14389]: %s:33317 [%s] http-in static/srv1 10/0/30/69/109 %d %d - - ---- 1/1/1/1/0 0/0 "%s %s %s"`,
				ts.Format("Jan _2 15:04:05"), h.RemoteAddr, ts.Format("02/Jan/2006:15:04:05.000"), h.Status, h.Bytes, h.Method, target, h.Protocol)
		case "squid":
			line = fmt.Sprintf(`%d.%03d %6d %s TCP_MISS/%03d %d %s http://www.example.com%s - HIER_DIRECT/203.0.113.10 text/html`,
				ts.Unix(), i%1000, 180, h.RemoteAddr, h.Status, h.Bytes, h.Method, target)
		default:
			panic("no renderer for " + format)
		}
		out[i] = []byte(line)
	}
	return out, header
}

// BenchmarkServerFormats reports ns, bytes and allocations per line for every
// server format, on the same sample requests as BenchmarkParse.
func BenchmarkServerFormats(b *testing.B) {
	for _, format := range serverFormatNames() {
		b.Run(format, func(b *testing.B) {
			lines, header := serverBenchLines(format, 4096)
			p, err := New(format)
			if err != nil {
				b.Fatal(err)
			}
			if header != nil && !p.Prime(header) {
				b.Fatalf("header %q not taken", header)
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
					b.Fatalf("%v: %s", err, lines[i&4095])
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

// The benchmark's lines parse into the requests they were rendered from.
func TestServerBenchLinesParse(t *testing.T) {
	for _, format := range serverFormatNames() {
		lines, header := serverBenchLines(format, 200)
		p := mustNew(t, format)
		if header != nil {
			p.Prime(header)
		}
		var h Hit
		for _, l := range lines {
			if err := p.Parse(l, &h); err != nil {
				t.Fatalf("%s: %v: %s", format, err, l)
			}
			if h.Has&HasStatus == 0 || len(h.Path) == 0 || h.Has&HasTime == 0 {
				t.Fatalf("%s: %s from %s", format, render(&h), l)
			}
		}
	}
}
