package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

const clickhouseServerBin = "/usr/sbin/clickhouse-server"

// ClickHouseServer is a ClickHouse 18.16 server of the test's own.
// Its methods fail the test that started it (t.Fatal), so call them from
// that test's goroutine.
type ClickHouseServer struct {
	t                                testing.TB
	dir                              string
	tcpPort, httpPort, interserverPt int
	proc                             *process
}

// ClickHouse starts a server on free loopback ports with its data in
// t.TempDir(), waits until it answers a native-protocol ping, and stops it
// when the test ends. On failure the test log gets the tail of its error log.
func ClickHouse(t testing.TB, opts ...CHOption) *ClickHouseServer {
	t.Helper()
	Require(t, "clickhouse-server", clickhouseServerBin)
	var cfg chConfig
	for _, o := range opts {
		o(&cfg)
	}
	dir := t.TempDir()
	ports := freePorts(t, 3)
	s := &ClickHouseServer{t: t, dir: dir, tcpPort: ports[0], httpPort: ports[1], interserverPt: ports[2]}
	cfgPath, err := writeClickHouseConfig(dir, s.tcpPort, s.httpPort, s.interserverPt, cfg)
	if err != nil {
		t.Fatalf("start clickhouse: %v", err)
	}
	s.proc = &process{
		name: "clickhouse-server",
		path: clickhouseServerBin,
		args: []string{"--config-file=" + cfgPath},
		out:  filepath.Join(dir, "stdout.log"),
	}
	t.Cleanup(func() {
		if err := s.proc.stop(30 * time.Second); err != nil {
			t.Errorf("stop clickhouse: %v", err)
		}
		if t.Failed() {
			t.Logf("clickhouse-server (%s) logs, last lines:\n%s", s.Addr(), s.logTail(40))
		}
	})
	s.Start()
	return s
}

// Addr is the native-protocol address, host:port.
func (s *ClickHouseServer) Addr() string { return loopback(s.tcpPort) }

// HTTPAddr is the HTTP interface's address (which clickhouse-go cannot use
// with 18.16; curl can).
func (s *ClickHouseServer) HTTPAddr() string { return loopback(s.httpPort) }

// Dir is the server's directory: config.xml, data/, log/.
func (s *ClickHouseServer) Dir() string { return s.dir }

// PID is the server's process ID, 0 before it first started.
func (s *ClickHouseServer) PID() int { return s.proc.pid() }

// Options returns client options for this server: native protocol, user
// default, no compression.
func (s *ClickHouseServer) Options() *clickhouse.Options {
	return &clickhouse.Options{
		Protocol:    clickhouse.Native,
		Addr:        []string{s.Addr()},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		Compression: &clickhouse.Compression{Method: clickhouse.CompressionNone},
		DialTimeout: 5 * time.Second,
	}
}

// Conn opens a client connection, closed when t ends.
func (s *ClickHouseServer) Conn(t testing.TB) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(s.Options())
	if err != nil {
		t.Fatalf("connect to clickhouse %s: %v", s.Addr(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Exec runs one statement on a fresh connection and fails t if it fails.
//
// Not for INSERT ... VALUES: 18.16 does not parse inline data sent over the
// native protocol but waits for data blocks, which Exec never sends, so the
// statement would hang. Use PrepareBatch or INSERT ... SELECT.
func (s *ClickHouseServer) Exec(t testing.TB, sql string) {
	t.Helper()
	if insertValuesRE.MatchString(sql) {
		t.Fatalf("exec %q: 18.16 would wait forever for the data of INSERT ... VALUES; use PrepareBatch or INSERT ... SELECT", sql)
	}
	conn, err := clickhouse.Open(s.Options())
	if err != nil {
		t.Fatalf("connect to clickhouse %s: %v", s.Addr(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

var insertValuesRE = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+[^()]+(\([^()]*\))?\s*VALUES\b`)

// Start starts the server (again) on the same directory and ports and waits
// until it answers.
func (s *ClickHouseServer) Start() {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Join(s.dir, "log"), 0o755); err != nil {
		s.t.Fatalf("start clickhouse: %v", err)
	}
	if err := s.proc.start(); err != nil {
		s.t.Fatalf("start clickhouse: %v", err)
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.proc.kill()
		s.t.Fatalf("start clickhouse: %v (its log follows at cleanup)", err)
	}
}

// Stop shuts the server down with SIGTERM and waits for it.
func (s *ClickHouseServer) Stop() {
	s.t.Helper()
	if err := s.proc.stop(30 * time.Second); err != nil {
		s.t.Fatalf("stop clickhouse: %v", err)
	}
}

// Kill ends the server with SIGKILL: no flush, no clean shutdown.
func (s *ClickHouseServer) Kill() { s.proc.kill() }

// Freeze stops the server with SIGSTOP, and returns once all its threads
// have stopped: connections stay open and requests hang, so a client cannot
// tell whether an insert landed. Thaw resumes it.
func (s *ClickHouseServer) Freeze() {
	s.t.Helper()
	if err := s.proc.freeze(10 * time.Second); err != nil {
		s.t.Fatalf("freeze clickhouse: %v", err)
	}
}

// Thaw resumes a frozen server with SIGCONT.
func (s *ClickHouseServer) Thaw() {
	s.t.Helper()
	if err := s.proc.signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("thaw clickhouse: %v", err)
	}
}

func (s *ClickHouseServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.exited():
			return fmt.Errorf("clickhouse-server exited during start-up: %v", s.proc.exitErr())
		default:
		}
		if lastErr = s.ping(); lastErr == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer on %s within %v: %w", s.Addr(), timeout, lastErr)
}

func (s *ClickHouseServer) ping() error {
	conn, err := clickhouse.Open(s.Options())
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// logTail is the end of the error log and of the main log, and stdout/stderr
// when the server wrote any (it does when it cannot read its configuration).
func (s *ClickHouseServer) logTail(n int) string {
	var b strings.Builder
	for _, f := range []struct {
		path  string
		lines int
	}{
		{filepath.Join(s.dir, "log", "clickhouse-server.err.log"), n},
		{filepath.Join(s.dir, "log", "clickhouse-server.log"), n / 2},
		{filepath.Join(s.dir, "stdout.log"), n / 2},
	} {
		if tail := stripLogBanner(fileTail(f.path, f.lines)); tail != "" {
			fmt.Fprintf(&b, "==> %s <==\n%s\n", f.path, tail)
		}
	}
	return b.String()
}

// stripLogBanner drops the lines the server prints to stdout at every start,
// which say nothing but where the logs are.
func stripLogBanner(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "Logging information to ") && !strings.HasPrefix(l, "Logging errors to ") {
			keep = append(keep, l)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// fileTail is the last n lines of a file, "" if it is missing or empty.
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
