package main

// The sweepers' chaos harness (issue 15), in the collector's harness's shape
// (internal/chaos): a seeded random schedule of faults against the real
// sweeper binary and real components, then an invariant check.
//
// keeper: K sweeper services (the built binary, sweep.every 1s, the elector
// off with HITCOUNT_TEST_NO_ELECTOR=1, so they race on the claims alone)
// with claims: keeper on a ClickHouse 18.16 server and ZooKeeper, sending
// to a FaultySMTP server (aiosmtpd). Three lanes run beside each other for
// CHAOS_DURATION:
//
//   - waves: new crossings (a block of hits on new pages) every few seconds;
//   - replicas: kill -9 and restart, SIGSTOP for 0.5-5 s then SIGCONT,
//     SIGTERM and restart, each on a replica picked at run time among those
//     running and not already faulted (faults on different replicas may
//     overlap);
//   - SMTP: windows of 451, hang (DATA never answered, nothing stored),
//     late N (stored, then 250 after N s, N around smtp.timeout) and drop
//     (stored, then the connection closed without a reply), ok between.
//
// Then a quiet period: SMTP ok, every replica running, no faults, until
// every crossing is settled (bounded: the retry backoff after a failed send
// is 30 s), a few more sweeps, and SIGTERM.
//
// local: the same schedule on one sweeper service with claims: local on the
// embedded engine (the deployed service: gocron, no test hook), restarted
// after every kill and term. The engine serves its data directory to one
// process, so a wave waits for the replica's next stop to be inserted (or,
// after 4 s, is the reason for a SIGTERM), and the table is read only then;
// the quiet period ends at a sweep that logs nothing waiting. It runs beside
// keeper (t.Parallel).
//
// The invariant, per crossing seeded: recorded and `sent` in the state table
// (and never seen leaving sent; `failed` only when its sends met silences,
// see unanswered); arrived at the SMTP server at least once (unless so
// failed after two sends that hung) and at most twice; every copy under one Message-ID (digests too: a digest's
// copies are counted for each crossing it lists); and a second copy only
// when the schedule injected a fault that can hide the server's acceptance
// from the sender of the first (the one window SMTP leaves open, see the
// design's Alerting section):
//
//   - the first copy was stored in SMTP mode late or drop; or
//   - its sender (each replica has its own From display name) was killed,
//     stopped or terminated within smtp.timeout + 2 s after the server
//     stored it, before the second copy arrived; or
//   - the second copy's sender was stopped before the first copy arrived
//     and sent the second within 2 s of SIGCONT (paused past its claim
//     between its last check and DATA).
//
// No message may be for a crossing that was not seeded.
//
//	CHAOS_SEED=N              repeat a run (the seed is printed first, and in any failure)
//	CHAOS_DURATION=5m         a longer fault phase (default 30s: about 70 s in all with the
//	                          quiet period, which waits out the 30 s retry backoff)
//	CHAOS_SWEEPER_FAULTS=...  a comma list of fault kinds (replica-kill, replica-stop,
//	                          replica-term, smtp-451, smtp-hang, smtp-late, smtp-drop); all by default
//	CHAOS_SWEEPER_DIGEST_AFTER=N  sweep.digest_after (default 8: a backlog after a fault
//	                          goes out as digests; 1000000 turns digests off)
//	CHAOS_ARTIFACTS=DIR       keep the run's files (replica logs, configs, SMTP messages,
//	                          fault log, report) in DIR; a failed run keeps them in any
//	                          case, by default in $TMPDIR/hitcount-chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
)

const (
	chaosDefaultDuration = 30 * time.Second
	chaosSMTPTimeout     = 3 * time.Second // smtp.timeout of every replica
	chaosSession         = 3 * time.Second // keeper.session_timeout: a stop of 3-5 s loses the claims
	chaosRoot            = "/hitcount/chaos"
	// chaosPostAccept is how long after the server stored a message its
	// sender may still not have recorded the outcome (reply, QUIT, mark) in
	// an unfaulted run; chaosSlack covers a message written whole just
	// before its sender was signalled.
	chaosPostAccept = chaosSMTPTimeout + 2*time.Second
	chaosSlack      = time.Second
	// chaosOnWaking bounds how soon a sender stopped between its last
	// check and DATA sends once it runs again: the SMTP dialogue only.
	chaosOnWaking = 2 * time.Second
	// chaosMaxCopies: the protocol re-sends at most once after a send with no
	// reply; a sender that dies holding the claim (nothing said of the send)
	// allows one more copy per such death, each excused on its own.
	chaosMaxCopies = 2
)

// chaosKind is a kind of fault.
type chaosKind string

const (
	replicaKill chaosKind = "replica-kill" // SIGKILL, restarted after 0-2 s
	replicaStop chaosKind = "replica-stop" // SIGSTOP for 0.5-5 s, then SIGCONT
	replicaTerm chaosKind = "replica-term" // SIGTERM (a clean stop), restarted after 0-1.5 s
	smtp451     chaosKind = "smtp-451"     // DATA answered 451
	smtpHang    chaosKind = "smtp-hang"    // DATA never answered, nothing stored
	smtpLate    chaosKind = "smtp-late"    // stored, 250 after N s
	smtpDrop    chaosKind = "smtp-drop"    // stored, connection closed without a reply
	chaosWave   chaosKind = "wave"         // new crossings
)

var (
	chaosReplicaKinds = []chaosKind{replicaKill, replicaStop, replicaTerm}
	chaosSMTPKinds    = []chaosKind{smtp451, smtpHang, smtpLate, smtpDrop}
)

// chaosSettings are a run's knobs, from the environment.
type chaosSettings struct {
	seed        uint64
	dur         time.Duration
	kinds       []chaosKind
	kindsSet    bool // CHAOS_SWEEPER_FAULTS was given
	digestAfter int
	artifacts   string // CHAOS_ARTIFACTS, "" when unset
}

func chaosSettingsFromEnv(t *testing.T) chaosSettings {
	t.Helper()
	s := chaosSettings{dur: chaosDefaultDuration, digestAfter: 8, artifacts: os.Getenv("CHAOS_ARTIFACTS")}
	s.kinds = append(append(s.kinds, chaosReplicaKinds...), chaosSMTPKinds...)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: not an unsigned integer", v)
		}
		s.seed = n
	} else {
		s.seed = rand.Uint64() >> 1 // positive in every printer
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive Go duration such as 60s or 5m", v)
		}
		s.dur = d
	}
	if v := strings.TrimSpace(os.Getenv("CHAOS_SWEEPER_FAULTS")); v != "" && v != "all" {
		s.kinds, s.kindsSet = nil, true
		all := append(append([]chaosKind{}, chaosReplicaKinds...), chaosSMTPKinds...)
		for _, name := range strings.Split(v, ",") {
			k := chaosKind(strings.TrimSpace(name))
			if k == "" {
				continue
			}
			if !slices.Contains(all, k) {
				t.Fatalf("CHAOS_SWEEPER_FAULTS: unknown fault kind %q (kinds: %v, or all)", k, all)
			}
			if !slices.Contains(s.kinds, k) {
				s.kinds = append(s.kinds, k)
			}
		}
	}
	if v := os.Getenv("CHAOS_SWEEPER_DIGEST_AFTER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_SWEEPER_DIGEST_AFTER=%q: want a number >= 1", v)
		}
		s.digestAfter = n
	}
	return s
}

