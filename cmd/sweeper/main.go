// Command sweeper turns counts into alerts: every sweep.every it finds the
// threshold crossings of the configured rules and emails each exactly once.
//
// This build checks the sweeper's configuration (rules, windows, time zones,
// recipients, templates, SMTP); sweeping itself is not built yet:
//
//	sweeper -check-config -config FILE
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/hitcount/hitcount/config"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sweeper", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration `file`")
	checkConfig := fs.Bool("check-config", false, "check the configuration file, report every problem, exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *configPath == "" || !*checkConfig {
		fmt.Fprintln(stderr, "sweeper: this build only checks configuration: sweeper -check-config -config FILE")
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err == nil {
		err = cfg.CheckSweeper()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, r := range cfg.Rules {
		window := r.Window
		fmt.Fprintf(stdout, "rule %s: path %s, window %s (%s), %d recipient(s)\n", r.Name, r.Match.Path, window, r.Location, len(r.To))
	}
	fmt.Fprintf(stdout, "%s: ok (%d rules)\n", *configPath, len(cfg.Rules))
	return 0
}
