package collector

import (
	"fmt"
	"strings"
	"testing"
)

// A header block of any length is kept bounded and still parses as the
// reader parsed it: past maxHeaderLines, the last line of each directive a
// parser reads.
func TestAppendHeaderKeepsWhatParsers(t *testing.T) {
	remarks := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("#Remark: %d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines []string
		tail  []string // the block's lines past maxHeaderLines
	}{
		{"short block whole", []string{"#Software: IIS", "#Fields: date time"}, nil},
		{"#Fields past the cap", append(remarks(maxHeaderLines+5), "#Fields: date time cs-uri-stem"), []string{"#Fields: date time cs-uri-stem"}},
		{"last of each kind", append(remarks(maxHeaderLines), "#Fields: a", "#Date: 2026-11-24", "#fields: b", "#GMT-Offset: +0100", "#Remark: x"),
			[]string{"#fields: b", "#Date: 2026-11-24", "#GMT-Offset: +0100"}},
		{"a file of only remarks stays bounded", remarks(10 * maxHeaderLines), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var block [][]byte
			for _, l := range tc.lines {
				block = appendHeader(block, []byte(l))
			}
			if len(tc.lines) <= maxHeaderLines {
				if len(block) != len(tc.lines) {
					t.Fatalf("kept %d of %d lines", len(block), len(tc.lines))
				}
				return
			}
			var tail []string
			for _, l := range block[maxHeaderLines:] {
				tail = append(tail, string(l))
			}
			if strings.Join(tail, "|") != strings.Join(tc.tail, "|") {
				t.Fatalf("past the cap: %q, want %q", tail, tc.tail)
			}
		})
	}
}