// reproduce is the environment that repeats the run.
func (s chaosSettings) reproduce() string {
	r := fmt.Sprintf("CHAOS_SEED=%d CHAOS_DURATION=%s", s.seed, s.dur)
	if s.kindsSet {
		var ks []string
		for _, k := range s.kinds {
			ks = append(ks, string(k))
		}
		r += " CHAOS_SWEEPER_FAULTS=" + strings.Join(ks, ",")
	}
	if s.digestAfter != 8 {
		r += fmt.Sprintf(" CHAOS_SWEEPER_DIGEST_AFTER=%d", s.digestAfter)
	}
	return r
}

// chaosEvent is one entry of a lane.
type chaosEvent struct {
	At   time.Duration // from the start of the fault phase
	Kind chaosKind
	Hold time.Duration // how long the fault lasts (down, stopped, the SMTP mode)
	Pick uint64        // chooses the replica at run time, among those free then
	N    int           // wave: new crossings
	Late time.Duration // smtp-late: the server's delay before its 250
}

func (e chaosEvent) String() string {
	switch {
	case e.Kind == chaosWave:
		return fmt.Sprintf("%5.1fs wave %d", e.At.Seconds(), e.N)
	case e.Kind == smtpLate:
		return fmt.Sprintf("%5.1fs %s %.1f (%.1fs)", e.At.Seconds(), e.Kind, e.Late.Seconds(), e.Hold.Seconds())
	}
	return fmt.Sprintf("%5.1fs %s (%.1fs)", e.At.Seconds(), e.Kind, e.Hold.Seconds())
}

// chaosSchedule is what the nemesis does: three lanes, each in time order,
// each drawn from its own stream of the seed.
type chaosSchedule struct {
	waves, replicas, smtp []chaosEvent
}

func newChaosSchedule(seed uint64, d time.Duration, kinds []chaosKind) chaosSchedule {
	var s chaosSchedule
	between := func(r *rand.Rand, lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
	}
	var rep, mail []chaosKind
	for _, k := range kinds {
		if slices.Contains(chaosReplicaKinds, k) {
			rep = append(rep, k)
		} else {
			mail = append(mail, k)
		}
	}

	wr := rand.New(rand.NewPCG(seed, 1))
	for at := between(wr, 0, time.Second); at < d; at += between(wr, 1500*time.Millisecond, 4*time.Second) {
		s.waves = append(s.waves, chaosEvent{At: at, Kind: chaosWave, N: 3 + wr.IntN(18)})
	}

	rr := rand.New(rand.NewPCG(seed, 2))
	for at := between(rr, time.Second, 3*time.Second); at < d && len(rep) > 0; at += between(rr, 700*time.Millisecond, 3*time.Second) {
		e := chaosEvent{At: at, Kind: rep[rr.IntN(len(rep))], Pick: rr.Uint64()}
		switch e.Kind {
		case replicaKill:
			e.Hold = between(rr, 0, 2*time.Second)
		case replicaStop:
			e.Hold = between(rr, 500*time.Millisecond, 5*time.Second)
		case replicaTerm:
			e.Hold = between(rr, 0, 1500*time.Millisecond)
		}
		s.replicas = append(s.replicas, e)
	}

	sr := rand.New(rand.NewPCG(seed, 3))
	for at := between(sr, time.Second, 3*time.Second); at < d && len(mail) > 0; {
		e := chaosEvent{At: at, Kind: mail[sr.IntN(len(mail))], Hold: between(sr, 1500*time.Millisecond, 5*time.Second)}
		if e.Kind == smtpLate {
			// Around smtp.timeout: below it the reply still comes in time
			// (a slow server), above it the client gives up on a message
			// the server has.
			e.Late = (chaosSMTPTimeout + between(sr, 0, 4*time.Second) - 1500*time.Millisecond).Round(100 * time.Millisecond)
		}
		s.smtp = append(s.smtp, e)
		at += e.Hold + between(sr, time.Second, 4*time.Second)
	}
	return s
}

func (s chaosSchedule) String() string {
	var b strings.Builder
	n := 0
	for _, e := range s.waves {
		n += e.N
	}
	fmt.Fprintf(&b, "schedule: %d waves (%d crossings), %d replica faults, %d SMTP windows\n", len(s.waves), n, len(s.replicas), len(s.smtp))
	line := func(name string, evs []chaosEvent) {
		if len(evs) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:", name)
		for i, e := range evs {
			if i%4 == 0 {
				b.WriteString("\n   ")
			}
			fmt.Fprintf(&b, " %-30s", e.String())
		}
		b.WriteString("\n")
	}
	line("waves", s.waves)
	line("replicas", s.replicas)
	line("smtp", s.smtp)
	return b.String()
}

// faultWindow is a fault as it happened: a replica's (kill and term start
// at the signal; a kill ends there, a term when the process has exited, a
// stop at SIGCONT) or the SMTP server's mode.
type faultWindow struct {
	kind       chaosKind
	replica    int // -1: the SMTP server
	start, end time.Time
	detail     string
}

// chaosReplica is one sweeper service, restarted as the schedule says; all
// its runs write to one log file.
type chaosReplica struct {
	r      *chaosRunner
	i      int
	name   string
	cfg    string
	env    []string
	log    string
	ready  string // the log line that says it sweeps
	starts int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the current process is reaped
	state   *os.ProcessState
	expect  bool // the harness asked it to end
	busy    bool // a fault on it is under way
	started time.Time
}

// start runs the binary (again).
func (p *chaosReplica) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	fmt.Fprintf(f, "=== harness: start %d at %s ===\n", p.starts, p.r.rel(time.Now()))
	cmd := exec.Command(p.r.h.bin, "-config", p.cfg, "-log-level", "info")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Dir = filepath.Dir(p.cfg)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.state, p.expect, p.started = cmd, exited, nil, false, time.Now()
	go func() {
		cmd.Wait()
		p.mu.Lock()
		p.state = cmd.ProcessState
		expected := p.expect
		p.mu.Unlock()
		close(exited)
		if !expected {
			p.r.problem("%s exited on its own at %s: %s; its log: %s", p.name, p.r.rel(time.Now()), cmd.ProcessState, p.tail(5))
		}
	}()
	return nil
}

