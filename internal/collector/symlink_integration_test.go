package collector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A log directory someone else can write to: symlinks named like the live log
// or its rotated siblings point at a secret file, a directory, a FIFO and
// /dev/zero, and a real FIFO sits among the rotated files. None of them is
// read, each is logged once and counted, and the live log ships in full. A
// configured path that is itself a symlink (current.log -> the real log) is
// still followed, unless the link's owner could not have written the target.
func TestSymlinksAndSpecialFilesNotRead(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSymlinksAndSpecialFilesNotRead)
}

func testSymlinksAndSpecialFilesNotRead(t *testing.T, d *testenv.Database) {
	st := newStore(t, d)
	root := t.TempDir()
	logs, app, outside := filepath.Join(root, "logs"), filepath.Join(root, "app"), filepath.Join(root, "outside")
	for _, dir := range []string{logs, app, outside} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const marker = "TOPSECRET"
	secret := filepath.Join(outside, "shadow")
	if err := os.WriteFile(secret, []byte(strings.Repeat("root:$6$"+marker+"$hash:19000:0:99999:7:::\n", 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(outside, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// The live log, and the real log behind the configured symlink.
	writeLog := func(path string, seed uint64, n int) int {
		var buf bytes.Buffer
		good, err := loggen.New(loggen.Options{Seed: seed, Start: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}).WriteN(&buf, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return good
	}
	good := writeLog(filepath.Join(logs, "access.log"), 1, 2000)
	good += writeLog(filepath.Join(outside, "real.log"), 2, 1000)

	symlink := func(target, name string) string {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	want := map[string]string{ // path -> reason it is not read
		symlink(secret, filepath.Join(logs, "access.log.1")):      "symlink", // a rotated sibling
		symlink(secret, filepath.Join(logs, "access-secret.log")): "symlink", // matched by the wildcard
		symlink(outside, filepath.Join(logs, "access.log.2")):     "symlink",
		symlink(fifo, filepath.Join(logs, "access.log.3")):        "symlink",
		symlink("/dev/zero", filepath.Join(logs, "access.log.4")): "symlink",
		symlink("/dev/zero", filepath.Join(app, "zero.log")):      "not_regular", // configured literally
	}
	realFIFO := filepath.Join(logs, "access.log.5")
	if err := syscall.Mkfifo(realFIFO, 0o644); err != nil {
		t.Fatal(err)
	}
	want[realFIFO] = "not_regular"
	symlink("../outside/real.log", filepath.Join(app, "current.log"))
	sources := []collector.Source{
		{Glob: filepath.Join(logs, "access*.log"), Site: "www", Format: "combined"},
		{Glob: filepath.Join(app, "current.log"), Site: "www", Format: "combined"},
		{Glob: filepath.Join(app, "zero.log"), Site: "www", Format: "combined"},
	}
	if os.Geteuid() == 0 {
		// Configured literally, but the link belongs to someone who could
		// not have written the file it points to.
		evil := symlink(secret, filepath.Join(app, "evil.log"))
		if err := os.Lchown(evil, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		want[evil] = "symlink_owner"
		sources = append(sources, collector.Source{Glob: evil, Site: "www", Format: "combined"})
	} else {
		t.Log("not root: the link owner case (a link chowned to another user) is not set up")
	}

	reg := prometheus.NewRegistry()
	logs2 := &lockedBuffer{}
	runCollector(t, st, "", func(o *collector.Options) {
		o.Sources = sources
		o.Metrics = collector.NewMetrics(reg)
		o.Logger = slog.New(slog.NewJSONHandler(io.MultiWriter(logs2, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelWarn}))
	})

	st.assertExactlyOnce(t, uint64(good))
	time.Sleep(1500 * time.Millisecond) // 15 more scans: a refusal must not be logged again

	if n := st.count(t, "SELECT count() FROM "+st.db+".rejects"); n != 0 {
		var sample string
		st.store.Select(context.Background(), "SELECT line FROM "+st.db+".rejects LIMIT 1", nil,
			func(scan func(...any) error) error { return scan(&sample) })
		t.Errorf("rejects holds %d lines of files that are not logs, such as %q", n, sample)
	}
	if n := st.count(t, "SELECT count() FROM "+st.db+".hits WHERE position(path, '"+marker+"') > 0 OR position(client, '"+marker+"') > 0"); n != 0 {
		t.Errorf("hits holds %d rows of the secret file", n)
	}
	var shipped []string
	st.store.Select(context.Background(), "SELECT DISTINCT path FROM "+st.db+".sources ORDER BY path", nil,
		func(scan func(...any) error) error {
			var p string
			if err := scan(&p); err != nil {
				return err
			}
			shipped = append(shipped, p)
			return nil
		})
	wantShipped := []string{filepath.Join(app, "current.log"), filepath.Join(logs, "access.log")}
	if strings.Join(shipped, "\n") != strings.Join(wantShipped, "\n") {
		t.Errorf("sources read: %q, want %q", shipped, wantShipped)
	}

	// Each refused path: one warning naming it and its reason.
	warned := map[string][]string{}
	for _, line := range bytes.Split(logs2.Bytes(), []byte("\n")) {
		var rec struct{ Path, Reason string }
		if json.Unmarshal(line, &rec) == nil && rec.Reason != "" {
			warned[rec.Path] = append(warned[rec.Path], rec.Reason)
		}
	}
	perReason := map[string]float64{}
	for p, reason := range want {
		perReason[reason]++
		if got := warned[p]; len(got) != 1 || got[0] != reason {
			t.Errorf("%s: warned %q, want once with reason %q", p, got, reason)
		}
	}
	for p, got := range warned {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: warned %q, but it should be read", p, got)
		}
	}
	got := skippedMetric(t, reg)
	for reason, n := range perReason {
		if got[reason] != n {
			t.Errorf("files skipped for %s: metric %v, want %v", reason, got[reason], n)
		}
	}
	t.Logf("%d lines shipped; not read: %v", good, got)
}

// skippedMetric reads hitcount_collector_files_skipped_total by reason.
func skippedMetric(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "hitcount_collector_files_skipped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// lockedBuffer collects log output written from the collector's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// A configured symlink to a log elsewhere (current.log -> ../logs/app.log)
// that logrotate rotates beside its target: the rotated files there are read
// too (they hold what was written before the server reopened its log, and
// everything written while the collector was down), each line once. A file
// there owned by someone else is not read, whatever its name.
func TestSymlinkedLogRotatedBesideItsTarget(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		root := t.TempDir()
		app, logs := filepath.Join(root, "app"), filepath.Join(root, "logs")
		os.Mkdir(app, 0o755)
		os.Mkdir(logs, 0o755)
		base := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		target := filepath.Join(logs, "app.log")
		writeGzip(t, target+".2.gz", logLines(21, 700, base))
		if err := os.WriteFile(target+".1", logLines(22, 800, base.Add(time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		old := base.Add(-time.Hour)
		os.Chtimes(target+".2.gz", old, old)
		if err := os.WriteFile(target, logLines(23, 900, base.Add(2*time.Hour)), 0o644); err != nil {
			t.Fatal(err)
		}
		want := uint64(700 + 800 + 900)
		if os.Geteuid() == 0 {
			other := target + ".3"
			if err := os.WriteFile(other, logLines(24, 50, base.Add(-2*time.Hour)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(other, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("../logs/app.log", filepath.Join(app, "current.log")); err != nil {
			t.Fatal(err)
		}
		startCollector(t, st, filepath.Join(app, "current.log"), nil)
		st.assertExactlyOnce(t, want)
		if n := st.count(t, "SELECT uniqExact(source_id) FROM "+st.db+".hits"); n != 3 {
			t.Fatalf("%d sources shipped, want 3 (the target and its two rotated files)", n)
		}
	})
}
