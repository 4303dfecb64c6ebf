package tailer

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// watchFIFO reports whether the FIFO at path is opened for reading from now
// on: a writer blocked in open(O_WRONLY) returns once any reader has opened
// the FIFO, even for an instant (the kernel counts reader opens), while an
// O_PATH descriptor is no reader. Call the function it returns after the last
// open that could have done it; it also ends the watch.
func watchFIFO(t *testing.T, path string) (opened func() bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fd)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // until it waits in open
	var once sync.Once
	var result bool
	opened = func() bool {
		once.Do(func() {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("the writer watching %s: %v", path, err)
				}
				result = true
				return
			case <-time.After(200 * time.Millisecond):
			}
			// Not opened: release the writer by opening it ourselves.
			fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
			if err != nil {
				t.Errorf("releasing the writer watching %s: %v", path, err)
				return
			}
			<-done
			syscall.Close(fd)
		})
		return result
	}
	t.Cleanup(func() { opened() })
	return opened
}

// Nothing that is not a regular file is ever opened for reading, not even for
// an instant and then refused: a device may act on open (opening
// /dev/watchdog arms a reboot). Here a FIFO stands for the device, since
// opening one is observable (see watchFIFO). It is swapped in where a regular
// file was checked, two ways, as fast as possible while OpenLog runs:
//
//   - a directory on the way to a configured symlink's target (the link's
//     owner controls that path) swaps between a real directory holding the
//     log and a symlink to a directory holding a FIFO of the same name;
//   - the file itself, in the log directory, swaps between a regular file and
//     a hard link to the FIFO.
func TestOpenLogNeverOpensSwappedFIFO(t *testing.T) {
	root := t.TempDir()
	base, fifos := filepath.Join(root, "logs"), filepath.Join(root, "fifos")
	d, alt := filepath.Join(root, "d"), filepath.Join(root, "alt")
	for _, dir := range []string{base, fifos, d} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(fifos, "app.log")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "app.log"), []byte("live\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifos, alt); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d, "app.log"), filepath.Join(base, "app.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "race.log"), []byte("live\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The probe itself sees an open.
	probe := watchFIFO(t, fifo)
	if fd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	} else {
		syscall.Close(fd)
	}
	if !probe() {
		t.Fatal("the probe did not see the FIFO opened for reading")
	}

	// d and alt swap atomically where the filesystem can (so that d always
	// exists), else alt's kind of entry is renamed over d's.
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Logf("no RENAME_EXCHANGE here (%v): d swaps between two symlinks", err)
		real := filepath.Join(root, "real")
		if err := os.Rename(d, real); err != nil {
			t.Fatal(err)
		}
		toReal := true
		exchange = func() error {
			tmp := filepath.Join(root, ".swap")
			target := fifos
			if toReal {
				target = real
			}
			toReal = !toReal
			if err := os.Symlink(target, tmp); err != nil {
				return err
			}
			return os.Rename(tmp, d)
		}
	}
	swapFile := func(i int) error {
		tmp, p := filepath.Join(base, ".swap"), filepath.Join(base, "race.log")
		os.Remove(tmp)
		var err error
		if i%2 == 0 {
			err = os.Link(fifo, tmp)
		} else {
			err = os.WriteFile(tmp, []byte("live\n"), 0o644)
		}
		if err != nil {
			return err
		}
		return os.Rename(tmp, p)
	}

	for _, c := range []struct {
		rel    string
		follow bool
		swap   func(i int) error
	}{
		{"app.log", true, func(int) error { return exchange() }},
		{"race.log", false, swapFile},
		{"race.log", true, swapFile},
	} {
		probe := watchFIFO(t, fifo)
		stop := make(chan struct{})
		swapped := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					swapped <- nil
					return
				default:
				}
				if err := c.swap(i); err != nil {
					swapped <- err
					return
				}
			}
		}()
		opened, refusedN := 0, 0
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
			f, _, err := OpenLog(base, c.rel, c.follow)
			var refused *RefusedError
			switch {
			case errors.As(err, &refused):
				if refused.Reason != ReasonNotRegular {
					t.Errorf("%s: refused for %s (%s)", c.rel, refused.Reason, refused.Detail)
				}
				refusedN++
			case err == nil:
				b, _ := io.ReadAll(f)
				f.Close()
				if string(b) != "live\n" {
					t.Errorf("%s: read %q", c.rel, b)
				}
				opened++
			}
		}
		close(stop)
		if err := <-swapped; err != nil {
			t.Fatal(err)
		}
		fired := probe()
		t.Logf("%s (follow %v): %d opens read the log, %d were refused", c.rel, c.follow, opened, refusedN)
		if fired {
			t.Errorf("%s (follow %v): the FIFO swapped in was opened for reading", c.rel, c.follow)
		}
		if opened == 0 || refusedN == 0 {
			t.Errorf("%s (follow %v): the race was not exercised (%d opened, %d refused)", c.rel, c.follow, opened, refusedN)
		}
	}
}
