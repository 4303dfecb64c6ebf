package parser

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the parser's output")

// render writes a hit as one readable, exact line: byte fields are Go-quoted so
// invalid UTF-8 and control bytes show as they are.
func render(h *Hit) string {
	var b strings.Builder
	if h.Has&HasTime != 0 {
		fmt.Fprintf(&b, "time=%s", h.Time().Format(time.RFC3339Nano))
	}
	q := func(name string, v []byte) {
		if v != nil {
			fmt.Fprintf(&b, " %s=%q", name, v)
		}
	}
	q("addr", h.RemoteAddr)
	q("user", h.RemoteUser)
	q("host", h.Host)
	q("method", h.Method)
	q("path", h.Path)
	q("query", h.Query)
	q("proto", h.Protocol)
	q("bad_request", h.BadRequest)
	if h.Has&HasStatus != 0 {
		fmt.Fprintf(&b, " status=%d", h.Status)
	}
	if h.Has&HasBytes != 0 {
		fmt.Fprintf(&b, " bytes=%d", h.Bytes)
	}
	q("referer", h.Referer)
	q("ua", h.UserAgent)
	q("xff", h.ForwardedFor)
	if h.Has&HasRequestTime != 0 {
		fmt.Fprintf(&b, " request_time=%s", h.RequestTime)
	}
	return b.String()
}

// TestGolden parses every testdata/golden/NAME.log with the format in
// NAME.format and compares, line by line, with NAME.golden. Run with -update to
// rewrite the golden files, then read the diff: it is the review.
func TestGolden(t *testing.T) {
	logs, err := filepath.Glob("testdata/golden/*.log")
	if err != nil || len(logs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, logPath := range logs {
		name := strings.TrimSuffix(filepath.Base(logPath), ".log")
		t.Run(name, func(t *testing.T) {
			format, err := os.ReadFile(strings.TrimSuffix(logPath, ".log") + ".format")
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(strings.TrimRight(string(format), "\n"))
			if err != nil {
				t.Fatal(err)
			}
			input, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			var h Hit
			for i, line := range bytes.SplitAfter(input, []byte("\n")) {
				if len(line) == 0 {
					continue // after a final newline
				}
				if err := p.Parse(line, &h); err != nil {
					fmt.Fprintf(&out, "%d error %v\n", i+1, err)
				} else {
					fmt.Fprintf(&out, "%d ok %s\n", i+1, render(&h))
				}
			}
			goldenPath := strings.TrimSuffix(logPath, ".log") + ".golden"
			if *update {
				if err := os.WriteFile(goldenPath, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test ./parser -run TestGolden -update)", err)
			}
			gotLines := strings.Split(out.String(), "\n")
			wantLines := strings.Split(string(want), "\n")
			for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
				var g, w string
				if i < len(gotLines) {
					g = gotLines[i]
				}
				if i < len(wantLines) {
					w = wantLines[i]
				}
				if g != w {
					t.Errorf("%s line %d:\n got: %s\nwant: %s", goldenPath, i+1, g, w)
				}
			}
		})
	}
}
