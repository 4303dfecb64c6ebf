package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/testenv"
)

// The collector's configuration in a run. Batches are small and frequent so
// that a minute holds many inserts for faults to land in.
//
// MaxPending is the README's default, below the number of files every run
// has open (4 busy live logs and their rotated files): N files of any
// activity must progress with any number of batches (finding 1 of issue 14:
// an idle file held a batch, and with fewer batches than files the
// collector stalled). The idle-files kind adds more quiet files than
// MaxPending on purpose.
const (
	BatchRows     = 2000
	BatchDelay    = 200 * time.Millisecond
	MaxPending    = 2
	InsertTimeout = 2 * time.Second
	// ServerDatabase is the database on the server and cluster stores; the
	// embedded store's is always hitcount.
	ServerDatabase = "chaos"
	// PartsToThrow is the server's parts_to_throw_insert under view-fail.
	PartsToThrow = 30
)

// quietFor is how long the collector's counters must stand still, after
// the faults, before it counts as done: longer than a rotated file's idle
// time (5 s) plus a batch delay and a scan.
const quietFor = 12 * time.Second

// maxFinal bounds the wait for quiet.
const maxFinal = 150 * time.Second

// ServerOptions are the options the ClickHouse server of a run needs: with
// view-fail, a parts_to_throw_insert low enough for a rollup whose merges
// are stopped to refuse inserts within seconds (parts_to_delay_insert the
// same, or 18.16 delays instead of refusing).
func ServerOptions(ks []Kind) []testenv.CHOption {
	if !hasKind(ks, ViewFail) {
		return nil
	}
	n := strconv.Itoa(PartsToThrow)
	return []testenv.CHOption{testenv.WithConfigXML("<merge_tree><parts_to_delay_insert>" + n +
		"</parts_to_delay_insert><parts_to_throw_insert>" + n + "</parts_to_throw_insert></merge_tree>")}
}

// Env is what a run needs from its test.
type Env struct {
	Store  string // "server", "embedded" or "cluster"
	Bin    string // the collector binary
	Dir    string // the run's directory (logs, state, config, embedded data)
	Server *testenv.ClickHouseServer
	// Replicas are the cluster store's servers, in the order of the
	// collector's clickhouse.addr (ClusterShape).
	Replicas []Replica
	ChdbLib  string
	Settings Settings
	Logf     func(format string, args ...any)
}

// Result is what a run did and found.
type Result struct {
	Settings Settings
	Store    string
	Schedule Schedule
	Ran      map[Kind]int // faults carried out
	Idle     map[Kind]int // scheduled, but no target existed then
	Lines    uint64       // lines written, all streams
	Streams  int
	Starts   int // collector starts
	// Report is the invariant's verdict; on the cluster store, the first
	// replica's (Replicas has each one's).
	Report   *Report
	Replicas []*ReplicaResult
	// Shape is the cluster store's replicas in the collector's address
	// order, "[r1, r2]" or "[r2, r1]".
	Shape string
	// Liveness is what the collector did during each replica fault
	// (cluster store).
	Liveness []Liveness
	// Problems are failures outside the per-stream invariant: the collector
	// exiting on its own or not stopping cleanly, not going quiet, a fault
	// the harness could not carry out.
	Problems []string
	Faults   time.Duration // the fault phase
	Final    time.Duration // waiting for quiet
	CheckDur time.Duration
	LogTail  string // the collector's last log lines, on failure
	// Artifacts is where the run's files were kept, on failure.
	Artifacts string
}

// Failed reports whether the run found anything wrong.
func (r *Result) Failed() bool {
	if len(r.Problems) > 0 || r.Report == nil || len(r.Report.Failed()) > 0 {
		return true
	}
	for _, rep := range r.Replicas {
		if len(rep.Report.Failed()) > 0 {
			return true
		}
	}
	return false
}

