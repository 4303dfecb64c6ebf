// Package latency measures the collector's write-to-commit latency: the time
// from a line being appended to a log file until the store has acknowledged
// the insert holding it. Run it through bench/write-to-commit.sh.
//
// The real collector (package collector, in this process) ships one file to a
// real store (the embedded engine, or a ClickHouse 18.16 server with
// BENCH_STORE=server) while a writer appends one line at a time at random
// intervals: a quiet site (a line every 1 to 3 s) and a busy one (about 200
// lines/s, exponential gaps). The commit is seen by wrapping the store the
// collector is given (collector.Inserter): the moment its Insert returns
// without error, every written line up to the batch's last offset is
// committed. Nothing in the collector is changed or polled for it, and it
// counts the store's acknowledgement itself, not the metric updated after it.
//
// BenchmarkCPU measures what the wait at the end of a file costs: the
// process's CPU time with many idle files, and with one busy file, against a
// store that acknowledges at once (so the engine's CPU is not in it).
package latency

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/collector"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// A load is how the writer appends: gap returns the wait before each line.
type load struct {
	name  string
	lines int
	gap   func(r *rand.Rand) time.Duration
}

func loads() []load {
	quiet, busy := envInt("BENCH_QUIET_LINES", 60), envInt("BENCH_BUSY_LINES", 2000)
	return []load{
		{"quiet", quiet, func(r *rand.Rand) time.Duration { return time.Second + time.Duration(r.Int64N(int64(2*time.Second))) }},
		{"busy", busy, func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * float64(5*time.Millisecond)) }},
	}
}

func BenchmarkWriteToCommit(b *testing.B) {
	backend := os.Getenv("BENCH_STORE")
	if backend == "" {
		backend = "embedded"
	}
	st := testenv.NewDatabase(b, backend).Open(b)
	delays := []time.Duration{time.Second, 50 * time.Millisecond}
	fmt.Printf("store %s; Poll 250ms (default); latency from the line's write to the store's ack of its insert\n", backend)
	fmt.Printf("%-6s %-10s %-6s %6s %9s %9s %9s %9s %8s %9s\n", "load", "BatchDelay", "wait", "lines", "p50", "p95", "max", "mean", "inserts", "insert")
	for _, delay := range delays {
		for _, l := range loads() {
			if !selected(fmt.Sprintf("%s-%s", l.name, delay)) {
				continue
			}
			// The modes take turns on the same load, so a drift of the
			// machine (other jobs) touches each alike.
			for _, m := range pick(modes) {
				site := fmt.Sprintf("%s-%s-%s", l.name, delay, m.name)
				lat, inserts := run(b, st, site, l, delay, m.tune)
				slices.Sort(lat)
				fmt.Printf("%-6s %-10s %-6s %6d %9s %9s %9s %9s %8d %9s\n", l.name, delay, m.name, len(lat),
					ms(pct(lat, 50)), ms(pct(lat, 95)), ms(lat[len(lat)-1]), ms(mean(lat)), len(inserts), ms(mean(inserts)))
				b.ReportMetric(float64(pct(lat, 50))/1e6, site+"_p50_ms")
				b.ReportMetric(float64(pct(lat, 95))/1e6, site+"_p95_ms")
			}
		}
	}
}

