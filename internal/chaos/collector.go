package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Collector is the real collector binary run as an operator runs it
// (collector -config FILE), started, killed and stopped by the nemesis. Its
// stdout and stderr go to one log file across restarts.
type Collector struct {
	Bin     string
	Config  string
	LogPath string
	HTTP    string // its http.listen, for /metrics

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{}
	waitErr    error
	signaled   bool  // the harness signalled the current process
	outputFrom int64 // the log's size when the current process started
	starts     int
}

// Start starts the collector; it must not be running.
func (c *Collector) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runningLocked() {
		return errors.New("collector already running")
	}
	out, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	c.starts++
	fmt.Fprintf(out, "=== chaos: collector start #%d at %s\n", c.starts, time.Now().Format(time.RFC3339Nano))
	if fi, err := out.Stat(); err == nil {
		c.outputFrom = fi.Size()
	}
	cmd := exec.Command(c.Bin, "-config", c.Config, "-log-level", "info")
	cmd.Stdout, cmd.Stderr = out, out
	// If the test binary dies without its cleanups, so does the collector.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start collector: %w", err)
	}
	done := make(chan struct{})
	c.cmd, c.done, c.signaled, c.waitErr = cmd, done, false, nil
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		c.waitErr = err
		c.mu.Unlock()
		close(done)
	}()
	return nil
}

func (c *Collector) runningLocked() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// Running reports whether the collector process is alive.
func (c *Collector) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runningLocked()
}

// Starts is how many times the collector was started.
func (c *Collector) Starts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// ExitedOnItsOwn reports a collector that ended without being signalled,
// with how it ended; it is then not running.
func (c *Collector) ExitedOnItsOwn() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil || c.runningLocked() || c.signaled {
		return false, nil
	}
	c.signaled = true // reported once
	return true, c.waitErr
}

func (c *Collector) signal(sig syscall.Signal) (chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.runningLocked() {
		return c.done, false
	}
	c.signaled = true
	_ = c.cmd.Process.Signal(sig)
	return c.done, true
}

// Kill is kill -9; it returns once the process is gone.
func (c *Collector) Kill() {
	if done, ok := c.signal(syscall.SIGKILL); ok {
		<-done
	}
}

// Term stops the collector with SIGTERM, as systemd does, and waits for it.
// The collector promises to flush and exit 0: anything else (another exit
// status, or still running after timeout, when it is killed) is an error.
func (c *Collector) Term(timeout time.Duration) error {
	// A process signalled before its main() installed the handler dies of
	// the signal having read nothing, as any Go program would (systemd counts
	// that a clean stop). The schedule can restart and stop it within
	// milliseconds (seeds 20261125 and 4795011254917538238, the second under
	// a loaded CI machine), so wait for its first line of output, which it
	// writes after the handler is in place and before it reads a file; a
	// collector that printed nothing by the signal may die of it.
	c.mu.Lock()
	running, from := c.runningLocked(), c.outputFrom
	c.mu.Unlock()
	started := !running || c.printedSince(from, 5*time.Second)
	done, ok := c.signal(syscall.SIGTERM)
	if !ok {
		return nil
	}
	select {
	case <-done:
	case <-time.After(timeout):
		c.Kill()
		return fmt.Errorf("collector still running %v after SIGTERM; killed", timeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waitErr != nil {
		if !started && isSignal(c.waitErr, syscall.SIGTERM) {
			return nil // before its first line: see above
		}
		return fmt.Errorf("collector exited with %v after SIGTERM (want 0)", c.waitErr)
	}
	return nil
}

// printedSince waits until the log file has grown past from (the collector
// wrote a line), at most timeout, and reports whether it did.
func (c *Collector) printedSince(from int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if fi, err := os.Stat(c.LogPath); err == nil && fi.Size() > from {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isSignal reports whether err is a process's death by sig.
func isSignal(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Metrics reads the collector's /metrics and sums every sample of each
// metric name (over its labels).
func (c *Collector) Metrics(ctx context.Context) (map[string]float64, error) {
	sums, _, err := c.MetricsByLabels(ctx)
	return sums, err
}

// MetricsByLabels reads the collector's /metrics: the sum of each metric
// name's samples, and each sample by name and label set ({...} as printed).
func (c *Collector) MetricsByLabels(ctx context.Context) (map[string]float64, map[string]map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.HTTP+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	byLabels := map[string]map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < 0 {
				continue
			}
			labels = line[i : j+1]
			rest, ok = strings.TrimSpace(line[j+1:]), true
		}
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
		if byLabels[name] == nil {
			byLabels[name] = map[string]float64{}
		}
		byLabels[name][labels] = v
	}
	return out, byLabels, sc.Err()
}

// LogContains reports whether the collector's log has a line containing
// every one of parts.
func (c *Collector) LogContains(parts ...string) bool {
	f, err := os.Open(c.LogPath)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
next:
	for sc.Scan() {
		for _, p := range parts {
			if !strings.Contains(sc.Text(), p) {
				continue next
			}
		}
		return true
	}
	return false
}

var (
	logTime   = regexp.MustCompile(`^time=(\S+) level=(\w+) `)
	logPath   = regexp.MustCompile(` path=(\S+)`)
	logSource = regexp.MustCompile(` source_id=(\w+)`)
)

// warning is a warning or error the collector logged about a file.
type warning struct {
	at   time.Time
	path string
}

// Warnings are the collector's warnings and errors that name a file, by
// its path or by its source id (a file being opened waits on the store by
// its source id), in the order logged.
func (c *Collector) Warnings() []warning {
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	// Source id -> path, from every "reading log file" line first: a source
	// waits on a replica (its settle fails) before it is opened, and those
	// warnings name only its id (seed 7949403517025150028: vhosts/a's
	// settles failed for 9 s before its first read, and the wait was taken
	// for a stall).
	paths := map[uint64]string{}
	for _, line := range lines {
		if p, id := logPath.FindStringSubmatch(line), logSource.FindStringSubmatch(line); p != nil && id != nil {
			if n, err := strconv.ParseUint(id[1], 10, 64); err == nil { // slog prints a uint64 in decimal
				if _, ok := paths[n]; !ok {
					paths[n] = p[1]
				}
			}
		}
	}
	var out []warning
	for _, line := range lines {
		m := logTime.FindStringSubmatch(line)
		if m == nil || m[2] != "WARN" && m[2] != "ERROR" {
			continue
		}
		path := ""
		if p := logPath.FindStringSubmatch(line); p != nil {
			path = p[1]
		} else if id := logSource.FindStringSubmatch(line); id != nil {
			n, _ := strconv.ParseUint(id[1], 10, 64)
			path = paths[n]
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || path == "" {
			continue
		}
		out = append(out, warning{at: at, path: path})
	}
	return out
}

// LogTail is the last n lines of the collector's log.
func (c *Collector) LogTail(n int) string {
	f, err := os.Open(c.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	const window = 256 << 10
	start := max(0, fi.Size()-window)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
