package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/internal/termprogress"
	"github.com/hitcount/hitcount/sink"
)

// ship wires the configuration into a sink, a collector and the ops server,
// and runs them until ctx ends.
func ship(ctx context.Context, cfg *config.Config, log *slog.Logger, migrateOnly bool) error {
	if cfg.ClickHouse == nil {
		return errors.New("no clickhouse section: the embedded store is not available to the collector in this build; configure a ClickHouse server")
	}
	collector.ApplyMemoryLimit()
	opts, err := sinkOptions(cfg)
	if err != nil {
		return err
	}
	log.Info("connecting to clickhouse", "addr", opts.Addr, "database", opts.Database)
	s, err := sink.Connect(ctx, opts, func(err error, wait time.Duration) {
		log.Warn("clickhouse not reachable yet; retrying", "err", err, "retry_in", wait)
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	log.Info("schema ready", "server_version", s.Version().String(), "database", s.Database())
	if migrateOnly {
		return nil
	}

	reg := ops.Registry()
	var sources []collector.Source
	for _, src := range cfg.Sources {
		sources = append(sources, collector.Source{
			Glob: cfg.Resolve(src.Path), Site: src.Site, Format: src.Format,
			StartAtEnd: src.StartAt == "end", MaxLine: src.MaxLine.Bytes,
		})
	}
	copts := collector.Options{
		Sources: sources, BatchRows: cfg.Batch.Rows, BatchDelay: cfg.Batch.Delay.Duration,
		MaxPending: cfg.Batch.MaxPending, StateDir: cfg.Resolve(cfg.StateDir),
		Logger: log, Metrics: collector.NewMetrics(reg),
	}
	if bars := termprogress.ForStderr(); bars != nil {
		copts.Backfill = func(path string, start, size int64) collector.Progress { return bars(path, start, size) }
	}
	c, err := collector.New(s, copts)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	if listen := *cfg.HTTP.Listen; listen != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ops.Serve(ctx, listen, ops.Handler(reg, c.Ready)); err != nil {
				errc <- err
				cancel()
			}
		}()
		log.Info("serving /metrics, /healthz, /readyz", "listen", listen)
	}
	runErr := c.Run(ctx)
	cancel()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	log.Info("collector stopped cleanly")
	return nil
}

func sinkOptions(cfg *config.Config) (sink.Options, error) {
	ch := cfg.ClickHouse
	pw, err := ch.Password()
	if err != nil {
		return sink.Options{}, err
	}
	o := sink.Options{
		Addr: ch.Addr, Database: ch.Database, Username: ch.Username, Password: pw.Reveal(),
		Compression: ch.Compression, DialTimeout: ch.DialTimeout.Duration, InsertTimeout: ch.InsertTimeout.Duration,
	}
	if ch.TLS.Enabled {
		t := &tls.Config{ServerName: ch.TLS.ServerName, InsecureSkipVerify: ch.TLS.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
		if ch.TLS.CAFile != "" {
			pem, err := os.ReadFile(cfg.Resolve(ch.TLS.CAFile))
			if err != nil {
				return o, fmt.Errorf("clickhouse.tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return o, fmt.Errorf("clickhouse.tls.ca_file %s: no certificate in it", ch.TLS.CAFile)
			}
			t.RootCAs = pool
		}
		o.TLS = t
	}
	return o, nil
}