// run ships one fresh file of site written with l, and returns each line's
// write-to-commit latency and how long each insert took in the store (the
// first line, which opens the file, and its insert aside).
func run(b *testing.B, st collector.Inserter, site string, l load, delay time.Duration, tune func(*collector.Options)) (lat, inserts []time.Duration) {
	dir := b.TempDir()
	path := filepath.Join(dir, "access.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tr := &tracker{ins: st, acked: make(chan struct{}, 1)}
	opts := collector.Options{
		Sources:    []collector.Source{{Glob: path, Site: site, Format: "combined"}},
		BatchDelay: delay, StateDir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tune != nil {
		tune(&opts)
	}
	c, err := collector.New(tr, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()

	rng := rand.New(rand.NewPCG(uint64(len(site)), 7))
	gen := loggen.New(loggen.Options{Seed: rng.Uint64()})
	var off int64
	var buf []byte
	write := func() {
		buf, _ = gen.Line(buf[:0], time.Now())
		tr.wrote(off, time.Now())
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		off += int64(len(buf))
	}
	// The first line gives the file its identity; once it is committed the
	// collector has the file open and is waiting at its end.
	write()
	tr.wait(b, 1, time.Minute)
	time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
	for range l.lines {
		time.Sleep(l.gap(rng))
		write()
	}
	tr.wait(b, l.lines+1, time.Minute)
	lat, inserts = tr.latencies()
	return lat[1:], inserts[1:]
}

// tracker is the store as the collector sees it, noting when each insert is
// acknowledged.
type tracker struct {
	ins   collector.Inserter
	acked chan struct{}

	mu      sync.Mutex
	writes  []write // in file order
	n       int     // writes[:n] are committed
	lat     []time.Duration
	inserts []time.Duration // how long each insert took in the store
}

type write struct {
	off int64
	at  time.Time
}

func (t *tracker) wrote(off int64, at time.Time) {
	t.mu.Lock()
	t.writes = append(t.writes, write{off, at})
	t.mu.Unlock()
}

func (t *tracker) Insert(ctx context.Context, b *sink.Batch) error {
	t0 := time.Now()
	err := t.ins.Insert(ctx, b)
	if err != nil {
		return err
	}
	now := time.Now()
	t.mu.Lock()
	t.inserts = append(t.inserts, now.Sub(t0))
	for t.n < len(t.writes) && t.writes[t.n].off <= b.Last {
		t.lat = append(t.lat, now.Sub(t.writes[t.n].at))
		t.n++
	}
	t.mu.Unlock()
	select {
	case t.acked <- struct{}{}:
	default:
	}
	return nil
}

func (t *tracker) committed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *tracker) wait(b *testing.B, n int, timeout time.Duration) {
	deadline := time.After(timeout)
	for t.committed() < n {
		select {
		case <-t.acked:
		case <-deadline:
			b.Fatalf("%d of %d lines committed after %s", t.committed(), n, timeout)
		}
	}
}

func (t *tracker) latencies() (lat, inserts []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lat), slices.Clone(t.inserts)
}

func (t *tracker) Settle(ctx context.Context, source uint64) (int64, bool, error) {
	return t.ins.Settle(ctx, source)
}
func (t *tracker) Committed(ctx context.Context) (sink.Progress, error) { return t.ins.Committed(ctx) }
func (t *tracker) Holds(ctx context.Context, source uint64, span sink.Span) (sink.Held, error) {
	return t.ins.Holds(ctx, source, span)
}
func (t *tracker) MarkProgress(ctx context.Context, site string, source uint64, last int64) error {
	return t.ins.MarkProgress(ctx, site, source, last)
}
func (t *tracker) RecordSource(ctx context.Context, site string, id uint64, path string) error {
	return t.ins.RecordSource(ctx, site, id, path)
}
func (t *tracker) Deduplicates() bool { return t.ins.Deduplicates() }
func (t *tracker) ClaimSources(ctx context.Context, c sink.Claim) (time.Time, []sink.Owner, error) {
	return t.ins.ClaimSources(ctx, c)
}

// BenchmarkCPU is the process's CPU time while the collector waits at the end
// of BENCH_IDLE_FILES idle files, and while it follows one busy file (1,000
// lines/s, BatchDelay 1s and 50ms), each for BENCH_CPU_SECONDS, per wait
// mode, BENCH_CPU_ROUNDS times. The store acknowledges every insert at once.
func BenchmarkCPU(b *testing.B) {
	files, secs, rounds := envInt("BENCH_IDLE_FILES", 200), envInt("BENCH_CPU_SECONDS", 10), envInt("BENCH_CPU_ROUNDS", 3)
	window := time.Duration(secs) * time.Second
	fmt.Printf("CPU time of the process over %s, median of %d rounds (the modes take turns)\n", window, rounds)
	fmt.Printf("%-14s %-8s %6s %12s %12s %10s\n", "case", "wait", "files", "CPU ms/s", "ms/s/file", "batches/s")
	type cpuCase struct {
		name  string
		files int
		every time.Duration // a line appended to one file this often; 0: none
		delay time.Duration
	}
	cases := []cpuCase{
		// BatchDelay only ships the files' first lines quickly here.
		{"cpu-idle", files, 0, 10 * time.Millisecond},
		{"cpu-busy-1s", 1, time.Millisecond, time.Second},
		{"cpu-busy-50ms", 1, time.Millisecond, 50 * time.Millisecond},
	}
	for _, cc := range cases {
		if !selected(cc.name) {
			continue
		}
		got, batches := map[string][]float64{}, map[string][]float64{}
		for range rounds {
			for _, m := range pick(cpuModes()) {
				cpu, n := cpuRun(b, cc.files, cc.every, cc.delay, window, m.tune)
				got[m.name] = append(got[m.name], float64(cpu)/1e6/window.Seconds())
				batches[m.name] = append(batches[m.name], float64(n)/window.Seconds())
			}
		}
		for _, m := range pick(cpuModes()) {
			msPerSec := median(got[m.name])
			fmt.Printf("%-14s %-8s %6d %12.2f %12.3f %10.1f\n", cc.name, m.name, cc.files, msPerSec, msPerSec/float64(cc.files), median(batches[m.name]))
			b.ReportMetric(msPerSec, cc.name+"_"+m.name+"_cpu_ms/s")
		}
	}
}

func median(x []float64) float64 {
	slices.Sort(x)
	return x[len(x)/2]
}

// cpuRun opens n files of one line each and, once every line is shipped (so
// that no file holds or waits for a batch), measures the process's CPU over
// window; with every > 0 the first file is appended a line every that long
// meanwhile (the writer's CPU is in it, the same for each mode).
func cpuRun(b *testing.B, n int, every, delay, window time.Duration, tune func(*collector.Options)) (cpu time.Duration, batches int) {
	dir := b.TempDir()
	gen := loggen.New(loggen.Options{Seed: 1})
	var buf []byte
	for i := range n {
		buf, _ = gen.Line(buf[:0], time.Now())
		// A directory each, as a vhost's logs often are: the scan looks
		// for each file's rotated siblings in its directory, and 200 files
		// in one would make the scan, not the wait, the idle cost.
		sub := filepath.Join(dir, fmt.Sprintf("%04d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "access.log"), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	fs := &nullStore{}
	opts := collector.Options{
		Sources:    []collector.Source{{Glob: filepath.Join(dir, "*", "access.log"), Site: "cpu", Format: "combined"}},
		BatchDelay: delay,
		// Enough small batches for every file's first line at once: the
		// files are idle sooner, whatever the wait.
		MaxPending: min(n, 64), BatchRows: 1000,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tune != nil {
		tune(&opts)
	}
	c, err := collector.New(fs, opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for fs.lines() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d files shipped after a minute", fs.lines(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // settled: every file idle at its end
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if every <= 0 {
			return
		}
		f, err := os.OpenFile(filepath.Join(dir, "0000", "access.log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				buf, _ = gen.Line(buf[:0], time.Now())
				f.Write(buf)
			}
		}
	}()
	before, batches0 := cpuTime(), fs.batches()
	time.Sleep(window)
	cpu, batches = cpuTime()-before, fs.batches()-batches0
	close(stop)
	<-wrote
	return cpu, batches
}

// nullStore acknowledges every insert at once, holds nothing, and counts the
// lines and batches.
type nullStore struct {
	mu         sync.Mutex
	n, inserts int
}

func (s *nullStore) lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *nullStore) batches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inserts
}

func (s *nullStore) Insert(_ context.Context, b *sink.Batch) error {
	s.mu.Lock()
	s.n += b.Lines
	s.inserts++
	s.mu.Unlock()
	return nil
}

func (s *nullStore) RecordSource(context.Context, string, uint64, string) error { return nil }
func (s *nullStore) Settle(context.Context, uint64) (int64, bool, error)        { return 0, false, nil }
func (s *nullStore) Committed(context.Context) (sink.Progress, error) {
	return sink.Progress{Offsets: map[uint64]int64{}, Sites: map[string]bool{}}, nil
}
func (s *nullStore) Holds(context.Context, uint64, sink.Span) (sink.Held, error) {
	return sink.Held{}, nil
}
func (s *nullStore) MarkProgress(context.Context, string, uint64, int64) error { return nil }
func (s *nullStore) Deduplicates() bool                                        { return true }
func (s *nullStore) ClaimSources(context.Context, sink.Claim) (time.Time, []sink.Owner, error) {
	return time.Now(), nil, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, (len(sorted)*p+99)/100-1)]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms" }

// pick is the modes whose name matches the regexp BENCH_MODES (all when
// unset).
func pick(ms []mode) []mode {
	re := os.Getenv("BENCH_MODES")
	var out []mode
	for _, m := range ms {
		if ok, err := regexp.MatchString(re, m.name); re == "" || ok && err == nil {
			out = append(out, m)
		}
	}
	return out
}

// selected reports whether a case (quiet-1s, busy-50ms, idle...) matches the
// regexp BENCH_CASES (all when unset).
func selected(name string) bool {
	re := os.Getenv("BENCH_CASES")
	ok, err := regexp.MatchString(re, name)
	return re == "" || ok && err == nil
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
