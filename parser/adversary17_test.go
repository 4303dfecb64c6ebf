package parser

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Adversary findings for issue 17 ("every access log a real web server
// writes"): lines from other projects' parser tests and from the servers'
// own output that the parser rejects, accepts into the wrong fields, or
// accepts although they are not requests at all. Every case failed when it
// was written; a fix makes it pass without touching the case. Each names
// where its line comes from.

// adv17Want is one acceptable outcome: adv17Reject, or the fields a hit must
// have (adv17Fields' keys; "" means the field must be absent). Fields not
// named are not checked, so a fix may fill them or not.
type adv17Want map[string]string

var adv17Reject = adv17Want{"reject": ""}

type adv17Case struct {
	name, source, format string
	// header lines go first, and each must be the format's directive (a
	// W3C "#..." line): ErrDirective, neither hit nor reject.
	header []string
	line   string
	// want lists the outcomes that are right; the case passes on any.
	want []adv17Want
}

// adv17Fields flattens a hit for comparison; the time is the instant, in UTC.
func adv17Fields(h *Hit) map[string]string {
	m := map[string]string{}
	if h.Has&HasTime != 0 {
		m["time"] = h.Time().UTC().Format(time.RFC3339Nano)
	}
	b := func(k string, v []byte) {
		if v != nil {
			m[k] = string(v)
		}
	}
	b("addr", h.RemoteAddr)
	b("user", h.RemoteUser)
	b("host", h.Host)
	b("method", h.Method)
	b("path", h.Path)
	b("query", h.Query)
	b("bad_request", h.BadRequest)
	b("referer", h.Referer)
	b("ua", h.UserAgent)
	b("xff", h.ForwardedFor)
	if h.Has&HasStatus != 0 {
		m["status"] = fmt.Sprint(h.Status)
	}
	if h.Has&HasBytes != 0 {
		m["bytes"] = fmt.Sprint(h.Bytes)
	}
	if h.Has&HasRequestTime != 0 {
		m["request_time"] = h.RequestTime.String()
	}
	return m
}

// adv17Match reports whether the outcome (err, h) is one of want.
func adv17Match(err error, h *Hit, want []adv17Want) bool {
	for _, w := range want {
		if _, ok := w["reject"]; ok {
			if err != nil {
				return true
			}
			continue
		}
		if err != nil {
			continue
		}
		got := adv17Fields(h)
		ok := true
		for k, v := range w {
			if g, present := got[k]; (v == "" && present) || (v != "" && g != v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func adv17Run(t *testing.T, cases []adv17Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustNew(t, c.format)
			var h Hit
			for i, l := range c.header {
				if err := p.Parse([]byte(l), &h); !errors.Is(err, ErrDirective) {
					t.Errorf("header line %d %q: got %v, want it read as the format's directive\nsource: %s", i+1, l, err, c.source)
				}
			}
			err := p.Parse([]byte(c.line), &h)
			if !adv17Match(err, &h, c.want) {
				got := fmt.Sprintf("%q", adv17Fields(&h))
				if err != nil {
					got = "reject: " + err.Error()
				}
				t.Errorf("format %s\nline: %q\n got: %s\nwant one of: %v\nsource: %s", c.format, c.line, got, c.want, c.source)
			}
		})
	}
}

// The named CLF formats read "$remote_user" as everything up to " [", so
// any number of words before the time land in the user field, and the
// client is whatever word comes first. A line with more words there than
// the format has is accepted into the wrong fields instead of rejected.
func TestAdversary17ClientAndUserFields(t *testing.T) {
	adv17Run(t, []adv17Case{
		{
			name:   "nginx client list as first field",
			source: "elastic/beats filebeat/module/nginx/access/test/test.log line 1 (expected: source.address 10.0.0.2, user.name -)",
			format: "combined",
			line:   `10.0.0.2, 10.0.0.1, 127.0.0.1 - - [07/Dec/2016:11:05:07 +0100] "GET /ocelot HTTP/1.1" 200 571 "-" "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.12; rv:49.0) Gecko/20100101 Firefox/49.0"`,
			// Today: addr "10.0.0.2," and user "127.0.0.1 - -".
			want: []adv17Want{adv17Reject, {"addr": "10.0.0.2", "user": "", "path": "/ocelot"}},
		},
		{
			name:   "quoted client list then client",
			source: "elastic/beats filebeat/module/nginx/access/test/test.log line 5",
			format: "combined",
			line:   `"10.5.102.222, 199.96.1.1, 204.246.1.1" 10.2.1.185 - - [22/Jan/2016:13:18:29 +0000] "GET /assets/xxxx?q=100 HTTP/1.1" 200 25507 "-" "Amazon CloudFront"`,
			// Today: addr `"10.5.102.222,` and user `204.246.1.1" 10.2.1.185 - -`.
			want: []adv17Want{adv17Reject, {"user": "", "path": "/assets/xxxx", "addr": "10.2.1.185"}, {"user": "", "path": "/assets/xxxx", "addr": "10.5.102.222"}},
		},
		{
			name:   "vhost line read as combined",
			source: "elastic/beats filebeat/module/apache/access/test/test.log line 7 (%v %h ..., expected source.address 123.123.123.123)",
			format: "combined",
			line:   `vhost1.domaine.fr 123.123.123.123 - - [04/Jul/2019:09:20:46 +0200] "GET / HTTP/1.1" 200 32953 "-" "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/75.0.3770.100 Safari/537.36"`,
			// Today: addr "vhost1.domaine.fr", user "- -": every hit of the
			// file under one client, no reject to say the format is wrong.
			want: []adv17Want{adv17Reject, {"addr": "123.123.123.123", "user": ""}},
		},
		{
			name:   "Debian other_vhosts_access.log read as combined",
			source: "parser/testdata/golden/apache_vhost_combined.log line 1 (Debian 12 apache2, vhost_combined)",
			format: "combined",
			line:   `www.example.com:80 127.0.0.1 - - [25/Nov/2026:11:40:10 +0000] "GET / HTTP/1.1" 200 250 "-" "curl/7.88.1"`,
			want:   []adv17Want{adv17Reject, {"addr": "127.0.0.1", "user": ""}},
		},
		{
			name:   "two combined lines joined, as vhost_combined",
			source: "made up: two nginx combined lines written without the newline between them (a writer cut short, or two writers to one file)",
			format: "vhost_combined",
			line:   `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 5 "-" "curl/8.0"10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] "GET /b HTTP/1.1" 200 5 "-" "curl/8.0"`,
			// Today: host "10.0.0.1", addr "-", user = the whole first line
			// (quotes included, which neither server writes unescaped).
			want: []adv17Want{adv17Reject},
		},
		{
			name:   "two combined lines joined, as vhost_common",
			source: "made up, as above",
			format: "vhost_common",
			line:   `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 5 "-" "curl/8.0"10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] "GET /b HTTP/1.1" 200 5 "-" "curl/8.0"`,
			want:   []adv17Want{adv17Reject},
		},
		{
			name: "Apache LogFormat with X-Forwarded-For in place of %h",
			source: `the LogFormat guides give for Apache behind a load balancer ("%{X-Forwarded-For}i %l %u %t \"%r\" %>s %b ..."), ` +
				"e.g. AWS's knowledge-center article on capturing client IPs behind ELB; line made up to it",
			format: `%{X-Forwarded-For}i %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`,
			line:   `203.0.113.9, 10.0.0.1 - - [10/Oct/2023:13:55:36 +0000] "GET / HTTP/1.1" 200 5 "-" "curl/8"`,
			// Today: no client at all (the list is kept only as
			// ForwardedFor, which the store has no column for).
			want: []adv17Want{{"addr": "203.0.113.9"}, {"addr": "203.0.113.9, 10.0.0.1"}},
		},
		{
			name:   "NUL block before a line",
			source: "made up: the run of NUL bytes a file system leaves in a log after a crash (delayed allocation), then the next line",
			format: "combined",
			line:   "\x00\x00\x00\x00\x00\x00\x00\x0010.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /a HTTP/1.1\" 200 5 \"-\" \"curl/8.0\"",
			// Today: accepted, client "\x00\x00...10.0.0.1".
			want: []adv17Want{adv17Reject, {"addr": "10.0.0.1"}},
		},
	})
}

// Lines a real server writes that a named format rejects.
func TestAdversary17ServerLinesRejected(t *testing.T) {
	adv17Run(t, []adv17Case{
		{
			name: "Apache status dash",
			source: "logstash-plugins/logstash-patterns-core spec/patterns/httpd_spec.rb:70 (expects bytes 7908, no status); " +
				"Apache mod_log_config.c log_status -> pfmt() writes \"-\" for a status <= 0",
			format: "combined",
			line:   `83.149.9.216 - a.user [11/Jan/2020:23:05:27 +0100] "OPTIONS /remote.php/ HTTP/1.1" - 7908 "-" "monitoring-client (v2.2)"`,
			want:   []adv17Want{{"status": "", "bytes": "7908", "method": "OPTIONS", "path": "/remote.php/", "user": "a.user", "ua": "monitoring-client (v2.2)"}},
		},
		{
			name:   "IIS Advanced Logging fields",
			source: "tstack/lnav test/logfile_w3c.3 (\"#Software: IIS Advanced Logging Module\": date-local, time-local, quoted values)",
			format: "w3c",
			header: []string{
				"#Software: IIS Advanced Logging Module",
				"#Version: 1.0",
				"#Start-Date: 2014-11-18 00:00:00.128",
				"#Fields:   date-local time-local   s-ip   cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip cs(User-Agent) cs(Referer) cs(Host) sc-status sc-substatus sc-win32-status TimeTakenMS",
			},
			line: `2012-08-15 17:00:00.363 1.2.3.4 GET /Products/theProduct - 80 - "70.95.0.0" "Mozilla/5.0 (Linux; Android 4.4.4; SM-G900V Build/KTU84P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/39.0.2171.59 Mobile Safari/537.36" "http://example.com/Search/SearchResults.pg?informationRecipient.languageCode.c=en" "xzy.example.com" 200 0 0 109`,
			// Today: "time: the line has no time".
			want: []adv17Want{{"time": "2012-08-15T17:00:00.363Z", "addr": "70.95.0.0", "path": "/Products/theProduct", "status": "200", "host": "xzy.example.com"}},
		},
		{
			name:   "W3C padded with runs of spaces, #GMT-Offset",
			source: "tstack/lnav test/logfile_w3c.1 (Oracle9iAS Web Cache 2.0.0.2.0)",
			format: "w3c",
			header: []string{
				"#Version: 1.0",
				"#GMT-Offset: -0800",
				"#Software: Oracle9iAS Web Cache/2.0.0.2.0",
				"#Start-Date: 2001-10-31 00:00:18",
				"#Fields:  c-ip  c-dns  c-auth-id  date  time  cs-method  cs-uri  sc-status  bytes  cs(Cookie)  cs(Referrer)  time-taken  cs(User-Agent)",
				"#Date: 2001-10-31 00:00:18",
			},
			line: `64.103.37.2      client_joaz7      DMS.user      2001-10-31     00:00:18      GET      /admin/images/oc_bottomleft.gif    200     350    "BIGipServerwww_webcache_pool=1443321748.19460.0000;ORA_UCM_AGID=%2fMP%2f8M7%3etSHPV%40%2fS%3f%3fDh3VHO"         "http://www.oracle.com/nl/partner/content.html"      370879      "Mozilla/4.5 [en] (WinNT; I)"`,
			// Today: "more fields than the #Fields: header names (13)".
			want: []adv17Want{{"time": "2001-10-31T08:00:18Z", "addr": "64.103.37.2", "path": "/admin/images/oc_bottomleft.gif", "status": "200", "ua": "Mozilla/4.5 [en] (WinNT; I)"}},
		},
		{
			name:   "W3C file with a UTF-8 byte order mark",
			source: "made up: elastic/beats filebeat/module/iis/access/test/access-full.log with EF BB BF before its first line, as files saved by Windows tools as \"UTF-8\" start (unverified that IIS itself writes one)",
			format: "w3c",
			header: []string{
				"\ufeff#Software: Microsoft Internet Information Services 10.0",
				"#Version: 1.0",
				"#Date: 2018-01-01 09:10:11",
				"#Fields: date time s-sitename s-computername s-ip cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip cs-version cs(User-Agent) cs(Cookie) cs(Referer) cs-host sc-status sc-substatus sc-win32-status sc-bytes cs-bytes time-taken",
			},
			line: "2018-01-01 09:10:11 W3SVC1 MACHINE-NAME 127.0.0.1 GET / - 80 - 127.0.0.1 HTTP/1.1 Mozilla/5.0+(Windows+NT+6.1;+Win64;+x64;+rv:57.0)+Gecko/20100101+Firefox/57.0 - - localhost 200 0 0 123 456 789",
			want: []adv17Want{{"path": "/", "status": "200"}},
		},
		{
			name:   "CloudFront user agent encoded twice",
			source: "logstash-plugins/logstash-patterns-core spec/patterns/aws_spec.rb:295 (a 2016 CloudFront line; its #Fields line is the 23 fields the line has)",
			format: "cloudfront",
			header: []string{
				"#Version: 1.0",
				"#Fields: date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) x-edge-result-type x-edge-request-id x-host-header cs-protocol cs-bytes time-taken x-forwarded-for ssl-protocol ssl-cipher x-edge-response-result-type",
			},
			line: "2016-06-10\t18:41:39\tIAD53\t224281\t192.168.1.1\tGET\td27enomp470abc.cloudfront.net\t/content/sample/thing.pdf\t200\thttps://example.com/\tMozilla/5.0%2520(Windows%2520NT%25206.1;%2520WOW64)%2520AppleWebKit/537.36%2520(KHTML,%2520like%2520Gecko)%2520Chrome/51.0.2704.79%2520Safari/537.36\t-\t-\tMiss\tUGskZ6dUKY7b4C6Pt7wAWVsU2KO-vTRe-mR4r9H-WQMjhNvY6w1Xcg==\thost.example.com\thttps\t883\t0.036\t-\tTLSv1.2\tECDHE-RSA-AES128-GCM-SHA256\tRefreshHit",
			// Today: ua "Mozilla/5.0%20(Windows%20NT%206.1;..." (GoAccess
			// has --double-decode for these logs).
			want: []adv17Want{{"ua": "Mozilla/5.0 (Windows NT 6.1; WOW64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/51.0.2704.79 Safari/537.36"}},
		},
		{
			name:   "Traefik v2.1 unquoted dash for a missing server URL",
			source: "traefik/traefik#6481 (v2.1.6's output for /ping: `\"ping@internal\" - 0ms`)",
			format: "traefik",
			line:   `127.0.0.1 - - [13/Mar/2020:18:49:07 +0000] "GET /ping HTTP/1.1" 200 2 "-" "-" 1 "ping@internal" - 0ms`,
			// Today: `server_url: expected '"'`.
			want: []adv17Want{{"path": "/ping", "status": "200", "request_time": "0s"}},
		},
		{
			name:   "Classic ELB before the user agent field",
			source: "logstash-plugins/logstash-patterns-core spec/patterns/aws_spec.rb:9 (ELB entries before May 2015 end after the request)",
			format: "elb",
			line:   `2014-02-15T23:39:43.945958Z my-test-loadbalancer 192.168.131.39:2817 10.0.0.1:80 0.000073 0.001048 0.000057 200 200 0 29 "GET http://www.example.com:80/ HTTP/1.1"`,
			// Today: "user_agent: missing: the line ends before it".
			want: []adv17Want{{"addr": "192.168.131.39", "path": "/", "status": "200", "bytes": "29", "host": "www.example.com"}},
		},
		{
			name:   "Classic ELB before the user agent field, no backend",
			source: "logstash-plugins/logstash-patterns-core spec/patterns/aws_spec.rb:67",
			format: "elb",
			line:   `2015-04-10T08:11:09.865823Z us-west-1-production-media 49.150.87.133:55128 - -1 -1 -1 408 - 1294336 0 "PUT https://media.xxxyyyzzz.com:443/videos/F4_M-T4X0MM6Hvy1PFHesw HTTP/1.1"`,
			want:   []adv17Want{{"addr": "49.150.87.133", "method": "PUT", "status": "408"}},
		},
	})
}

// "A line without a time and a request is a reject" (issue 17). The json
// format needs only a time key, so any structured application log is a
// hit; caddy needs only ts and request.uri, which Caddy's own debug lines
// about a request also have.
func TestAdversary17NotRequests(t *testing.T) {
	// A hit is acceptable only with the request in it: a fix may reject
	// these or read their request, not count a hit without one.
	reqOrReject := func(want adv17Want) []adv17Want {
		return []adv17Want{adv17Reject, want}
	}
	adv17Run(t, []adv17Case{
		{
			name:   "Caddy runtime line (zap JSON)",
			source: "tstack/lnav test/logfile_caddy_log.0 line 1 (the \"caddy  | \" of docker compose cut off)",
			format: "json",
			line:   `{"level":"info","ts":1761019822.3152757,"msg":"maxprocs: Leaving GOMAXPROCS=12: CPU quota undefined"}`,
			want:   []adv17Want{adv17Reject},
		},
		{
			name:   "JSON application log",
			source: "tstack/lnav test/logfile_json.json line 1",
			format: "json",
			line:   `{"ts": "2013-09-06T20:00:48.124817Z", "logger": "com.example.foo.bar.bazzer", "lvl": "TRACE", "msg": "trace test"}`,
			want:   []adv17Want{adv17Reject},
		},
		{
			name:   "Go log/slog JSONHandler",
			source: "the log/slog package documentation's JSONHandler example output",
			format: "json",
			line:   `{"time":"2022-11-08T15:28:26.000000000-05:00","level":"INFO","msg":"hello","count":3}`,
			want:   []adv17Want{adv17Reject},
		},
		{
			name:   "Docker json-file line of an Apache container",
			source: "fluent/fluent-bit tests/runtime/data/kubernetes/log/default_apache-logs_apache-logs.log (what dockerd writes to /var/lib/docker/containers/*/*-json.log)",
			format: "json",
			line:   `{"log":"20.38.166.115 - - [21/Feb/2018:17:26:53 +0000] \"GET /intra-abdominally HTTP/1.0\" 500 2216\n","stream":"stdout","time":"2018-02-21T17:26:53.360920913Z"}`,
			// Today: a hit at Docker's time with no request, status or client.
			want: reqOrReject(adv17Want{"path": "/intra-abdominally", "status": "500"}),
		},
		{
			name:   "Istio TCP access log in a Docker json-file line",
			source: "fluent/fluent-bit tests/runtime/data/kubernetes/log/socks_session-db-fdd649d68-cq5sp_istio-proxy.log (inner object shortened)",
			format: "json",
			line:   `{"log":"{\"level\":\"info\",\"time\":\"2018-09-21T02:56:05.979833Z\",\"instance\":\"tcpaccesslog.logentry.istio-system\",\"protocol\":\"tcp\",\"receivedBytes\":432,\"sentBytes\":424,\"sourceIp\":\"10.244.1.131\"}\n","stream":"stdout","time":"2018-09-21T02:56:06.978292233Z"}`,
			want:   []adv17Want{adv17Reject},
		},
		{
			name:   "Traefik JSON access log",
			source: "allinurl/goaccess#2757 and xavier-hernandez/goaccess-for-nginxproxymanager#108 (accessLog.format: json; client address masked, user agent shortened)",
			format: "json",
			line:   `{"ClientAddr":"192.0.2.10:63261","ClientHost":"192.0.2.10","ClientPort":"63261","ClientUsername":"-","DownstreamContentSize":287,"DownstreamStatus":207,"Duration":8184335,"OriginContentSize":287,"OriginDuration":7349966,"OriginStatus":207,"Overhead":834369,"RequestAddr":"sub.example.com","RequestContentSize":366,"RequestCount":17348,"RequestHost":"sub.example.com","RequestMethod":"REPORT","RequestPath":"/dav.php/calendars/","RequestPort":"-","RequestProtocol":"HTTP/2.0","RequestScheme":"https","RetryAttempts":0,"RouterName":"https-bk@docker","ServiceAddr":"172.29.0.2:8111","ServiceName":"bk-bk@docker","ServiceURL":"http://172.29.0.2:8111","StartLocal":"2024-12-29T12:42:47.503803974+01:00","StartUTC":"2024-12-29T11:42:47.503803974Z","TLSCipher":"TLS_AES_128_GCM_SHA256","TLSVersion":"1.3","entryPointName":"https","level":"info","msg":"","request_User-Agent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) CalendarAgent","time":"2024-12-29T12:42:47+01:00"}`,
			// Today: a hit with a time and nothing else.
			want: reqOrReject(adv17Want{"path": "/dav.php/calendars/", "status": "207", "addr": "192.0.2.10"}),
		},
		{
			name:   "Caddy reverse_proxy debug line",
			source: "caddyserver/forwardproxy#139 (Caddy's own log with debug on: one more line per proxied request)",
			format: "caddy",
			line:   `{"level":"debug","ts":1725981949.93399,"logger":"http.handlers.reverse_proxy","msg":"upstream roundtrip","upstream":"127.0.0.1:8001","duration":0.000840843,"request":{"remote_ip":"127.0.0.1","remote_port":"54300","client_ip":"127.0.0.1","proto":"HTTP/1.1","method":"GET","host":"localhost:8000","uri":"/","headers":{"User-Agent":["curl/7.81.0"],"X-Forwarded-For":["127.0.0.1"],"X-Forwarded-Proto":["http"],"X-Forwarded-Host":["localhost:8000"],"Accept":["*/*"]}},"headers":{"Date":["Tue, 10 Sep 2024 15:25:49 GMT"],"Content-Length":["14"],"Content-Type":["text/plain; charset=utf-8"]},"status":200}`,
			// Today: a second hit for the request the access logger logs.
			want: []adv17Want{adv17Reject},
		},
		{
			name:   "Caddy rewrite debug line",
			source: "caddyserver/caddy#4511",
			format: "caddy",
			line:   `{"level":"debug","ts":1641801940.6196253,"logger":"http.handlers.rewrite","msg":"rewrote request","request":{"remote_addr":"127.0.0.1:57796","proto":"HTTP/2.0","method":"GET","host":"test.local","uri":"/_wdt/5f95c1","headers":{"User-Agent":["Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:95.0) Gecko/20100101 Firefox/95.0"]}},"method":"GET","uri":"index.php"}`,
			want:   []adv17Want{adv17Reject},
		},
	})
}

// The matcher itself: a right hit, a wrong field, an absent field and a
// reject are told apart, so the cases above fail for what they say.
func TestAdversary17Matcher(t *testing.T) {
	p := mustNew(t, "combined")
	var h Hit
	line := []byte(`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 5 "-" "curl/8.0"`)
	err := p.Parse(line, &h)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		want []adv17Want
		ok   bool
	}{
		{[]adv17Want{{"addr": "10.0.0.1", "path": "/a", "status": "200", "time": "2000-10-10T20:55:36Z"}}, true},
		{[]adv17Want{{"addr": "10.0.0.2"}}, false},
		{[]adv17Want{{"user": ""}}, true},
		{[]adv17Want{{"ua": ""}}, false},
		{[]adv17Want{adv17Reject}, false},
		{[]adv17Want{adv17Reject, {"path": "/a"}}, true},
	} {
		if got := adv17Match(nil, &h, c.want); got != c.ok {
			t.Errorf("accepted hit vs %v: %v, want %v", c.want, got, c.ok)
		}
	}
	if !adv17Match(errors.New("x"), &h, []adv17Want{adv17Reject}) || adv17Match(errors.New("x"), &h, []adv17Want{{"path": "/a"}}) {
		t.Error("a reject is matched only by adv17Reject")
	}
}
