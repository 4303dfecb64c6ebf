package tableout

import (
	"bytes"
	"testing"
)

func TestWrite(t *testing.T) {
	cols := []string{"path", "hits", "säte"}
	types := []string{"String", "UInt64", "String"}
	rows := [][]string{{"/pricing", "1204", "ö"}, {"/a\tb\nc", "7", "x,\"y\""}}
	for _, c := range []struct{ format, want string }{
		{"table", "path      hits  säte\n--------  ----  -----\n/pricing  1204  ö\n/a\\tb\\nc     7  x,\"y\"\n(2 rows)\n"},
		{"csv", "path,hits,säte\n/pricing,1204,ö\n\"/a\tb\nc\",7,\"x,\"\"y\"\"\"\n"},
		{"tsv", "path\thits\tsäte\n/pricing\t1204\tö\n/a\\tb\\nc\t7\tx,\"y\"\n"},
		{"json", `{"path":"/pricing","hits":1204,"säte":"ö"}` + "\n" + `{"path":"/a\tb\nc","hits":7,"säte":"x,\"y\""}` + "\n"},
	} {
		t.Run(c.format, func(t *testing.T) {
			var b bytes.Buffer
			in := make([][]string, len(rows))
			for i := range rows {
				in[i] = append([]string(nil), rows[i]...)
			}
			if err := Write(&b, c.format, cols, types, in); err != nil {
				t.Fatal(err)
			}
			if b.String() != c.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), c.want)
			}
		})
	}
	if err := Write(&bytes.Buffer{}, "xml", cols, types, rows); err == nil {
		t.Error("an unknown format was accepted")
	}
}
