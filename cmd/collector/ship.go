package main

import (
	"context"
	"log/slog"

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
	if err := service.Run(ctx, log, *cfg.HTTP.Listen, reg, c.Ready, service.Part{Name: "collector", Run: c.Run}); err != nil {
		return err
	}
	log.Info("collector stopped cleanly")
	return nil
}
