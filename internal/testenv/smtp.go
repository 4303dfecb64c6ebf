package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

const systemPython = "/usr/bin/python3" // Debian's; python3 on PATH may be another without aiosmtpd

// SMTPServer is an aiosmtpd server that stores every message it accepts in a
// Maildir.
// Its methods fail the test that started it (t.Fatal), so call them from
// that test's goroutine.
type SMTPServer struct {
	t       testing.TB
	port    int
	maildir string
	proc    *process
}

// SMTP starts an SMTP server on a free loopback port, without TLS or auth,
// and stops it when the test ends.
func SMTP(t testing.TB) *SMTPServer {
	t.Helper()
	Require(t, "python3 (Debian's, with python3-aiosmtpd)", systemPython)
	Require(t, "python3-aiosmtpd", "/usr/lib/python3/dist-packages/aiosmtpd")
	dir := t.TempDir()
	s := &SMTPServer{t: t, port: freePorts(t, 1)[0], maildir: filepath.Join(dir, "maildir")}
	s.proc = &process{
		name: "aiosmtpd",
		path: systemPython,
		// -n: aiosmtpd otherwise setuids to nobody, which fails unless run as
		// root and, as root, leaves nobody unable to write to our temp dir.
		args: []string{"-m", "aiosmtpd", "-n", "-l", s.Addr(), "-c", "aiosmtpd.handlers.Mailbox", s.maildir},
		out:  filepath.Join(dir, "aiosmtpd.out"),
	}
	t.Cleanup(func() {
		if err := s.proc.stop(10 * time.Second); err != nil {
			t.Errorf("stop smtp: %v", err)
		}
		if t.Failed() {
			t.Logf("aiosmtpd (%s) output, last lines:\n%s", s.Addr(), fileTail(s.proc.out, 40))
		}
	})
	s.Start()
	return s
}

// Addr is the server's address, host:port.
func (s *SMTPServer) Addr() string { return loopback(s.port) }

// Host is the server's host, 127.0.0.1.
func (s *SMTPServer) Host() string { return "127.0.0.1" }

// Port is the server's port.
func (s *SMTPServer) Port() int { return s.port }

// Maildir is the directory messages are delivered to.
func (s *SMTPServer) Maildir() string { return s.maildir }

// Start starts the server (again) on the same port and Maildir and waits until
// it greets.
func (s *SMTPServer) Start() {
	s.t.Helper()
	if err := s.proc.start(); err != nil {
		s.t.Fatalf("start smtp: %v", err)
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		s.proc.kill()
		s.t.Fatalf("start smtp: %v (its output follows at cleanup)", err)
	}
}

// Stop shuts the server down with SIGTERM and waits for it.
func (s *SMTPServer) Stop() {
	s.t.Helper()
	if err := s.proc.stop(10 * time.Second); err != nil {
		s.t.Fatalf("stop smtp: %v", err)
	}
}

// Messages parses every delivered message, oldest first. The Maildir's files
// are complete once the server has answered the client's end of data.
func (s *SMTPServer) Messages(t testing.TB) []*mail.Message {
	t.Helper()
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	for _, sub := range []string{"new", "cur"} {
		entries, err := os.ReadDir(filepath.Join(s.maildir, sub))
		if err != nil && !os.IsNotExist(err) {
			t.Fatalf("read maildir: %v", err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			files = append(files, file{filepath.Join(s.maildir, sub, e.Name()), info.ModTime()})
		}
	}
	// Maildir names start with the delivery second but their microseconds are
	// not zero-padded, so names alone do not sort by time.
	sort.Slice(files, func(i, j int) bool {
		if !files[i].mod.Equal(files[j].mod) {
			return files[i].mod.Before(files[j].mod)
		}
		return files[i].path < files[j].path
	})
	msgs := make([]*mail.Message, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatalf("read message: %v", err)
		}
		m, err := mail.ReadMessage(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("parse message %s: %v", f.path, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func (s *SMTPServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.exited():
			return fmt.Errorf("aiosmtpd exited during start-up: %v", s.proc.exitErr())
		default:
		}
		if lastErr = smtpGreets(s.Addr()); lastErr == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no greeting on %s within %v: %w", s.Addr(), timeout, lastErr)
}

func smtpGreets(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "220") {
		return fmt.Errorf("greeting %q", strings.TrimSpace(line))
	}
	_, _ = c.Write([]byte("QUIT\r\n"))
	return nil
}
