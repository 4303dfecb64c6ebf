package liveview

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fakeDB answers the view's queries: counts, no crossings, and top pages
// whose paths are hostile.
type fakeDB struct{ paths []string }

func (f fakeDB) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	switch {
	case strings.Contains(q, "crossings"):
		return nil
	case strings.Contains(q, "hits_1d"):
		for i, p := range f.paths {
			err := fn(func(dest ...any) error {
				*dest[0].(*string), *dest[1].(*string), *dest[2].(*uint64) = "www\x1b[31m", p, uint64(100-i)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	default:
		return fn(func(dest ...any) error { *dest[0].(*uint64) = 42; return nil })
	}
}

func (fakeDB) InsertRows(context.Context, string, string, [][]any) error { return nil }

func TestRenderEscapesHostilePaths(t *testing.T) {
	db := fakeDB{paths: []string{
		"/\x1b]0;owned\x07\x1b[2J",  // OSC title, then clear screen
		"/c1-\u009b31m",             // C1 CSI
		"/raw-\x9b31m-\xff",         // raw 0x9B and invalid UTF-8
		"/bidi-\u202etxt.exe",       // right-to-left override
		"/del-\x7f/nul-\x00/tab-\t", // DEL, NUL, tab (breaks alignment)
	}}
	var b strings.Builder
	var last uint64
	var lastAt time.Time
	if err := render(context.Background(), &b, Options{DB: db, Database: "hc", Top: 5}, time.Now(), &last, &lastAt); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	assertTerminalSafe(t, out)
	for _, want := range []string{`/\x1b]0;owned\x07\x1b[2J`, `/c1-\u009b31m`, `/raw-\x9b31m-\xff`, `/bidi-\u202etxt.exe`, `/del-\x7f/nul-\x00/tab-\t`, `www\x1b[31m`} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %s:\n%q", want, out)
		}
	}
}

// assertTerminalSafe fails if s holds anything a terminal would act on other
// than the newlines between lines.
func assertTerminalSafe(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("output is not valid UTF-8: %q", s)
	}
	for _, r := range s {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r <= 0x9f) || r == 0x202e {
			t.Errorf("output holds %U: %q", r, s)
			return
		}
	}
}

// The rejected lines shown are every line that did not parse, from the
// collector, with the rejects table's sample beside it: never the sample's
// size as the count (issue 18: 222 shown, 322 rejected).
func TestRenderRejectedLines(t *testing.T) {
	cases := []struct {
		name     string
		rejected func() uint64
		want     string
	}{
		{"the collector's count", func() uint64 { return 322 }, "rejected lines 322 since start (42 sampled in hc.rejects)"},
		{"without a collector, the sample said as such", nil, "rejected lines: 42 sampled in hc.rejects"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			var last uint64
			var lastAt time.Time
			if err := render(context.Background(), &b, Options{DB: fakeDB{}, Database: "hc", Top: 5, Rejected: c.rejected}, time.Now(), &last, &lastAt); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "hits 42, "+c.want+", crossings sent 0") {
				t.Errorf("view %q lacks %q", b.String(), c.want)
			}
		})
	}
}
