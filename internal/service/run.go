package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hitcount/hitcount/internal/ops"
)

// Part is one long-running piece of a process (the collector, the sweeper's
// schedule, a live view); Run returns when ctx ends.
type Part struct {
	Name string
	Run  func(ctx context.Context) error
}

// Run runs the parts, and /metrics, /healthz, /readyz on listen ("" for
// none), until ctx ends or one of them fails; the first failure stops the
// others and is returned. A part that ends because ctx ended is not a
// failure.
func Run(ctx context.Context, log *slog.Logger, listen string, reg *prometheus.Registry, ready func() error, parts ...Part) error {
	return RunWith(ctx, log, listen, ops.Handler(reg, ready), parts...)
}

// RunWith is Run with the HTTP handler given (ops.HandlerWith adds endpoints).
func RunWith(ctx context.Context, log *slog.Logger, listen string, h http.Handler, parts ...Part) error {
	g, ctx := errgroup.WithContext(ctx)
	if listen != "" {
		g.Go(func() error { return ops.Serve(ctx, listen, h) })
		log.Info("serving /metrics, /healthz, /readyz", "listen", listen)
	}
	for _, p := range parts {
		g.Go(func() error {
			err := p.Run(ctx)
			if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
				return nil
			}
			if err == nil && ctx.Err() == nil {
				// A part that stops on its own stops the process: nothing
				// here is meant to end before the others.
				return fmt.Errorf("%s stopped unexpectedly", p.Name)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}
