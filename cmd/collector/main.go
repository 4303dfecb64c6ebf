// Command collector tails web-server access logs and ships every line to
// ClickHouse exactly once.
//
//	collector -config FILE                 ship until SIGTERM/SIGINT, then flush
//	collector -check-config -config FILE   report every problem in the file, exit
//	collector -migrate -config FILE        create the schema, exit
//	collector -check-log FILE [-format F] [-timezone Z]  parse a whole log, print a JSON report
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/applog"
	"github.com/hitcount/hitcount/internal/checklog"
	"github.com/hitcount/hitcount/internal/service"
	"github.com/hitcount/hitcount/internal/tableout"
	"github.com/hitcount/hitcount/parser"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("collector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration `file`")
	checkConfig := fs.Bool("check-config", false, "check the configuration file, report every problem, exit")
	migrate := fs.Bool("migrate", false, "create or update the ClickHouse schema, exit")
	checkLog := fs.String("check-log", "", "parse this log `file` (plain or .gz), print a JSON report, exit")
	format := fs.String("format", parser.Auto, fmt.Sprintf("log format for -check-log: auto, %v, or an nginx log_format string", parser.Formats()))
	timezone := fs.String("timezone", "UTC", "for -check-log: the IANA zone of times the log writes without one (HAProxy, W3C in local time)")
	maxLine := fs.Int("max-line", 0, "longest line in bytes for -check-log (default 1 MiB); longer lines are rejected")
	logLevel := fs.String("log-level", "info", "debug | info | warn | error")
	logFormat := fs.String("log-format", "text", "text | json")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *checkLog != "" {
		loc, err := time.LoadLocation(*timezone)
		if err != nil || strings.EqualFold(*timezone, "Local") {
			fmt.Fprintf(stderr, "collector: -timezone %q: want an IANA zone such as Europe/Berlin, or UTC\n", *timezone)
			return 2
		}
		return runCheckLog(ctx, *checkLog, checklog.Options{Format: *format, MaxLine: *maxLine, Location: loc}, stdout, stderr)
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "collector: give -config FILE (or -check-log FILE)")
		fs.Usage()
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err == nil {
		err = cfg.CheckCollector()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *checkConfig {
		// Allowed but exposed (a password in clear text, say): said here,
		// where the operator reads the file's verdict, and logged at start.
		for _, w := range append(cfg.Warnings(), cfg.SourceWarnings()...) {
			fmt.Fprintln(stderr, "warning: "+w.Error())
		}
		fmt.Fprintf(stdout, "%s: ok (%d sources, %d rules)\n", *configPath, len(cfg.Sources), len(cfg.Rules))
		return 0
	}
	log, err := applog.New(stderr, *logLevel, *logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 2
	}
	if err := ship(ctx, cfg, log, *migrate); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// Asked to stop (SIGTERM) while still starting, say while the
			// store opens: nothing was read, so it is a clean stop, and
			// systemd or a supervisor must not see a failure.
			log.Info("collector stopped before it started shipping", "reason", err)
			return 0
		}
		if code, ok := service.StartFailure(err); ok {
			fmt.Fprintf(stderr, "collector: %v\n", err)
			return code
		}
		log.Error("collector stopped", "err", err)
		return 1
	}
	return 0
}

func runCheckLog(ctx context.Context, path string, opts checklog.Options, stdout, stderr io.Writer) int {
	rep, err := checklog.File(ctx, path, opts)
	if err != nil {
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 1
	}
	// Said where a person reads, besides the report: the one thing to act on.
	if s := rep.RejectedParseAs; s != nil {
		fmt.Fprintf(stderr, "collector: %d of %d lines are rejected with format %s; %s accepts %d of %d of them: try -format %s\n",
			rep.Rejected, rep.Lines-rep.Directives, rep.Format, s.Format, s.Accepted, s.Of, shellQuote(s.Format))
	} else if rep.Detected && rep.Parsed == 0 && rep.Lines > 0 {
		fmt.Fprintf(stderr, "collector: no known format parses this log (tried %d); give its nginx log_format or Apache LogFormat string with -format\n", len(parser.DetectFormats()))
	}
	// The report quotes log lines and paths: made safe for the terminal it
	// is usually read on.
	// Format strings and paths hold <, > and &: kept as they are, not
	// \u003e, so the report reads like the log.
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	err = enc.Encode(rep)
	if err == nil {
		_, err = stdout.Write(tableout.EscapeJSON(js.Bytes()))
	}
	if err != nil {
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 1
	}
	return 0
}

// shellQuote quotes a format for a shell command line when it needs it (a
// format string has spaces, quotes and $).
func shellQuote(s string) string {
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
