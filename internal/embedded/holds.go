package embedded

import (
	"context"
	"fmt"

	"github.com/hitcount/hitcount/sink"
)

// Holds answers which lines of span the engine holds, from hits and rejects
// themselves. An insert never outlives this process, so nothing can still be
// running.
func (s *Store) Holds(ctx context.Context, source uint64, span sink.Span) (sink.Held, error) {
	h := sink.Held{Hits: map[int64]bool{}, Rejects: map[int64]bool{}}
	hitsQ, rejQ := sink.HoldsQueries(s.db+".hits", s.db+".rejects", span)
	for _, t := range []struct {
		sql string
		set map[int64]bool
	}{{hitsQ, h.Hits}, {rejQ, h.Rejects}} {
		err := s.Select(ctx, t.sql, []any{source, uint64(span.First), uint64(span.Last)}, func(scan func(...any) error) error {
			var off uint64
			if err := scan(&off); err != nil {
				return err
			}
			t.set[int64(off)] = true
			return nil
		})
		if err != nil {
			return sink.Held{}, fmt.Errorf("lines of source %016x held in [%d, %d]: %w", source, span.First, span.Last, err)
		}
	}
	return h, nil
}

// Exclusive reports that no other process inserts into this store: the
// engine serves its directory to this one alone. So after a crash, the batch
// that was in flight can be inserted again, identical, before anything else,
// well inside the deduplication window, to complete the views a kill cut short.
func (s *Store) Exclusive() bool { return true }

// MarkProgress records that a source's lines up to the one at last are
// committed (see sink.Sink.MarkProgress).
func (s *Store) MarkProgress(ctx context.Context, site string, source uint64, last int64) error {
	q, err := bind(sink.MarkProgressSQL(s.db+".ingest_progress"), []any{site, source, uint64(last)})
	if err == nil {
		err = s.e.Exec(ctx, q)
	}
	if err != nil {
		return fmt.Errorf("mark source %016x committed to %d: %w", source, last, err)
	}
	return nil
}