// running reports whether a process of this replica is up.
func (p *chaosReplica) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the running process (never to a reaped one: its pid
// may be reused); stopping says an exit will follow and is expected.
func (p *chaosReplica) signal(sig syscall.Signal, stopping bool) (exited chan struct{}, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil, false
	}
	select {
	case <-p.exited:
		return p.exited, false
	default:
	}
	if stopping {
		p.expect = true
	}
	syscall.Kill(-p.cmd.Process.Pid, sig)
	return p.exited, true
}

// stop ends the running process with sig, waiting up to wait for it to
// exit (then kill -9); it returns how it ended.
func (p *chaosReplica) stop(sig syscall.Signal, wait time.Duration) (*os.ProcessState, time.Time, bool) {
	exited, _ := p.signal(sig, true)
	if exited == nil {
		return nil, time.Now(), false
	}
	timedOut := false
	select {
	case <-exited:
	case <-time.After(wait):
		timedOut = true
		p.signal(syscall.SIGCONT, true)
		p.signal(syscall.SIGKILL, true)
		<-exited
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, time.Now(), timedOut
}

// tail is the last n lines of the replica's log, one line.
func (p *chaosReplica) tail(n int) string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// waitReady waits for the log line that says the replica sweeps.
func (p *chaosReplica) waitReady(timeout time.Duration) error {
	return p.waitLog(p.ready, timeout)
}

// waitLog waits for a line holding want (all of its words, in any order)
// in the log of the current start.
func (p *chaosReplica) waitLog(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	marker := fmt.Sprintf("=== harness: start %d ", p.starts)
	p.mu.Unlock()
	words := strings.Fields(want)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(p.log)
		s := string(data)
		if i := strings.LastIndex(s, marker); i >= 0 {
			for _, line := range strings.Split(s[i:], "\n") {
				if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
					return nil
				}
			}
		}
		if !p.running() {
			return fmt.Errorf("%s exited while starting: %s", p.name, p.tail(5))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: no log line %q within %v: %s", p.name, want, timeout, p.tail(5))
}

// chaosRunner is one run: its schedule, what happened, and the check.
type chaosRunner struct {
	t       *testing.T
	set     chaosSettings
	variant string
	h       *raceHarness
	smtp    *testenv.FaultySMTP
	reps    []*chaosReplica
	sched   chaosSchedule
	t0      time.Time // start of the fault phase
	waves   int

	mu       sync.Mutex
	flog     []logLine // the fault log
	windows  []faultWindow
	problems []string
	ran      map[chaosKind]int
	idle     map[chaosKind]int
	seeded   map[string]time.Time // page -> when its wave was inserted
	states   map[string]string    // the watch's last read of the table
	sentAt   map[string]time.Time // when the watch first read a crossing as sent

	// local: the embedded engine serves its data directory to one process,
	// so the harness inserts waves (and reads the table) only while the
	// replica is down: a wave waits in queue for the next kill or term, or
	// is the reason for one (queueWait). Nil for keeper.
	local *chaosLocal
}

// chaosLocal is the local variant's embedded store.
type chaosLocal struct {
	lib, data string
	queue     []int     // sizes of the waves waiting to be inserted
	since     time.Time // when the oldest of them was due
}

// queueWait is how long a wave waits for a kill or term of the local
// replica before the harness stops it (SIGTERM) to insert it.
const queueWait = 4 * time.Second

// logLine is an entry of the fault log.
type logLine struct {
	at   time.Time
	text string
}

// faultLog is the fault log in time order (a fault is logged when it
// ends, at the time it began).
func (r *chaosRunner) faultLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines := slices.Clone(r.flog)
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at.Before(lines[j].at) })
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%9s  %s\n", r.rel(l.at), l.text)
	}
	return b.String()
}

func (r *chaosRunner) rel(at time.Time) string {
	if r.t0.IsZero() {
		return "setup"
	}
	return fmt.Sprintf("%+.2fs", at.Sub(r.t0).Seconds())
}

func (r *chaosRunner) logf(at time.Time, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flog = append(r.flog, logLine{at, fmt.Sprintf(format, args...)})
}

func (r *chaosRunner) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

func (r *chaosRunner) window(w faultWindow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows = append(r.windows, w)
}

func (r *chaosRunner) count(m map[chaosKind]int, k chaosKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m[k]++
}

// sleepUntil waits for the phase's offset at, or stop; false on stop.
func sleepUntil(t0 time.Time, at time.Duration, stop <-chan struct{}) bool {
	select {
	case <-time.After(time.Until(t0.Add(at))):
		return true
	case <-stop:
		return false
	}
}

// waveLane inserts the schedule's waves of new crossings.
func (r *chaosRunner) waveLane(stop <-chan struct{}) {
	for _, e := range r.sched.waves {
		if !sleepUntil(r.t0, e.At, stop) {
			return
		}
		if r.local == nil {
			r.wave(e.N)
			continue
		}
		r.mu.Lock()
		if len(r.local.queue) == 0 {
			r.local.since = time.Now()
		}
		r.local.queue = append(r.local.queue, e.N)
		old := time.Since(r.local.since) >= queueWait
		r.mu.Unlock()
		if p := r.reps[0]; old && p.take() {
			r.count(r.ran, replicaTerm)
			r.replicaFault(p, chaosEvent{Kind: replicaTerm}, "to insert the waves waiting")
			p.release()
		}
	}
}

// take marks the replica busy with a fault if it is free and running.
func (p *chaosReplica) take() bool {
	if !p.running() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.busy {
		return false
	}
	p.busy = true
	return true
}

func (p *chaosReplica) release() {
	p.mu.Lock()
	p.busy = false
	p.mu.Unlock()
}

// flush inserts the waves waiting, on the local replica's embedded store
// (which no process holds now), and reads the table.
func (r *chaosRunner) flush() {
	ctx := context.Background()
	st, err := embedded.Open(ctx, embedded.Options{LibPath: r.local.lib, DataPath: r.local.data, Database: r.h.db})
	if err != nil {
		r.problem("open the embedded store to insert waves: %v", err)
		return
	}
	defer st.Close()
	r.h.store = st
	r.mu.Lock()
	queue := r.local.queue
	r.local.queue = nil
	r.mu.Unlock()
	for _, n := range queue {
		r.wave(n)
	}
	r.observe()
}

