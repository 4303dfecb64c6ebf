package embedded

import (
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestBind(t *testing.T) {
	for _, c := range []struct {
		name, q string
		args    []any
		want    string
		err     string
	}{
		{"numbers and strings", "SELECT ? , ?, ?", []any{int64(-3), uint32(7), "a"}, "SELECT -3 , 7, 'a'", ""},
		{"a quote cannot end the literal", "WHERE path = ?", []any{`x' OR 1=1 --`}, `WHERE path = 'x\' OR 1=1 --'`, ""},
		{"a backslash cannot escape the closing quote", "WHERE path = ?", []any{`x\`}, `WHERE path = 'x\\'`, ""},
		{"NUL is escaped", "SELECT ?", []any{"a\x00b"}, `SELECT 'a\0b'`, ""},
		{"? inside literals stays", "SELECT '?', \"a?\", `b?`, 'it\\'s?', ?", []any{1}, "SELECT '?', \"a?\", `b?`, 'it\\'s?', 1", ""},
		{"sets become tuples", "WHERE k IN ?", []any{clickhouse.GroupSet{Value: []any{"a", "b'"}}}, `WHERE k IN ('a', 'b\'')`, ""},
		{"times are Unix seconds", "WHERE t >= ?", []any{time.Unix(1700000000, 0)}, "WHERE t >= toDateTime(1700000000)", ""},
		{"too few arguments", "SELECT ?, ?", []any{1}, "", "more placeholders"},
		{"too many arguments", "SELECT ?", []any{1, 2}, "", "2 arguments for 1 placeholders"},
		{"unknown type refused", "SELECT ?", []any{3.5}, "", "float64"},
		{"empty set refused", "WHERE k IN ?", []any{clickhouse.GroupSet{}}, "", "empty set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := bind(c.q, c.args)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %q, %v; want error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
