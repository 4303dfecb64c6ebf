package parser

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// Adversary findings for issue 17 against Detect (format: auto, check-log):
// files whose first lines make Detect choose a format that then loses or
// misplaces fields, or take lines that are not requests for hits. Each case
// failed when it was written; each names where its lines come from.

// det17CaddyStderr is Caddy's default log output (stderr: runtime lines and,
// with a bare `log` directive, the access lines among them): tstack/lnav
// test/logfile_caddy_log.0 lines 1-5, 16 and 39, docker compose's
// "caddy  | " prefix cut off.
var det17CaddyStderr = []string{
	`{"level":"info","ts":1761019822.3152757,"msg":"maxprocs: Leaving GOMAXPROCS=12: CPU quota undefined"}`,
	`{"level":"info","ts":1761019822.3153872,"msg":"GOMEMLIMIT is updated","package":"github.com/KimMachineGun/automemlimit/memlimit","GOMEMLIMIT":29511419904,"previous":9223372036854775807}`,
	`{"level":"info","ts":1761019822.3154097,"msg":"using config from file","file":"/etc/caddy/Caddyfile"}`,
	`{"level":"info","ts":1761019822.31575,"msg":"adapted config to JSON","adapter":"caddyfile"}`,
	`{"level":"warn","ts":1761019822.3157542,"msg":"Caddyfile input is not formatted; run 'caddy fmt --overwrite' to fix inconsistencies","adapter":"caddyfile","file":"/etc/caddy/Caddyfile","line":1}`,
	`{"level":"info","ts":1761019828.6153953,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"172.19.0.1","remote_port":"46628","client_ip":"172.19.0.1","proto":"HTTP/1.1","method":"GET","host":"localhost","uri":"/","headers":{"Accept-Encoding":["gzip, deflate, br, zstd"],"Upgrade-Insecure-Requests":["1"],"Sec-Fetch-Site":["none"],"Accept":["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],"Accept-Language":["en-US,en;q=0.5"],"Priority":["u=0, i"],"Cookie":["REDACTED"],"Sec-Fetch-Dest":["document"],"User-Agent":["Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:142.0) Gecko/20100101 Firefox/142.0"],"Sec-Fetch-Mode":["navigate"],"If-Modified-Since":["Tue, 21 Oct 2025 04:01:45 GMT"],"If-None-Match":["\"ddnp8sh5vg3i58\""],"Connection":["keep-alive"],"Sec-Fetch-User":["?1"]}},"bytes_read":0,"user_id":"","duration":0.001674508,"size":0,"status":304,"resp_headers":{"Etag":["\"ddnp8sh5vg3i58\""],"Server":["Caddy"],"Vary":["Accept-Encoding"]}}`,
	`{"level":"info","ts":1761019957.9247544,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"172.19.0.1","remote_port":"37882","client_ip":"172.19.0.1","proto":"HTTP/1.1","method":"GET","host":"localhost","uri":"/index.html","headers":{"Accept-Language":["en-US,en;q=0.5"],"Cookie":["REDACTED"],"Upgrade-Insecure-Requests":["1"],"Sec-Fetch-Mode":["navigate"],"User-Agent":["Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:142.0) Gecko/20100101 Firefox/142.0"],"Sec-Fetch-Site":["none"],"Priority":["u=0, i"],"Accept":["text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],"Accept-Encoding":["gzip, deflate, br, zstd"],"Connection":["keep-alive"],"Sec-Fetch-Dest":["document"],"Sec-Fetch-User":["?1"]}},"bytes_read":0,"user_id":"","duration":0.000073649,"size":188,"status":200,"resp_headers":{"Server":["Caddy"],"Vary":["Accept-Encoding"],"Etag":["\"ddnp8sh5vg3i58\""],"Content-Type":["text/html; charset=utf-8"],"Last-Modified":["Tue, 21 Oct 2025 04:01:45 GMT"],"Accept-Ranges":["bytes"],"Content-Length":["188"]}}`,
}

// det17Case is a file's first lines and what must hold of the format Detect
// chooses for them, checked on probe (the first line unless set) parsed
// with that format; err says no format was chosen or it rejects probe.
type det17Case struct {
	name, source string
	lines        []string
	probe        string
	check        func(d Detection, h *Hit, err error) string
}

