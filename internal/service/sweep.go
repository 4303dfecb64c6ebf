package service

import (
	"context"
	"crypto/x509"
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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/backend"
)

// Sweep is the configured sweeper: its rules, claims and transport on a
// backend.
type Sweep struct {
	sw     *alerts.Sweeper
	every  time.Duration
	rules  int
	log    *slog.Logger
	keeper *alerts.KeeperClaims
	b      *backend.Backend
	close  []func() error

	mu      sync.Mutex
	lastErr error
	// busy counts the sweeps running: Run returns only once they have
	// recorded what they sent (a sweep's marks outlive its context).
	busy sync.WaitGroup
}

// NewSweep wires the configuration's rules, claims and transport to b. With
// dryRun it takes no claims and changes nothing. Close releases the claims.
// tune, if any, adjust the sweeper's options last (tests' fault hooks).
func NewSweep(ctx context.Context, cfg *config.Config, b *backend.Backend, log *slog.Logger, reg prometheus.Registerer, dryRun bool, tune ...func(*alerts.Options)) (*Sweep, error) {
	rules, err := alerts.CompileRules(cfg.Rules)
	if err != nil {
		return nil, err
	}
	s := &Sweep{every: cfg.Sweep.Every.Duration, rules: len(rules), log: log, b: b, lastErr: errors.New("no sweep finished yet")}
	if err := b.RegisterMetrics(reg); err != nil {
		return nil, err
	}
	var claims alerts.Claimer
	switch {
	case dryRun:
	case cfg.Sweep.Claims == "keeper":
		k := cfg.Keeper
		pw, err := k.Password()
		if err != nil {
			return nil, err
		}
		s.keeper, err = alerts.OpenKeeperClaims(ctx, alerts.KeeperOptions{Addr: k.Addr, Root: k.Root, SessionTimeout: k.SessionTimeout.Duration,
			Username: k.Username, Password: pw.Reveal(), Logger: log})
		if err != nil {
			return nil, err
		}
		s.close = append(s.close, func() error { s.keeper.Close(); return nil })
		claims = s.keeper
	case cfg.Sweep.Claims == "keepermap":
		if !b.Version.AtLeast(23, 0) {
			return nil, fmt.Errorf("%w: the server is %s", alerts.ErrNoKeeperMap, b.Version)
		}
		host, _ := os.Hostname()
		km, err := alerts.OpenKeeperMapClaims(ctx, b.KeeperMap, b.Database(), "/hitcount", fmt.Sprintf("%s-%d", host, os.Getpid()), time.Now)
		if err != nil {
			return nil, err
		}
		claims = km
	default:
		local, err := alerts.OpenLocalClaims(cfg.Resolve(cfg.StateDir), time.Now)
		if err != nil {
			return nil, err
		}
		s.close = append(s.close, local.Close)
		claims = local
	}
	sender, from, err := newSender(cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	// The owner names this sweeper's state, stable across restarts.
	host, _ := os.Hostname()
	stateDir, _ := filepath.Abs(cfg.Resolve(cfg.StateDir))
	owner := host + ":" + stateDir
	store := alerts.NewStore(b, b.Database())
	if !dryRun && cfg.Sweep.Claims == "local" && !b.Embedded {
		// The lock file stops a second sweeper on this state directory; this
		// stops one on another machine or directory, against the same tables.
		// (The embedded engine admits one process: nothing to check there.)
		// By the store's clock, which dated the other's sweeps too.
		now, err := store.Now(ctx)
		if err != nil {
			s.Close()
			return nil, err
		}
		since := now.Add(-2*cfg.Sweep.Every.Duration - cfg.Sweep.Lease.Duration)
		others, err := store.OtherSweepers(ctx, owner, since)
		if err != nil {
			s.Close()
			return nil, err
		}
		if len(others) > 0 {
			s.Close()
			return nil, fmt.Errorf("%w: %s swept database %s recently; claims: local allows one sweeper: stop it (this one may start once it has been quiet for 2 x sweep.every + sweep.lease), or use claims: keeper or keepermap for replicas",
				alerts.ErrAnotherSweeper, strings.Join(others, ", "), b.Database())
		}
	}
	o := alerts.Options{
		Lateness: cfg.Sweep.Lateness.Duration, Lease: cfg.Sweep.Lease.Duration, MaxCrossings: cfg.Sweep.MaxCrossings,
		DigestAfter: cfg.Sweep.DigestAfter, From: from, Owner: owner, DryRun: dryRun, Logger: log, Metrics: alerts.NewMetrics(reg),
	}
	if cfg.Sweep.Claims == "keepermap" {
		// A keepermap claim is a lease: it must have a delivery's worth of
		// time left when the message goes (config requires the lease to be
		// 20 s longer than this).
		o.SendBudget = 10 * time.Second
		if cfg.SMTP != nil {
			o.SendBudget = 3*cfg.SMTP.Timeout.Duration + 10*time.Second
		}
	}
	for _, f := range tune {
		f(&o)
	}
	s.sw = alerts.NewSweeper(store, rules, claims, sender, o)
	return s, nil
}

// Close releases the claims.
func (s *Sweep) Close() error {
	var errs []error
	for i := len(s.close) - 1; i >= 0; i-- {
		errs = append(errs, s.close[i]())
	}
	s.close = nil
	return errors.Join(errs...)
}

// Ready is nil once a sweep has finished and the last one succeeded (and,
// with keeper claims, the keeper session is up).
func (s *Sweep) Ready() error {
	if s.keeper != nil {
		if err := s.keeper.Healthy(); err != nil {
			return fmt.Errorf("not sending: %w", err)
		}
	}
	if err := s.b.ReplicaProblem(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// Run sweeps every sweep.every, starting now, until ctx ends. A failed sweep
// is logged and tried again on schedule.
func (s *Sweep) Run(ctx context.Context) error {
	var opts []gocron.SchedulerOption
	if s.keeper != nil {
		// One replica runs each sweep; the others stand by. Correctness does
		// not depend on it: the per-crossing claims decide who sends.
		opts = append(opts, gocron.WithDistributedElector(s.keeper))
	}
	sched, err := gocron.NewScheduler(opts...)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	// Singleton mode: a run still going when the next is due makes that one
	// wait for the following tick instead of overlapping it.
	_, err = sched.NewJob(gocron.DurationJob(s.every),
		gocron.NewTask(func(jobCtx context.Context) {
			s.busy.Add(1)
			defer s.busy.Done()
			err := s.passes(jobCtx, false, nil)
			s.mu.Lock()
			s.lastErr = err
			s.mu.Unlock()
			if err != nil && jobCtx.Err() == nil {
				s.log.Error("sweep failed; next try on schedule", "err", err)
			}
		}),
		gocron.WithContext(ctx),
		gocron.WithSingletonMode(gocron.LimitModeReschedule),
		gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		return fmt.Errorf("schedule sweeps: %w", err)
	}
	s.log.Info("sweeping", "every", s.every, "rules", s.rules)
	sched.Start()
	<-ctx.Done()
	err = sched.Shutdown()
	// gocron stops waiting for a job after its stop timeout; a sweep
	// cancelled mid-send still writes its marks (bounded by the sweeper's
	// MarkTimeout) and must not be cut off by the process exiting.
	s.busy.Wait()
	return err
}

// Once sweeps until no work is left over; with dryRun it prints what would
// be recorded to out.
func (s *Sweep) Once(ctx context.Context, dryRun bool, out io.Writer) error {
	return s.passes(ctx, dryRun, out)
}

// passes sweeps until a pass leaves no work it had to put off (a pass that
// hit max_crossings runs again at once rather than a full interval later).
func (s *Sweep) passes(ctx context.Context, dryRun bool, out io.Writer) error {
	for {
		res, err := s.sw.Sweep(ctx)
		if err != nil {
			return err
		}
		if dryRun {
			for _, r := range res.Detected {
				fmt.Fprintln(out, s.sw.Describe(r))
			}
			// What each below and no_traffic rule evaluated, or why it
			// is held.
			for _, n := range res.Notes {
				fmt.Fprintln(out, n)
			}
			fmt.Fprintf(out, "dry run: %d new crossings, %d waiting to be sent\n", len(res.Detected), res.Pending)
			return nil
		}
		s.log.Info("sweep done", "recorded", len(res.Detected), "sent", res.Sent, "failed", res.Failed, "waiting", res.Pending)
		if !res.More || ctx.Err() != nil {
			return nil
		}
	}
}

func newSender(cfg *config.Config) (alerts.Sender, string, error) {
	if cfg.SMTP == nil {
		return alerts.Outbox{Dir: cfg.Resolve(cfg.Outbox)}, "hitcount <hitcount@localhost>", nil
	}
	s, err := newSMTP(cfg)
	if err != nil {
		return nil, "", err
	}
	return s, cfg.SMTP.From, nil
}

// newSMTP is the SMTP sender of the smtp section.
func newSMTP(cfg *config.Config) (*alerts.SMTP, error) {
	pw, err := cfg.SMTP.Password()
	if err != nil {
		return nil, err
	}
	o := alerts.SMTPOptions{Host: cfg.SMTP.Host, Port: cfg.SMTP.Port, TLS: cfg.SMTP.TLS,
		Username: cfg.SMTP.Username, Password: pw.Reveal(), Timeout: cfg.SMTP.Timeout.Duration}
	if cfg.SMTP.CAFile != "" {
		pem, err := os.ReadFile(cfg.Resolve(cfg.SMTP.CAFile))
		if err != nil {
			return nil, fmt.Errorf("smtp.ca_file: %w", err)
		}
		o.RootCAs = x509.NewCertPool()
		if !o.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp.ca_file %s: no certificate in it", cfg.SMTP.CAFile)
		}
	}
	return alerts.NewSMTP(o), nil
}

// CheckSMTP tries the smtp section's server as a send would, without
// sending: connect, TLS as configured, login, quit (alerts.SMTP.Check). It
// returns what it did, or why it failed.
func CheckSMTP(ctx context.Context, cfg *config.Config) (string, error) {
	if cfg.SMTP == nil {
		return "", fmt.Errorf("no smtp section to try: crossings are written as .eml files to %s", cfg.Resolve(cfg.Outbox))
	}
	s, err := newSMTP(cfg)
	if err != nil {
		return "", err
	}
	return s.Check(ctx)
}