// Summary is the run's output: seed, faults per kind, lines, per-stream
// invariant.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos %s store: %s\n", r.Store, r.Settings.Reproduce(r.Store))
	if r.Store == StoreCluster {
		fmt.Fprintf(&b, "collector's clickhouse.addr: %s\n", r.Shape)
	}
	fmt.Fprintf(&b, "faults run (scheduled) per kind:")
	sched := r.Schedule.Count()
	var ks []string
	for k := range sched {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(&b, " %s %d", k, r.Ran[Kind(k)])
		if r.Ran[Kind(k)] != sched[Kind(k)] {
			fmt.Fprintf(&b, " (%d)", sched[Kind(k)])
		}
	}
	if len(ks) == 0 {
		b.WriteString(" none")
	}
	fmt.Fprintf(&b, "\nlines written: %d in %d streams; collector started %d times; faults %.0fs, quiet after %.0fs, check %.1fs\n",
		r.Lines, r.Streams, r.Starts, r.Faults.Seconds(), r.Final.Seconds(), r.CheckDur.Seconds())
	switch {
	case len(r.Replicas) > 0:
		for _, rep := range r.Replicas {
			fmt.Fprintf(&b, "replica %s (synced in %.1fs):\n", rep.Name, rep.SyncDur.Seconds())
			for _, t := range sortedKeys(rep.Tables) {
				fmt.Fprintf(&b, "  %s: %s\n", t, rep.Tables[t])
			}
			b.WriteString(rep.Report.Table())
		}
	case r.Report != nil:
		b.WriteString(r.Report.Table())
	}
	b.WriteString(livenessTable(r.Liveness))
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "PROBLEM: %s\n", p)
	}
	return b.String()
}

// FailureMessage says precisely what failed, with the seed.
func (r *Result) FailureMessage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run on the %s store failed; reproduce with %s\n", r.Store, r.Settings.Reproduce(r.Store))
	failed := func(where string, rep *Report) {
		for _, s := range rep.Failed() {
			fmt.Fprintf(&b, "%sstream %s (%s): written %d, expected rows %d, rows %d, distinct (source_id, offset) %d, distinct lines %d, hits_1m %d: %s\n",
				where, s.Name, s.File, s.Written, s.Expected, s.Rows, s.Distinct, s.Seqs, s.Rollup, strings.Join(s.Problems, "; "))
		}
	}
	switch {
	case len(r.Replicas) > 0:
		for _, rep := range r.Replicas {
			failed("replica "+rep.Name+": ", rep.Report)
			for _, p := range rep.Parts {
				fmt.Fprintf(&b, "replica %s: %s\n", rep.Name, p)
			}
		}
	case r.Report != nil:
		failed("", r.Report)
	default:
		b.WriteString("no invariant check (see problems)\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	if r.Artifacts != "" {
		fmt.Fprintf(&b, "the run's logs, collector log and state are kept in %s\n", r.Artifacts)
	}
	return b.String()
}

type runner struct {
	t     testing.TB
	env   Env
	res   *Result
	coll  *Collector
	logs  *Logs
	mu    sync.Mutex
	start time.Time
	// killedReplica: a replica was killed (kill -9) during the run; read
	// and written on the nemesis lane's goroutine, the test's.
	killedReplica bool
	// windows are the replica faults' stretches, for Liveness.
	windows []window
}

func (r *runner) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.res.Problems = append(r.res.Problems, msg)
	r.env.Logf("%6.1fs PROBLEM: %s", time.Since(r.start).Seconds(), msg)
}

func (r *runner) ran(k Kind, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if what == "" {
		r.res.Idle[k]++
		return
	}
	r.res.Ran[k]++
	r.env.Logf("%6.1fs %s: %s", time.Since(r.start).Seconds(), k, what)
}

