package collector

import (
	"context"
	"os"
	"time"
)

// fileWatcher tells readers waiting at the end of their files that a file
// may have changed (internal/filewake: one per collector, opened and closed
// by Run). A change can go unnoticed (NFS, the inotify watch limit), so it
// only shortens the wait that Poll bounds.
type fileWatcher interface {
	// Watch returns a channel that receives when f may have changed, and
	// stop, to call before f is closed.
	Watch(f *os.File) (changed <-chan struct{}, stop func(), err error)
}

// waker is a shipper's wait at the end of its file.
type waker interface {
	// Wait returns when the file may have changed, ctx ends or d passes;
	// at once when it starts watching the file, so that what was written
	// since the last read is read before waiting.
	Wait(ctx context.Context, d time.Duration)
	// Sleep returns when ctx ends or d passes, and stops watching the file:
	// while the reader has a batch in hand, each write of a busy file would
	// cost an event for nothing (the batch ships when due, with what was
	// written by then).
	Sleep(ctx context.Context, d time.Duration)
	// Close stops watching the file; call it before the file is closed.
	Close()
}

// newWaker is the wait of a reader of f: woken by the collector's watcher,
// if it has one, and by a timer.
func (c *Collector) newWaker(f *os.File, path string) waker {
	return &fileWaker{c: c, f: f, path: path}
}

type fileWaker struct {
	c       *Collector
	f       *os.File
	path    string
	failed  bool            // the file cannot be watched: poll only
	changed <-chan struct{} // nil (never ready) while not watched
	stop    func()          // nil while not watched
	timer   *time.Timer
}

func (w *fileWaker) Wait(ctx context.Context, d time.Duration) {
	if w.stop == nil && !w.failed && w.c.watcher != nil {
		changed, stop, err := w.c.watcher.Watch(w.f)
		if err != nil {
			w.failed = true
			w.c.log.Info("cannot watch the file for changes; polling it", "path", w.path, "poll", w.c.opts.Poll, "err", err)
		} else {
			w.changed, w.stop = changed, stop
			return
		}
	}
	w.wait(ctx, d, w.changed)
}

func (w *fileWaker) Sleep(ctx context.Context, d time.Duration) {
	w.unwatch()
	w.wait(ctx, d, nil)
}

func (w *fileWaker) wait(ctx context.Context, d time.Duration, changed <-chan struct{}) {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
	case <-changed:
	case <-w.timer.C:
	}
}

func (w *fileWaker) unwatch() {
	if w.stop != nil {
		w.stop()
		w.changed, w.stop = nil, nil
	}
}

func (w *fileWaker) Close() {
	w.unwatch()
	if w.timer != nil {
		w.timer.Stop()
	}
}