// wave inserts n new crossings as one block.
func (r *chaosRunner) wave(n int) {
	round := r.waves
	r.waves++
	r.mu.Lock() // settled reads h.pages
	from := len(r.h.pages)
	at := time.Now()
	err := r.h.seedPages(round, n)
	for _, p := range r.h.pages[from:] {
		r.seeded[p] = at
	}
	r.mu.Unlock()
	r.count(r.ran, chaosWave)
	if err != nil {
		r.problem("wave %d: insert of %d crossings failed (they may be missing): %v", round, n, err)
	}
	r.logf(at, "wave %d: %d new crossings (%s..%s)", round, n, r.h.pages[from], r.h.pages[len(r.h.pages)-1])
}

// replicaLane runs the replica faults, each on a replica free at its time;
// a fault's hold runs beside the next faults (on other replicas).
func (r *chaosRunner) replicaLane(stop <-chan struct{}, wg *sync.WaitGroup) {
	for _, e := range r.sched.replicas {
		if !sleepUntil(r.t0, e.At, stop) {
			return
		}
		var free []*chaosReplica
		for _, p := range r.reps {
			p.mu.Lock()
			busy := p.busy
			p.mu.Unlock()
			if !busy && p.running() {
				free = append(free, p)
			}
		}
		var p *chaosReplica
		if len(free) > 0 {
			p = free[e.Pick%uint64(len(free))]
		}
		if p == nil || !p.take() {
			r.count(r.idle, e.Kind)
			r.logf(time.Now(), "%s: no replica free, skipped", e.Kind)
			continue
		}
		r.count(r.ran, e.Kind)
		wg.Go(func() {
			r.replicaFault(p, e, "")
			p.release()
		})
	}
}

func (r *chaosRunner) replicaFault(p *chaosReplica, e chaosEvent, why string) {
	if why != "" {
		why = " (" + why + ")"
	}
	switch e.Kind {
	case replicaKill:
		at := time.Now()
		p.stop(syscall.SIGKILL, 10*time.Second)
		r.window(faultWindow{kind: e.Kind, replica: p.i, start: at, end: at})
		r.logf(at, "%s kill -9 (start %d), restart in %.1fs%s", p.name, p.starts, e.Hold.Seconds(), why)
		time.Sleep(e.Hold)
		r.restart(p)
	case replicaStop:
		at := time.Now()
		if _, ok := p.signal(syscall.SIGSTOP, false); !ok {
			r.logf(at, "%s: not running, stop skipped", p.name)
			return
		}
		time.Sleep(e.Hold)
		p.signal(syscall.SIGCONT, false)
		end := time.Now()
		r.window(faultWindow{kind: e.Kind, replica: p.i, start: at, end: end})
		r.logf(at, "%s SIGSTOP for %.1fs (SIGCONT at %s)", p.name, end.Sub(at).Seconds(), r.rel(end))
	case replicaTerm:
		at := time.Now()
		st, end, timedOut := p.stop(syscall.SIGTERM, 20*time.Second)
		r.window(faultWindow{kind: e.Kind, replica: p.i, start: at, end: end})
		how := fmt.Sprint(st)
		switch {
		case timedOut:
			r.problem("%s did not stop within 20 s of SIGTERM at %s (killed)", p.name, r.rel(at))
		case st != nil && st.ExitCode() == 0:
		case st != nil && st.Sys().(syscall.WaitStatus).Signaled() && time.Since(p.started) < 2*time.Second:
			how += " (before it caught SIGTERM: just started)"
		default:
			r.problem("%s: SIGTERM at %s ended it badly: %s; its log: %s", p.name, r.rel(at), how, p.tail(5))
		}
		r.logf(at, "%s SIGTERM: %s after %.1fs; restart in %.1fs%s", p.name, how, end.Sub(at).Seconds(), e.Hold.Seconds(), why)
		time.Sleep(e.Hold)
		r.restart(p)
	}
}

// restart starts a replica that is down; the local variant's waiting waves
// go in first.
func (r *chaosRunner) restart(p *chaosReplica) {
	if r.local != nil {
		r.flush()
	}
	if err := p.start(); err != nil {
		r.problem("%s: restart: %v", p.name, err)
	}
}

// smtpLane switches the SMTP server's mode: each window, then ok.
func (r *chaosRunner) smtpLane(stop <-chan struct{}) {
	for _, e := range r.sched.smtp {
		if !sleepUntil(r.t0, e.At, stop) {
			return
		}
		mode := strings.TrimPrefix(string(e.Kind), "smtp-")
		if e.Kind == smtpLate {
			mode = fmt.Sprintf("late %.1f", e.Late.Seconds())
		}
		at := time.Now()
		if err := r.smtp.SetMode(mode); err != nil {
			r.problem("smtp mode %s: %v", mode, err)
		}
		r.count(r.ran, e.Kind)
		time.Sleep(e.Hold)
		if err := r.smtp.SetMode("ok"); err != nil {
			r.problem("smtp mode ok: %v", err)
		}
		end := time.Now()
		r.window(faultWindow{kind: e.Kind, replica: -1, start: at, end: end, detail: mode})
		r.logf(at, "smtp %s until %s", mode, r.rel(end))
	}
}

