package checklog

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// writeLog writes a combined log with a known mix: wantPaths counts the good
// lines per path; every 1000th line is malformed; one line is 2 MB long and one
// is binary garbage; the file ends without a newline.
func writeLog(t *testing.T, n int) (data []byte, wantPaths map[string]int64, bad int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	paths := []string{"/", "/pricing", "/blog/a", "/blog/b", "/checkout"}
	wantPaths = map[string]int64{}
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		switch {
		case i%1000 == 999:
			fmt.Fprintf(&b, "garbage line %d\n", i)
			bad++
		case i == 500:
			b.WriteString(strings.Repeat("A", 2<<20) + "\n")
			bad++
		case i == 501:
			b.Write([]byte{0x16, 0x03, 0x01, 0x00, 0xff, '\n'})
			bad++
		default:
			p := paths[rng.IntN(len(paths))]
			wantPaths[p]++
			fmt.Fprintf(&b, `10.0.0.%d - - [22/Nov/2026:10:%02d:%02d +0000] "GET %s?x=%d HTTP/1.1" 200 %d "-" "ua"`+"\n", i%250, i/60%60, i%60, p, i, i)
		}
	}
	data = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return data, wantPaths, bad
}

func TestCheckCountsEveryLine(t *testing.T) {
	const n = 20_000
	data, wantPaths, bad := writeLog(t, n)
	dir := t.TempDir()
	plain := filepath.Join(dir, "access.log")
	if err := os.WriteFile(plain, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	// logrotate's name for a rotated, compressed log: detection is by content.
	rotated := filepath.Join(dir, "access.log.1.gz")
	if err := os.WriteFile(rotated, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{plain, rotated} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			rep, err := File(context.Background(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != "combined" || !rep.Detected {
				t.Errorf("format %q detected=%v, want combined detected", rep.Format, rep.Detected)
			}
			if rep.Lines != n || rep.Rejected != bad || rep.Parsed != n-bad {
				t.Errorf("lines %d parsed %d rejected %d, want %d %d %d", rep.Lines, rep.Parsed, rep.Rejected, n, n-bad, bad)
			}
			if rep.Bytes != int64(len(data)) {
				t.Errorf("bytes %d, want %d", rep.Bytes, len(data))
			}
			if len(rep.TopPaths) != len(wantPaths) {
				t.Fatalf("top paths %v, want %d entries", rep.TopPaths, len(wantPaths))
			}
			var prev int64 = 1 << 62
			for _, e := range rep.TopPaths {
				path, hits := e[0].(string), e[1].(int64)
				if hits != wantPaths[path] || hits > prev {
					t.Errorf("path %s: %d hits, want %d (and in descending order)", path, hits, wantPaths[path])
				}
				prev = hits
			}
			if len(rep.FirstRejects) != 10 {
				t.Fatalf("%d reject samples, want 10", len(rep.FirstRejects))
			}
			if r := rep.FirstRejects[0]; r.Line != 501 || !strings.Contains(r.Reason, "longer than the limit") || len(r.Text) > 200 {
				t.Errorf("first reject %+v, want line 501 too long, sample cut to 200 bytes", r)
			}
			if r := rep.FirstRejects[1]; r.Line != 502 || !strings.HasPrefix(r.Text, `\x16\x03`) {
				t.Errorf("second reject %+v, want line 502 shown as \\x escapes", r)
			}
		})
	}
}

// The report names the format it detected with every candidate's counts,
// and, when many lines are rejected, the format that accepts them.
func TestCheckDetectsAndSuggests(t *testing.T) {
	combined := `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"` + "\n"
	common := `1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1` + "\n"
	vhost := `h:80 1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-"` + "\n"
	json := `{"time":"2026-11-22T10:00:00Z","request":"GET / HTTP/1.1","status":200}` + "\n"
	cases := []struct {
		name, format, log string
		wantFormat        string
		wantRejected      int64
		// wantSuggest is the format the rejected lines parse as; "": none said.
		wantSuggest string
	}{
		{"combined detected", "", strings.Repeat(combined, 3), "combined", 0, ""},
		{"common detected", "auto", strings.Repeat(common, 3), "common", 0, ""},
		{"vhost_combined detected", "", strings.Repeat(vhost, 3), "vhost_combined", 0, ""},
		{"json detected", "", strings.Repeat(json, 3), "json", 0, ""},
		{"a wrong format given: the right one named", "combined", strings.Repeat(json, 20), "combined", 20, "json"},
		{"a format change after the detected lines", "", strings.Repeat(combined, 300) + strings.Repeat(json, 100), "combined", 100, "json"},
		{"a few rejects: nothing said", "", strings.Repeat(combined, 50) + strings.Repeat(json, 2), "combined", 2, ""},
		{"garbage: nothing accepts it", "", strings.Repeat("garbage\n", 20), "combined", 20, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Check(context.Background(), strings.NewReader(c.log), Options{Format: c.format})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Format != c.wantFormat || rep.Rejected != c.wantRejected {
				t.Errorf("format %q rejected %d, want %q %d", rep.Format, rep.Rejected, c.wantFormat, c.wantRejected)
			}
			detect := c.format == "" || c.format == "auto"
			if rep.Detected != detect || (rep.Detection != nil) != detect {
				t.Errorf("detected %v with detection %+v, want %v", rep.Detected, rep.Detection, detect)
			}
			if detect && (rep.Detection.Lines == 0 || len(rep.Detection.Candidates) < 4) {
				t.Errorf("detection %+v: want its lines and every candidate", rep.Detection)
			}
			got := ""
			if rep.RejectedParseAs != nil {
				got = rep.RejectedParseAs.Format
				if rep.RejectedParseAs.Accepted != int(c.wantRejected) || rep.RejectedParseAs.Of != int(c.wantRejected) {
					t.Errorf("suggestion %+v, want all %d", rep.RejectedParseAs, c.wantRejected)
				}
			}
			if got != c.wantSuggest {
				t.Errorf("rejected lines parse as %q, want %q", got, c.wantSuggest)
			}
		})
	}
}

func TestCheckCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data, _, _ := writeLog(t, 100)
	if _, err := Check(ctx, bytes.NewReader(data), Options{Format: "combined"}); err == nil {
		t.Fatal("a cancelled check returned no error")
	}
}

// A line whose time the store cannot hold is a reject, with the reason the
// collector records, not a parsed line.
func TestTimeOutsideTheStoreIsAReject(t *testing.T) {
	log := strings.Join([]string{
		`1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] "GET /ok HTTP/1.1" 200 1 "-" "-"`,
		`1.2.3.4 - - [31/Dec/1969:23:59:59 +0000] "GET /before-1970 HTTP/1.1" 200 1 "-" "-"`,
		`1.2.3.4 - - [01/Jan/0001:00:00:00 +0000] "GET /year-1 HTTP/1.1" 200 1 "-" "-"`,
		`1.2.3.4 - - [06/Feb/2106:00:00:00 +0000] "GET /after-2106 HTTP/1.1" 200 1 "-" "-"`,
		`1.2.3.4 - - [31/Dec/9999:23:59:59 +0000] "GET /year-9999 HTTP/1.1" 200 1 "-" "-"`,
		`1.2.3.4 - - [05/Feb/2106:23:59:59 +0000] "GET /last-second HTTP/1.1" 200 1 "-" "-"`,
	}, "\n") + "\n"
	rep, err := Check(context.Background(), strings.NewReader(log), Options{Format: "combined"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 6 || rep.Parsed != 2 || rep.Rejected != 4 {
		t.Errorf("lines %d parsed %d rejected %d, want 6 2 4", rep.Lines, rep.Parsed, rep.Rejected)
	}
	wantTimes := []string{"1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2106-02-06T00:00:00Z", "9999-12-31T23:59:59Z"}
	if len(rep.FirstRejects) != len(wantTimes) {
		t.Fatalf("rejects %+v", rep.FirstRejects)
	}
	for i, r := range rep.FirstRejects {
		tm, _ := time.Parse(time.RFC3339, wantTimes[i])
		if want := sink.TimeRangeReason(tm.Unix()); r.Reason != want || r.Line != int64(i+2) {
			t.Errorf("reject %d: line %d %q, want line %d %q", i, r.Line, r.Reason, i+2, want)
		}
	}
	if rep.LastTime != "2106-02-05T23:59:59Z" {
		t.Errorf("last time %s, want the last storable second", rep.LastTime)
	}
}
