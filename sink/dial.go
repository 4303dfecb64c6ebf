package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// dialInOrder is clickhouse-go's default dial strategy (each address in
// order, the first that answers wins), except that when none does the
// error holds each address's error, not only the last one's. A replica
// that answers "database does not exist" (UNKNOWN_DATABASE, a replica
// rebuilt empty) is then seen as such even when the address after it is
// down, and Open and the insert path can act on it (see cluster_schema.go).
func dialInOrder(ctx context.Context, _ int, opt *clickhouse.Options, dial clickhouse.Dial) (clickhouse.DialResult, error) {
	errs := make([]error, 0, len(opt.Addr))
	for _, addr := range opt.Addr {
		r, err := dial(ctx, addr, opt)
		if err == nil {
			return r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	if len(errs) == 0 {
		return clickhouse.DialResult{}, clickhouse.ErrAcquireConnNoAddress
	}
	return clickhouse.DialResult{}, errors.Join(errs...)
}
