package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/sink"
)

type mode struct {
	once, dryRun bool
	out          io.Writer
}

// sweep wires the configuration into a sweeper and runs it once or on its
// schedule.
func sweep(ctx context.Context, cfg *config.Config, log *slog.Logger, m mode) error {
	if cfg.ClickHouse == nil {
		return errors.New("no clickhouse section: the embedded store is not available to the sweeper in this build")
	}
	ch := cfg.ClickHouse
	pw, err := ch.Password()
	if err != nil {
		return err
	}
	s, err := sink.Connect(ctx, sink.Options{Addr: ch.Addr, Database: ch.Database, Username: ch.Username, Password: pw.Reveal(),
		Compression: ch.Compression, DialTimeout: ch.DialTimeout.Duration, InsertTimeout: ch.InsertTimeout.Duration},
		func(err error, wait time.Duration) {
			log.Warn("clickhouse not reachable yet; retrying", "err", err, "retry_in", wait)
		})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	rules, err := alerts.CompileRules(cfg.Rules)
	if err != nil {
		return err
	}
	var claims alerts.Claimer
	var keeper *alerts.KeeperClaims
	switch {
	case m.dryRun:
	case cfg.Sweep.Claims == "keeper":
		k := cfg.Keeper
		pw, err := k.Password()
		if err != nil {
			return err
		}
		keeper, err = alerts.OpenKeeperClaims(ctx, alerts.KeeperOptions{Addr: k.Addr, Root: k.Root, SessionTimeout: k.SessionTimeout.Duration,
			Username: k.Username, Password: pw.Reveal(), Logger: log})
		if err != nil {
			return err
		}
		defer keeper.Close()
		claims = keeper
	case cfg.Sweep.Claims == "keepermap":
		if v := s.Version(); !v.AtLeast(23, 0) {
			return fmt.Errorf("%w: the server is %s", alerts.ErrNoKeeperMap, v)
		}
		host, _ := os.Hostname()
		km, err := alerts.OpenKeeperMapClaims(ctx, alerts.ConnSQL{Conn: s.Conn()}, s.Database(), "/hitcount", fmt.Sprintf("%s-%d", host, os.Getpid()), time.Now)
		if err != nil {
			return err
		}
		claims = km
	default:
		local, err := alerts.OpenLocalClaims(cfg.Resolve(cfg.StateDir), time.Now)
		if err != nil {
			return err
		}
		defer local.Close()
		claims = local
	}
	sender, from, err := newSender(cfg)
	if err != nil {
		return err
	}
	// The owner names this sweeper's state, stable across restarts.
	host, _ := os.Hostname()
	stateDir, _ := filepath.Abs(cfg.Resolve(cfg.StateDir))
	owner := host + ":" + stateDir
	store := alerts.NewStore(s, s.Database())
	if !m.dryRun && cfg.Sweep.Claims == "local" {
		// The lock file stops a second sweeper on this state directory; this
		// stops one on another machine or directory, against the same tables.
		since := time.Now().Add(-2*cfg.Sweep.Every.Duration - cfg.Sweep.Lease.Duration)
		others, err := store.OtherSweepers(ctx, owner, since)
		if err != nil {
			return err
		}
		if len(others) > 0 {
			return fmt.Errorf("%w: %s swept database %s recently; claims: local allows one sweeper: stop it (this one may start once it has been quiet for 2 x sweep.every + sweep.lease), or use claims: keeper or keepermap for replicas",
				alerts.ErrAnotherSweeper, strings.Join(others, ", "), s.Database())
		}
	}
	reg := ops.Registry()
	sw := alerts.NewSweeper(store, rules, claims, sender, alerts.Options{
		Lateness: cfg.Sweep.Lateness.Duration, Lease: cfg.Sweep.Lease.Duration, MaxCrossings: cfg.Sweep.MaxCrossings,
		DigestAfter: cfg.Sweep.DigestAfter, From: from, Owner: owner, DryRun: m.dryRun, Logger: log, Metrics: alerts.NewMetrics(reg),
	})

	if m.once {
		return runPasses(ctx, sw, log, m)
	}
	var ready sync.Mutex
	var lastErr error = errors.New("no sweep finished yet")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if listen := *cfg.HTTP.Listen; listen != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ops.Serve(ctx, listen, ops.Handler(reg, func() error {
				if keeper != nil {
					if err := keeper.Healthy(); err != nil {
						return fmt.Errorf("not sending: %w", err)
					}
				}
				ready.Lock()
				defer ready.Unlock()
				return lastErr
			}))
			if err != nil {
				log.Error("ops server", "err", err)
				cancel()
			}
		}()
	}
	var schedOpts []gocron.SchedulerOption
	if keeper != nil {
		// One replica runs each sweep; the others stand by. Correctness does
		// not depend on it: the per-crossing claims decide who sends.
		schedOpts = append(schedOpts, gocron.WithDistributedElector(keeper))
	}
	sched, err := gocron.NewScheduler(schedOpts...)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	// Singleton mode: a run still going when the next is due makes that one
	// wait for the following tick instead of overlapping it.
	_, err = sched.NewJob(gocron.DurationJob(cfg.Sweep.Every.Duration),
		gocron.NewTask(func(jobCtx context.Context) {
			err := runPasses(jobCtx, sw, log, m)
			ready.Lock()
			lastErr = err
			ready.Unlock()
			if err != nil {
				log.Error("sweep failed; next try on schedule", "err", err)
			}
		}),
		gocron.WithContext(ctx),
		gocron.WithSingletonMode(gocron.LimitModeReschedule),
		gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		return fmt.Errorf("schedule sweeps: %w", err)
	}
	log.Info("sweeping", "every", cfg.Sweep.Every.Duration, "rules", len(rules))
	sched.Start()
	<-ctx.Done()
	err = sched.Shutdown()
	wg.Wait()
	return err
}

// runPasses sweeps until a pass leaves no work it had to put off (a pass that
// hit max_crossings runs again at once rather than a full interval later).
func runPasses(ctx context.Context, sw *alerts.Sweeper, log *slog.Logger, m mode) error {
	for {
		res, err := sw.Sweep(ctx)
		if err != nil {
			return err
		}
		if m.dryRun {
			for _, r := range res.Detected {
				fmt.Fprintf(m.out, "would record: rule %s page %s%s threshold %d window %s count %d\n",
					r.Rule, r.Site, r.Path, r.Threshold, r.WindowStart.Format(time.RFC3339), r.Count)
			}
			fmt.Fprintf(m.out, "dry run: %d new crossings, %d waiting to be sent\n", len(res.Detected), res.Pending)
			return nil
		}
		log.Info("sweep done", "recorded", len(res.Detected), "sent", res.Sent, "failed", res.Failed, "waiting", res.Pending)
		if !res.More || ctx.Err() != nil {
			return nil
		}
	}
}

func newSender(cfg *config.Config) (alerts.Sender, string, error) {
	if cfg.SMTP == nil {
		return alerts.Outbox{Dir: cfg.Resolve(cfg.Outbox)}, "hitcount <hitcount@localhost>", nil
	}
	pw, err := cfg.SMTP.Password()
	if err != nil {
		return nil, "", err
	}
	return alerts.NewSMTP(alerts.SMTPOptions{Host: cfg.SMTP.Host, Port: cfg.SMTP.Port, TLS: cfg.SMTP.TLS,
		Username: cfg.SMTP.Username, Password: pw.Reveal(), Timeout: cfg.SMTP.Timeout.Duration}), cfg.SMTP.From, nil
}