// runPhases starts the replicas, runs the schedule, then the quiet period,
// and stops the replicas.
func (r *chaosRunner) runPhases() {
	t := r.t
	for _, p := range r.reps {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.signal(syscall.SIGCONT, true)
			p.signal(syscall.SIGKILL, true)
		})
	}
	for _, p := range r.reps {
		if err := p.waitReady(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if r.local == nil {
		stopWatch := r.watch()
		defer stopWatch()
	}

	r.t0 = time.Now()
	r.logf(r.t0, "fault phase: %s", r.set.dur)
	stop := make(chan struct{})
	time.AfterFunc(r.set.dur, func() { close(stop) })
	var lanes, faults sync.WaitGroup
	lanes.Go(func() { r.waveLane(stop) })
	lanes.Go(func() { r.replicaLane(stop, &faults) })
	lanes.Go(func() { r.smtpLane(stop) })
	lanes.Wait()
	faults.Wait() // the holds under way end (restarts, SIGCONTs)

	// Quiet: SMTP ok, every replica up, no faults, until every crossing is
	// settled. A crossing whose send failed waits retryAfter(attempts)
	// (30 s, doubling) from its last try: the bound allows for the longest
	// backoff the fault phase can have reached. The phase lasts until the
	// last fault under way ends, past r.set.dur (CI, seed
	// 7930769754957420481: crossings refused at 2 s were tried again at
	// 32 s, in an SMTP drop that ran to 34.6 s, and waited 60 s more).
	qt := time.Now()
	r.smtp.Set(t, "ok")
	if r.local != nil && len(r.local.queue) > 0 && r.reps[0].take() {
		// The last waves go in now, in the one stop the quiet period has.
		r.count(r.ran, replicaTerm)
		r.replicaFault(r.reps[0], chaosEvent{Kind: replicaTerm}, "to insert the last waves")
		r.reps[0].release()
	}
	for _, p := range r.reps {
		if !p.running() {
			r.logf(time.Now(), "%s was down at the quiet period: started", p.name)
			r.restart(p)
		}
	}
	bound := chaosQuietBound(qt.Sub(r.t0))
	if r.local != nil {
		// The table cannot be read while the replica runs: its own log says
		// when a sweep left nothing waiting.
		r.logf(qt, "quiet period: SMTP ok, the replica running, no faults; waiting up to %s for a sweep that leaves nothing waiting", bound)
		err := r.reps[0].waitLog(`sweep done waiting=0`, bound-time.Since(qt))
		r.logf(time.Now(), "quiet period: after %.1fs: %v", time.Since(qt).Seconds(), cmp.Or[any](err, "nothing waiting"))
	} else {
		r.logf(qt, "quiet period: SMTP ok, %d replicas running, no faults; waiting up to %s for %d crossings to settle", len(r.reps), bound, len(r.h.pages))
		n := 0
		for {
			var all bool
			all, n = r.settled()
			if all || time.Since(qt) > bound {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		r.logf(time.Now(), "quiet period: %d of %d crossings settled (sent or failed) after %.1fs", n, len(r.h.pages), time.Since(qt).Seconds())
	}
	time.Sleep(3 * time.Second) // a few more sweeps: anything still to go out goes now
	for _, p := range r.reps {
		at := time.Now()
		st, _, timedOut := p.stop(syscall.SIGTERM, 20*time.Second)
		switch {
		case timedOut:
			r.problem("%s did not stop within 20 s of the final SIGTERM (killed)", p.name)
		case st != nil && st.ExitCode() != 0:
			r.problem("%s: the final SIGTERM ended it badly: %s; its log: %s", p.name, st, p.tail(5))
		}
		r.logf(at, "%s stopped: %v", p.name, st)
	}
	if r.local != nil {
		// The check reads the table: the store stays open to the end.
		st, err := embedded.Open(context.Background(), embedded.Options{LibPath: r.local.lib, DataPath: r.local.data, Database: r.h.db})
		if err != nil {
			t.Fatalf("open the embedded store for the check: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		r.h.store = st
		r.observe()
	}
}

// watch reads the state table every half second until stop is called: the
// harness's watch (a crossing seen sent and later in another state is
// noticed), its last read kept for settled.
func (r *chaosRunner) watch() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			r.observe()
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// observe reads the state table (through raceHarness.readStates, which
// notes a crossing seen sent and later in another state).
func (r *chaosRunner) observe() {
	st, err := r.h.readStates()
	if err != nil {
		return
	}
	at := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = st
	for k, s := range st {
		if _, ok := r.sentAt[k]; !ok && s == alerts.StateSent {
			r.sentAt[k] = at
		}
	}
}

// settled is raceHarness.settled on the watch's last read.
func (r *chaosRunner) settled() (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.h.pages {
		if s := r.states[raceKey(p)]; s == alerts.StateSent || s == alerts.StateFailed {
			n++
		}
	}
	return n == len(r.h.pages), n
}

// chaosQuietBound is how long the quiet period waits: the retry backoff of
// the most attempts a crossing can have made in a fault phase of d (30 s,
// 60 s, ... from its last failure), and 20 s more.
func chaosQuietBound(d time.Duration) time.Duration {
	attempts, backoff, until := 1, 30*time.Second, 30*time.Second
	for until < d && attempts < 5 {
		attempts++
		backoff = min(2*backoff, time.Hour)
		until += backoff
	}
	return backoff + 20*time.Second
}

// copyOf is one arrival of a crossing at the SMTP server.
type copyOf struct {
	at     time.Time
	mode   string // the server's mode when it stored it: ok, late, drop
	sender string // the From display name: the replica
	msgID  string
	digest bool
	file   string
}

// numbers makes a violation's text its kind.
var numbers = regexp.MustCompile(`\d+`)

// digestLine is a crossing's line in a digest's text part.
var digestLine = regexp.MustCompile(`(?m)^  (\S+)  \d+ hits \(threshold (\d+), rule (\S+), window from (\S+)\)`)

// crossingsOf are the keys of the crossings a message carries: its
// X-Hitcount-Crossing, or for a digest the lines of its text part.
func crossingsOf(m *mail.Message) (keys []string, digest bool, err error) {
	k := m.Header.Get("X-Hitcount-Crossing")
	if !strings.HasPrefix(k, "digest-") {
		return []string{k}, false, nil
	}
	text, err := textPart(m.Header, m.Body)
	if err != nil {
		return nil, true, err
	}
	for _, sm := range digestLine.FindAllStringSubmatch(text, -1) {
		th, _ := strconv.ParseInt(sm[2], 10, 64)
		ws, err := time.Parse(time.RFC3339, sm[4])
		if err != nil {
			return nil, true, fmt.Errorf("digest line %q: %w", sm[0], err)
		}
		keys = append(keys, alerts.Crossing{Rule: sm[3], Subject: sm[1], WindowStart: ws.UTC(), Threshold: th}.Key())
	}
	if len(keys) == 0 {
		return nil, true, fmt.Errorf("digest %s lists no crossing", k)
	}
	return keys, true, nil
}

// textPart is the decoded text/plain part of a message.
func textPart(h interface{ Get(string) string }, body io.Reader) (string, error) {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				return "", fmt.Errorf("no text/plain part")
			}
			if err != nil {
				return "", err
			}
			if s, err := textPart(p.Header, p); err == nil {
				return s, nil
			}
		}
	}
	if mt != "text/plain" {
		return "", fmt.Errorf("a %s part", mt)
	}
	var r io.Reader = body
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body)
	}
	data, err := io.ReadAll(r)
	return string(data), err
}

// crossingVerdict is what the check found for one crossing.
type crossingVerdict struct {
	page, key, state string
	copies           []copyOf
	excuse           string   // why a second copy is allowed
	excuseKinds      []string // the excuses' kinds, for the summary
	gaveUp           bool     // failed after its sends went unanswered (see unanswered)
	wrong            []string // what breaks the invariant
}

