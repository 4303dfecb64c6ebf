package lines

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

type got struct {
	line   string
	offset int64
	err    string
}

func readAll(t *testing.T, in string, limit int) []got {
	t.Helper()
	r := NewReader(strings.NewReader(in), 100, limit)
	var out []got
	for i := 0; i < 100; i++ {
		line, off, err := r.Next()
		g := got{line: string(line), offset: off}
		var tl *TooLongError
		switch {
		case errors.As(err, &tl):
			g.err = "toolong"
			if tl.Partial {
				g.err = "toolong-partial"
			}
			if tl.Offset != off {
				t.Errorf("TooLongError offset %d, returned %d", tl.Offset, off)
			}
		case err == io.EOF:
			g.err = "eof"
		case err != nil:
			t.Fatal(err)
		}
		out = append(out, g)
		if err == io.EOF || (tl != nil && tl.Partial) {
			return out
		}
	}
	t.Fatal("no end")
	return nil
}

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	cases := []struct {
		name  string
		in    string
		limit int
		want  []got
	}{
		{"lines with offsets", "a\nbb\n\nccc\n", 0, []got{{"a\n", 100, ""}, {"bb\n", 102, ""}, {"\n", 105, ""}, {"ccc\n", 106, ""}, {"", 110, "eof"}}},
		{"partial last line returned with EOF", "a\nbb", 0, []got{{"a\n", 100, ""}, {"bb", 102, "eof"}}},
		{"crlf kept for the parser", "a\r\nb\r\n", 0, []got{{"a\r\n", 100, ""}, {"b\r\n", 103, ""}, {"", 106, "eof"}}},
		{"long line within the limit", long + "\nz\n", 0, []got{{long + "\n", 100, ""}, {"z\n", 200_101, ""}, {"", 200_103, "eof"}}},
		{"over-long line skipped, the next one kept", "a\n" + long + "\nz\n", 1000, []got{{"a\n", 100, ""}, {"", 102, "toolong"}, {"z\n", 200_103, ""}, {"", 200_105, "eof"}}},
		{"over-long line exactly at the buffer", strings.Repeat("y", 70_000) + "\nz\n", 65_536, []got{{"", 100, "toolong"}, {"z\n", 70_101, ""}, {"", 70_103, "eof"}}},
		{"over-long unfinished line", "a\n" + long, 1000, []got{{"a\n", 100, ""}, {"", 102, "toolong-partial"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := readAll(t, c.in, c.limit)
			if len(out) != len(c.want) {
				t.Fatalf("got %d results, want %d: %v", len(out), len(c.want), out)
			}
			for i := range out {
				if out[i] != c.want[i] {
					t.Errorf("result %d: got %q@%d %s, want %q@%d %s", i, trunc(out[i].line), out[i].offset, out[i].err, trunc(c.want[i].line), c.want[i].offset, c.want[i].err)
				}
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// After an unfinished over-long line, Offset stays at its start so a tailer
// re-reads it once complete.
func TestPartialKeepsOffset(t *testing.T) {
	r := NewReader(strings.NewReader("a\n"+strings.Repeat("x", 5000)), 0, 1000)
	if _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.Next()
	var tl *TooLongError
	if !errors.As(err, &tl) || !tl.Partial {
		t.Fatalf("err = %v, want partial TooLongError", err)
	}
	if r.Offset() != 2 {
		t.Fatalf("Offset = %d, want 2", r.Offset())
	}
}

// A tailer sees a line being written in pieces as one line, at its offset.
func TestPartialLineCompletesLater(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one\ntw")
	rf, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r := NewReader(rf, 0, 0)
	if line, off, err := r.Next(); err != nil || string(line) != "one\n" || off != 0 {
		t.Fatalf("got %q@%d %v", line, off, err)
	}
	if line, off, err := r.Next(); err != io.EOF || string(line) != "tw" || off != 4 {
		t.Fatalf("partial: got %q@%d %v", line, off, err)
	}
	if r.Offset() != 4 {
		t.Fatalf("Offset after a partial line = %d, want 4", r.Offset())
	}
	f.WriteString("o\nthree\n")
	if line, off, err := r.Next(); err != nil || string(line) != "two\n" || off != 4 {
		t.Fatalf("completed: got %q@%d %v", line, off, err)
	}
	if line, off, err := r.Next(); err != nil || string(line) != "three\n" || off != 8 {
		t.Fatalf("next: got %q@%d %v", line, off, err)
	}
}
