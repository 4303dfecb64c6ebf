package tableout

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hitcount/hitcount/parser"
)

// hostile are values a client can put into a logged request: terminal
// control sequences in every encoding, invalid UTF-8, bidi overrides.
var hostile = []struct{ name, in, table, csv string }{
	{"plain", "/pricing?a=ö", "/pricing?a=ö", "/pricing?a=ö"},
	{"OSC title then CSI clear", "/\x1b]0;title\x07\x1b[2J", `/\x1b]0;title\x07\x1b[2J`, `/\x1b]0;title\x07\x1b[2J`},
	{"C1 CSI", "/a\u009b31mb", `/a\u009b31mb`, `/a\u009b31mb`},
	{"C1 OSC and ST", "/\u009d0;x\u009c", `/\u009d0;x\u009c`, `/\u009d0;x\u009c`},
	{"raw 0x9B byte", "/a\x9b31mb", `/a\x9b31mb`, `/a\x9b31mb`},
	{"invalid UTF-8", "/\xff\xfe\xc3", `/\xff\xfe\xc3`, `/\xff\xfe\xc3`},
	{"overlong encoding of ESC", "/\xc0\x9b", `/\xc0\x9b`, `/\xc0\x9b`},
	{"DEL and NUL", "/a\x7fb\x00c", `/a\x7fb\x00c`, `/a\x7fb\x00c`},
	{"backspace over text", "/admin\x08\x08\x08\x08\x08user", `/admin\x08\x08\x08\x08\x08user`, `/admin\x08\x08\x08\x08\x08user`},
	{"tab newline return", "/a\tb\nc\rd", `/a\tb\nc\rd`, "/a\tb\nc\\rd"},
	{"bidi override", "/invoice\u202egpj.exe", `/invoice\u202egpj.exe`, `/invoice\u202egpj.exe`},
	{"bidi isolate", "/a\u2066b\u2069", `/a\u2066b\u2069`, `/a\u2066b\u2069`},
	{"line separators", "/a\u2028b\u2029c", `/a\u2028b\u2029c`, `/a\u2028b\u2029c`},
	{"backslash kept", `/a\x1b`, `/a\x1b`, `/a\x1b`},
	{"emoji kept", "/🙂", "/🙂", "/🙂"},
}

func TestEscape(t *testing.T) {
	for _, c := range hostile {
		if got := Escape(c.in); got != c.table {
			t.Errorf("%s: Escape(%q) = %q, want %q", c.name, c.in, got, c.table)
		}
		if got := escapeTerminal(c.in); got != c.csv {
			t.Errorf("%s: escapeTerminal(%q) = %q, want %q", c.name, c.in, got, c.csv)
		}
	}
}

func TestEscapeTSV(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/a\\b", `/a\\b`},
		{"a\tb\nc\rd\be\ff\x00g", `a\tb\nc\rd\be\ff\0g`},
		{"/\x1b]0;t\x07\x1b[2J", `/\x1b]0;t\x07\x1b[2J`},
		{"/\u009b", `/\xc2\x9b`},
		{"/\x9b\xff", `/\x9b\xff`},
		{"/\x7f", `/\x7f`},
		{"/ö\u202e", `/ö\xe2\x80\xae`},
	} {
		if got := escapeTSV(c.in); got != c.want {
			t.Errorf("escapeTSV(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Every format prints hostile values without a byte a terminal acts on,
// column names included.
func TestWriteHostileValues(t *testing.T) {
	cols := []string{"path\x1b[2J", "hits"}
	types := []string{"String", "UInt64"}
	var rows [][]string
	for _, c := range hostile {
		rows = append(rows, []string{c.in, "1"})
	}
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, format, cols, types, rows); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !utf8.ValidString(out) {
				t.Errorf("output is not valid UTF-8:\n%q", out)
			}
			// CSV keeps tabs, newlines and carriage returns inside quoted
			// fields; TSV separates fields with tabs. Nothing else.
			allowed := map[rune]bool{'\n': true}
			switch format {
			case "csv":
				allowed['\t'], allowed['\r'] = true, true
			case "tsv":
				allowed['\t'] = true
			}
			for _, r := range out {
				if (r < 0x20 || (r >= 0x7f && r <= 0x9f)) && !allowed[r] {
					t.Fatalf("output holds %U:\n%q", r, out)
				}
				if format == "table" && bidi(r) {
					t.Fatalf("table holds the bidi control %U:\n%q", r, out)
				}
			}
			if format == "table" && strings.Count(out, "\n") != len(rows)+3 {
				t.Errorf("table has %d lines, want %d:\n%q", strings.Count(out, "\n"), len(rows)+3, out)
			}
		})
	}
}

