package parser

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Each format feature on one line, checked against the whole rendered hit.
func TestFormatFeatures(t *testing.T) {
	cases := []struct {
		name, format, line, want string
	}{
		{"unbracketed time_local holds a space", `$remote_addr $time_local $request_method $request_uri $status`,
			`1.2.3.4 22/Nov/2026:10:00:00 +0100 GET /a?b 200`,
			`time=2026-11-22T10:00:00+01:00 addr="1.2.3.4" method="GET" path="/a" query="b" status=200`},
		{"uri is_args args is the request target", `[$time_local] "$request_method $uri$is_args$args" $status`,
			`[22/Nov/2026:10:00:00 +0000] "GET /a?b=c" 200`,
			`time=2026-11-22T10:00:00Z method="GET" path="/a" query="b=c" status=200`},
		{"uri is_args args without a query", `[$time_local] "$request_method $uri$is_args$args" $status`,
			`[22/Nov/2026:10:00:00 +0000] "GET /a" 200`,
			`time=2026-11-22T10:00:00Z method="GET" path="/a" status=200`},
		{"upstream lists with commas and colons", `[$time_local] $status $upstream_response_time $upstream_addr $request_time`,
			`[22/Nov/2026:10:00:00 +0000] 502 0.001, 0.002 : 0.003 10.0.0.1:80, 10.0.0.2:80 : unix:/s 0.250`,
			`time=2026-11-22T10:00:00Z status=502 request_time=250ms`},
		{"unquoted forwarded list", `[$time_local] $http_x_forwarded_for $status`,
			`[22/Nov/2026:10:00:00 +0000] 203.0.113.7, 10.0.0.2 200`,
			`time=2026-11-22T10:00:00Z addr="203.0.113.7" status=200 xff="203.0.113.7, 10.0.0.2"`},
		{"X-Forwarded-For= extra as a format string", `$remote_addr [$time_local] "$request" $status X-Forwarded-For=$http_x_forwarded_for`,
			`1.2.3.4 [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 X-Forwarded-For=203.0.113.7`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 xff="203.0.113.7"`},
		{"body bytes win over bytes with headers", `[$time_local] $bytes_sent $body_bytes_sent`,
			`[22/Nov/2026:10:00:00 +0000] 900 600`, `time=2026-11-22T10:00:00Z bytes=600`},
		{"bytes with headers when the body's are not logged", `[$time_local] $bytes_sent`,
			`[22/Nov/2026:10:00:00 +0000] 900`, `time=2026-11-22T10:00:00Z bytes=900`},
		{"unquoted escapes decoded", `[$time_local] $request_uri $status`,
			`[22/Nov/2026:10:00:00 +0000] /caf\xC3\xA9\x22 200`, `time=2026-11-22T10:00:00Z path="/café\"" status=200`},
		{"escape=json", `log_format j escape=json '[$time_local] "$http_user_agent"';`,
			`[22/Nov/2026:10:00:00 +0000] "a\"b\u00e9\\"`, `time=2026-11-22T10:00:00Z ua="a\"bé\\"`},
		{"escape=none keeps backslashes", `log_format j escape=none '[$time_local] $request_uri';`,
			`[22/Nov/2026:10:00:00 +0000] /a\x22`, `time=2026-11-22T10:00:00Z path="/a\\x22"`},
		{"realip_remote_addr only without remote_addr", `[$time_local] $realip_remote_addr $remote_addr`,
			`[22/Nov/2026:10:00:00 +0000] 10.0.0.1 203.0.113.7`, `time=2026-11-22T10:00:00Z addr="203.0.113.7"`},
		{"apache %a wins over %{c}a", `%{c}a %a %t`, `10.0.0.1 203.0.113.7 [22/Nov/2026:10:00:00 +0000]`,
			`time=2026-11-22T10:00:00Z addr="203.0.113.7"`},
		{"apache %{c}a alone", `%{c}a %t`, `10.0.0.1 [22/Nov/2026:10:00:00 +0000]`,
			`time=2026-11-22T10:00:00Z addr="10.0.0.1"`},
		{"apache %U%q with a query", `%t "%m %U%q %H" %>s`, `[22/Nov/2026:10:00:00 +0000] "GET /a?b=c HTTP/1.1" 200`,
			`time=2026-11-22T10:00:00Z method="GET" path="/a" query="b=c" proto="HTTP/1.1" status=200`},
		{"apache %U %q separately", `%t %U %q %>s`, `[22/Nov/2026:10:00:00 +0000] /a ?b=c 200`,
			`time=2026-11-22T10:00:00Z path="/a" query="b=c" status=200`},
		{"apache %V host and %{Host}i", `%V %t %{Host}i`, `www.example.com [22/Nov/2026:10:00:00 +0000] other.example.org`,
			`time=2026-11-22T10:00:00Z host="other.example.org"`},
		{"apache %T in seconds", `%t %T`, `[22/Nov/2026:10:00:00 +0000] 2`, `time=2026-11-22T10:00:00Z request_time=2s`},
		{"apache %{us}T", `%t %{us}T`, `[22/Nov/2026:10:00:00 +0000] 1500`, `time=2026-11-22T10:00:00Z request_time=1.5ms`},
		{"apache conditional status logs -", `%t %!200s %400,501{User-agent}i`, `[22/Nov/2026:10:00:00 +0000] - -`,
			`time=2026-11-22T10:00:00Z`},
		{"apache %% and \\t", `%t 100%% %>s\t%b`, "[22/Nov/2026:10:00:00 +0000] 100% 200\t5",
			`time=2026-11-22T10:00:00Z status=200 bytes=5`},
		{"apache strftime same as %t", `%{%d/%b/%Y:%H:%M:%S %z}t "%r"`, `22/Nov/2026:10:00:00 -0930 "GET / HTTP/1.1"`,
			`time=2026-11-22T10:00:00-09:30 method="GET" path="/" proto="HTTP/1.1"`},
		{"apache strftime names and 12-hour clock", `%{%A, %B %e %Y %I:%M:%S %p %Z}t %h`, `Sunday, November  1 2026 01:05:09 PM GMT 1.2.3.4`,
			`time=2026-11-01T13:05:09Z addr="1.2.3.4"`},
		{"apache strftime 12 AM is midnight", `%{%D %r}t %h`, `11/22/26 12:00:01 AM 1.2.3.4`,
			`time=2026-11-22T00:00:01Z addr="1.2.3.4"`},
		{"apache %{usec}t", `%{usec}t %h`, `1795606810123456 1.2.3.4`, `time=2026-11-25T11:40:10.123456Z addr="1.2.3.4"`},
		{"apache %{msec}t with begin:", `%{begin:msec}t %h`, `1795606810123 1.2.3.4`, `time=2026-11-25T11:40:10.123Z addr="1.2.3.4"`},
		{"apache usec_frac", `[%{%d/%b/%Y:%H:%M:%S}t.%{usec_frac}t %{%z}t] %h`, `[22/Nov/2026:10:00:00.000250 +0100] 1.2.3.4`,
			`time=2026-11-22T10:00:00.00025+01:00 addr="1.2.3.4"`},
		{"apache %t with a fraction", `%t %{msec_frac}t %h`, `[22/Nov/2026:10:00:00 +0100] 042 1.2.3.4`,
			`time=2026-11-22T10:00:00.042+01:00 addr="1.2.3.4"`},
		{"main keeps the forwarded list", "main", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" "203.0.113.7, 10.0.0.2" 0.004`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 bytes=1 xff="203.0.113.7, 10.0.0.2"`},
		{"nginx_main is main", "nginx_main", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" "-"`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 bytes=1`},
		{"combinedio keeps the body's bytes", "combinedio", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" 300 512`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 bytes=1`},
		{"CustomLog with a nickname", `CustomLog ${APACHE_LOG_DIR}/access.log combined`,
			`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-" 5123`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 bytes=1`},
		{"CustomLog with a format and env=", `CustomLog "logs/access_log" "%h %t \"%r\" %>s %D" env=!dontlog`,
			`1.2.3.4 [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5123`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200 request_time=5.123ms`},
		{"LogFormat continued on the next line", "LogFormat \"%h %t \\\n \\\"%r\\\" %>s\" short",
			`1.2.3.4 [22/Nov/2026:10:00:00 +0000]  "GET / HTTP/1.1" 200`,
			`time=2026-11-22T10:00:00Z addr="1.2.3.4" method="GET" path="/" proto="HTTP/1.1" status=200`},
		{"log_format with a comment and bare words", "log_format x # the short one\n  $remote_addr ' [$time_local] ' $status;",
			`1.2.3.4 [22/Nov/2026:10:00:00 +0000] 200`, `time=2026-11-22T10:00:00Z addr="1.2.3.4" status=200`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h Hit
			if err := mustNew(t, c.format).Parse([]byte(c.line), &h); err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got := render(&h); got != c.want {
				t.Errorf("\n got: %s\nwant: %s", got, c.want)
			}
		})
	}
}

// A format that cannot work is refused when it is compiled, saying why.
func TestNewRefuses(t *testing.T) {
	cases := []struct{ format, want string }{
		{"combine", `unknown format "combine"; did you mean "combined"?`},
		{"Combined", `did you mean "combined"?`},
		{"vhost-combined", `did you mean "vhost_combined"?`},
		{"nginx main", `did you mean "nginx_main"?`},
		{"xyzzy", `unknown format "xyzzy": not one of combined, common`},
		{"apache", `unknown format "apache"; did you mean "combined"?`},
		{"clf", `did you mean "common"?`},
		{"referer", `Apache's referer log ("%{Referer}i -> %U") has no time`},
		{"agent", `has no time`},
		{`%h %l %u "%r" %>s %b`, `no time field`},
		{`$remote_addr "$request" $status`, `no time field`},
		{`%h %t %Z`, `%Z: unknown directive`},
		{`%h %t %{%G}t`, `strftime %G is not supported`},
		{`%h %{%H:%M:%S}t`, `no time field`},
		{`%h %{%Y-%m %H}t`, `a date needs a year`},
		{`%h %t %{}i`, `needs a header name`},
		{`%h %t %{min}T`, `unknown unit "min"`},
		{`%h %t %{Referer`, `unclosed %{`},
		{`%h %t %`, `a % with no directive`},
		{`%h%u %t`, `%u follows %h with nothing between them`},
		{`$remote_addr$status [$time_local]`, `$status follows $remote_addr`},
		{`[$time_local] $is_args`, `$is_args only makes sense as $uri$is_args$args`},
		{`log_format main;`, `log_format needs a name, then the format`},
		{`log_format '$remote_addr [$time_local]';`, `log_format needs a name`},
		{`log_format main escape=xml '[$time_local]';`, `escape=xml: want default, json or none`},
		{`log_format main '[$time_local]`, `unclosed '`},
		{`log_format main '[$time_local]'; access_log x;`, `more text after its ';'`},
		{`LogFormat "%h %t" a b`, `LogFormat takes a format and an optional nickname`},
		{`CustomLog /var/log/x.log`, `CustomLog needs a file and a format or nickname`},
		{`CustomLog /var/log/x.log combine`, `did you mean "combined"?`},
	}
	for _, c := range cases {
		_, err := New(c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q) = %v, want an error containing %q", c.format, err, c.want)
		}
	}
	var ue *UnknownFormatError
	if _, err := New("combine"); !errors.As(err, &ue) || ue.Suggest != "combined" {
		t.Errorf("New(combine): %v, want an *UnknownFormatError suggesting combined", err)
	}
}

// A directive pasted from the server's configuration parses exactly like the
// format string it holds.
func TestPastedDirectiveIsItsFormat(t *testing.T) {
	cases := []struct{ pasted, plain string }{
		{"log_format  main  '$remote_addr - $remote_user [$time_local] \"$request\" '\n" +
			"                  '$status $body_bytes_sent \"$http_referer\" '\n" +
			"                  '\"$http_user_agent\" \"$http_x_forwarded_for\"';",
			`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for"`},
		{"'$remote_addr - $remote_user [$time_local] \"$request\" '\n'$status $body_bytes_sent'",
			`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`},
		{`"$remote_addr - $remote_user [$time_local] \"$request\" " "$status $body_bytes_sent";`,
			`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`},
		{"$remote_addr - $remote_user [$time_local]\n  \"$request\" $status $body_bytes_sent\n",
			`$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`},
		{"$remote_addr  -  $remote_user [$time_local]\r\n\"$request\"\t$status $body_bytes_sent\n",
			"$remote_addr  -  $remote_user [$time_local] \"$request\"\t$status $body_bytes_sent"},
		{`LogFormat "%h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\"" combined`,
			`%h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i"`},
		{`%h %l %u %t \"%r\" %>s %b`, `%h %l %u %t "%r" %>s %b`},
		{`"%h %l %u %t \"%r\" %>s %b"`, `%h %l %u %t "%r" %>s %b`},
	}
	lines := []string{
		`1.2.3.4 - frank [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 512 "-" "ua" "-"`,
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 512`,
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 512 "https://r/" "Mozilla \"x\""`,
	}
	for _, c := range cases {
		pasted, plain := mustNew(t, c.pasted), mustNew(t, c.plain)
		for _, l := range lines {
			var a, b Hit
			errA, errB := pasted.Parse([]byte(l), &a), plain.Parse([]byte(l), &b)
			if errString(errA) != errString(errB) || render(&a) != render(&b) {
				t.Errorf("%q on %q:\npasted %v %s\n plain %v %s", c.pasted, l, errA, render(&a), errB, render(&b))
			}
		}
	}
	// A format string that merely starts with quoted fields is not pieces.
	p := mustNew(t, `"$request" "$time_local"`)
	var h Hit
	if err := p.Parse([]byte(`"GET / HTTP/1.1" "22/Nov/2026:10:00:00 +0000"`), &h); err != nil {
		t.Errorf("quoted fields taken for pasted pieces: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEveryNameCompiles(t *testing.T) {
	for _, name := range Formats() {
		if _, err := New(name); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
	for _, nf := range NamedFormats() {
		if nf.About == "" {
			t.Errorf("%s has no description", nf.Name)
		}
		if _, err := New(nf.Spec); err != nil {
			t.Errorf("%s's spec: %v", nf.Name, err)
		}
	}
}

// A time logged without a zone is in the Parser's Location, daylight saving
// time included.
func TestZonelessTimeInLocation(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no zoneinfo:", err)
	}
	p, err := NewWith(`%{%Y-%m-%d %H:%M:%S}t %h`, Options{Location: berlin})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ line, want string }{
		{"2026-01-15 12:00:00 1.2.3.4", "2026-01-15T12:00:00+01:00"},
		{"2026-07-15 12:00:00 1.2.3.4", "2026-07-15T12:00:00+02:00"},
	} {
		var h Hit
		if err := p.Parse([]byte(c.line), &h); err != nil {
			t.Fatal(err)
		}
		if got := h.Time().Format(time.RFC3339); got != c.want {
			t.Errorf("%s: %s, want %s", c.line, got, c.want)
		}
		line := []byte(c.line)
		if allocs := testing.AllocsPerRun(10, func() { p.Parse(line, &h) }); allocs != 0 {
			t.Errorf("%s: %.0f allocations", c.line, allocs)
		}
	}
}

// Times the store cannot hold still parse to what they say: year 1, before
// 1970, after 2106, year 9999, in every time syntax. Keeping them out of the
// store is the sink's job, and its reason needs the right time.
func TestTimesOutsideTheStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	local := mustNew(t, `[$time_local] $remote_addr`)
	iso := mustNew(t, `$time_iso8601 $remote_addr`)
	strf := mustNew(t, `%{%Y-%m-%dT%H:%M:%S %z}t %h`)
	first := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	last := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	var h Hit
	for i := 0; i < 20000; i++ {
		sec := first + rng.Int64N(last-first)
		if i%4 == 0 { // the span around the store's bounds
			sec = rng.Int64N(2*86400) - 86400
			if i%8 == 0 {
				sec += 4294857599
			}
		}
		zone := time.FixedZone("", (rng.IntN(28*4)-14*4)*15*60)
		want := time.Unix(sec, 0).In(zone)
		if want.Year() < 1 || want.Year() > 9999 {
			continue
		}
		for _, c := range []struct {
			p    *Parser
			line string
		}{
			{local, "[" + want.Format("02/Jan/2006:15:04:05 -0700") + "] 1.2.3.4"},
			{iso, want.Format("2006-01-02T15:04:05-07:00") + " 1.2.3.4"},
			{strf, want.Format("2006-01-02T15:04:05 -0700") + " 1.2.3.4"},
		} {
			if err := c.p.Parse([]byte(c.line), &h); err != nil {
				t.Fatalf("%s: %v", c.line, err)
			}
			if h.Unix != sec || h.ZoneOffset != int32(offset(want)) {
				t.Fatalf("%s: unix %d offset %d, want %d %d", c.line, h.Unix, h.ZoneOffset, sec, offset(want))
			}
		}
	}
}
