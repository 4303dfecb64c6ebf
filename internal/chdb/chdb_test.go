package chdb_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/testenv"
)

// The engine serves one data directory per process, so none of these tests
// runs in parallel, and each closes its Engines before it ends.

func open(t *testing.T, dir string) *chdb.Engine {
	t.Helper()
	e, err := chdb.Open(context.Background(), chdb.Options{LibPath: testenv.RequireChdb(t), DataPath: dir})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func exec1(t *testing.T, e *chdb.Engine, sql string) {
	t.Helper()
	if err := e.Exec(context.Background(), sql); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func query(t *testing.T, e *chdb.Engine, sql, format string) string {
	t.Helper()
	out, err := e.Query(context.Background(), sql, format)
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return string(out)
}

func TestRoundTrip(t *testing.T) {
	e := open(t, t.TempDir())
	exec1(t, e, "CREATE TABLE hits (site String, path String, n UInt64) ENGINE = MergeTree ORDER BY (site, path)")
	exec1(t, e, "INSERT INTO hits VALUES ('b.example', '/', 2), ('a.example', '/x', 1), ('a.example', '/', 3)")
	if got, want := query(t, e, "SELECT site, path, n FROM hits ORDER BY site, path", "TSV"),
		"a.example\t/\t3\na.example\t/x\t1\nb.example\t/\t2\n"; got != want {
		t.Errorf("TSV: got %q, want %q", got, want)
	}
	if got, want := query(t, e, "SELECT site, sum(n) AS n FROM hits GROUP BY site ORDER BY site", "JSONEachRow"),
		`{"site":"a.example","n":4}`+"\n"+`{"site":"b.example","n":2}`+"\n"; got != want {
		t.Errorf("JSONEachRow: got %q, want %q", got, want)
	}
	if got := query(t, e, "SELECT 1 WHERE 0", "TSV"); got != "" {
		t.Errorf("empty result: got %q", got)
	}
}

func TestDataSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	e := open(t, dir)
	exec1(t, e, "CREATE TABLE t (k UInt32) ENGINE = MergeTree ORDER BY k")
	exec1(t, e, "INSERT INTO t VALUES (7)")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = open(t, dir)
	if got := query(t, e, "SELECT k FROM t", "TSV"); got != "7\n" {
		t.Errorf("after reopen: got %q", got)
	}
}

func TestQueryError(t *testing.T) {
	e := open(t, t.TempDir())
	_, err := e.Query(context.Background(), "SELECT * FROM no_such_table", "TSV")
	var qe *chdb.QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("got %v (%T), want *QueryError", err, err)
	}
	if qe.Code != 60 || qe.Name != "UNKNOWN_TABLE" || !strings.Contains(qe.Message, "no_such_table") {
		t.Errorf("got code %d name %q message %q", qe.Code, qe.Name, qe.Message)
	}
	if err := e.Exec(context.Background(), "SELEKT 1"); !errors.As(err, &qe) || qe.Name != "SYNTAX_ERROR" {
		t.Errorf("syntax error: got %v", err)
	}
	// The engine survives its errors.
	if got := query(t, e, "SELECT 1", "TSV"); got != "1\n" {
		t.Errorf("after errors: got %q", got)
	}
}

func TestLibraryMissing(t *testing.T) {
	_, err := chdb.Open(context.Background(), chdb.Options{
		LibPath: filepath.Join(t.TempDir(), "libchdb.so"), DataPath: t.TempDir(),
	})
	if !errors.Is(err, chdb.ErrLibraryMissing) {
		t.Fatalf("got %v, want ErrLibraryMissing", err)
	}
	for _, want := range []string{"scripts/setup.sh --embedded-only", "HITCOUNT_CHDB_LIB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %s", err, want)
		}
	}
}

func TestClosed(t *testing.T) {
	e := open(t, t.TempDir())
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := e.Query(context.Background(), "SELECT 1", "TSV"); !errors.Is(err, chdb.ErrClosed) {
		t.Errorf("query after close: got %v, want ErrClosed", err)
	}
}

