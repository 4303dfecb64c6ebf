package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/ops"
)

// Part is one long-running piece of a process (the collector, the sweeper's
// schedule, a live view); Run returns when ctx ends.
type Part struct {
	Name string
	Run  func(ctx context.Context) error
}

// Listen opens the listener of http.listen (nil when it is ""), for Run.
// Commands call it first, before they open the store or start anything:
// a port in use then fails start-up at once, naming the key and its place
// in the file, instead of after the engine and the demo traffic started.
func Listen(cfg *config.Config) (net.Listener, error) {
	addr := *cfg.HTTP.Listen
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	msg := fmt.Sprintf("cannot serve /metrics, /healthz, /readyz on %s: %v", addr, err)
	if errors.Is(err, syscall.EADDRINUSE) {
		msg = fmt.Sprintf("%s is in use by another process (another hitcount, collector or sweeper?): give a free host:port, or \"\" for no endpoint (%v)", addr, err)
	}
	return nil, cfg.Problem("http.listen", msg)
}

// Run runs the parts, and /metrics, /healthz, /readyz on ln (nil for
// none, see Listen), until ctx ends or one of them fails; the first failure
// stops the others and is returned. A part that ends because ctx ended is
// not a failure. Run closes ln.
func Run(ctx context.Context, log *slog.Logger, ln net.Listener, reg *prometheus.Registry, ready func() error, parts ...Part) error {
	return RunWith(ctx, log, ln, ops.Handler(reg, ready), parts...)
}

// RunWith is Run with the HTTP handler given (ops.HandlerWith adds endpoints).
func RunWith(ctx context.Context, log *slog.Logger, ln net.Listener, h http.Handler, parts ...Part) error {
	g, ctx := errgroup.WithContext(ctx)
	if ln != nil {
		g.Go(func() error { return ops.ServeOn(ctx, ln, h) })
		log.Info("serving /metrics, /healthz, /readyz", "listen", ln.Addr().String())
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

// StartFailure reports whether err ended a command before it ran, for a
// reason only an operator can fix, and its exit status: a problem at a
// place in the config file (http.listen in use: 1) or a ClickHouse login
// the server refused (backend.ExitLoginRefused). The commands print these
// plainly, as they print the config file's problems, not as a log record.
func StartFailure(err error) (code int, ok bool) {
	var le *backend.LoginError
	var fe *config.FieldError
	switch {
	case errors.As(err, &le):
		return backend.ExitLoginRefused, true
	case errors.As(err, &fe):
		return 1, true
	}
	return 0, false
}
