// Package service turns a configuration and an open backend into the running
// parts of hitcount: the collector and the sweeper. The commands (collector,
// sweeper, hitcount run) only choose which parts to run in their process.
package service

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/termprogress"
	"github.com/hitcount/hitcount/sink"
)

// NewCollector builds the collector of the configuration's sources, shipping
// into store, with its metrics in reg.
func NewCollector(cfg *config.Config, store collector.Inserter, log *slog.Logger, reg prometheus.Registerer) (*collector.Collector, error) {
	key, err := cfg.VisitorKey()
	if err != nil {
		return nil, fmt.Errorf("collector: %w", err)
	}
	var sources []collector.Source
	for _, src := range cfg.Sources {
		sources = append(sources, collector.Source{
			Glob: cfg.Resolve(src.Path), Site: src.Site, Format: src.Format, Location: src.Location,
			StartAtEnd: src.StartAt == "end", MaxLine: src.MaxLine.Bytes,
			Clients: sink.Clients{Key: sink.VisitorKey(key.Reveal()), Anonymize: src.AnonymizeClients},
		})
	}
	stateDir := cfg.Resolve(cfg.StateDir)
	opts := collector.Options{
		Sources: sources, BatchRows: cfg.Batch.Rows, BatchDelay: cfg.Batch.Delay.Duration,
		MaxPending: cfg.Batch.MaxPending, StateDir: stateDir,
		Logger: log, Metrics: collector.NewMetrics(reg),
	}
	if bars := termprogress.ForStderr(); bars != nil {
		opts.Backfill = func(path string, start, size int64) collector.Progress { return bars(path, start, size) }
	}
	if r, ok := store.(interface {
		RegisterMetrics(prometheus.Registerer) error
	}); ok {
		if err := r.RegisterMetrics(reg); err != nil {
			return nil, err
		}
	}
	return collector.New(store, opts)
}
