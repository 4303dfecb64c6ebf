// Package testenv starts real servers for tests: ClickHouse 18.16, ZooKeeper
// 3.8, an SMTP server (aiosmtpd) and the embedded engine (libchdb.so). Each
// runs as a child process on free loopback ports in t.TempDir() and is stopped
// when the test ends. scripts/setup.sh installs them; a missing one skips the
// test, or fails it when CI is set, so CI cannot go green by skipping.
package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Require skips the test (fails it when the environment variable CI is set) if
// path, the component called what, is missing.
func Require(t testing.TB, what, path string) {
	t.Helper()
	require(t, what, path, "run scripts/setup.sh to install it")
}

// RequireChdb is Require for libchdb.so; it returns the library's path.
func RequireChdb(t testing.TB) string {
	t.Helper()
	lib := ChdbLibPath()
	require(t, "libchdb.so", lib, "run scripts/setup.sh --embedded-only, or set HITCOUNT_CHDB_LIB to its path")
	return lib
}

// require is the one place that decides between skipping and failing: a CI
// run must not turn green by skipping everything real.
func require(t testing.TB, what, path, hint string) {
	t.Helper()
	_, err := os.Stat(path)
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s not found at %s: %s", what, path, hint)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// ChdbLibPath is where tests find libchdb.so: $HITCOUNT_CHDB_LIB, or else
// .cache/chdb/current/libchdb.so in the repository root.
func ChdbLibPath() string {
	if p := os.Getenv("HITCOUNT_CHDB_LIB"); p != "" {
		return p
	}
	return filepath.Join(repoRoot(), ".cache", "chdb", "current", "libchdb.so")
}

// repoRoot walks up from the working directory (a test's package directory) to
// the directory holding go.mod; "." if there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// freePorts returns n distinct free loopback ports. Each listener stays open
// until all are chosen so the kernel cannot hand out one port twice; another
// process may still take one before the server binds it, which the server
// then reports as "Address already in use".
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// RefusedPort is a loopback port that refuses every connection for as long as
// t runs: a socket bound to it that never listens, so the port stays taken
// (a port merely closed after net.Listen may be handed to a parallel test's
// server before the connection that should be refused is tried).
func RefusedPort(t testing.TB) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("refused port: socket: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("refused port: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("refused port: %v", err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
