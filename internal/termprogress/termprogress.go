// Package termprogress shows a backfill's progress (rate, percent, ETA) on a
// terminal, and nothing anywhere else: a sidecar's logs stay clean.
package termprogress

import (
	"os"
	"path/filepath"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar follows one file's backfill.
type Bar struct {
	bar   *progressbar.ProgressBar
	start int64
}

// Set moves the bar to offset.
func (b *Bar) Set(offset int64) { _ = b.bar.Set64(offset - b.start) }

// Done finishes the bar.
func (b *Bar) Done() { _ = b.bar.Finish() }

// ForStderr returns a constructor of bars on stderr, or nil when stderr is not
// a terminal.
func ForStderr() func(path string, start, size int64) *Bar {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return func(path string, start, size int64) *Bar {
		return &Bar{start: start, bar: progressbar.NewOptions64(size-start,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("backfill "+filepath.Base(path)),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200_000_000),
			progressbar.OptionClearOnFinish(),
		)}
	}
}
