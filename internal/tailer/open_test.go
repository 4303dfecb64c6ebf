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
)

const secretContent = "root:$6$secret:19000:0:99999:7:::\n"

// fixture: a log directory (dir) and, outside it, a secret file, a directory,
// a FIFO and the real log a configured symlink points to.
func fixture(t *testing.T) (dir, outside string) {
	t.Helper()
	root := t.TempDir()
	dir, outside = filepath.Join(root, "logs"), filepath.Join(root, "outside")
	for _, d := range []string{dir, outside, filepath.Join(outside, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), secretContent)
	write(filepath.Join(outside, "real.log"), "real\n")
	write(filepath.Join(outside, "sub", "access.log"), secretContent)
	write(filepath.Join(dir, "access.log"), "live\n")
	if err := syscall.Mkfifo(filepath.Join(outside, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "access.log.9"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"access.log.1": filepath.Join(outside, "secret"),
		"access.log.2": outside,
		"access.log.3": filepath.Join(outside, "fifo"),
		"access.log.4": "/dev/zero",
		"current.log":  "../outside/real.log",
		"chain.log":    "current.log",
		"sub":          filepath.Join(outside, "sub"),
		"via.log":      filepath.Join(outside, "sublink", "access.log"),
	}
	if err := os.Symlink(filepath.Join(outside, "sub"), filepath.Join(outside, "sublink")); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, outside
}

func TestOpenLog(t *testing.T) {
	dir, _ := fixture(t)
	for _, c := range []struct {
		rel    string
		follow bool
		want   string // content read, or the refusal reason
	}{
		{"access.log", false, "live\n"},
		{"access.log", true, "live\n"},
		{"access.log.1", false, ReasonSymlink},
		{"access.log.1", true, "root:"}, // named literally by the operator, owned by the same user
		{"access.log.2", false, ReasonSymlink},
		{"access.log.2", true, ReasonNotRegular},
		{"access.log.3", false, ReasonSymlink},
		{"access.log.3", true, ReasonNotRegular}, // must not block on the FIFO
		{"access.log.4", false, ReasonSymlink},
		{"access.log.4", true, ReasonNotRegular},
		{"access.log.9", false, ReasonNotRegular}, // a FIFO in the directory itself
		{"current.log", false, ReasonSymlink},
		{"current.log", true, "real\n"}, // relative target, from the link's directory
		{"chain.log", true, ReasonSymlink},
		{"via.log", false, ReasonSymlink},
		{"via.log", true, "root:"},               // a symlinked directory in the link's target, as /var/log/app -> /data/logs/app
		{"sub/access.log", false, ReasonSymlink}, // a symlinked directory on the way
		{"sub/access.log", true, ReasonSymlink},
	} {
		f, fi, err := OpenLog(dir, c.rel, c.follow)
		var refused *RefusedError
		switch {
		case errors.As(err, &refused):
			if refused.Reason != c.want {
				t.Errorf("%s (follow %v): refused for %s (%s), want %q", c.rel, c.follow, refused.Reason, refused.Detail, c.want)
			}
			if refused.Path != filepath.Join(dir, c.rel) {
				t.Errorf("%s: refusal names %s", c.rel, refused.Path)
			}
		case err != nil:
			t.Errorf("%s (follow %v): %v, want %q", c.rel, c.follow, err, c.want)
		default:
			b, _ := io.ReadAll(f)
			f.Close()
			if len(b) < len(c.want) || string(b[:len(c.want)]) != c.want || !fi.Mode().IsRegular() {
				t.Errorf("%s (follow %v): read %q (mode %v), want %q", c.rel, c.follow, b, fi.Mode(), c.want)
			}
		}
	}
	if _, _, err := OpenLog(dir, "gone.log", false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
	if _, _, err := OpenLog(dir, "../outside/secret", false); err == nil {
		t.Error("a path leaving base was opened")
	}
}

// A configured symlink whose owner could not have written the target is not
// followed (needs root to give a link to another user).
func TestOpenLogLinkOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown of a symlink needs root")
	}
	dir, outside := fixture(t)
	p := filepath.Join(dir, "evil.log")
	if err := os.Symlink(filepath.Join(outside, "secret"), p); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenLog(dir, "evil.log", true)
	if refused := (*RefusedError)(nil); !errors.As(err, &refused) || refused.Reason != ReasonLinkOwner {
		t.Fatalf("a link owned by uid 65534 to root's file: %v, want %s", err, ReasonLinkOwner)
	}
	// The same user's link to their own file is followed.
	if err := os.Chown(filepath.Join(outside, "secret"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	f, _, err := OpenLog(dir, "evil.log", true)
	if err != nil {
		t.Fatalf("a link to a file of the same owner: %v", err)
	}
	f.Close()
}

// The path is swapped between a regular file and a symlink to the secret
// (and a directory on the way between a real one and a symlink) as fast as
// possible while it is opened: no open may ever read the secret.
func TestOpenLogSwapRace(t *testing.T) {
	dir, outside := fixture(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer halt() // before the temporary directory is removed, even after Fatal
	swap := func(name string, asReal, asLink func(tmp string) error) {
		defer wg.Done()
		p := filepath.Join(dir, name)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(dir, ".swap-"+name)
			os.RemoveAll(tmp)
			mk := asReal
			if i%2 == 1 {
				mk = asLink
			}
			if err := mk(tmp); err != nil {
				t.Error(err)
				return
			}
			os.RemoveAll(p) // a directory cannot be renamed over a symlink
			if err := os.Rename(tmp, p); err != nil {
				t.Error(err)
				return
			}
		}
	}
	wg.Add(2)
	go swap("race.log", func(tmp string) error { return os.WriteFile(tmp, []byte("live\n"), 0o644) },
		func(tmp string) error { return os.Symlink(filepath.Join(outside, "secret"), tmp) })
	go swap("racedir", func(tmp string) error {
		if err := os.Mkdir(tmp, 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, "access.log"), []byte("live\n"), 0o644)
	}, func(tmp string) error { return os.Symlink(filepath.Join(outside, "sub"), tmp) })
	opened, refusedN := 0, 0
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for _, rel := range []string{"race.log", "racedir/access.log"} {
			f, _, err := OpenLog(dir, rel, false)
			var refused *RefusedError
			if errors.As(err, &refused) {
				refusedN++
				continue
			}
			if err != nil {
				continue // swapped away at that moment
			}
			b, _ := io.ReadAll(f)
			f.Close()
			opened++
			if string(b) == secretContent {
				t.Fatalf("%s: read the secret through a swapped symlink", rel)
			}
		}
	}
	halt()
	t.Logf("%d opens read the real file, %d were refused as symlinks", opened, refusedN)
	if opened == 0 || refusedN == 0 {
		t.Errorf("the race was not exercised (%d opened, %d refused)", opened, refusedN)
	}
}
