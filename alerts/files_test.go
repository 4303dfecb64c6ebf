package alerts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
)

// Files hitcount creates hold what the access logs hold (paths, hosts):
// directories it creates are 0700 and files 0600, so copies of adm-only logs
// do not become world-readable. Directories that exist keep their mode: an
// operator may have given a group access on purpose.
func TestFileModes(t *testing.T) {
	perm := func(p string) os.FileMode {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode().Perm()
	}
	existing := func() string {
		t.Helper()
		d := filepath.Join(t.TempDir(), "existing")
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o750); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return d
	}
	msg := &alerts.Message{ID: "<x@example.com>", Key: "k1", From: "hitcount <a@example.com>", To: []string{"ops@example.com"},
		Subject: "s", Text: "/pricing reached 10 hits", Date: time.Now()}

	t.Run("outbox", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "outbox", "sub")
		old := existing()
		for _, dir := range []string{fresh, old} {
			// An older, world-readable file of the same crossing is replaced
			// by a private one.
			if dir == old {
				if err := os.WriteFile(filepath.Join(dir, "k1.eml"), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := (alerts.Outbox{Dir: dir}).Send(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
			if m := perm(filepath.Join(dir, "k1.eml")); m != 0o600 {
				t.Errorf("%s/k1.eml: mode %v, want 0600", dir, m)
			}
		}
		if m := perm(fresh); m != 0o700 {
			t.Errorf("new outbox: mode %v, want 0700", m)
		}
		if m := perm(filepath.Dir(fresh)); m != 0o700 {
			t.Errorf("new outbox parent: mode %v, want 0700", m)
		}
		if m := perm(old); m != 0o750 {
			t.Errorf("existing outbox: mode %v, want 0750 as the operator left it", m)
		}
	})

	t.Run("local claims state dir", func(t *testing.T) {
		fresh := filepath.Join(t.TempDir(), "state")
		old := existing()
		for _, dir := range []string{fresh, old} {
			c, err := alerts.OpenLocalClaims(dir, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if m := perm(filepath.Join(dir, "sweeper.lock")); m != 0o600 {
				t.Errorf("%s/sweeper.lock: mode %v, want 0600", dir, m)
			}
		}
		if m := perm(fresh); m != 0o700 {
			t.Errorf("new state dir: mode %v, want 0700", m)
		}
		if m := perm(old); m != 0o750 {
			t.Errorf("existing state dir: mode %v, want 0750 as the operator left it", m)
		}
	})
}
