package parser

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fuzzFormat checks, for any input, that Parse does not panic, that a success
// leaves a hit with a time and a sane status, that a failure is an *Error with a
// column inside the line, and that the same line parses the same way twice
// (the scratch buffer and the time cache leak nothing between lines).
func fuzzFormat(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if golden, err := os.ReadFile(filepath.Join("testdata", "golden", format+".log")); err == nil {
		for _, l := range bytes.Split(golden, []byte("\n")) {
			f.Add(l)
		}
	}
	p, err := New(format)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var h1, h2 Hit
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
	})
}

func FuzzCombined(f *testing.F) {
	fuzzFormat(f, "combined", `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 1 "r" "u\"a"`)
}

func FuzzCommon(f *testing.F) {
	fuzzFormat(f, "common", `1.2.3.4 - u [22/Nov/2026:10:00:00 +0000] "GET /a?b HTTP/1.1" 200 -`)
}

func FuzzVhostCombined(f *testing.F) {
	fuzzFormat(f, "vhost_combined", `h:443 1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"`)
}

func FuzzLogFormat(f *testing.F) {
	fuzzFormat(f, `$time_iso8601 $host $remote_addr "$request_method $request_uri $server_protocol" $status $bytes_sent $request_time "$http_user_agent"`,
		`2026-11-22T13:55:36+01:00 h 1.2.3.4 "GET /a?b HTTP/1.1" 200 9 0.001 "ua"`)
}

func FuzzJSON(f *testing.F) {
	fuzzFormat(f, "json", `{"time":"2026-11-22T10:00:00Z","request":"GET /\u00e9 HTTP/1.1","status":200,"x":[{"y":"}"}]}`)
}
