package testenv

import (
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// FaultySMTP is a real aiosmtpd server whose handler answers DATA as its mode
// says: "ok" (stores the message), "451" (temporary failure), "550"
// (permanent), or "hang" (never answers). The mode can change at any time.
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
    async def handle_DATA(self, server, session, envelope):
        mode = open(os.path.join(self.d, "mode")).read().strip()
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode in ("451", "550"):
            return mode + (" 4.3.0 try again later" if mode == "451" else " 5.7.1 rejected")
        name = os.path.join(self.d, "msgs", "%d.eml" % time.time_ns())
        with open(name + ".tmp", "wb") as f:
            f.write(envelope.content)
        os.rename(name + ".tmp", name)
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

// Set changes how DATA is answered from now on.
func (f *FaultySMTP) Set(t testing.TB, mode string) {
	if err := os.WriteFile(f.mode, []byte(mode), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Messages returns what was accepted, oldest first.
func (f *FaultySMTP) Messages(t testing.TB) []*mail.Message {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(f.messages, "*.eml"))
	sort.Strings(files)
	var out []*mail.Message
	for _, p := range files {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mail.ReadMessage(fh)
		fh.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}
