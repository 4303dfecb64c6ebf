package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/internal/service"
)

type mode struct {
	once, dryRun bool
	out          io.Writer
}

// sweep opens the configured store and sweeps once or on its schedule.
func sweep(ctx context.Context, cfg *config.Config, log *slog.Logger, m mode) error {
	var ln net.Listener
	if !m.once {
		var err error
		if ln, err = service.Listen(cfg); err != nil {
			return err
		}
		if ln != nil {
			defer ln.Close() // Run closes it too; this is for the returns before
		}
	}
	b, err := backend.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer b.Close()
	reg := ops.Registry()
	s, err := service.NewSweep(ctx, cfg, b, log, reg, m.dryRun, pauseAtHook(log)...)
	if err != nil {
		return err
	}
	defer s.Close()
	if m.once {
		return s.Once(ctx, m.dryRun, m.out)
	}
	run := s.Run
	if os.Getenv(noElectorEnv) == "1" { // a test hook, see testhook.go
		run = sweepWithoutElector(s, cfg.Sweep.Every.Duration, log)
	}
	return service.Run(ctx, log, ln, reg, s.Ready, service.Part{Name: "sweeper", Run: run})
}
