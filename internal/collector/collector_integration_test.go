package collector_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/testenv"
)

func gzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

// runCollector runs a collector in this process until the test ends.
func runCollector(t *testing.T, st *store, glob string, tune func(*collector.Options)) *collector.Metrics {
	t.Helper()
	m := collector.NewMetrics(prometheus.NewRegistry())
	startCollector(t, st, glob, func(o *collector.Options) {
		o.Metrics = m
		if tune != nil {
			tune(o)
		}
	})
	return m
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// Kill test: a writer appends lines while the collector is SIGKILLed and
// restarted at random moments; at the end every line is in the store once.
// On the embedded engine the engine dies with the collector, mid-insert
// included; a start there costs about a second, so it is killed fewer times.
func TestKillNineExactlyOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		kills := 25
		if d.Backend == "embedded" {
			kills = 12
		}
		st := newStore(t, d)
		// The children open the store: the embedded engine's directory is
		// open in one process at a time.
		st.store.Close()
		dir := t.TempDir()
		w := newWriter(t, dir, 1000)
		state := t.TempDir()
		child := func(env ...string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(append(append(os.Environ(), d.Env()...), "HITCOUNT_CHILD_COLLECTOR=1",
				"HC_GLOB="+filepath.Join(dir, "access*.log"), "HC_ROWS=2000", "HC_STATE="+state), env...)
			cmd.Stderr = testWriter{t}
			return cmd
		}
		stopWriting := make(chan struct{})
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for {
				select {
				case <-stopWriting:
					return
				case <-time.After(2 * time.Millisecond):
					w.write(1 + rand.IntN(400))
				}
			}
		}()
		for i := 0; i < kills; i++ {
			cmd := child()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
		}
		close(stopWriting)
		<-writerDone
		if err := child("HC_UNTIL_QUIET=1").Run(); err != nil {
			t.Fatalf("final collector run: %v", err)
		}
		good := w.goodLines()
		t.Logf("%s: %d lines written (%d good), collector killed %d times", d.Backend, w.lines, good, kills)
		st.store = d.Open(t)
		st.assertExactlyOnce(t, good)
	})
}

// Rotation tests: logrotate's create and copytruncate styles every few
// thousand lines under a concurrent writer, rotated files gzipped.
func TestRotationExactlyOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testRotationExactlyOnce)
}

func testRotationExactlyOnce(t *testing.T, d *testenv.Database) {
	for _, style := range []string{"create", "copytruncate"} {
		t.Run(style, func(t *testing.T) {
			d := *d
			d.Name = fmt.Sprintf("%s_%s", d.Name, style)
			st := newStore(t, &d)
			dir := t.TempDir()
			w := newWriter(t, dir, 0)
			runCollector(t, st, filepath.Join(dir, "access.log"), nil)
			const rotations, perRotation = 15, 4000
			for r := 0; r < rotations; r++ {
				for written := 0; written < perRotation; {
					n := 1 + rand.IntN(300)
					w.write(n)
					written += n
					time.Sleep(time.Millisecond)
				}
				if style == "create" {
					w.rotateCreate()
				} else {
					w.rotateCopyTruncate()
				}
			}
			w.write(1000)
			good := w.goodLines()
			t.Logf("%d lines, %d rotations", good, rotations)
			st.assertExactlyOnce(t, good)
		})
	}
}

// Unknown outcome: the server is frozen (SIGSTOP) while inserts are in flight,
// until the collector's inserts time out, then thawed while the collector
// recovers. The server may still finish the insert it was running: the
// collector must wait for it before asking what was committed.
func TestFrozenServerExactlyOnce(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	st := newServerStore(t, ch, 2*time.Second)
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	m := runCollector(t, st, filepath.Join(dir, "access.log"), func(o *collector.Options) { o.BatchRows = 20000 })
	for round := 0; round < 3; round++ {
		w.write(60000) // several inserts' worth, so one is in flight when the server stops
		time.Sleep(time.Duration(50+rand.IntN(100)) * time.Millisecond)
		ch.Freeze()
		time.Sleep(3 * time.Second) // past the 2 s insert timeout
		ch.Thaw()
		time.Sleep(time.Second)
	}
	good := w.goodLines()
	st.assertExactlyOnce(t, good)
	if failed := testutil.ToFloat64(m.Batches.WithLabelValues("failed")); failed < 1 {
		t.Fatalf("no insert failed while the server was frozen: the test did not exercise the unknown outcome")
	} else {
		t.Logf("%d inserts had an unknown outcome; %d rows, each once", int(failed), good)
	}
}

