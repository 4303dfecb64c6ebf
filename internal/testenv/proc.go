package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a server child that can be stopped and started again. It runs
// in a process group of its own so that signals reach anything it forks.
// Safe for concurrent use: a test may freeze a server from one goroutine while
// another reads its PID.
type process struct {
	name string
	path string
	args []string
	env  []string // added to the test's environment
	out  string   // file collecting the child's stdout and stderr

	mu  sync.Mutex
	cur *run // nil until the first start
}

type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the child has been reaped
	err  error         // from Wait; read only after done
}

func (r *run) running() bool {
	if r == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (p *process) current() *run {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.running() {
		return fmt.Errorf("%s: already running", p.name)
	}
	out, err := os.OpenFile(p.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = out, out
	// Pdeathsig kills the child if the test binary dies without cleanups (a
	// -timeout panic, a crash). It fires when the forking thread exits, which
	// Go threads do not do unless locked to a goroutine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	p.cur = r
	return nil
}

// exited is closed when the current child ends; nil before the first start.
func (p *process) exited() <-chan struct{} {
	if r := p.current(); r != nil {
		return r.done
	}
	return nil
}

// exitErr says how the current child ended; call after exited is closed.
func (p *process) exitErr() error {
	if r := p.current(); r != nil {
		<-r.done
		return r.err
	}
	return nil
}

func (p *process) pid() int {
	if r := p.current(); r != nil {
		return r.cmd.Process.Pid
	}
	return 0
}

// signal sends sig to the child's whole process group.
func (p *process) signal(sig syscall.Signal) error {
	r := p.current()
	if !r.running() {
		return fmt.Errorf("%s: not running", p.name)
	}
	if err := syscall.Kill(-r.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: signal %v: %w", p.name, sig, err)
	}
	return nil
}

// freeze stops the child's group with SIGSTOP and waits until every thread of
// the child has stopped. SIGSTOP alone is not enough: the kernel stops a
// multi-threaded process one thread at a time, as each is scheduled, and on a
// busy machine the others keep answering requests for a while.
func (p *process) freeze(timeout time.Duration) error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		states, err := threadStates(p.pid())
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if strings.Trim(states, "Tt") == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: threads not stopped within %v of SIGSTOP (states %q)", p.name, timeout, states)
		}
		time.Sleep(time.Millisecond)
	}
}

// threadStates is the state letter (R, S, D, T, ...) of each thread of pid.
func threadStates(pid int) (string, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return "", fmt.Errorf("no threads under /proc/%d/task", pid)
	}
	var b strings.Builder
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		// "pid (comm) S ...": comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
			b.WriteByte(data[i+2])
		}
	}
	return b.String(), nil
}

// stop asks the child to exit (SIGTERM) and kills it if it has not within
// grace. A frozen child is thawed first, or it could not act on SIGTERM.
func (p *process) stop(grace time.Duration) error {
	r := p.current()
	if !r.running() {
		return nil
	}
	_ = p.signal(syscall.SIGTERM)
	_ = p.signal(syscall.SIGCONT)
	select {
	case <-r.done:
		return nil
	case <-time.After(grace):
	}
	p.kill()
	return fmt.Errorf("%s: did not exit within %v of SIGTERM; killed", p.name, grace)
}

// kill ends the whole group with SIGKILL and waits for the child. Only while
// the child lives: once it is reaped its PID, and so the group ID, may belong
// to an unrelated process.
func (p *process) kill() {
	r := p.current()
	if !r.running() {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}
