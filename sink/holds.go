package sink

import (
	"context"
	"database/sql"
	"fmt"
)

// Span is a run of one source's lines, as a batch in flight is recorded:
// the offsets of its first and last line and the range of its hits' times
// (MaxTS 0: unknown), which confines the search to the partitions and parts
// that can hold them.
type Span struct {
	First, Last  int64
	MinTS, MaxTS int64
	// RejectsAt is the time (Unix seconds) the batch's rejects are stamped
	// with (Batch.RejectsTime), so that the batch read again after a restart
	// is the same block, rejects included, and a store that drops an
	// identical block (a replicated table: by checksum, on any replica)
	// drops it; 0 when unknown (a record of an older version).
	RejectsAt int64
}

// Held is what the store holds of a span: the offsets present in hits and in
// rejects.
type Held struct {
	Hits, Rejects map[int64]bool
}

// Holds answers, from the tables that hold the rows (not from a view written
// after them), which lines of span the store has. The caller first makes
// sure no insert of the source is still running (Settle).
func (s *Sink) Holds(ctx context.Context, source uint64, span Span) (Held, error) {
	h := Held{Hits: map[int64]bool{}, Rejects: map[int64]bool{}}
	hitsQ, rejQ := HoldsQueries(s.table("hits"), s.table("rejects"), span)
	read := func(q func(query string, args ...any) (rowIter, error)) error {
		for _, t := range []struct {
			sql string
			set map[int64]bool
		}{{hitsQ, h.Hits}, {rejQ, h.Rejects}} {
			rows, err := q(t.sql, source, span.First, span.Last)
			if err != nil {
				return err
			}
			for rows.Next() {
				var off uint64
				if err := rows.Scan(&off); err != nil {
					rows.Close()
					return err
				}
				t.set[int64(off)] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if s.cluster != "" {
		// A replica may not have fetched a part another one committed: what
		// it lacks could be these very lines, so an incomplete replica is
		// an error here (the caller waits, for this one source).
		err = s.replicaRead(ctx, []string{"hits", "rejects"}, false, func(c *sql.Conn) error {
			return read(func(q string, args ...any) (rowIter, error) { return c.QueryContext(ctx, q, args...) })
		})
	} else {
		err = read(func(q string, args ...any) (rowIter, error) { return s.conn.Query(ctx, q, args...) })
	}
	if err != nil {
		return Held{}, fmt.Errorf("lines of source %016x held in [%d, %d]: %w", source, span.First, span.Last, err)
	}
	return h, nil
}

// rowIter is what Holds reads of a result, from either driver interface.
type rowIter interface {
	Next() bool
	Scan(dest ...any) error
	Close() error
	Err() error
}

// HoldsQueries are the queries Holds runs (on a server or the embedded engine), with ? for source, first, last.
func HoldsQueries(hits, rejects string, span Span) (string, string) {
	hitsQ := "SELECT offset FROM " + hits + " WHERE source_id = ? AND offset >= ? AND offset <= ?"
	if span.MaxTS > 0 {
		hitsQ += fmt.Sprintf(" AND ts >= toDateTime(%d) AND ts <= toDateTime(%d)", span.MinTS, span.MaxTS)
	}
	return hitsQ, "SELECT offset FROM " + rejects + " WHERE source_id = ? AND offset >= ? AND offset <= ?"
}

// markProgress records that a source's lines up to the one at last are
// committed, where a view that failed after hits took them (the batch was
// then settled from hits) left ingest_progress behind: a restart must not
// resume before them. MarkProgress (quorum.go) calls it.
func (s *Sink) markProgress(ctx context.Context, site string, source uint64, last int64) error {
	if err := s.conn.Exec(ctx, MarkProgressSQL(s.table("ingest_progress")), site, source, uint64(last)); err != nil {
		return fmt.Errorf("mark source %016x committed to %d: %w", source, last, err)
	}
	return nil
}

// MarkProgressSQL is MarkProgress's statement, with ? for site, source and
// offset.
func MarkProgressSQL(progress string) string {
	return "INSERT INTO " + progress + " (site, source_id, max_offset, last_insert) SELECT ?, ?, maxState(toUInt64(?)), maxState(now())"
}