// Outage: the server is stopped for 30 s mid-stream and started again.
func TestOutageExactlyOnce(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	st := newServerStore(t, ch, 5*time.Second)
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	m := runCollector(t, st, filepath.Join(dir, "access.log"), nil)
	w.write(20000)
	st.waitRows(t, w.goodLines(), 30*time.Second)
	ch.Stop()
	for i := 0; i < 30; i++ {
		w.write(2000)
		time.Sleep(time.Second)
	}
	if up := testutil.ToFloat64(m.ClickHouseUp); up != 0 {
		t.Errorf("clickhouse_up = %v during the outage", up)
	}
	ch.Start()
	w.write(5000)
	st.assertExactlyOnce(t, w.goodLines())
}

// Malformed lines: 1 in 1000 malformed, binary garbage and a 1 MB line are
// counted, sampled into the rejects table, and never stop the stream.
func TestMalformedLinesCountedAndSampled(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	st := newServerStore(t, ch, 10*time.Second)
	dir := t.TempDir()
	w := newWriter(t, dir, 1000)
	m := runCollector(t, st, filepath.Join(dir, "access.log"), nil)
	w.write(20000)
	w.mu.Lock()
	w.f.Write([]byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\xff\xfe garbage\n"))
	w.f.Write(append(bytesRepeat('x', 1<<20), '\n'))
	w.lines += 2
	w.mu.Unlock()
	w.write(20000)
	good := w.goodLines()
	bad := w.lines - good
	st.assertExactlyOnce(t, good)
	if got := testutil.ToFloat64(m.LinesRejected.WithLabelValues("www")); uint64(got) != bad {
		t.Errorf("rejected lines metric %v, want %d", got, bad)
	}
	var sampled uint64
	var longest uint64
	if err := st.store.Select(context.Background(), "SELECT count(), max(length(line)) FROM "+st.db+".rejects", nil,
		func(scan func(...any) error) error { return scan(&sampled, &longest) }); err != nil {
		t.Fatal(err)
	}
	if sampled != bad || longest > 2048 {
		t.Errorf("rejects table holds %d samples (longest %d bytes), want all %d, each cut to at most 2048 bytes", sampled, longest, bad)
	}
	t.Logf("%d good lines shipped, %d rejected and sampled", good, bad)
}

func bytesRepeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// testLogLevel is Warn, or Info with HITCOUNT_TEST_LOG=info.
func testLogLevel() slog.Level {
	if os.Getenv("HITCOUNT_TEST_LOG") == "info" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

// With a backlog of gigabytes and the server down, then shipping flat out, the
// collector's memory stays bounded: it stops reading when its batches are full.
func TestBacklogMemoryBounded(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	st := newServerStore(t, ch, 10*time.Second)
	dir := t.TempDir()
	w := newWriter(t, dir, 0)
	// About 600 MB: four times the bound, so a collector that buffered the
	// backlog would fail, at a third of the writing time of a 2 GB file.
	for w.lines < 3_000_000 {
		w.write(50000)
	}
	fi, _ := os.Stat(w.name)
	// The real binary, built as operators build it: this test binary may carry
	// the race detector, whose shadow memory would swamp what is measured.
	bin := filepath.Join(t.TempDir(), "collector")
	build := exec.Command("go", "build", "-o", bin, "github.com/hitcount/hitcount/cmd/collector")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build collector: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(`clickhouse: {addr: ["`+ch.Addr()+`"], database: `+st.db+`}
sources: [{path: access*.log, site: www, start_at: beginning}]
batch: {rows: 50000}
http: {listen: ""}
state_dir: state
`), 0o644)
	ch.Stop()
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
	time.Sleep(5 * time.Second)
	down := peakRSS(t, cmd.Process.Pid)
	ch.Start()
	time.Sleep(20 * time.Second)
	shipping := peakRSS(t, cmd.Process.Pid)
	rows, _, _ := st.counts(t)
	t.Logf("backlog %d MB: peak RSS %d MB with the server down, %d MB after 20 s of shipping (%d rows shipped)", fi.Size()>>20, down>>20, shipping>>20, rows)
	if shipping > 150<<20 {
		t.Fatalf("peak RSS %d MB, want < 150 MB", shipping>>20)
	}
	if rows == 0 {
		t.Fatal("nothing shipped after the server came back")
	}
}

func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := testenv.PeakRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
