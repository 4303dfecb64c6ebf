package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Found by review (an adversarial pass over the two-line identities and the
// scan/open split); each failed before its fix.

// A log truncated and rewritten in one go (copytruncate followed at once by
// the server's next lines, or `app > access.log`) while the collector reads
// it: its new lines ship while it is quiet, and after a create rotation. The
// file was remembered as read at its size when the truncation was noticed,
// so the new lines (50 of them) were skipped until the file changed again.
func TestTruncatedAndRewrittenAtOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		path := filepath.Join(dir, "access.log")
		base := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
		if err := os.WriteFile(path, logLines(1, 200, base), 0o644); err != nil {
			t.Fatal(err)
		}
		startCollector(t, st, path, nil)
		st.waitRows(t, 200, 30*time.Second)
		if err := os.WriteFile(path, logLines(2, 50, base.Add(time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		st.waitRows(t, 250, 30*time.Second)
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, logLines(3, 10, base.Add(2*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		st.assertExactlyOnce(t, 260)
	})
}

// Two vhost logs that start with the same health check in the same second,
// one quiet (only that line, for longer than RotatedIdle, so read under its
// first-line id): the busy one ships in full, and after a restart nothing is
// shipped again. It waited for the quiet one to finish, that is for ever.
func TestSameFirstLineOneQuiet(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
		shared := logLines(1, 1, base)
		os.MkdirAll(filepath.Join(dir, "a"), 0o755)
		os.MkdirAll(filepath.Join(dir, "b"), 0o755)
		pa := filepath.Join(dir, "a", "access.log")
		if err := os.WriteFile(pa, shared, 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Minute)
		os.Chtimes(pa, old, old)
		pb := filepath.Join(dir, "b", "access.log")
		if err := os.WriteFile(pb, append(append([]byte{}, shared...), logLines(11, 2000, base.Add(time.Second))...), 0o644); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		tune := func(o *collector.Options) { o.StateDir = state }
		stop := startCollector(t, st, filepath.Join(dir, "*", "access.log"), tune)
		st.assertExactlyOnce(t, 2002)
		stop()
		appendLines(t, pb, logLines(12, 100, base.Add(time.Hour)))
		startCollector(t, st, filepath.Join(dir, "*", "access.log"), tune)
		st.assertExactlyOnce(t, 2102)
	})
}

// A configured symlink owned by an unprivileged user, to a log of theirs:
// the rotated files beside its target are read, but swapping the target's
// directory for a symlink to a root-only one (renameat2 RENAME_EXCHANGE in a
// loop) must not make the collector read root's file named like a rotated
// log. The owner was checked by path and the directory opened by name.
func TestSymlinkTargetSiblingsDirSwapped(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root: the attacker is another uid")
	}
	const uid = 4242
	d := testenv.NewDatabase(t, "embedded")
	st := newStore(t, d)
	root := t.TempDir()
	base := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	conf := filepath.Join(root, "conf")
	home := filepath.Join(root, "home")
	secret := filepath.Join(root, "secret")
	for _, p := range []string{conf, home, secret} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(secret, 0o700)
	os.Chown(home, uid, uid)
	real := filepath.Join(home, "d")
	os.Mkdir(real, 0o755)
	os.Chown(real, uid, uid)
	write := func(p string, data []byte, owner int) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, owner, owner)
	}
	// The user's own files: live app.log and app.log.1.
	write(filepath.Join(real, "app.log"), logLines(1, 10, base), uid)
	write(filepath.Join(real, "app.log.1"), logLines(2, 10, base.Add(-time.Hour)), uid)
	// Root's private file, named like a rotated sibling.
	secretLine := []byte("ROOT-ONLY SECRET: the password is hunter2\n")
	var secretData []byte
	for range 5 {
		secretData = append(secretData, secretLine...)
	}
	write(filepath.Join(secret, "app.log.1"), secretData, 0)
	// The user's configured link, and the symlink they will swap in.
	link := filepath.Join(conf, "current.log")
	if err := os.Symlink(filepath.Join(real, "app.log"), link); err != nil {
		t.Fatal(err)
	}
	os.Lchown(link, uid, uid)
	alt := filepath.Join(home, "alt")
	os.Symlink(secret, alt)
	os.Lchown(alt, uid, uid)
	// Touch app.log.1 so it is not 'seen' forever: a fresh inode each time
	// is not needed; the race needs the candidate to be considered (not
	// unchanged) while the directory is swapped. Keep the user's app.log.1
	// changing a little so it is reconsidered at every scan.
	stopSwap := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		i := 0
		for {
			select {
			case <-stopSwap:
				// leave the real directory in place
				var st os.FileInfo
				st, _ = os.Lstat(real)
				if st != nil && st.Mode()&os.ModeSymlink != 0 {
					unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
				}
				return
			default:
			}
			unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
			i++
			if i%2000 == 0 {
				// the user's rotated file changes, so the scan opens it again
				p := filepath.Join(real, "app.log.1")
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
						os.Chtimes(p, time.Now(), time.Now())
					}
				}
			}
		}
	}()
	startCollector(t, st, link, nil)
	deadline := time.Now().Add(20 * time.Second)
	var n uint64
	for time.Now().Before(deadline) {
		n = st.count(t, "SELECT count() FROM "+st.db+".rejects WHERE line LIKE '%hunter2%'")
		if n > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	close(stopSwap)
	<-done
	t.Logf("rejects rows holding root's secret: %d", n)
	// The user's own lines ship (the race does not stop the feature).
	if own := st.count(t, "SELECT count() FROM "+st.db+".hits"); own == 0 {
		t.Fatal("nothing of the user's own logs shipped")
	}
	var srcs []string
	st.store.Select(context.Background(), "SELECT DISTINCT path FROM "+st.db+".sources", nil, func(scan func(...any) error) error {
		var p string
		if err := scan(&p); err != nil {
			return err
		}
		srcs = append(srcs, p)
		return nil
	})
	t.Logf("sources: %v", srcs)
	if n > 0 {
		t.Fatalf("the collector read root's file %s through a user-owned link's target siblings", filepath.Join(secret, "app.log.1"))
	}
}
