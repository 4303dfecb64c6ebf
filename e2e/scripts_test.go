package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

// script runs one of the repository's scripts in its own process group and
// collects what it prints.
type script struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer // stdout and stderr, interleaved
	lines  chan string
	exited chan error
}

func startScript(t *testing.T, repo string, env []string, args ...string) *script {
	t.Helper()
	s := &script{lines: make(chan string, 4096), exited: make(chan error, 1)}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Dir = repo
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, r) // past a line too long to scan, so the script never blocks on its output
	}()
	// exited is sent only once every line is in out: Wait returns as soon as
	// the pipe's reader has taken the last bytes, before the scanner has
	// appended them, and a test that reads output() on exit would miss them.
	go func() { err := s.cmd.Wait(); w.Close(); <-scanned; s.exited <- err }()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return s
}

func (s *script) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// waitFor waits for a line containing want, failing the test if the script
// exits first or the time is up.
func (s *script) waitFor(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line := <-s.lines:
			if strings.Contains(line, want) {
				return line
			}
		case err := <-s.exited:
			s.exited <- err
			t.Fatalf("the script exited (%v) before printing %q:\n%s", err, want, s.output())
		case <-deadline:
			t.Fatalf("no %q within %v:\n%s", want, timeout, s.output())
		}
	}
}

// processesUnder lists the processes whose command line names dir.
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		out = append(out, e.Name()+": "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

// scripts/run-server.sh, stopped with SIGTERM (systemd, kill, a terminal
// closing): it stops the ClickHouse server, the demo traffic, the collector
// and the sweeper it started, and then exits, instead of going back to
// printing the outbox's count every 10 s for ever.
func TestRunServerExitsOnSIGTERM(t *testing.T) {
	testenv.Require(t, "clickhouse-server", "/usr/sbin/clickhouse-server")
	testenv.Require(t, "clickhouse-client", "/usr/bin/clickhouse-client")
	repo := filepath.Join(t.TempDir(), "hitcount")
	copyRepo(t, repoRoot(t), repo)
	s := startScript(t, repo, nil, "./scripts/run-server.sh")
	s.waitFor(t, "run: collector shipping", 5*time.Minute) // a cold build
	// In the printing loop: the state the old script never left.
	s.waitFor(t, "emails in "+filepath.Join(repo, "data", "server", "demo", "outbox"), time.Minute)
	children := processesUnder(repo)
	if len(children) < 4 {
		t.Fatalf("want the server, the demo traffic, the collector and the sweeper running under %s, found %q", repo, children)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil { // the script only, as kill(1) does
		t.Fatal(err)
	}
	sent := time.Now()
	// A bound for "it exits", not a timing goal: the children's own stops
	// (the collector's flush, the server's shutdown) take a few seconds.
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; want 0", err)
		}
		t.Logf("run-server.sh exited %.1f s after SIGTERM", time.Since(sent).Seconds())
	case <-time.After(time.Minute):
		t.Fatalf("run-server.sh still runs a minute after SIGTERM:\n%s", s.output())
	}
	out := s.output()
	if i := strings.Index(out, "run: stopped"); i < 0 || strings.Contains(out[i:], "emails in") {
		t.Errorf("want \"run: stopped\" last, with no outbox count after it:\n%s", out)
	}
	if left := processesUnder(repo); len(left) > 0 {
		t.Errorf("still running after the script exited: %q", left)
	}
}

// scripts/run.sh with a real log: the log is its own site (from its file
// name) in its own directory, read from its end, never the demo's store or
// site; and a port in use is refused before anything is built or started,
// naming HITCOUNT_HTTP_LISTEN.
func TestRunScriptOwnLog(t *testing.T) {
	testenv.RequireChdb(t)
	repo := filepath.Join(t.TempDir(), "hitcount")
	copyRepo(t, repoRoot(t), repo)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s := startScript(t, repo, []string{"HITCOUNT_HTTP_LISTEN=" + taken.Addr().String()}, "./scripts/run.sh")
	select {
	case err := <-s.exited:
		want := taken.Addr().String() + ", where hitcount serves /metrics, is in use by another process"
		if err == nil || !strings.Contains(s.output(), want) || !strings.Contains(s.output(), "HITCOUNT_HTTP_LISTEN=") {
			t.Errorf("port in use: exit %v, output %q; want a failure saying %q and naming HITCOUNT_HTTP_LISTEN", err, s.output(), want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("run.sh on a port in use still runs after a minute:\n%s", s.output())
	}
	if _, err := os.Stat(filepath.Join(repo, "bin")); err == nil {
		t.Error("run.sh built the binaries before refusing the port")
	}

	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "www.example.com-access.log")
	g := loggen.New(loggen.Options{Seed: 18})
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	const history = 5000
	if _, err := g.WriteN(f, history); err != nil {
		t.Fatal(err)
	}
	s = startScript(t, repo, []string{"HITCOUNT_HTTP_LISTEN=127.0.0.1:0"}, "./scripts/run.sh", logPath)
	dir := filepath.Join(repo, "data", "www.example.com")
	s.waitFor(t, `run: shipping `+logPath+` as site "www.example.com" into `+dir+", a store of its own; read from its end", 5*time.Minute)
	line := s.waitFor(t, `msg="reading log file"`, time.Minute)
	if !strings.Contains(line, `how="at its end (start_at: end)"`) || !strings.Contains(line, "site=www.example.com") {
		t.Errorf("the log is not read from its end as site www.example.com: %s", line)
	}
	const fresh = 300
	if _, err := g.WriteN(f, fresh); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := filepath.Join(dir, "hitcount.yaml")
	query := func(sql string) string {
		out, err := exec.Command(filepath.Join(repo, "bin", "hitcount"), "query", "-config", cfg, "-format", "tsv", sql).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("error %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	want := fmt.Sprintf("site\tn\nwww.example.com\t%d", fresh)
	var got string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		got = query("SELECT site, count() AS n FROM hitcount.hits GROUP BY site")
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if got != want {
		t.Errorf("stored: %q; want only the %d lines written after the start, as site www.example.com", got, fresh)
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("after Ctrl-C: %v\n%s", err, s.output())
		}
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after Ctrl-C:\n%s", s.output())
	}
	for _, p := range []string{"hitcount.yaml", "chdb", "state"} { // outbox/ comes with the first email
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the run's directory lacks %s: %v", p, err)
		}
	}
	for _, p := range []string{"data/demo", "data/hitcount.yaml", "data/chdb", "outbox"} {
		if _, err := os.Stat(filepath.Join(repo, p)); err == nil {
			t.Errorf("a run on a real log made %s: the demo's or the old shared layout", p)
		}
	}
}