func TestAdversary17Detect(t *testing.T) {
	clf := func(i int, tail string) string {
		return fmt.Sprintf(`192.0.2.%d - - [10/Oct/2023:13:55:%02d +0000] "GET /page/%d HTTP/1.1" 200 %d "-" "Mozilla/5.0 (X11; Linux x86_64)"%s`, i+1, i, i, 1000+i, tail)
	}
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := []det17Case{
		{
			name:   "Caddy's default output: runtime and access lines",
			source: "tstack/lnav test/logfile_caddy_log.0",
			lines:  det17CaddyStderr,
			// Today: json (7 of 7: each runtime line a hit with a time and
			// nothing else; the access lines without path or client).
			check: func(d Detection, _ *Hit, _ error) string {
				if d.Format != "caddy" {
					return "want caddy (its 2 access lines; the runtime lines rejects)"
				}
				return ""
			},
		},
		{
			name:   "Apache combined plus %T (whole seconds)",
			source: `made up to Apache's documented %T ("the time taken to serve the request, in seconds"), appended to combined as guides add it`,
			lines:  many(20, func(i int) string { return clf(i, fmt.Sprintf(" %d", []int{0, 0, 1, 0, 2, 0, 5}[i%7])) }),
			probe:  clf(4, " 2"),
			// Today: the %D candidate (tried first) reads 2 as 2µs.
			check: func(_ Detection, h *Hit, err error) string {
				if err != nil {
					return err.Error()
				}
				if h.Has&HasRequestTime != 0 && h.RequestTime != 2*time.Second {
					return fmt.Sprintf("a 2 s request read as %v", h.RequestTime)
				}
				return ""
			},
		},
		{
			name: "client list (X-Forwarded-For) as the first field",
			source: "elastic/beats filebeat/module/nginx/access/test/test.log lines 1, 3 and 6 (expected source.address 10.0.0.2, " +
				"85.181.35.98, 2a03:0000:10ff:f00f:0000:0000:0:8000; no host)",
			lines: []string{
				`10.0.0.2, 10.0.0.1, 127.0.0.1 - - [07/Dec/2016:11:05:07 +0100] "GET /ocelot HTTP/1.1" 200 571 "-" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.12; rv:49.0) Gecko/20100101 Firefox/49.0"`,
				`10.0.0.2, 10.0.0.1, 85.181.35.98 - - [07/Dec/2016:11:05:07 +0100] "GET /ocelot HTTP/1.1" 200 571 "-" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.12; rv:49.0) Gecko/20100101 Firefox/49.0"`,
				`2a03:0000:10ff:f00f:0000:0000:0:8000, 10.225.192.17 10.2.2.121 - - [30/Dec/2016:06:47:09 +0000] "GET /test.html HTTP/1.1" 404 8571 "-" "Mozilla/5.0 (compatible; Facebot 1.0; https://developers.facebook.com/docs/sharing/webmasters/crawler)"`,
			},
			probe: `2a03:0000:10ff:f00f:0000:0000:0:8000, 10.225.192.17 10.2.2.121 - - [30/Dec/2016:06:47:09 +0000] "GET /test.html HTTP/1.1" 404 8571 "-" "Mozilla/5.0 (compatible; Facebot 1.0; https://developers.facebook.com/docs/sharing/webmasters/crawler)"`,
			// Today: vhost_combined; for the probe host
			// "2a03:0000:10ff:f00f:0000:0000:0:8000," and client
			// "10.225.192.17"; for line 1 host "10.0.0.2,", client
			// "10.0.0.1,", user "-".
			check: func(_ Detection, h *Hit, err error) string {
				if err != nil {
					return "" // nothing chosen, or a reject: an honest answer
				}
				if bytes.HasSuffix(h.RemoteAddr, []byte(",")) || bytes.HasSuffix(h.Host, []byte(",")) || len(h.RemoteUser) > 0 {
					return fmt.Sprintf("client %q, host %q, user %q: pieces of the client list", h.RemoteAddr, h.Host, h.RemoteUser)
				}
				return ""
			},
		},
		{
			name: "nginx timed_combined ($request_time $upstream_response_time $pipe)",
			source: "the line and log_format quoted at https://m.yisu.com/zixun/300890.html " +
				`('"$http_referer" "$http_user_agent" $request_time $upstream_response_time $pipe')`,
			lines: []string{
				`66.249.71.173 - - [08/Nov/2010:14:16:18 -0600] "GET /blog/2010/apr/30/installing-geodjango-dependencies-homebrew/ HTTP/1.1" 200 6569 "-" "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)" 0.640 0.640 .`,
			},
			// Today: combined, the request time dropped with the tail.
			check: det17WantRequestTime(640 * time.Millisecond),
		},
		{
			name: "ingress-nginx's default upstreaminfo",
			source: "vectordotdev/vrl src/stdlib/parse_nginx_log.rs test ingress_upstreaminfo " +
				"(https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration/log-format/)",
			lines: []string{
				`0.0.0.0 - - [18/Mar/2023:15:00:00 +0000] "GET /some/path HTTP/2.0" 200 12312 "https://10.0.0.1/some/referer" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/111.0.0.0 Safari/537.36" 462 0.050 [some-upstream-service-9000] [] 10.0.50.80:9000 19437 0.049 200 752178adb17130b291aefd8c386279e7`,
			},
			// Today: combined; $request_time (0.050) dropped.
			check: det17WantRequestTime(50 * time.Millisecond),
		},
		{
			name: "nginx's documented compression format",
			source: `nginx.org/en/docs/http/ngx_http_log_module.html (log_format compression ... "$gzip_ratio"); ` +
				"the line is vectordotdev/vrl src/stdlib/parse_nginx_log.rs's combined test with \"2.75\"",
			lines: []string{
				`172.17.0.1 - alice [01/Apr/2021:12:02:31 +0000] "POST /not-found HTTP/1.1" 404 153 "http://localhost/somewhere" "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/72.0.3626.119 Safari/537.36" "2.75"`,
			},
			// Today: main, the gzip ratio kept as the forwarded client.
			check: func(d Detection, h *Hit, err error) string {
				if err == nil && string(h.ForwardedFor) == "2.75" {
					return "the gzip ratio kept as the forwarded client"
				}
				return ""
			},
		},
		{
			name:   "Traefik JSON access log",
			source: "allinurl/goaccess#2757, xavier-hernandez/goaccess-for-nginxproxymanager#108 (accessLog.format: json)",
			lines: []string{
				`{"ClientAddr":"192.0.2.10:63261","ClientHost":"192.0.2.10","ClientPort":"63261","ClientUsername":"-","DownstreamContentSize":287,"DownstreamStatus":207,"Duration":8184335,"OriginContentSize":287,"OriginDuration":7349966,"OriginStatus":207,"Overhead":834369,"RequestAddr":"sub.example.com","RequestContentSize":366,"RequestCount":17348,"RequestHost":"sub.example.com","RequestMethod":"REPORT","RequestPath":"/dav.php/calendars/","RequestPort":"-","RequestProtocol":"HTTP/2.0","RequestScheme":"https","RetryAttempts":0,"RouterName":"https-bk@docker","ServiceAddr":"172.29.0.2:8111","ServiceName":"bk-bk@docker","ServiceURL":"http://172.29.0.2:8111","StartLocal":"2024-12-29T12:42:47.503803974+01:00","StartUTC":"2024-12-29T11:42:47.503803974Z","TLSCipher":"TLS_AES_128_GCM_SHA256","TLSVersion":"1.3","entryPointName":"https","level":"info","msg":"","request_User-Agent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) CalendarAgent","time":"2024-12-29T12:42:47+01:00"}`,
			},
			// Today: json, every hit without path, status or client.
			check: det17NoRequestlessHits,
		},
		{
			name:   "JSON application log",
			source: "tstack/lnav test/logfile_json.json lines 1-3",
			lines: []string{
				`{"ts": "2013-09-06T20:00:48.124817Z", "logger": "com.example.foo.bar.bazzer", "lvl": "TRACE", "msg": "trace test"}`,
				`{"ts": "2013-09-06T20:00:49.124817Z", "logger": "com.example.demoµs", "lvl": "INFO", "msg": "Starting up \u001B[0;32mservice\u001B[0m"}`,
				`{"ts": "2013-09-06T22:00:49.124817Z", "lvl": "INFO", "msg": "Shutting down service", "user": "steve@example.com"}`,
			},
			// Today: json, 3 of 3.
			check: det17NoRequestlessHits,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := make([][]byte, len(c.lines))
			for i, l := range c.lines {
				lines[i] = []byte(l + "\n")
			}
			d := Detect(lines, Options{})
			probe := c.probe
			if probe == "" {
				probe = c.lines[0]
			}
			h := &Hit{}
			err := fmt.Errorf("no format chosen")
			if d.Format != "" {
				p, perr := New(d.Format)
				if perr != nil {
					t.Fatal(perr)
				}
				err = p.Parse([]byte(probe), h)
			}
			if why := c.check(d, h, err); why != "" {
				t.Errorf("Detect chose %q (%s): %s\nsource: %s", d.Format, d.Summary(4), why, c.source)
			}
		})
	}
}

// det17WantRequestTime: the chosen format keeps the probe's request time.
func det17WantRequestTime(want time.Duration) func(Detection, *Hit, error) string {
	return func(_ Detection, h *Hit, err error) string {
		if err != nil {
			return err.Error()
		}
		if h.Has&HasRequestTime == 0 || h.RequestTime != want {
			return fmt.Sprintf("request time %v (present %v), want %v: the file logs it", h.RequestTime, h.Has&HasRequestTime != 0, want)
		}
		return ""
	}
}

// det17NoRequestlessHits: whatever Detect chose, the probe is not a hit
// without a request ("a line without a time and a request is a reject",
// issue 17).
func det17NoRequestlessHits(_ Detection, h *Hit, err error) string {
	if err == nil && h.Has&HasRequest == 0 && h.BadRequest == nil {
		return "a hit without a request"
	}
	return ""
}
