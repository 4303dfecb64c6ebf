package parser

import "testing"

// Fuzz targets of the server formats; each is seeded with its golden log
// (testdata/golden/NAME.log) by fuzzFormat, plus a line here.

func FuzzCaddy(f *testing.F) {
	fuzzFormat(f, "caddy", `{"ts":1646861401.5,"request":{"client_ip":"::1","method":"GET","host":"a:1","uri":"/?q","headers":{"User-Agent":["a\"b"]}},"duration":"1.5ms","size":1,"status":200}`)
}

func FuzzTraefik(f *testing.F) {
	fuzzFormat(f, "traefik", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 1 "-" "ua" 1 "r@docker" "http://10.0.0.1:80" 2ms`,
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /ping HTTP/1.1" 200 2 "-" "-" 1 "ping@internal" - 0ms`)
}

func FuzzW3C(f *testing.F) {
	fuzzFormat(f, "w3c", "#Fields: date time cs-method cs-uri-stem sc-status cs(User-Agent)",
		`2026-11-22 10:00:00 GET /a 200 "a ""b"""`, "#Date: 12-Jan-1996 00:00:00", "#GMT-Offset: -0800",
		"2026-11-22 \t 10:00:00   GET  /a 200 ua  ")
}

func FuzzCloudFront(f *testing.F) {
	fuzzFormat(f, "cloudfront", "#Fields: date time c-ip cs-method cs(Host) cs-uri-stem sc-status x-host-header",
		"2019-12-04\t21:02:31\t192.0.2.1\tGET\td1.cloudfront.net\t/a%20b\t000\twww.example.com\t",
		"#Fields: date time cs-uri-stem cs(User-Agent)", "2016-06-10\t18:41:39\t/a\tMozilla/5.0%2520(X11)%25zz%2")
}

func FuzzALB(f *testing.F) {
	fuzzFormat(f, "alb", `h2 2018-07-02T22:23:00.186641Z app/lb/1 10.0.1.252:48160 - -1 0.002 0.000 200 - 5 257 "GET https://[::1]:773/x?y HTTP/2.0" "curl/7.46.0" - -`)
}

func FuzzELB(f *testing.F) {
	fuzzFormat(f, "elb", `2015-05-13T23:39:43.945958Z lb 192.168.131.39:2817 10.0.0.1:80 0.000073 0.001048 0.000057 200 200 0 29 "GET http://www.example.com:80/ HTTP/1.1" "curl/7.38.0" - -`)
}

func FuzzS3(f *testing.F) {
	fuzzFormat(f, "s3", `o b [06/Feb/2019:00:00:38 +0000] 192.0.2.3 - id REST.GET.OBJECT k "GET /b/k?x HTTP/1.1" 200 - - 1 2 3 "-" "ua" - h SigV4 c AuthHeader b.s3.amazonaws.com TLSv1.2`)
}

func FuzzGCS(f *testing.F) {
	fuzzFormat(f, "gcs", `"time_micros","c_ip","cs_method","cs_uri","sc_status","cs_user_agent"`,
		`"1734524400000000","::1","GET","/x?y","200","a ""b"", c"`)
}

func FuzzHAProxy(f *testing.F) {
	fuzzFormat(f, "haproxy", `Feb  6 12:14:14 localhost haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/+109 200 +2750 - - ---- 1/1/1/1/0 0/0 {a|b} {} "GET /index.html HTTP/1.1"`)
}

func FuzzSquid(f *testing.F) {
	fuzzFormat(f, "squid", `1286536308.779    180 192.168.0.224 TCP_MISS/200 411 CONNECT a.example:443 - DIRECT/192.0.2.1 -`)
}
