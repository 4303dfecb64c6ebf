package collector_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A source whose path matches nothing is said once, not silently waited on,
// and shows as 0 files in a gauge; when the log appears it is said, counted
// and shipped.
func TestSourceMatchingNothingIsSaid(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		glob := filepath.Join(dir, "acess.log") // the typo an operator makes
		logs := &lockedBuffer{}
		reg := prometheus.NewRegistry()
		startCollector(t, st, glob, func(o *collector.Options) {
			o.Metrics = collector.NewMetrics(reg)
			o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		})
		time.Sleep(time.Second) // about ten scans
		if n := bytes.Count(logs.Bytes(), []byte("source matches no file")); n != 1 {
			t.Errorf("said %d times that the source matches no file, want once:\n%s", n, logs.Bytes())
		}
		if got := sourceFiles(t, reg); got != 0 {
			t.Errorf("hitcount_collector_source_files = %v, want 0", got)
		}
		if err := os.WriteFile(glob, logLines(1, 50, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)), 0o644); err != nil {
			t.Fatal(err)
		}
		st.waitRows(t, 50, 30*time.Second)
		if !bytes.Contains(logs.Bytes(), []byte("source matches files again")) {
			t.Errorf("the log's appearance is not said:\n%s", logs.Bytes())
		}
		if got := sourceFiles(t, reg); got != 1 {
			t.Errorf("hitcount_collector_source_files = %v, want 1", got)
		}
	})
}

func sourceFiles(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hitcount_collector_source_files" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no hitcount_collector_source_files series")
	return -1
}

// A second collector on the same state directory refuses to run, naming the
// first: two on the same files would ship their lines twice.
func TestSecondCollectorOnOneStateDirRefused(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir, state := t.TempDir(), t.TempDir()
		glob := filepath.Join(dir, "access.log")
		os.WriteFile(glob, logLines(1, 10, time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)), 0o644)
		startCollector(t, st, glob, func(o *collector.Options) { o.StateDir = state })
		st.waitRows(t, 10, 30*time.Second)
		c, err := collector.New(st.store, collector.Options{Sources: []collector.Source{{Glob: glob, Site: "www", Format: "combined"}}, StateDir: state})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = c.Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "another collector runs on state_dir") || !strings.Contains(err.Error(), "pid ") {
			t.Fatalf("second collector: %v; want a refusal naming the first", err)
		}
		if ctx.Err() != nil {
			t.Error("the refusal waited for the context")
		}
	})
}