// Run carries out one chaos run: the workload, the schedule, the wait for
// quiet, the check. It runs on the test's goroutine (the server's faults
// fail the test from there when they cannot be carried out).
func Run(t testing.TB, env Env) *Result {
	t.Helper()
	set := env.Settings
	res := &Result{Settings: set, Store: env.Store, Ran: map[Kind]int{}, Idle: map[Kind]int{}}
	r := &runner{t: t, env: env, res: res}
	res.Schedule = NewSchedule(set.Seed, set.Duration, set.KindsFor(env.Store), env.Store, InsertTimeout)
	env.Logf("%s", res.Schedule)
	if env.Store == StoreCluster {
		res.Shape = replicaNames(env.Replicas)
		env.Logf("cluster store: the collector's clickhouse.addr lists %s", res.Shape)
	}
	if set.Kinds == nil {
		for _, k := range AllKinds() {
			b, ok := Blocked[k]
			switch {
			case !ok || !b.On(env.Store):
			case b.Stalls:
				env.Logf("in the default, its stalls reported, not failed (CHAOS_FAULTS=all fails them): %s: %s", k, b.Finding)
			default:
				env.Logf("not in the default, fails today (CHAOS_FAULTS=all runs it): %s: %s", k, b.Finding)
			}
		}
	}

	r.logs = NewLogs(filepath.Join(env.Dir, "logs"), set.Seed)
	defer r.logs.Close()
	lay, err := r.logs.Setup(res.Schedule.Kinds, MaxPending)
	if err != nil {
		t.Fatalf("chaos: set up the logs: %v", err)
	}
	httpAddr, err := freeAddr()
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	cfgPath := filepath.Join(env.Dir, "hitcount.yaml")
	if err := os.WriteFile(cfgPath, []byte(r.config(lay, httpAddr)), 0o644); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	r.coll = &Collector{Bin: env.Bin, Config: cfgPath, LogPath: filepath.Join(env.Dir, "collector.log"), HTTP: httpAddr}
	t.Cleanup(r.coll.Kill)

	r.start = time.Now()
	if err := r.coll.Start(); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	ctx, stopWriters := context.WithCancel(context.Background())
	defer stopWriters()
	r.logs.Start(ctx)
	var smp *sampler
	var watch *replicaWatch
	sampling, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	var sampled sync.WaitGroup
	if env.Store == StoreCluster {
		smp, watch = &sampler{}, &replicaWatch{}
		sampled.Add(2)
		go func() { defer sampled.Done(); smp.run(sampling, r) }()
		go func() { defer sampled.Done(); watch.run(sampling, r) }()
	}
	var lanes sync.WaitGroup
	if lay.LatePath != "" {
		lanes.Add(1)
		go func() { defer lanes.Done(); r.releaseLate(ctx, lay.LatePath) }()
	}
	lanes.Add(1)
	go func() { defer lanes.Done(); r.fileLane(ctx) }()
	r.nemesisLane()
	r.sleepUntil(set.Duration)
	stopWriters()
	lanes.Wait()
	r.logs.Wait()
	res.Faults = time.Since(r.start)
	for _, err := range r.logs.Errors() {
		r.problem("harness: %v", err)
	}
	for _, s := range r.logs.Streams() {
		res.Lines += s.Written()
	}
	res.Streams = len(r.logs.Streams())
	env.Logf("%6.1fs faults over; %d lines written in %d streams; waiting for the collector to go quiet",
		time.Since(r.start).Seconds(), res.Lines, res.Streams)

	t0 := time.Now()
	if env.Store == StoreCluster {
		r.restoreReplicas()
	}
	r.waitQuiet()
	stopSampling()
	sampled.Wait()
	if smp != nil {
		res.Liveness = r.liveness(smp)
		if err := smp.write(filepath.Join(env.Dir, "samples.txt"), r.logs.Root); err != nil {
			r.problem("harness: %v", err)
		}
		if err := watch.write(filepath.Join(env.Dir, "replicas.txt")); err != nil {
			r.problem("harness: %v", err)
		}
	}
	if err := r.coll.Term(2 * time.Minute); err != nil {
		r.problem("final stop: %v", err)
	}
	res.Final = time.Since(t0)
	res.Starts = r.coll.Starts()

	t0 = time.Now()
	if env.Store == StoreCluster {
		res.Replicas, err = r.checkCluster(lay)
		if len(res.Replicas) > 0 {
			res.Report = res.Replicas[0].Report
		}
	} else {
		res.Report, err = r.check(lay)
	}
	res.CheckDur = time.Since(t0)
	if err != nil {
		r.problem("check: %v", err)
	}
	if res.Failed() {
		res.LogTail = r.coll.LogTail(60)
	}
	// CHAOS_KEEP=1 keeps a passing run's files too (to read what the
	// collector logged through a fault that did not fail the check).
	if res.Failed() || os.Getenv("CHAOS_KEEP") != "" {
		res.Artifacts = r.keep()
		r.keepReplicaLogs(res.Artifacts)
		env.Logf("the run's files are kept in %s", res.Artifacts)
	}
	return res
}