// check reads the mailbox and the state table and judges every crossing.
func (r *chaosRunner) check() (verdicts []*crossingVerdict, foreign []copyOf, dist [4]int) {
	t := r.t
	perKey := map[string][]copyOf{}
	for _, a := range r.smtp.Arrivals(t) {
		keys, digest, err := crossingsOf(a.Msg)
		c := copyOf{at: a.At, mode: a.Mode, msgID: a.Msg.Header.Get("Message-Id"), digest: digest, file: filepath.Base(a.Path)}
		if from, err := mail.ParseAddress(a.Msg.Header.Get("From")); err == nil {
			c.sender = from.Name
		}
		if err != nil {
			r.problem("message %s: %v", c.file, err)
			continue
		}
		for _, k := range keys {
			perKey[k] = append(perKey[k], c)
		}
	}
	states := r.h.states()
	errs := r.finalErrors()
	seeded := map[string]bool{}
	for _, p := range r.h.pages {
		v := &crossingVerdict{page: p, key: raceKey(p), state: states[raceKey(p)], copies: perKey[raceKey(p)]}
		seeded[v.key] = true
		verdicts = append(verdicts, v)
		n := len(v.copies)
		dist[min(n, 3)]++
		if v.state == "" {
			v.state = "unrecorded"
		}
		switch {
		case v.state == alerts.StateSent:
		case v.state == alerts.StateFailed && r.unanswered(v.key, errs[v.key], v.copies):
			v.gaveUp = true
		default:
			v.wrong = append(v.wrong, "ends "+v.state)
		}
		if r.h.left[v.key] {
			v.wrong = append(v.wrong, "was seen sent, then in another state")
		}
		if n == 0 && !v.gaveUp { // (given up after two sends that hung: nothing arrived)
			v.wrong = append(v.wrong, "never arrived")
		}
		ids := map[string]bool{}
		for _, c := range v.copies {
			ids[c.msgID] = true
		}
		if len(ids) > 1 {
			v.wrong = append(v.wrong, fmt.Sprintf("copies under %d Message-IDs", len(ids)))
		}
		if n >= 2 {
			var why []string
			for i := 1; i < n; i++ {
				e, kind := r.excuse(v.key, v.copies[i-1], v.copies[i])
				v.excuseKinds = append(v.excuseKinds, kind)
				if e == "" {
					v.wrong = append(v.wrong, fmt.Sprintf("copy %d arrived with no fault that could hide copy %d's acceptance from its sender", i+1, i))
				} else {
					why = append(why, e)
				}
			}
			v.excuse = strings.Join(why, "; ")
			// Past two copies, every extra one must be excused by its
			// predecessor's sender dying or stopping, save one at most:
			// the one re-send after no reply.
			silent := 0
			for _, k := range v.excuseKinds {
				if strings.HasPrefix(k, "smtp-") {
					silent++
				}
			}
			if n > chaosMaxCopies && silent > 1 {
				v.wrong = append(v.wrong, fmt.Sprintf("arrived %d times, %d of the extra copies after a send with no reply (one re-send at most)", n, silent))
			}
		}
	}
	for k, cs := range perKey {
		if !seeded[k] {
			foreign = append(foreign, cs...)
		}
	}
	return verdicts, foreign, dist
}

// noReply is a send's error when the whole message went and no reply came:
// a timeout or a connection that ended.
var noReply = regexp.MustCompile(`(?i)no reply|i/o timeout|EOF|connection reset|broken pipe`)

// unanswered reports whether a crossing that ends failed could end no
// other way: its last error is a send with no reply, and every copy the
// server stored went unanswered: stored in SMTP mode late or drop, or (all
// but the last) its sender killed, stopped or terminated before the reply
// reached it (senderFault; seed 4130107986992517934: an ok copy whose
// sender was killed 0.0 s after the server stored it, then a re-send in mode
// late). The protocol sends such a crossing once more and never a third
// time (a second silence marks it failed: it may have arrived), so with at
// most two copies, sent cannot be promised when both sends meet a silence;
// long runs meet it. The summary counts these apart.
func (r *chaosRunner) unanswered(key, lastErr string, copies []copyOf) bool {
	if strings.Contains(lastErr, "re-sent after no reply, and its sender stopped") {
		// The one re-send after a silence was in flight when its sweeper
		// died: whatever the server did with it, no third send.
		return true
	}
	if !noReply.MatchString(lastErr) || len(copies) > chaosMaxCopies {
		return false
	}
	for i, c := range copies {
		if c.mode == "late" || c.mode == "drop" {
			continue
		}
		if i+1 < len(copies) {
			if why, _ := r.senderFault(key, c, copies[i+1]); why != "" {
				continue
			}
		}
		return false
	}
	return true
}

// finalErrors is each crossing's error in its current row.
func (r *chaosRunner) finalErrors() map[string]string {
	out := map[string]string{}
	err := r.h.store.Select(context.Background(), "SELECT key, argMax(error, version) FROM "+r.h.db+".crossings GROUP BY key", nil,
		func(scan func(...any) error) error {
			var k, e string
			if err := scan(&k, &e); err != nil {
				return err
			}
			out[k] = e
			return nil
		})
	if err != nil {
		r.problem("read the crossings' errors: %v", err)
	}
	return out
}

// excuse says which injected fault could have hidden the server's
// acceptance of prev from its sender, so that next was sent; "" if none.
// A fault on prev's sender after the table was read with the crossing sent
// excuses nothing: the outcome was recorded by then.
func (r *chaosRunner) excuse(key string, prev, next copyOf) (why, kind string) {
	// A fault on the sender first: a copy stored in mode late whose sender
	// died before the reply was due is a death to the protocol (it never
	// saw the silence), and only the re-send after a silence is limited.
	if why, kind := r.senderFault(key, prev, next); why != "" {
		return why, kind
	}
	if prev.mode == "late" || prev.mode == "drop" {
		return fmt.Sprintf("copy stored at %s in SMTP mode %s", r.rel(prev.at), prev.mode), "smtp-" + prev.mode
	}
	return "", "none"
}

// senderFault is excuse's fault on prev's sender, or on next's across prev.
func (r *chaosRunner) senderFault(key string, prev, next copyOf) (why, kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recorded, seen := r.sentAt[key]
	for _, w := range r.windows {
		if w.replica < 0 {
			continue
		}
		name := r.reps[w.replica].name
		if (prev.sender == "" || prev.sender == name) && !w.start.Before(prev.at.Add(-chaosSlack)) &&
			!w.start.After(prev.at.Add(chaosPostAccept)) && w.start.Before(next.at) &&
			(!seen || recorded.After(next.at) || !w.start.After(recorded)) {
			return fmt.Sprintf("%s (the first copy's sender) %s at %s, %.1fs after the server stored it", name, w.kind, r.rel(w.start), w.start.Sub(prev.at).Seconds()), string(w.kind) + " of the sender"
		}
		if w.kind == replicaStop && (next.sender == "" || next.sender == name) && !w.start.After(prev.at.Add(chaosSlack)) &&
			!next.at.Before(w.end.Add(-chaosSlack)) && !next.at.After(w.end.Add(chaosOnWaking)) {
			return fmt.Sprintf("%s (the second copy's sender) stopped %s..%s, across the first copy, and sent on waking", name, r.rel(w.start), r.rel(w.end)), "replica-stop of the re-sender"
		}
	}
	return "", "none"
}

