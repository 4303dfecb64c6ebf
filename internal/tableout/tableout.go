// Package tableout prints a query result for people (an aligned table) or
// for programs (CSV, TSV, JSON lines).
package tableout

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Formats are the names Write accepts.
var Formats = []string{"table", "csv", "tsv", "json"}

// Write prints columns and rows in format. types (ClickHouse type names, may
// be nil) right-align numbers in a table and keep them numbers in JSON.
func Write(w io.Writer, format string, columns, types []string, rows [][]string) error {
	switch format {
	case "table":
		return table(w, columns, types, rows)
	case "csv":
		// Quoting keeps tabs and newlines in a field; what a terminal would
		// act on is escaped, as a CSV "for files" is printed often enough.
		cw := csv.NewWriter(w)
		for _, r := range append([][]string{columns}, rows...) {
			if err := cw.Write(mapStrings(r, escapeTerminal)); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "tsv":
		for _, r := range append([][]string{columns}, rows...) {
			if _, err := fmt.Fprintln(w, strings.Join(mapStrings(r, escapeTSV), "\t")); err != nil {
				return err
			}
		}
		return nil
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range rows {
			obj := make(map[string]any, len(r))
			for i, v := range r {
				obj[columns[i]] = jsonValue(v, typeOf(types, i))
			}
			if err := enc.Encode(orderedObject{keys: columns, m: obj}); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("output format %q: want one of %v", format, Formats)
}

func typeOf(types []string, i int) string {
	if i < len(types) {
		return types[i]
	}
	return ""
}

// numeric is true for the ClickHouse types printed as plain numbers.
func numeric(t string) bool {
	t = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(t, "Nullable("), ")"), "LowCardinality(")
	for _, p := range []string{"UInt", "Int", "Float", "Decimal"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func jsonValue(v, typ string) any {
	if numeric(typ) {
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return json.Number(v)
		}
		if v == "NULL" || v == `\N` {
			return nil
		}
	}
	return v
}

// orderedObject keeps the columns' order in each JSON object.
type orderedObject struct {
	keys []string
	m    map[string]any
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(o.m[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return EscapeJSON([]byte(b.String())), nil
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// maxCell is the most runes a table cell shows: a table is read by people,
// and one 30 MB value would otherwise pad every row of its column to 30 MB.
// The machine formats keep every byte.
const maxCell = 1000

// clip cuts a cell to maxCell runes, saying how much it left out.
func clip(v string) string {
	if len(v) <= maxCell {
		return v
	}
	n := utf8.RuneCountInString(v)
	if n <= maxCell {
		return v
	}
	cut := 0
	for range maxCell {
		_, size := utf8.DecodeRuneInString(v[cut:])
		cut += size
	}
	return fmt.Sprintf("%s…(%d more)", v[:cut], n-maxCell)
}

// table aligns columns by display width (runes); numbers to the right.
// Values and names are shown through Escape, so none can break the layout or
// reach the terminal as a control sequence.
func table(w io.Writer, columns, types []string, rows [][]string) error {
	columns = mapStrings(columns, Escape)
	width := make([]int, len(columns))
	for i, c := range columns {
		width[i] = utf8.RuneCountInString(c)
	}
	cells := make([][]string, len(rows))
	for r, row := range rows {
		cells[r] = make([]string, len(row))
		for i, v := range row {
			v = clip(Escape(v))
			cells[r][i] = v
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(v))
			}
		}
	}
	line := func(vals []string, header bool) error {
		var b strings.Builder
		for i, v := range vals {
			if i >= len(width) {
				break
			}
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(v))
			if !header && numeric(typeOf(types, i)) {
				b.WriteString(pad + v)
			} else if i == len(vals)-1 {
				b.WriteString(v)
			} else {
				b.WriteString(v + pad)
			}
		}
		_, err := fmt.Fprintln(w, b.String())
		return err
	}
	if err := line(columns, true); err != nil {
		return err
	}
	rule := make([]string, len(columns))
	for i := range rule {
		rule[i] = strings.Repeat("-", width[i])
	}
	if err := line(rule, true); err != nil {
		return err
	}
	for _, r := range cells {
		if err := line(r, false); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "(%d rows)\n", len(rows))
	return err
}