// keep copies the run's files (logs, collector log, config, state, the
// embedded engine's data: tens of MB) where they outlive the test, for a
// failure to be read: $CHAOS_ARTIFACTS, else the system's temporary
// directory.
func (r *runner) keep() string {
	base := os.Getenv("CHAOS_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "hitcount-chaos")
	}
	dst := filepath.Join(base, fmt.Sprintf("%s-seed%d-%s", r.env.Store, r.env.Settings.Seed, time.Now().Format("20060102-150405")))
	err := filepath.WalkDir(r.env.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.env.Dir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		r.env.Logf("chaos: keeping the run's files in %s: %v", dst, err)
	}
	return dst
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// config is the collector's configuration file, as an operator writes it.
func (r *runner) config(lay Layout, httpAddr string) string {
	var b strings.Builder
	q := strconv.Quote
	switch r.env.Store {
	case StoreServer:
		fmt.Fprintf(&b, "clickhouse:\n  addr: [%s]\n  database: %s\n  insert_timeout: %s\n  dial_timeout: 1s\n",
			q(r.env.Server.Addr()), ServerDatabase, InsertTimeout)
	case StoreCluster:
		var addrs []string
		for _, rep := range r.env.Replicas {
			addrs = append(addrs, q(rep.Addr()))
		}
		fmt.Fprintf(&b, "clickhouse:\n  addr: [%s]\n  cluster: %s\n  database: %s\n  insert_timeout: %s\n  dial_timeout: 1s\n",
			strings.Join(addrs, ", "), ClusterName, ServerDatabase, InsertTimeout)
	default:
		fmt.Fprintf(&b, "embedded:\n  path: %s\n  library: %s\n", q(filepath.Join(r.env.Dir, "chdb")), q(r.env.ChdbLib))
	}
	b.WriteString("sources:\n")
	src := func(path, site, startAt string) {
		fmt.Fprintf(&b, "  - path: %s\n    site: %s\n    format: combined\n    start_at: %s\n", q(path), site, startAt)
	}
	src(lay.VhostGlob, "www", "beginning")
	src(lay.APIPath, "api", "beginning")
	if lay.LatePath != "" {
		src(lay.LatePath, "late", "end")
	}
	fmt.Fprintf(&b, "batch:\n  rows: %d\n  delay: %s\n  max_pending: %d\n", BatchRows, BatchDelay, MaxPending)
	fmt.Fprintf(&b, "http:\n  listen: %s\n", q(httpAddr))
	fmt.Fprintf(&b, "state_dir: %s\n", q(filepath.Join(r.env.Dir, "state")))
	return b.String()
}

// releaseLate starts the start_at: end stream's writer once the collector
// has opened its live file (at its end): lines written before that are
// history, not to be shipped, and the check could not tell them apart.
func (r *runner) releaseLate(ctx context.Context, path string) {
	s := r.logs.Stream("late")
	deadline := time.Now().Add(60 * time.Second)
	for !r.coll.LogContains(`msg="reading log file"`, "path="+path+" ") {
		if time.Now().After(deadline) {
			r.problem("the collector did not open %s within 60s of its start", path)
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.Release()
}

// sleepUntil waits until the fault phase's offset at, restarting a
// collector that exited on its own (a problem) meanwhile.
func (r *runner) sleepUntil(at time.Duration) {
	for {
		r.watchCollector()
		left := at - time.Since(r.start)
		if left <= 0 {
			return
		}
		time.Sleep(min(left, 250*time.Millisecond))
	}
}

func (r *runner) watchCollector() {
	if gone, err := r.coll.ExitedOnItsOwn(); gone {
		r.problem("the collector exited on its own (%v); log:\n%s", err, r.coll.LogTail(20))
		if err := r.coll.Start(); err != nil {
			r.problem("restart: %v", err)
		}
	}
}

func (r *runner) fileLane(ctx context.Context) {
	for _, e := range r.res.Schedule.File {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(r.start.Add(e.At))):
		}
		what, err := r.logs.Apply(ctx, e)
		if err != nil {
			r.problem("%s: %v", e.Kind, err)
			continue
		}
		r.ran(e.Kind, what)
	}
}

// nemesisLane runs the collector, server and replica faults, one at a time,
// each undone before the next.
func (r *runner) nemesisLane() {
	for _, e := range r.res.Schedule.Nemesis {
		r.sleepUntil(e.At)
		switch e.Kind {
		case ReplicaKill, ReplicaPause, ReplicaDownLong, StopFetches, StopFetchesKill:
			r.replicaFault(e)
		case CollectorKill:
			r.coll.Kill()
			r.ran(e.Kind, fmt.Sprintf("collector killed, down %.1fs", e.Hold.Seconds()))
			time.Sleep(e.Hold)
			r.startCollector()
		case CollectorTerm, StartAtEnd:
			t0 := time.Now()
			if err := r.coll.Term(time.Minute); err != nil {
				r.problem("%s: %v", e.Kind, err)
			}
			r.ran(e.Kind, fmt.Sprintf("collector stopped with SIGTERM in %.1fs, down %.1fs", time.Since(t0).Seconds(), e.Hold.Seconds()))
			time.Sleep(e.Hold)
			r.startCollector()
		case ServerKill:
			r.env.Server.Kill()
			r.ran(e.Kind, fmt.Sprintf("server killed, down %.1fs", e.Hold.Seconds()))
			time.Sleep(e.Hold)
			r.env.Server.Start()
		case ServerFreeze:
			r.env.Server.Freeze()
			r.ran(e.Kind, fmt.Sprintf("server frozen for %.1fs", e.Hold.Seconds()))
			time.Sleep(e.Hold)
			r.env.Server.Thaw()
		case ServerRestart:
			r.env.Server.Stop()
			r.ran(e.Kind, fmt.Sprintf("server stopped, down %.1fs", e.Hold.Seconds()))
			time.Sleep(e.Hold)
			r.env.Server.Start()
		case ViewFail:
			if err := r.serverExec("SYSTEM STOP MERGES " + ServerDatabase + ".hits_1m"); err != nil {
				r.problem("view-fail: %v", err)
				continue
			}
			r.ran(e.Kind, fmt.Sprintf("merges of hits_1m stopped for %.1fs (its view fails past %d parts)", e.Hold.Seconds(), PartsToThrow))
			time.Sleep(e.Hold)
			if err := r.serverExec("SYSTEM START MERGES " + ServerDatabase + ".hits_1m"); err != nil {
				r.problem("view-fail: %v", err)
			}
			if err := r.serverExec("OPTIMIZE TABLE " + ServerDatabase + ".hits_1m FINAL"); err != nil {
				r.env.Logf("view-fail: optimize (merges catch up anyway): %v", err)
			}
		}
	}
}

func (r *runner) startCollector() {
	if err := r.coll.Start(); err != nil {
		r.problem("start collector: %v", err)
	}
}

func (r *runner) serverExec(sql string) error {
	conn, err := clickhouse.Open(r.env.Server.Options())
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// waitQuiet waits until the collector's counters (lines read, rows
// inserted, batches by result) stand still for quietFor while it is
// settled: everything it can ship is shipped. A store cannot be counted from outside while the
// embedded engine runs, so the counters are the collector's own.
func (r *runner) waitQuiet() {
	if !r.coll.Running() {
		r.startCollector()
	}
	begin := time.Now()
	var last string
	since := time.Now()
	for time.Since(begin) < maxFinal {
		r.watchCollector()
		m, err := r.coll.Metrics(context.Background())
		sig := "unreachable"
		// Settled: the last contact with the store succeeded (a collector
		// waiting out a backoff after a failure is not done) and no line
		// read is waiting to be committed.
		settled := false
		if err == nil {
			sig = fmt.Sprintf("%v/%v/%v/%v", m["hitcount_collector_lines_read_total"], m["hitcount_collector_rows_inserted_total"],
				m["hitcount_collector_batches_total"], m["hitcount_collector_lines_rejected_total"])
			up, ok := m["hitcount_collector_clickhouse_up"]
			settled = (!ok || up == 1) && m["hitcount_collector_oldest_unshipped_seconds"] == 0
		}
		if sig != last {
			last, since = sig, time.Now()
		} else if settled && time.Since(since) >= quietFor {
			r.env.Logf("%6.1fs collector quiet (lines read/rows inserted/batches/rejected %s)", time.Since(r.start).Seconds(), sig)
			return
		}
		time.Sleep(time.Second)
	}
	r.problem("the collector was still busy %v after the faults ended (lines read/rows inserted/batches/rejected %s)", maxFinal, last)
}

// check opens the store (the collector has stopped) and checks the
// invariant.
func (r *runner) check(lay Layout) (*Report, error) {
	d := &testenv.Database{Backend: r.env.Store, Name: "hitcount", Data: filepath.Join(r.env.Dir, "chdb")}
	o := CheckOptions{}
	if r.env.Store == "server" {
		d = &testenv.Database{Backend: "server", Addr: r.env.Server.Addr(), Name: ServerDatabase, Server: r.env.Server}
		var why []string
		if r.res.Ran[ServerKill] > 0 {
			why = append(why, "docs/guarantees.md, Limits: a 18.16 server killed mid-insert keeps the hits part and can lose a view's")
		}
		if r.res.Ran[ViewFail] > 0 {
			why = append(why, "docs/guarantees.md, Limits: on 18.16 a view failing after hits took a batch loses that batch's rollup block (no token to re-send it by)")
		}
		o = CheckOptions{RollupMayLag: len(why) > 0, Why: strings.Join(why, "; ")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := d.OpenStore(ctx, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("open the %s store: %w", r.env.Store, err)
	}
	defer st.Close()
	return Check(ctx, st, d.Name, r.logs, o)
}
