package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// ClaimSources writes a collector's records of the sources it ships in one
// insert, stamped with the engine's clock, then reads every live record of
// those sources (see sink.Sink.ClaimSources). The engine serves one process,
// so only that process's collector writes here; the records still say which
// file a source is and since when it is shipped, as on a server.
func (s *Store) ClaimSources(ctx context.Context, c sink.Claim) (time.Time, []sink.Owner, error) {
	var now time.Time
	if len(c.Sources) == 0 {
		return now, nil, nil
	}
	err := s.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) })
	if err != nil {
		return now, nil, fmt.Errorf("claim sources: the store's time: %w", err)
	}
	if err := s.InsertRows(ctx, s.db+".source_owners", sink.OwnersColumns, sink.ClaimRows(c, now)); err != nil {
		return now, nil, fmt.Errorf("claim %d source(s): %w", len(c.Sources), err)
	}
	if c.ReleasesOnly() {
		return now, nil, nil
	}
	var owners []sink.Owner
	err = s.Select(ctx, sink.OwnersQuery(s.db+".source_owners"), sink.OwnersArgs(c), func(scan func(...any) error) error {
		var o sink.Owner
		if err := scan(&o.Source, &o.Collector, &o.Host, &o.Path, &o.Started, &o.Seen); err != nil {
			return err
		}
		owners = append(owners, o)
		return nil
	})
	if err != nil {
		return now, nil, fmt.Errorf("read the owners of %d source(s): %w", len(c.Sources), err)
	}
	return now, owners, nil
}