// JSON escapes DEL and C1 as \u00XX, which decodes back to the same value;
// invalid UTF-8 cannot be carried by JSON and becomes U+FFFD.
func TestJSONRoundTrip(t *testing.T) {
	var rows [][]string
	for _, c := range hostile {
		rows = append(rows, []string{c.in})
	}
	var b bytes.Buffer
	if err := Write(&b, "json", []string{"path"}, []string{"String"}, rows); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&b)
	for _, c := range hostile {
		var got struct{ Path string }
		if err := dec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if want := strings.ToValidUTF8(c.in, "\uFFFD"); utf8.ValidString(c.in) && got.Path != c.in || !utf8.ValidString(c.in) && !strings.Contains(got.Path, "\uFFFD") {
			t.Errorf("%s: JSON decodes to %q, want %q", c.name, got.Path, want)
		}
	}
}

// End to end: nginx writes an ESC in a request as \x1B; the parser decodes it
// into the byte; the table shows it escaped, never raw.
func TestParsedPathPrintsEscaped(t *testing.T) {
	p, err := parser.New("combined")
	if err != nil {
		t.Fatal(err)
	}
	line := `203.0.113.9 - - [22/Nov/2026:12:00:00 +0000] "GET /\x1B]0;title\x07\x1B[2J\xC2\x9B31m\x9B HTTP/1.1" 200 5 "-" "curl/8\x1B[8m"` + "\n"
	var h parser.Hit
	if err := p.Parse([]byte(line), &h); err != nil {
		t.Fatal(err)
	}
	if want := "/\x1b]0;title\x07\x1b[2J\u009b31m\x9b"; string(h.Path) != want {
		t.Fatalf("parsed path %q, want %q: the parser no longer decodes nginx's escapes, so this test proves nothing", h.Path, want)
	}
	var b bytes.Buffer
	rows := [][]string{{string(h.Path), string(h.UserAgent), "1"}}
	if err := Write(&b, "table", []string{"path", "user_agent", "hits"}, []string{"String", "String", "UInt64"}, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\u009b") || !utf8.ValidString(out) {
		t.Fatalf("a control reached the table output raw:\n%q", out)
	}
	for _, want := range []string{`/\x1b]0;title\x07\x1b[2J\u009b31m\x9b`, `curl/8\x1b[8m`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %s:\n%q", want, out)
		}
	}
}

// JSON escapes bidi and C1 characters as \uNNNN: lossless, and safe on a
// terminal.
func TestEscapeJSONBidi(t *testing.T) {
	in := []byte("{\"p\":\"/invoice\u202egpj.exe\u009b\x7f\"}")
	want := `{"p":"/invoice\u202egpj.exe\u009b\u007f"}`
	if got := string(EscapeJSON(in)); got != want {
		t.Errorf("EscapeJSON(%q) = %q, want %q", in, got, want)
	}
}

// A huge value is cut in the table (for people), never in the machine
// formats: a 30,000-rune cell does not pad every row to 30,000.
func TestTableClipsHugeCells(t *testing.T) {
	var b strings.Builder
	huge := strings.Repeat("ä", 30_000)
	if err := Write(&b, "table", []string{"a", "b"}, nil, [][]string{{huge, "1"}, {"", "2"}}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if n := utf8.RuneCountInString(line); n > maxCell+40 {
			t.Errorf("a line of %d runes", n)
		}
	}
	if !strings.Contains(b.String(), "…(29000 more)") {
		t.Errorf("the cut is not said:\n%.300s", b.String())
	}
	b.Reset()
	Write(&b, "tsv", []string{"a"}, nil, [][]string{{huge}})
	if !strings.Contains(b.String(), huge) {
		t.Error("tsv cut a value")
	}
}
