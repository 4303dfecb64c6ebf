package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/hitcount/hitcount/internal/service"
)

// noElectorEnv names a test hook, not an operator setting (issue 15's
// reproduction, race_integration_test.go): with HITCOUNT_TEST_NO_ELECTOR=1
// the service sweeps every sweep.every without gocron's distributed elector,
// so keeper replicas all sweep at once and rest on the per-crossing claims
// alone, as keepermap replicas (which have no elector) and -once runs from
// timers do. In this mode /readyz stays 503: no sweep result is recorded.
const noElectorEnv = "HITCOUNT_TEST_NO_ELECTOR"

// sweepWithoutElector is the service's schedule without the elector: a sweep
// (all its passes), then sweep.every, until ctx ends.
func sweepWithoutElector(s *service.Sweep, every time.Duration, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		log.Warn(noElectorEnv + "=1: sweeping without the elector (a test hook, not for production)")
		for {
			if err := s.Once(ctx, false, io.Discard); err != nil && ctx.Err() == nil {
				log.Error("sweep failed; next try on schedule", "err", err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(every):
			}
		}
	}
}
