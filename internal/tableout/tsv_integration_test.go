package tableout_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/hitcount/hitcount/internal/tableout"
	"github.com/hitcount/hitcount/internal/testenv"
)

// roundTrip are values whose TSV form must read back unchanged: ClickHouse's
// own escapes and the \xNN escapes added for a terminal's sake.
var roundTrip = []string{
	"/pricing",
	`/back\slash\N`,
	"a\tb\nc\rd\be\ff\x00g",
	"/\x1b]0;title\x07\x1b[2J",
	"/c1\u009b31m",
	"/raw\x9b\xff\xc0",
	"/del\x7f",
	"/ö🙂\u202e",
}

// The TSV output is ClickHouse's TabSeparated: both stores read it back into
// the very bytes that were written, hostile ones included.
func TestTSVReadBackByClickHouse(t *testing.T) {
	var tsv bytes.Buffer
	var rows [][]string
	for i, v := range roundTrip {
		rows = append(rows, []string{fmt.Sprint(i), v})
	}
	if err := tableout.Write(&tsv, "tsv", []string{"i", "s"}, []string{"UInt32", "String"}, rows); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, got string) {
		var want strings.Builder
		for i, v := range roundTrip {
			fmt.Fprintf(&want, "%d\t%s\n", i, strings.ToUpper(hex.EncodeToString([]byte(v))))
		}
		if got != want.String() {
			t.Errorf("read back (i, hex(s)):\n%s\nwant:\n%s\nfrom the TSV:\n%q", got, want.String(), tsv.String())
		}
	}
	t.Run("server", func(t *testing.T) {
		ch := testenv.ClickHouse(t)
		post := func(q string, body io.Reader) string {
			t.Helper()
			resp, err := http.Post("http://"+ch.HTTPAddr()+"/?query="+url.QueryEscape(q), "text/plain", body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %s: %s", q, resp.Status, out)
			}
			return string(out)
		}
		post("CREATE TABLE default.tsv_round_trip (i UInt32, s String) ENGINE = Memory", nil)
		post("INSERT INTO default.tsv_round_trip FORMAT TabSeparatedWithNames", bytes.NewReader(tsv.Bytes()))
		check(t, post("SELECT i, hex(s) FROM default.tsv_round_trip ORDER BY i FORMAT TabSeparated", nil))
	})
	t.Run("embedded", func(t *testing.T) {
		e := testenv.Embedded(t)
		ctx := context.Background()
		if err := e.Exec(ctx, "CREATE TABLE default.tsv_round_trip (i UInt32, s String) ENGINE = Memory"); err != nil {
			t.Fatal(err)
		}
		// Inline data after FORMAT, as clickhouse-local reads it.
		if err := e.Exec(ctx, "INSERT INTO default.tsv_round_trip FORMAT TabSeparatedWithNames\n"+tsv.String()); err != nil {
			t.Fatal(err)
		}
		out, err := e.Query(ctx, "SELECT i, hex(s) FROM default.tsv_round_trip ORDER BY i", "TabSeparated")
		if err != nil {
			t.Fatal(err)
		}
		check(t, string(out))
	})
}
