package testenv

import (
	"bytes"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FaultySMTP is a real aiosmtpd server whose handler answers DATA as its mode
// says: "ok" (stores the message), "451" (temporary failure), "550"
// (permanent), "hang" (never answers, stores nothing), "late N" (stores the
// message, then answers 250 only after N seconds, a decimal: a client whose
// timeout is shorter gives up on a message the server has accepted), or
// "drop" (stores the message, then closes the connection without a reply).
// The mode can change at any time; it is read when the client ends DATA.
type FaultySMTP struct {
	port     int
	mode     string
	messages string
}

const faultyHandler = `
import asyncio, os, time
class Handler:
    def __init__(self, d):
        self.d = d
    @classmethod
    def from_cli(cls, parser, *args):
        return cls(*args)
    def store(self, envelope, mode):
        # <arrival ns>-<mode>.eml: when the server had the message, and how
        # it was going to answer.
        name = os.path.join(self.d, "msgs", "%d-%s.eml" % (time.time_ns(), mode))
        with open(name + ".tmp", "wb") as f:
            f.write(envelope.content)
        os.rename(name + ".tmp", name)
    async def handle_DATA(self, server, session, envelope):
        words = open(os.path.join(self.d, "mode")).read().split() or ["ok"]
        mode = words[0]
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode in ("451", "550"):
            return mode + (" 4.3.0 try again later" if mode == "451" else " 5.7.1 rejected")
        self.store(envelope, mode)
        if mode == "late":
            await asyncio.sleep(float(words[1]) if len(words) > 1 else 3600)
        elif mode == "drop":
            # No reply: the connection ends; aiosmtpd then cancels this
            # handler (connection_lost), so the sleep never ends on its own.
            server.transport.close()
            await asyncio.sleep(3600)
        return "250 OK"
`

// StartFaultySMTP starts one in mode "ok", stopped at test end.
func StartFaultySMTP(t testing.TB) *FaultySMTP {
	t.Helper()
	Require(t, "python3 with aiosmtpd", "/usr/bin/python3")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "faulty.py"), []byte(faultyHandler), 0o644); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "msgs"), 0o755)
	f := &FaultySMTP{mode: filepath.Join(dir, "mode"), messages: filepath.Join(dir, "msgs"), port: freePorts(t, 1)[0]}
	f.Set(t, "ok")
	cmd := exec.Command("/usr/bin/python3", "-m", "aiosmtpd", "-n", "-l", loopback(f.port), "-c", "faulty.Handler", dir)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", loopback(f.port)); err == nil {
			c.Close()
			return f
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("faulty SMTP server did not start")
	return nil
}

// Port is the server's port on 127.0.0.1.
func (f *FaultySMTP) Port() int { return f.port }

// Set changes how DATA is answered from now on: a mode of the type's
// comment ("late 12.5" for late).
func (f *FaultySMTP) Set(t testing.TB, mode string) {
	if err := f.SetMode(mode); err != nil {
		t.Fatal(err)
	}
}

// SetMode is Set for a goroutine other than the test's: it returns the
// error.
func (f *FaultySMTP) SetMode(mode string) error {
	tmp := f.mode + ".tmp"
	if err := os.WriteFile(tmp, []byte(mode), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.mode) // the handler never reads a half-written mode
}

// Messages returns what was stored, oldest first.
func (f *FaultySMTP) Messages(t testing.TB) []*mail.Message {
	t.Helper()
	var out []*mail.Message
	for _, a := range f.Arrivals(t) {
		out = append(out, a.Msg)
	}
	return out
}

// Arrival is a message the server stored: when, in which mode ("ok", "late"
// or "drop": with the last two the client got no timely reply), and its file.
type Arrival struct {
	At   time.Time
	Mode string
	Path string
	Msg  *mail.Message
}

// Arrivals returns what was stored, oldest first.
func (f *FaultySMTP) Arrivals(t testing.TB) []Arrival {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(f.messages, "*.eml"))
	sort.Strings(files) // names start with the arrival's nanoseconds, 19 digits
	var out []Arrival
	for _, p := range files {
		a := Arrival{Path: p, Mode: "ok"}
		stem, mode, _ := strings.Cut(strings.TrimSuffix(filepath.Base(p), ".eml"), "-")
		if mode != "" {
			a.Mode = mode
		}
		if ns, err := strconv.ParseInt(stem, 10, 64); err == nil {
			a.At = time.Unix(0, ns)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mail.ReadMessage(bytes.NewReader(data)) // the body stays readable
		if err != nil {
			t.Fatal(err)
		}
		a.Msg = m
		out = append(out, a)
	}
	return out
}

// Dir is the directory stored messages are in (<ns>-<mode>.eml).
func (f *FaultySMTP) Dir() string { return f.messages }
