package embedded

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The engine takes SQL text only, so parameters are bound here as literals.
// Written by hand because it is small and every value that reaches it is one
// of a few types; anything else is refused rather than guessed at.

// bind replaces each ? outside string literals and quoted identifiers in q
// with the literal of the next argument.
func bind(q string, args []any) (string, error) {
	if len(args) == 0 {
		return q, nil
	}
	var b strings.Builder
	b.Grow(len(q) + 16*len(args))
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(q) {
				i++
				b.WriteByte(q[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
			b.WriteByte(c)
		case c == '?':
			if n == len(args) {
				return "", fmt.Errorf("bind: more placeholders than the %d arguments", len(args))
			}
			if err := literal(&b, args[n]); err != nil {
				return "", fmt.Errorf("bind argument %d: %w", n+1, err)
			}
			n++
		default:
			b.WriteByte(c)
		}
	}
	if n != len(args) {
		return "", fmt.Errorf("bind: %d arguments for %d placeholders", len(args), n)
	}
	return b.String(), nil
}

// quoteString writes s as a ClickHouse string literal: backslash and quote
// escaped, so no content can end the literal.
func quoteString(b *strings.Builder, s string) {
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
}

func literal(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case string:
		quoteString(b, v)
	case int:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case int32:
		b.WriteString(strconv.FormatInt(int64(v), 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	case uint32:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case uint16:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case uint8:
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	case bool:
		if v {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	case time.Time:
		fmt.Fprintf(b, "toDateTime(%d)", v.Unix())
	case clickhouse.GroupSet:
		if len(v.Value) == 0 {
			return fmt.Errorf("an empty set has no literal")
		}
		b.WriteByte('(')
		for i, e := range v.Value {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := literal(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(')')
	default:
		return fmt.Errorf("type %T has no literal here", v)
	}
	return nil
}

// appendTSVValue appends v as one TSV field.
func appendTSVValue(buf []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		for i := 0; i < len(v); i++ {
			switch c := v[i]; c {
			case '\\':
				buf = append(buf, `\\`...)
			case '\t':
				buf = append(buf, `\t`...)
			case '\n':
				buf = append(buf, `\n`...)
			case '\r':
				buf = append(buf, `\r`...)
			case 0:
				buf = append(buf, `\0`...)
			default:
				buf = append(buf, c)
			}
		}
	case int:
		buf = strconv.AppendInt(buf, int64(v), 10)
	case int64:
		buf = strconv.AppendInt(buf, v, 10)
	case int32:
		buf = strconv.AppendInt(buf, int64(v), 10)
	case uint64:
		buf = strconv.AppendUint(buf, v, 10)
	case uint32:
		buf = strconv.AppendUint(buf, uint64(v), 10)
	case uint16:
		buf = strconv.AppendUint(buf, uint64(v), 10)
	case uint8:
		buf = strconv.AppendUint(buf, uint64(v), 10)
	case bool:
		if v {
			buf = append(buf, '1')
		} else {
			buf = append(buf, '0')
		}
	case time.Time:
		// As text in UTC, the session's zone: a bare number is ambiguous to
		// the parser (5 digits are refused, 8 read as a date). The zero
		// time is the epoch, as the server driver writes it.
		if v.Unix() < 0 {
			v = time.Unix(0, 0)
		}
		buf = v.UTC().AppendFormat(buf, time.DateTime)
	default:
		return buf, fmt.Errorf("type %T cannot be inserted here", v)
	}
	return buf, nil
}

// scanTSV parses one TSV field into dest. DateTime text is read as UTC: the
// store's session runs in UTC.
func scanTSV(field string, dest any) error {
	switch d := dest.(type) {
	case *string:
		*d = unescapeTSV(field)
	case *uint64:
		v, err := strconv.ParseUint(field, 10, 64)
		*d = v
		return err
	case *uint32:
		v, err := strconv.ParseUint(field, 10, 32)
		*d = uint32(v)
		return err
	case *uint16:
		v, err := strconv.ParseUint(field, 10, 16)
		*d = uint16(v)
		return err
	case *uint8:
		v, err := strconv.ParseUint(field, 10, 8)
		*d = uint8(v)
		return err
	case *int64:
		v, err := strconv.ParseInt(field, 10, 64)
		*d = v
		return err
	case *int:
		v, err := strconv.ParseInt(field, 10, 64)
		*d = int(v)
		return err
	case *float64:
		v, err := strconv.ParseFloat(field, 64)
		*d = v
		return err
	case *bool:
		*d = field == "1" || field == "true"
	case *time.Time:
		layout := time.DateTime
		if len(field) == len(time.DateOnly) {
			layout = time.DateOnly
		}
		v, err := time.ParseInLocation(layout, field, time.UTC)
		*d = v
		return err
	default:
		return fmt.Errorf("cannot scan into %T", dest)
	}
	return nil
}

// Select implements alerts.DB: q with ? parameters bound as literals, each row
// of the TSV result scanned into fn's destinations.
func (s *Store) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	sql, err := bind(q, args)
	if err != nil {
		return err
	}
	out, err := s.e.Query(ctx, sql, "TSV")
	if err != nil {
		return err
	}
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		fields := strings.Split(string(line), "\t")
		err := fn(func(dest ...any) error {
			if len(dest) != len(fields) {
				return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(fields))
			}
			for i, d := range dest {
				if err := scanTSV(fields[i], d); err != nil {
					return fmt.Errorf("scan column %d (%q): %w", i+1, fields[i], err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// InsertRows implements alerts.DB: the rows as one TSV block.
func (s *Store) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	buf := []byte("INSERT INTO " + table + " (" + columns + ") FORMAT TSV\n")
	var err error
	for _, r := range rows {
		for i, v := range r {
			if i > 0 {
				buf = append(buf, '\t')
			}
			if buf, err = appendTSVValue(buf, v); err != nil {
				return fmt.Errorf("insert into %s: column %d: %w", table, i+1, err)
			}
		}
		buf = append(buf, '\n')
	}
	if err := s.e.Exec(ctx, string(buf)); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}
