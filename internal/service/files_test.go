package service

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/collector"
)

// nopStore is a store the collector is built on but never runs against.
type nopStore struct{ collector.Inserter }

func (nopStore) Deduplicates() bool { return false }

// The collector's state_dir holds its positions hint (file names and offsets
// of access logs): when hitcount creates it, it is 0700; one that exists
// keeps the mode its operator gave it.
func TestStateDirMode(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	build := func(stateDir string) {
		t.Helper()
		cfg, err := config.Parse(filepath.Join(t.TempDir(), "t.yaml"), []byte("state_dir: "+stateDir+"\nsources: [{path: /nonexistent/access.log, site: s}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewCollector(cfg, nopStore{}, log, prometheus.NewRegistry()); err != nil {
			t.Fatal(err)
		}
	}
	fresh := filepath.Join(t.TempDir(), "state", "collector")
	build(fresh)
	for _, d := range []string{fresh, filepath.Dir(fresh)} {
		if m := perm(t, d); m != 0o700 {
			t.Errorf("new %s: mode %v, want 0700", d, m)
		}
	}
	existing := filepath.Join(t.TempDir(), "existing")
	if err := os.Mkdir(existing, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o750); err != nil { // whatever the umask
		t.Fatal(err)
	}
	build(existing)
	if m := perm(t, existing); m != 0o750 {
		t.Errorf("existing state dir: mode %v, want 0750 as the operator left it", m)
	}
}

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