func TestCanceledContext(t *testing.T) {
	e := open(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Query(ctx, "SELECT 1", "TSV"); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	e := open(t, t.TempDir())
	exec1(t, e, "CREATE TABLE t (g UInt32, k UInt32) ENGINE = MergeTree ORDER BY (g, k)")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for k := range 5 {
				if err := e.Exec(context.Background(), fmt.Sprintf("INSERT INTO t VALUES (%d, %d)", g, k)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := query(t, e, "SELECT count(), uniqExact(g) FROM t", "TSV"); got != "40\t8\n" {
		t.Errorf("got %q, want 40 rows in 8 groups", got)
	}
}

// The engine allows several connections to one directory in a process...
func TestSameDirTwiceInProcess(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir)
	b := open(t, dir)
	exec1(t, a, "CREATE TABLE t (k UInt32) ENGINE = MergeTree ORDER BY k")
	exec1(t, b, "INSERT INTO t VALUES (1)")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := query(t, b, "SELECT count() FROM t", "TSV"); got != "1\n" {
		t.Errorf("second engine after the first closed: got %q", got)
	}
}

// ...but only one directory at a time.
func TestOtherDirInProcess(t *testing.T) {
	a := open(t, t.TempDir())
	other := t.TempDir()
	_, err := chdb.Open(context.Background(), chdb.Options{LibPath: testenv.RequireChdb(t), DataPath: other})
	if !errors.Is(err, chdb.ErrOtherDataDirOpen) {
		t.Fatalf("got %v, want ErrOtherDataDirOpen", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open(t, other)
	if got := query(t, b, "SELECT 1", "TSV"); got != "1\n" {
		t.Errorf("after the first closed: got %q", got)
	}
}

const holdEnv = "HITCOUNT_CHDB_TEST_HOLD_DIR"

// TestHelperHoldDataDir is not a test: TestSecondProcessRefused runs the test
// binary again with only this test, to hold a data directory in another
// process until its stdin closes.
func TestHelperHoldDataDir(t *testing.T) {
	dir := os.Getenv(holdEnv)
	if dir == "" {
		t.Skip("helper process for TestSecondProcessRefused")
	}
	e := open(t, dir)
	exec1(t, e, "CREATE TABLE held (k UInt8) ENGINE = Memory")
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func TestSecondProcessRefused(t *testing.T) {
	lib := testenv.RequireChdb(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldDataDir$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
				break
			}
		}
		ready <- false
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("helper ended without holding %s: %s", dir, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("helper did not open %s within 30s", dir)
	}

	// The refusal is the error alone: nothing from the engine on stderr,
	// where `hitcount query` would print it above the running job's answer.
	noise := stderrOf(t, func() {
		_, err = chdb.Open(context.Background(), chdb.Options{LibPath: lib, DataPath: dir})
	})
	if !errors.Is(err, chdb.ErrDataDirLocked) {
		t.Fatalf("got %v, want ErrDataDirLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("%q does not name the directory", err)
	}
	if noise != "" {
		t.Errorf("the refusal printed on stderr: %q", noise)
	}

	// Once the holder is gone the directory, with its data, is ours.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v: %s", err, stderr.String())
	}
	e := open(t, dir)
	if got := query(t, e, "EXISTS TABLE held", "TSV"); got != "1\n" {
		t.Errorf("EXISTS TABLE held: got %q, want the helper's table", got)
	}
}

// A data directory the engine creates is private (0700): it holds copies of
// access logs, which are adm-only on most systems. A directory that exists
// keeps the mode its operator gave it (group access may be on purpose).
func TestDataDirMode(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "data")
	e := open(t, fresh)
	exec1(t, e, "CREATE TABLE t (k UInt32) ENGINE = MergeTree ORDER BY k")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if m := perm(t, fresh); m != 0o700 {
		t.Errorf("new data directory: mode %v, want 0700", m)
	}
	existing := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(existing, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o750); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := open(t, existing).Close(); err != nil {
		t.Fatal(err)
	}
	if m := perm(t, existing); m != 0o750 {
		t.Errorf("existing data directory: mode %v, want 0750 as the operator left it", m)
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

// stderrOf runs fn with the process's stderr (fd 2, where the engine
// writes) sent to a file, and returns what was written there.
func stderrOf(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := syscall.Dup3(saved, 2, 0); err != nil {
		t.Fatal(err)
	}
	syscall.Close(saved)
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
