// Command hitcount runs the whole job in one process and queries the store.
//
//	hitcount run -config FILE [-live 10s] [-demo LOG]   collector and sweeper together (standalone mode)
//	hitcount query -config FILE [-format F] SQL         run SQL, print a table (or csv, tsv, json)
//
// Standalone mode is one process because the embedded engine serves its data
// directory to one process only: the collector and the sweeper must share
// it, and so must the live view. While it runs, `hitcount query` asks it
// over a Unix socket in its state directory (read-only, see queryhttp). The separate collector and sweeper commands
// are for a ClickHouse server, where each can run (and scale) on its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/applog"
	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/liveview"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/internal/queryhttp"
	"github.com/hitcount/hitcount/internal/readonlysql"
	"github.com/hitcount/hitcount/internal/service"
	"github.com/hitcount/hitcount/internal/tableout"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  hitcount run -config FILE [-live 10s] [-demo LOG]   the collector and the sweeper in one process
  hitcount query -config FILE [-format table|csv|tsv|json] [SQL]   SQL from the argument or stdin
run "hitcount run -h" or "hitcount query -h" for the flags`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runJob(ctx, args[1:], stdout, stderr)
	case "query":
		return runQuery(ctx, args[1:], stdin, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "hitcount: unknown command %q\n%s\n", args[0], usage)
	return 2
}

type common struct {
	config, logLevel, logFormat *string
}

func commonFlags(fs *flag.FlagSet) common {
	return common{
		config:    fs.String("config", "", "configuration `file`"),
		logLevel:  fs.String("log-level", "info", "debug | info | warn | error"),
		logFormat: fs.String("log-format", "text", "text | json"),
	}
}

func (c common) logger(w io.Writer) (*slog.Logger, error) {
	return applog.New(w, *c.logLevel, *c.logFormat)
}

func runJob(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hitcount run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := commonFlags(fs)
	checkConfig := fs.Bool("check-config", false, "check the configuration file, report every problem, exit")
	live := fs.Duration("live", 0, "print hits, top pages and crossings to stdout this often (0: off)")
	demo := fs.String("demo", "", "write live demo traffic (combined format) to this log `file` while running")
	demoRate := fs.Int("demo-rate", 200, "demo requests per second")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *c.config == "" {
		fmt.Fprintln(stderr, "hitcount run: give -config FILE")
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*c.config)
	if err == nil {
		err = errors.Join(cfg.CheckCollector(), cfg.CheckSweeper(), alerts.CheckRules(cfg))
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *checkConfig {
		for _, w := range append(cfg.Warnings(), cfg.SourceWarnings()...) {
			fmt.Fprintln(stderr, "warning: "+w.Error())
		}
		for _, r := range cfg.Rules {
			fmt.Fprintf(stdout, "rule %s: %s; %d recipient(s)\n", r.Name, alerts.Explain(r), len(r.To))
		}
		fmt.Fprintf(stdout, "%s: ok (%d sources, %d rules)\n", *c.config, len(cfg.Sources), len(cfg.Rules))
		return 0
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "hitcount run: %v\n", err)
		return 2
	}
	if err := standalone(ctx, cfg, log, *live, *demo, *demoRate, stdout); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Asked to stop (SIGTERM) while starting or between steps:
			// a clean stop, not a failure for systemd to report.
			log.Info("hitcount stopped", "reason", err)
			return 0
		}
		if code, ok := service.StartFailure(err); ok {
			fmt.Fprintf(stderr, "hitcount run: %v\n", err)
			return code
		}
		log.Error("hitcount stopped", "err", err)
		return 1
	}
	return 0
}

// standalone runs the collector, the sweeper, and optionally the demo
// traffic and the live view, on one store, until ctx ends.
func standalone(ctx context.Context, cfg *config.Config, log *slog.Logger, live time.Duration, demo string, demoRate int, stdout io.Writer) error {
	collector.ApplyMemoryLimit()
	// First: a port in use fails here, before the engine or the demo start.
	ln, err := service.Listen(cfg)
	if err != nil {
		return err
	}
	if ln != nil {
		defer ln.Close() // RunWith closes it too; this is for the returns before
	}
	b, err := backend.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("store ready", "store", b.Where, "database", b.Database())
	reg := ops.Registry()
	col, err := service.NewCollector(cfg, b, log, reg)
	if err != nil {
		return err
	}
	sw, err := service.NewSweep(ctx, cfg, b, log, reg, false)
	if err != nil {
		return err
	}
	defer sw.Close()
	parts := []service.Part{{Name: "collector", Run: col.Run}, {Name: "sweeper", Run: sw.Run}}
	if demo != "" {
		parts = append(parts, service.Part{Name: "demo traffic", Run: func(ctx context.Context) error { return writeDemo(ctx, demo, demoRate) }})
		log.Info("writing live demo traffic", "log", demo, "per_second", demoRate)
	}
	if live > 0 {
		parts = append(parts, service.Part{Name: "live view", Run: func(ctx context.Context) error {
			return liveview.Run(ctx, liveview.Options{DB: b, Database: b.Database(), Every: live, Out: stdout, Rejected: col.RejectedLines})
		}})
	}
	ready := func() error { return errors.Join(col.Ready(), sw.Ready()) }
	if b.Embedded {
		// No other process can open the engine while this one runs: serve
		// read-only SQL to `hitcount query` of the same user, on a Unix
		// socket (see queryhttp for why not TCP).
		p, err := querySocket(ctx, b, cfg.Resolve(cfg.StateDir))
		if err != nil {
			return err
		}
		parts = append(parts, p)
		log.Info("serving read-only SQL for hitcount query", "socket", queryhttp.SocketPath(cfg.Resolve(cfg.StateDir)))
	}
	if err := service.RunWith(ctx, log, ln, ops.Handler(reg, ready), parts...); err != nil {
		return err
	}
	log.Info("stopped cleanly")
	return nil
}

// querySocket is the part that answers `hitcount query` while the job runs:
// each statement checked by the engine's own parser and run on a fresh
// read-only session with time, memory and result limits, two at a time.
func querySocket(ctx context.Context, b *backend.Backend, stateDir string) (service.Part, error) {
	open := func(ctx context.Context) (readonlysql.Session, error) { return b.ReadOnly(ctx) }
	srv, err := readonlysql.NewServer(ctx, open)
	if err != nil {
		return service.Part{}, err
	}
	ln, err := queryhttp.Listen(stateDir)
	if err != nil {
		return service.Part{}, err
	}
	h := queryhttp.Handler(srv.Run, 2)
	return service.Part{Name: "query socket", Run: func(ctx context.Context) error { return queryhttp.Serve(ctx, ln, h) }}, nil
}

func writeDemo(ctx context.Context, path string, rate int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("demo traffic: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("demo traffic: %w", err)
	}
	defer f.Close()
	g := loggen.New(loggen.Options{Seed: uint64(time.Now().UnixNano())})
	if _, err := g.Live(ctx, f, rate, time.Now); err != nil && ctx.Err() == nil {
		return fmt.Errorf("demo traffic to %s: %w", path, err)
	}
	return ctx.Err()
}

func runQuery(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("hitcount query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := commonFlags(fs)
	format := fs.String("format", "table", "output: "+strings.Join(tableout.Formats, " | "))
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *c.config == "" {
		fmt.Fprintln(stderr, "hitcount query: give -config FILE")
		return 2
	}
	if !slices.Contains(tableout.Formats, *format) {
		fmt.Fprintf(stderr, "hitcount query: -format %q: want one of %v\n", *format, tableout.Formats)
		return 2
	}
	sql := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if sql == "" || sql == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "hitcount query: read stdin: %v\n", err)
			return 1
		}
		sql = strings.TrimSpace(string(data))
	}
	sql = strings.TrimSuffix(sql, ";")
	if sql == "" {
		fmt.Fprintln(stderr, "hitcount query: no SQL given (as the argument or on stdin)")
		return 2
	}
	cfg, err := config.Load(*c.config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "hitcount query: %v\n", err)
		return 2
	}
	b, err := backend.Open(ctx, cfg, log)
	if errors.Is(err, chdb.ErrDataDirLocked) {
		// A running `hitcount run` holds the engine: ask it.
		qerr := queryhttp.Query(ctx, queryhttp.SocketPath(cfg.Resolve(cfg.StateDir)), sql, *format, stdout)
		var unreachable *queryhttp.UnreachableError
		switch {
		case errors.As(qerr, &unreachable):
			fmt.Fprintf(stderr, "hitcount query: %v; %v\n", err, qerr)
			return 1
		case qerr != nil:
			fmt.Fprintf(stderr, "hitcount query: %v\n", qerr)
			return 1
		}
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "hitcount query: %v\n", err)
		return 1
	}
	defer b.Close()
	res, err := b.Table(ctx, sql)
	if err != nil {
		fmt.Fprintf(stderr, "hitcount query: %v\n", err)
		return 1
	}
	if res.Columns == nil {
		return 0 // a statement without a result
	}
	if err := tableout.Write(stdout, *format, res.Columns, res.Types, res.Rows); err != nil {
		fmt.Fprintf(stderr, "hitcount query: %v\n", err)
		return 1
	}
	return 0
}
