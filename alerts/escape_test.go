package alerts

import (
	"strings"
	"testing"
)

func TestTextSafe(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/pricing?q=ä€", "/pricing?q=ä€"},
		{"/a\r\nBcc: x@y", `/a\r\nBcc: x@y`},
		{"\t\x00\x1b\x7f", `\t\x00\x1b\x7f`},
		{"a\u0085b\u009fc", `a\u0085b\u009fc`},
		{"a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"bad\xff\xfe utf8", `bad\xff\xfe utf8`},
		{`back\slash \n`, `back\slash \n`},
	}
	for _, c := range cases {
		if got := textSafe(c.in); got != c.want {
			t.Errorf("textSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("é", 150) // 300 bytes: the cut must not split one
	if got := headerSafe(long); !strings.HasSuffix(got, "...") || strings.ContainsRune(got, '\uFFFD') || len(got) > 203 {
		t.Errorf("headerSafe cut %q", got)
	}
}

// Operator templates are escaped too: values printed directly, through
// functions, in a defined template, in range and with; declared variables
// keep their type (a range over one still works); the template's own line
// breaks stay.
func TestParseTextEscapesEveryValue(t *testing.T) {
	tmpl, err := parseText("text", `{{define "page"}}{{.Site}}{{.Path}}{{end}}page: {{template "page" .}}
printf: {{printf "%s!" .Path}}
{{$p := .Path}}{{$l := .List}}var: {{$p}}
{{range $l}}item: {{.}}
{{end}}{{with .Path}}with: {{.}}{{end}}
{{if .Missing}}{{else}}none: {{.Missing}}{{end}}
`)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	data := map[string]any{"Site": "s\r\n", "Path": "/a\nB", "List": []string{"x\ry", "z"}}
	if err := tmpl.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	want := `page: s\r\n/a\nB
printf: /a\nB!
var: /a\nB
item: x\ry
item: z
with: /a\nB
none: <no value>
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
