package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// Child mode: a collector on the embedded store, to be killed with SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("HITCOUNT_CHILD_EMBEDDED") != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

func child() int {
	ctx := context.Background()
	st, err := embedded.Open(ctx, embedded.Options{LibPath: testenv.ChdbLibPath(), DataPath: os.Getenv("HC_DATA"), Database: "hitcount"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	run := func(ctx context.Context) error {
		c, err := collector.New(st, collector.Options{
			Sources:   []collector.Source{{Glob: os.Getenv("HC_GLOB"), Site: "www", Format: "combined"}},
			BatchRows: 2000, BatchDelay: 100 * time.Millisecond, Poll: 20 * time.Millisecond, Scan: 100 * time.Millisecond,
			StateDir: os.Getenv("HC_STATE"),
			Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
	if os.Getenv("HC_ONCE") == "" {
		if err := run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	// Ship what is there, then stop once a run adds nothing: used to read the
	// final counts however loaded the machine is. The engine is only queried
	// between runs, never while the collector inserts.
	last := ""
	for i := 0; i < 40; i++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := run(rctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		out, err := st.Engine().Query(ctx, "SELECT count() FROM hitcount.hits", "TSV")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if string(out) == last {
			break
		}
		last = string(out)
	}
	return counts(st)
}

func counts(st *embedded.Store) int {
	out, err := st.Engine().Query(context.Background(),
		"SELECT (SELECT count() FROM hitcount.hits), (SELECT uniqExact(source_id, offset) FROM hitcount.hits), (SELECT sum(hits) FROM hitcount.hits_1m)", "TSV")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(string(out))
	return 0
}

// The collector ships a log into the embedded engine in a separate process,
// as standalone mode will: every good line once, the rollup in agreement, the
// lines that do not parse (binary garbage, tabs and backslashes from nginx's
// escapes in good ones) handled. A restart ships only what is new.
func TestShipsToEmbeddedEngine(t *testing.T) {
	testenv.RequireChdb(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "access.log")
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := loggen.New(loggen.Options{Seed: rand.Uint64(), BadEvery: 1000})
	var good, lines int
	var buf []byte
	write := func(n int) {
		buf = buf[:0]
		for range n {
			var ok bool
			buf, ok = g.Line(buf, time.Now())
			if ok {
				good++
			}
			lines++
		}
		f.Write(buf)
	}
	once := func() []string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "HITCOUNT_CHILD_EMBEDDED=1", "HC_ONCE=1", "HC_DATA="+data, "HC_GLOB="+filepath.Join(dir, "access*.log"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		for try := 0; try < 3 && err != nil && raceBuild && strings.Contains(err.Error(), "segmentation fault"); try++ {
			// Under the race detector (ThreadSanitizer's runtime beside the
			// engine's uninstrumented C++), this child crashes in about 1
			// run of 7, before this session's changes too; never in 10
			// runs without it, and the product is never built with it.
			// Said, then tried again, up to three times (two crashes in
			// a row were seen once in CI).
			t.Logf("collector child crashed under the race detector (%v); running it again", err)
			cmd = exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "HITCOUNT_CHILD_EMBEDDED=1", "HC_ONCE=1", "HC_DATA="+data, "HC_GLOB="+filepath.Join(dir, "access*.log"))
			cmd.Stderr = os.Stderr
			out, err = cmd.Output()
		}
		if err != nil {
			t.Fatalf("collector on the embedded engine: %v", err)
		}
		return strings.Fields(string(out))
	}
	write(20000)
	f.Write([]byte("1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] \"GET /tab\\x09and\\x5Cslash HTTP/1.1\" 200 1 \"-\" \"-\"\n\x16\x03\x01 garbage\n"))
	good, lines = good+1, lines+2
	for round := 0; round < 2; round++ { // the second run finds only what was added
		got := once()
		want := fmt.Sprint(good)
		if len(got) != 3 || got[0] != want || got[1] != want || got[2] != want {
			t.Fatalf("run %d: rows, distinct (source, offset), rollup sum = %v; want all %d (%d lines)", round, got, good, lines)
		}
		write(5000)
	}
	t.Logf("%d lines (%d good) shipped to the embedded engine in 3 runs, each once", lines, good)
}
