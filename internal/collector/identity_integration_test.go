package collector_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Two vhost logs that start with the same request in the same second (a
// health check hitting both as they are created) are two files: both ship in
// full, at the same time, each line once. Before, the second was taken for
// the first and its lines were skipped without a word.
func TestSameFirstLineTwoFiles(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		base := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
		shared := logLines(1, 1, base)
		for i, vhost := range []string{"a", "b"} {
			os.MkdirAll(filepath.Join(dir, vhost), 0o755)
			data := append(append([]byte{}, shared...), logLines(uint64(10+i), 2000, base.Add(time.Second))...)
			if err := os.WriteFile(filepath.Join(dir, vhost, "access.log"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		startCollector(t, st, filepath.Join(dir, "*", "access.log"), nil)
		st.assertExactlyOnce(t, 2*2001)
		if n := st.count(t, "SELECT uniqExact(source_id) FROM "+st.db+".hits"); n != 2 {
			t.Fatalf("%d source ids, want 2", n)
		}
	})
}

// A file known by its first line (it had one line when it first shipped, or
// it was shipped by a version that knew files by their first line) keeps that
// id when it grows and across restarts: its lines are not shipped again under
// a two-line id.
func TestOneLineFileKeepsItsID(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		st := newStore(t, d)
		dir := t.TempDir()
		path := filepath.Join(dir, "access.log")
		base := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
		if err := os.WriteFile(path, logLines(1, 1, base), 0o644); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		tune := func(o *collector.Options) { o.StateDir = state }
		stop := startCollector(t, st, path, tune)
		// A quiet log's single line ships once the file has been idle.
		st.waitRows(t, 1, 30*time.Second)
		appendLines(t, path, logLines(2, 500, base.Add(time.Minute)))
		st.waitRows(t, 501, 30*time.Second)
		stop()
		appendLines(t, path, logLines(3, 100, base.Add(2*time.Minute)))
		startCollector(t, st, path, tune)
		st.assertExactlyOnce(t, 601)
		if n := st.count(t, "SELECT uniqExact(source_id) FROM "+st.db+".hits"); n != 1 {
			t.Fatalf("%d source ids for one file, want 1", n)
		}
	})
}

func appendLines(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}
