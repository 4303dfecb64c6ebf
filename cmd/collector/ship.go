package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/internal/service"
)

// ship opens the configured store and runs the collector and the ops server
// until ctx ends.
func ship(ctx context.Context, cfg *config.Config, log *slog.Logger, migrateOnly bool) error {
	collector.ApplyMemoryLimit()
	var ln net.Listener
	if !migrateOnly {
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
	log.Info("schema ready", "store", b.Where, "database", b.Database())
	if migrateOnly {
		return nil
	}
	reg := ops.Registry()
	c, err := service.NewCollector(cfg, b, log, reg)
	if err != nil {
		return err
	}
	if err := service.Run(ctx, log, ln, reg, c.Ready, service.Part{Name: "collector", Run: c.Run}); err != nil {
		return err
	}
	log.Info("collector stopped cleanly")
	return nil
}
