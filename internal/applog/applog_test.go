package applog

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// A path from a log, with what a terminal acts on, reaches neither format
// raw; the JSON still reads back to the same text.
func TestHostileValuesAreEscaped(t *testing.T) {
	const path = "/x/\u009b31mPWNED\u202egnp.exe\x7f\u2028\x1b]0;t\x07"
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		log, err := New(&buf, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Warn("touched pages with paths too long to count", "first", "www"+path, "err", errors.New("query failed for "+path))
		out := buf.String()
		for _, c := range []string{"\u009b", "\u202e", "\x7f", "\u2028", "\x1b", "\x07"} {
			if strings.Contains(out, c) {
				t.Errorf("%s: %q reaches the log raw: %q", format, c, out)
			}
		}
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("json log line: %v: %s", err, out)
			}
			if m["first"] != "www"+path {
				t.Errorf("json: first reads back as %q", m["first"])
			}
		}
	}
}

func TestBadLevelOrFormat(t *testing.T) {
	if _, err := New(&bytes.Buffer{}, "loud", "text"); err == nil {
		t.Error("level loud accepted")
	}
	if _, err := New(&bytes.Buffer{}, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
