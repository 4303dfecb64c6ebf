// Command collector tails web-server access logs and ships every line to
// ClickHouse exactly once. This build provides the log check:
//
//	collector -check-log FILE [-format F]
//
// which parses a whole file (plain or gzipped) and prints a JSON report.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hitcount/hitcount/internal/checklog"
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
	checkLog := fs.String("check-log", "", "parse this log `file` (plain or .gz), print a JSON report, exit")
	format := fs.String("format", "auto", fmt.Sprintf("log format for -check-log: auto, %v, or an nginx log_format string", parser.Formats()))
	maxLine := fs.Int("max-line", 0, "longest line in bytes (default 1 MiB); longer lines are rejected")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *checkLog == "" {
		fmt.Fprintln(stderr, "collector: nothing to do: give -check-log FILE")
		fs.Usage()
		return 2
	}
	rep, err := checklog.File(ctx, *checkLog, checklog.Options{Format: *format, MaxLine: *maxLine})
	if err != nil {
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		fmt.Fprintf(stderr, "collector: %v\n", err)
		return 1
	}
	return 0
}