// report logs the result and fails the test on a violation or a problem.
func (r *chaosRunner) report(verdicts []*crossingVerdict, foreign []copyOf, dist [4]int) string {
	var bad []*crossingVerdict
	kinds := map[string]int{}
	excuses := map[string]int{}
	msgs, gaveUp, lost := 0, 0, 0
	for _, v := range verdicts {
		if len(v.wrong) > 0 {
			bad = append(bad, v)
			for _, w := range v.wrong {
				kinds[numbers.ReplaceAllString(w, "N")]++
			}
		}
		if v.gaveUp {
			gaveUp++
			if len(v.copies) == 0 {
				lost++
			}
		}
		for _, k := range v.excuseKinds {
			excuses[k]++
		}
		msgs += len(v.copies)
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(ks)
	final := map[string]int{}
	for _, v := range verdicts {
		final[v.state]++
	}
	var fs []string
	for st, n := range final {
		fs = append(fs, fmt.Sprintf("%s %d", st, n))
	}
	sort.Strings(fs)
	var ran []string
	for _, k := range append(append([]chaosKind{chaosWave}, chaosReplicaKinds...), chaosSMTPKinds...) {
		if r.ran[k]+r.idle[k] > 0 {
			s := fmt.Sprintf("%s %d", k, r.ran[k])
			if r.idle[k] > 0 {
				s += fmt.Sprintf(" (+%d skipped)", r.idle[k])
			}
			ran = append(ran, s)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos sweeper %s: %s\n", r.variant, r.set.reproduce())
	fmt.Fprintf(&b, "faults run: %s\n", strings.Join(ran, ", "))
	var es []string
	for k, n := range excuses {
		es = append(es, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(es)
	fmt.Fprintf(&b, "%d crossings, %d arrivals of them; copies per crossing: 0: %d, 1: %d, 2: %d, 3+: %d; final states: %s; messages for no seeded crossing: %d\n",
		len(verdicts), msgs, dist[0], dist[1], dist[2], dist[3], strings.Join(fs, ", "), len(foreign))
	fmt.Fprintf(&b, "copies after the first, by the fault that allows them: %s; failed after unanswered sends (no third send): %d, %d of them never arrived (both sends hung)\n",
		cmp.Or(strings.Join(es, ", "), "none"), gaveUp, lost)
	if len(bad) == 0 && len(foreign) == 0 && len(r.problems) == 0 {
		b.WriteString("invariant holds\n")
		return b.String()
	}
	fmt.Fprintf(&b, "INVARIANT BROKEN: %d crossings (%s)\n", len(bad), strings.Join(ks, "; "))
	for _, p := range r.problems {
		fmt.Fprintf(&b, "problem: %s\n", p)
	}
	for i, c := range foreign {
		if i == 5 {
			fmt.Fprintf(&b, "  ... %d more messages for no seeded crossing\n", len(foreign)-5)
			break
		}
		fmt.Fprintf(&b, "  message for no seeded crossing: %s at %s from %s (%s)\n", c.file, r.rel(c.at), c.sender, c.msgID)
	}
	// The first crossings of each kind of violation in detail.
	shown := map[string]int{}
	for _, v := range bad {
		kind := numbers.ReplaceAllString(v.wrong[0], "N")
		if shown[kind] >= 3 {
			continue
		}
		shown[kind]++
		b.WriteString(r.explain(v))
	}
	return b.String()
}

// explain is one crossing's timeline: seeded, each copy, the faults around
// them, its rows in the table, and the replicas' log lines about its page.
func (r *chaosRunner) explain(v *crossingVerdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n  crossing %s (page %s), seeded at %s: %s; state %s", v.key, v.page, r.rel(r.seeded[v.page]), strings.Join(v.wrong, "; "), v.state)
	if at, ok := r.sentAt[v.key]; ok {
		fmt.Fprintf(&b, " (first read as sent at %s)", r.rel(at))
	}
	b.WriteString("\n")
	if v.excuse != "" {
		fmt.Fprintf(&b, "    (excused: %s)\n", v.excuse)
	}
	from, to := r.seeded[v.page], r.seeded[v.page].Add(10*time.Second)
	for _, c := range v.copies {
		kind := "single"
		if c.digest {
			kind = "digest"
		}
		fmt.Fprintf(&b, "    copy at %s: %s, stored in mode %s, sender %s, %s (%s)\n", r.rel(c.at), kind, c.mode, c.sender, c.msgID, c.file)
		if c.at.After(to) {
			to = c.at
		}
	}
	// The faults around the copies (or, with none, after the seeding):
	// what could have been in flight with them.
	spans := [][2]time.Time{}
	for _, c := range v.copies {
		spans = append(spans, [2]time.Time{c.at.Add(-chaosPostAccept), c.at.Add(chaosPostAccept)})
	}
	if len(spans) == 0 {
		spans = append(spans, [2]time.Time{from, to})
	}
	ws := slices.Clone(r.windows)
	sort.Slice(ws, func(i, j int) bool { return ws[i].start.Before(ws[j].start) })
	for _, w := range ws {
		if !slices.ContainsFunc(spans, func(sp [2]time.Time) bool { return !w.end.Before(sp[0]) && !w.start.After(sp[1]) }) {
			continue
		}
		who := "smtp " + w.detail
		if w.replica >= 0 {
			who = r.reps[w.replica].name + " " + string(w.kind)
		}
		fmt.Fprintf(&b, "    fault %s..%s: %s\n", r.rel(w.start), r.rel(w.end), who)
	}
	fmt.Fprintf(&b, "    rows left in the table (ReplacingMergeTree merges older versions away):\n%s\n", r.h.history(v.key))
	for _, p := range r.reps {
		f, err := os.Open(p.log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			if strings.Contains(sc.Text(), v.page+" ") || strings.Contains(sc.Text(), v.page+"\"") || strings.HasSuffix(sc.Text(), v.page) {
				if n < 8 {
					fmt.Fprintf(&b, "    %s: %s\n", p.name, sc.Text())
				}
				n++
			}
		}
		f.Close()
		if n > 8 {
			fmt.Fprintf(&b, "    %s: ... %d more lines about the page\n", p.name, n-8)
		}
	}
	return b.String()
}

// keep copies the run's files where they outlive the test.
func (r *chaosRunner) keep(report string) string {
	base := r.set.artifacts
	if base == "" {
		base = filepath.Join(os.TempDir(), "hitcount-chaos")
	}
	dst := filepath.Join(base, fmt.Sprintf("sweeper-%s-seed%d-%s", r.variant, r.set.seed, time.Now().Format("20060102-150405")))
	copyFile := func(src, name string) {
		data, err := os.ReadFile(src)
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, name), data, 0o644)
		}
		if err != nil {
			r.t.Logf("chaos: keeping %s: %v", src, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, "smtp"), 0o755); err != nil {
		r.t.Logf("chaos: keeping the run's files: %v", err)
		return dst
	}
	for _, p := range r.reps {
		copyFile(p.log, p.name+".log")
		copyFile(p.cfg, p.name+".yaml")
	}
	files, _ := filepath.Glob(filepath.Join(r.smtp.Dir(), "*.eml"))
	for _, f := range files {
		copyFile(f, filepath.Join("smtp", filepath.Base(f)))
	}
	flog := r.faultLog()
	os.WriteFile(filepath.Join(dst, "schedule.txt"), []byte(r.sched.String()), 0o644)
	os.WriteFile(filepath.Join(dst, "faults.log"), []byte(flog), 0o644)
	os.WriteFile(filepath.Join(dst, "report.txt"), []byte(report), 0o644)
	return dst
}

// finish checks, reports and keeps the artifacts.
func (r *chaosRunner) finish() {
	t := r.t
	verdicts, foreign, dist := r.check()
	report := r.report(verdicts, foreign, dist)
	flog := r.faultLog()
	r.mu.Lock()
	failed := len(r.problems) > 0
	r.mu.Unlock()
	for _, v := range verdicts {
		failed = failed || len(v.wrong) > 0
	}
	failed = failed || len(foreign) > 0
	if failed || r.set.artifacts != "" {
		report += fmt.Sprintf("the run's files (replica logs, SMTP messages, fault log) are kept in %s\n", r.keep(report))
	}
	if failed {
		t.Logf("fault log:\n%s", flog)
		t.Errorf("\n%s", report)
		return
	}
	t.Logf("fault log:\n%s", flog)
	t.Logf("\n%s", report)

}

// newChaosRunner is the run's harness: the binary built, the FaultySMTP
// server started, the schedule drawn.
func newChaosRunner(t *testing.T, set chaosSettings, variant string) *chaosRunner {
	t.Helper()
	r := &chaosRunner{t: t, set: set, variant: variant, ran: map[chaosKind]int{}, idle: map[chaosKind]int{}, seeded: map[string]time.Time{}, sentAt: map[string]time.Time{}}
	t.Logf("chaos sweeper %s: seed %d (%s repeats this run)", variant, set.seed, set.reproduce())
	r.sched = newChaosSchedule(set.seed, set.dur, set.kinds)
	t.Logf("%s", r.sched)
	rng := rand.New(rand.NewPCG(set.seed, 0x15))
	r.h = &raceHarness{t: t, p: raceParams{seed: set.seed}, rng: rng, dir: t.TempDir(), wasSent: map[string]bool{}, left: map[string]bool{}}
	r.h.db = fmt.Sprintf("chaos%d", rng.Uint32())
	r.h.bin = buildSweeper(t, r.h.dir)
	r.smtp = testenv.StartFaultySMTP(t)
	return r
}

// chaosConfig writes a replica's config: store is the clickhouse or
// embedded section, extra the keeper section.
func (r *chaosRunner) chaosConfig(name, store, claims, extra string) string {
	r.t.Helper()
	p := filepath.Join(r.h.dir, name+".yaml")
	data := fmt.Sprintf(`%s
sources: [{path: /var/log/x.log, site: %s}]
http: {listen: ""}
state_dir: %s
sweep: {every: 1s, claims: %s, digest_after: %d}
%s
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "%s <alerts@example.com>", timeout: %s}
rules:
  - {name: %s, match: {path: "/race/*"}, milestones: [%d], window: lifetime, to: [ops@example.com]}
`, store, raceSite, filepath.Join(r.h.dir, "state-"+name), claims, r.set.digestAfter, extra, r.smtp.Port(), name, chaosSMTPTimeout, raceRule, raceHits)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// TestSweeperChaos runs K sweeper replicas under a seeded random schedule of
// faults, then checks every crossing (see the top of this file).
//
//	go test -run TestSweeperChaos -v ./cmd/sweeper/
//	CHAOS_SEED=N CHAOS_DURATION=5m go test -run TestSweeperChaos -v -timeout 30m ./cmd/sweeper/
//
// Not parallel with the other tests: its verdict excuses a second copy
// only inside fixed windows after a fault (smtp.timeout + 2 s, 2 s on
// waking), which the racing-replica tests' load beside it would stretch. Its
// two runs are parallel with each other.
func TestSweeperChaos(t *testing.T) {
	set := chaosSettingsFromEnv(t)
	t.Run("keeper", func(t *testing.T) {
		t.Parallel()
		r := newChaosRunner(t, set, "keeper")
		ch := testenv.ClickHouse(t)
		zk := testenv.ZooKeeper(t)
		r.h.serverStore(ch)
		for i := range raceK {
			name := fmt.Sprintf("replica%d", i)
			cfg := r.chaosConfig(name, fmt.Sprintf("clickhouse: {addr: [%q], database: %s}", ch.Addr(), r.h.db), "keeper",
				fmt.Sprintf("keeper: {addr: [%q], root: %s, session_timeout: %s}", zk.Addr(), chaosRoot, chaosSession))
			r.reps = append(r.reps, &chaosReplica{r: r, i: i, name: name, cfg: cfg, env: []string{noElectorEnv + "=1"},
				log: filepath.Join(r.h.dir, name+".log"), ready: "sweeping without the elector"})
		}
		r.runPhases()
		r.finish()
	})

	// local: one sweeper at a time (the lock file), the service as deployed
	// (gocron, no test hook), on the embedded engine; restarted after every
	// kill and term. Waves go in while it is down (see chaosLocal).
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		lib := testenv.RequireChdb(t)
		r := newChaosRunner(t, set, "local")
		testenv.HoldEngine(t) // flush opens the engine in this process
		r.h.db = "hitcount"   // the embedded store's database
		r.local = &chaosLocal{lib: lib, data: filepath.Join(r.h.dir, "data")}
		name := "replica0"
		cfg := r.chaosConfig(name, fmt.Sprintf("embedded: {path: %s, library: %s}", r.local.data, lib), "local", "")
		r.reps = append(r.reps, &chaosReplica{r: r, name: name, cfg: cfg, log: filepath.Join(r.h.dir, name+".log"), ready: "msg=sweeping"})
		r.flush() // the schema, before the first start
		r.runPhases()
		r.finish()
	})
}
