package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hitcount/hitcount/alerts"
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

// pauseAtEnv names a test hook, not an operator setting: with
// HITCOUNT_TEST_PAUSE_AT=STEP:DURATION (a step of alerts.Options.Fault, e.g.
// sent:3s) the sweeper sleeps that long after the step, so a test can stop
// it there: a SIGTERM between the SMTP server's acceptance and the mark
// (stop_integration_test.go).
const pauseAtEnv = "HITCOUNT_TEST_PAUSE_AT"

func pauseAtHook(log *slog.Logger) []func(*alerts.Options) {
	step, d, ok := strings.Cut(os.Getenv(pauseAtEnv), ":")
	pause, err := time.ParseDuration(d)
	if !ok || err != nil {
		return nil
	}
	log.Warn(pauseAtEnv + " is set: pausing at a step of sending (a test hook, not for production)")
	return []func(*alerts.Options){func(o *alerts.Options) {
		o.Fault = func(at string) {
			if at == step {
				log.Info("test hook: paused", "step", step, "for", pause)
				time.Sleep(pause)
			}
		}
	}}
}
