package sink

import (
	"context"
	"fmt"
)

// Select runs q with ? parameters bound by the driver and calls fn for each
// row; scan fills fn's destinations. Only builtin types cross this boundary,
// so the alerts store can take the server or the embedded engine alike.
func (s *Sink) Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error {
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// InsertRows inserts rows of values, in the order of columns, into table
// (database.table) as one block.
// It uses a prepared batch: an INSERT ... VALUES statement sent as text
// crashes 18.16 through this driver.
func (s *Sink) InsertRows(ctx context.Context, table, columns string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			b.Abort()
			return fmt.Errorf("insert into %s: %w", table, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", table, err)
	}
	return nil
}
