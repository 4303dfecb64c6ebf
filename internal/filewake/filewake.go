// Package filewake tells the reader of an open file that the file may have
// changed, so a reader waiting at the end of a log wakes when a line is
// appended instead of at its next poll.
//
// One Watcher serves any number of files with one notification instance
// (inotify on Linux, kqueue on the BSDs and macOS, through
// github.com/fsnotify/fsnotify) and three goroutines (fsnotify's reader, the
// dispatch, the error drain), whatever the number of files; Close releases
// them all. Nothing is kept in package-level state.
//
// A wake is a hint, never a promise: it can be spurious (a change already
// read, a chmod), and it can be missed (a file system that sends no
// notifications, such as NFS for another host's writes; the inotify watch
// limit; a queue overflow, after which every file is woken once). A reader
// must keep a poll as the bound of its wait.
//
// On Linux the watch is placed through /proc/self/fd/N, on the inode of the
// open descriptor: it follows the file the reader has open, not the path it
// was opened by, so a rotated file (renamed, unlinked) goes on waking its
// reader, and a new file created at the path does not.
package filewake

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// Watcher wakes readers of open files on change.
type Watcher struct {
	fw   *fsnotify.Watcher
	lost chan struct{}  // an error: events may have been lost
	done sync.WaitGroup // run and drainErrors

	mu     sync.Mutex
	closed bool
	files  map[string]*watch // by the name the watch was added with
}

type watch struct {
	name string
	// follow: name is the descriptor's /proc link, which names the open file
	// whatever happens to its path, so the watch can be added again after
	// fsnotify drops it on a rename.
	follow bool
	c      chan struct{}
}

// New starts a Watcher.
func New() (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("file notifications: %w", err)
	}
	w := &Watcher{fw: fw, lost: make(chan struct{}, 1), files: map[string]*watch{}}
	w.done.Add(2)
	go w.run()
	go w.drainErrors()
	return w, nil
}

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("filewake: watcher closed")

// Watch starts watching the open file f: changed receives (at most one wake
// is pending) whenever f may have changed. Call stop before closing f. On an
// error nothing is watched: changed is nil (it never receives) and stop does
// nothing.
func (w *Watcher) Watch(f *os.File) (changed <-chan struct{}, stop func(), err error) {
	want, err := f.Stat()
	if err != nil {
		return nil, func() {}, err
	}
	e := &watch{c: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, func() {}, ErrClosed
	}
	// The descriptor's own link first (Linux): the watch is then on the open
	// file's inode. Elsewhere, the path the file was opened by, if it still
	// names that file once watched.
	proc := ""
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { proc = "/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10) })
	}
	switch {
	case proc != "" && w.files[proc] == nil && w.fw.Add(proc) == nil:
		e.name, e.follow = proc, true
	case filepath.IsAbs(f.Name()) && w.files[f.Name()] == nil:
		if err := w.fw.Add(f.Name()); err != nil {
			return nil, func() {}, fmt.Errorf("watch %s: %w", f.Name(), err)
		}
		if now, err := os.Stat(f.Name()); err != nil || !os.SameFile(now, want) {
			w.fw.Remove(f.Name())
			return nil, func() {}, fmt.Errorf("watch %s: the path no longer names the open file", f.Name())
		}
		e.name = f.Name()
	default:
		return nil, func() {}, fmt.Errorf("watch %s: no name to watch the open file by", f.Name())
	}
	w.files[e.name] = e
	return e.c, func() { w.unwatch(e) }, nil
}

func (w *Watcher) unwatch(e *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.files[e.name] != e {
		return
	}
	delete(w.files, e.name)
	if !w.closed {
		// Already gone when the file was renamed and not followed, or
		// deleted: nothing to remove then.
		w.fw.Remove(e.name)
	}
}

// Close stops every watch and the goroutines; the channels Watch returned
// receive nothing more, and a stop after Close does nothing.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.fw.Close() // ends fsnotify's reader, which closes Events and Errors
	w.done.Wait()
	return err
}

// run hands each event to the file it is about.
func (w *Watcher) run() {
	defer w.done.Done()
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			w.event(ev)
		case <-w.lost:
			// An overflowed queue lost events of unknown files: wake every
			// reader once rather than leave one to its poll.
			w.mu.Lock()
			for _, e := range w.files {
				wake(e.c)
			}
			w.mu.Unlock()
		}
	}
}

// drainErrors takes fsnotify's errors as they come. It must never wait on
// w.mu: fsnotify may send an error while holding its own lock, which Watch
// and stop wait for while holding w.mu.
func (w *Watcher) drainErrors() {
	defer w.done.Done()
	for range w.fw.Errors {
		wake(w.lost)
	}
}

func (w *Watcher) event(ev fsnotify.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.files[ev.Name]
	if e == nil {
		return // stopped meanwhile
	}
	if ev.Has(fsnotify.Rename) && e.follow && !w.closed {
		// fsnotify drops a watch whose file was renamed (it cannot tell the
		// new path); the descriptor's link still names the file.
		w.fw.Add(e.name)
	}
	wake(e.c)
}

// wake leaves one wake pending on c; more would tell nothing more.
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
