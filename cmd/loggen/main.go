// Command loggen writes realistic combined-format access-log traffic, either a
// fixed number of lines (benchmarks, tests) or live at a rate (the demo).
//
//	loggen -n 2000000 -o access.log
//	loggen -rate 200 -o /tmp/demo/access.log     # until interrupted
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
)

func main() {
	n := flag.Int("n", 0, "write this many lines and exit")
	rate := flag.Int("rate", 0, "write about this many lines per second, stamped now, until interrupted")
	out := flag.String("o", "-", "output `file` (appended to); - for stdout")
	seed := flag.Uint64("seed", 1, "random seed")
	bad := flag.Int("bad-every", 0, "make every Nth line malformed")
	step := flag.Duration("step", 10*time.Millisecond, "log time between lines with -n")
	flag.Parse()
	if (*n > 0) == (*rate > 0) {
		fmt.Fprintln(os.Stderr, "loggen: give exactly one of -n or -rate")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *rate, *out, loggen.Options{Seed: *seed, BadEvery: *bad, Step: *step}); err != nil {
		fmt.Fprintf(os.Stderr, "loggen: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n, rate int, out string, opts loggen.Options) error {
	w := os.Stdout
	if out != "-" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	g := loggen.New(opts)
	if n > 0 {
		_, err := g.WriteN(w, n)
		return err
	}
	_, err := g.Live(ctx, w, rate, time.Now)
	return err
}
