package backend

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hitcount/hitcount/internal/chdb"
)

// Result is a query's answer as text, for people: column names and types,
// and every value as ClickHouse prints it.
type Result struct {
	Columns []string
	Types   []string
	Rows    [][]string
}

// maxResultRows bounds what an ad-hoc query may pull into memory.
const maxResultRows = 1_000_000

// maxResultBytes and maxQueryMemory bound a query served by a running job.
const (
	maxResultBytes = 256 << 20
	maxQueryMemory = 256 << 20
)

// Table runs one SQL statement of any kind and returns its result as text.
func (b *Backend) Table(ctx context.Context, sql string) (*Result, error) {
	if b.Engine != nil {
		return EngineTable(ctx, b.Engine, sql)
	}
	rows, err := b.Server.Conn().Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	res := &Result{Columns: rows.Columns()}
	cts := rows.ColumnTypes()
	dest := make([]any, len(cts))
	for i, ct := range cts {
		res.Types = append(res.Types, ct.DatabaseTypeName())
		dest[i] = reflect.New(ct.ScanType()).Interface()
	}
	for rows.Next() {
		if len(res.Rows) == maxResultRows {
			return nil, fmt.Errorf("more than %d rows: add a LIMIT", maxResultRows)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]string, len(dest))
		for i, d := range dest {
			row[i] = text(reflect.ValueOf(d).Elem().Interface())
		}
		res.Rows = append(res.Rows, row)
	}
	return res, rows.Err()
}

// EngineTable runs sql on an embedded engine connection and returns its
// result as text.
func EngineTable(ctx context.Context, e *chdb.Engine, sql string) (*Result, error) {
	out, err := e.Query(ctx, sql, "TSVWithNamesAndTypes")
	if err != nil {
		return nil, err
	}
	return ParseTSVWithNamesAndTypes(out)
}

// ReadOnly opens a second connection to the embedded engine that can only
// read, with bounded time and result size: for queries from outside while
// the job runs. Close it when done.
func (b *Backend) ReadOnly(ctx context.Context) (*chdb.Engine, error) {
	if b.Engine == nil {
		return nil, fmt.Errorf("read-only connection: not on the embedded engine")
	}
	e, err := chdb.Open(ctx, chdb.Options{LibPath: b.lib, DataPath: b.Engine.DataPath()})
	if err != nil {
		return nil, fmt.Errorf("read-only connection: %w", err)
	}
	// The settings are this connection's session's alone; readonly last,
	// since it also forbids changing settings.
	// The memory cap keeps queries from taking the memory the collector
	// runs in (the standalone unit allows the whole job 2 GB; a query
	// without it took the job from 0.3 to 8.6 GB): two at a time, 512 MiB.
	for _, set := range []string{"SET max_execution_time = 60", fmt.Sprintf("SET max_result_rows = %d", maxResultRows),
		fmt.Sprintf("SET max_result_bytes = %d", maxResultBytes), "SET result_overflow_mode = 'throw'",
		fmt.Sprintf("SET max_memory_usage = %d", maxQueryMemory), "SET allow_introspection_functions = 0",
		"SET session_timezone = 'UTC'", "SET readonly = 1"} {
		if err := e.Exec(ctx, set); err != nil {
			e.Close()
			return nil, fmt.Errorf("read-only connection: %w", err)
		}
	}
	return e, nil
}

// text prints a value the way clickhouse-client does for the common types.
func text(v any) string {
	switch v := v.(type) {
	case time.Time:
		return v.Format(time.DateTime)
	case *string:
		if v == nil {
			return "NULL"
		}
		return *v
	case nil:
		return "NULL"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "NULL"
		}
		return text(rv.Elem().Interface())
	}
	return fmt.Sprint(v)
}

func ParseTSVWithNamesAndTypes(out []byte) (*Result, error) {
	res := &Result{}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(out) == 0 {
		return res, nil // a statement without a result (DDL, INSERT)
	}
	if len(lines) < 2 {
		return nil, fmt.Errorf("result without its header: %q", out)
	}
	res.Columns = fields(lines[0])
	res.Types = fields(lines[1])
	for _, l := range lines[2:] {
		if len(res.Rows) == maxResultRows {
			return nil, fmt.Errorf("more than %d rows: add a LIMIT", maxResultRows)
		}
		res.Rows = append(res.Rows, fields(l))
	}
	return res, nil
}

func fields(line []byte) []string {
	f := strings.Split(string(line), "\t")
	for i := range f {
		f[i] = unescape.Replace(f[i])
	}
	return f
}

// unescape undoes the TSV escapes of the engine's output.
var unescape = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\r`, "\r", `\'`, "'", `\0`, "\x00",
	`\b`, "\b", `\f`, "\f", `\a`, "\a", `\v`, "\v")
