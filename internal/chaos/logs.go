package chaos

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
)

// Line classes: what the check expects of a line.
const (
	lineNormal     = iota // in hits exactly once
	lineMustAbsent        // history before a start_at: end first start: never shipped
	lineOdd               // a line the store may refuse (no newline, before 1970): counted once, in hits or rejects
	lineShared            // written into several files (same first line): once per file
)

type seqRange struct{ lo, hi uint64 } // inclusive

// fileObj is one file's content as far as the streams are concerned: which
// of its stream's lines it holds. It keeps its object across renames; a
// gzipped copy or a copytruncate copy is a new object with the same lines.
type fileObj struct {
	path   string
	ranges []seqRange
}

func (f *fileObj) add(seq uint64) {
	if n := len(f.ranges); n > 0 && f.ranges[n-1].hi+1 == seq {
		f.ranges[n-1].hi = seq
		return
	}
	f.ranges = append(f.ranges, seqRange{seq, seq})
}

// Stream is one sequence of lines, /chaos/<name>/<seq>, written to one live
// log file (and, through rotation, to its rotated siblings).
type Stream struct {
	Name string
	Site string
	Path string // the live file
	// Style is how the stream's logrotate rotates it: RotateCreate,
	// RotateCopyTruncate or RotateDelayCompress.
	Style  Kind
	rate   int  // lines per second of its writer; 0: no writer
	bursty bool // its writer falls silent for seconds at a time
	// rotatable: rotation faults may pick it (only streams whose writer
	// runs: a file with nothing in it has no identity yet).
	rotatable bool
	started   chan struct{} // closed when its writer may begin

	mu    sync.Mutex
	f     *os.File
	cur   *fileObj
	next  uint64 // the next line's seq: lines written so far
	gen   *loggen.Generator
	rng   *rand.Rand
	buf   []byte
	files map[string]*fileObj // by current path
	// class of lines that are not lineNormal.
	special map[uint64]int
	// lost: lines of a rotated file that logrotate deleted; the collector
	// may not have read them (at most their expected count).
	lost   map[uint64]bool
	why    map[uint64]string // for odd lines: which fault wrote it
	expect map[uint64]int    // for shared lines: the number of files holding it
}

// Logs are a run's log files and the streams written into them.
type Logs struct {
	Root string
	seed uint64

	mu      sync.Mutex
	streams []*Stream
	errs    []error
	dups    int // same-first-line pairs made
	wg      sync.WaitGroup
}

// placeholder is the path loggen writes, replaced by the stream's marker.
const placeholder = "/_chaos_marker_"

// NewLogs prepares an empty log tree under root.
func NewLogs(root string, seed uint64) *Logs { return &Logs{Root: root, seed: seed} }

func (l *Logs) errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Errorf(format, args...))
}

// Errors are the harness's own failures (a write or rename that failed).
func (l *Logs) Errors() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// Streams lists every stream, in creation order.
func (l *Logs) Streams() []*Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.streams)
}

// Stream returns the stream called name, or nil.
func (l *Logs) Stream(name string) *Stream {
	for _, s := range l.Streams() {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// add creates a stream whose live file is rel under Root (no file yet).
func (l *Logs) add(name, site, rel string, style Kind, rate int) *Stream {
	l.mu.Lock()
	defer l.mu.Unlock()
	seed := l.seed ^ uint64(len(l.streams)+1)*0x9e3779b97f4a7c15
	s := &Stream{
		Name: name, Site: site, Style: style, rate: rate,
		started: make(chan struct{}),
		gen:     loggen.New(loggen.Options{Seed: seed, Paths: []string{placeholder}}),
		rng:     rand.New(rand.NewPCG(seed, 7)),
		files:   map[string]*fileObj{}, special: map[uint64]int{}, lost: map[uint64]bool{}, why: map[uint64]string{}, expect: map[uint64]int{},
	}
	if rel != "" {
		s.Path = filepath.Join(l.Root, rel)
	}
	l.streams = append(l.streams, s)
	return s
}

// Written is the number of lines the stream has written.
func (s *Stream) Written() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// class says what the check expects of line seq: its class, how many
// copies, and whether fewer are allowed (its file was deleted).
func (s *Stream) class(seq uint64) (c, want int, mayLose bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c = s.special[seq]
	switch c {
	case lineShared:
		want = s.expect[seq]
	case lineMustAbsent:
		want = 0
	default:
		want = 1
	}
	return c, want, s.lost[seq]
}

// open creates (or appends to) the live file.
func (s *Stream) openLocked() error {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(s.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.f = f
	if obj, ok := s.files[s.Path]; ok {
		s.cur = obj
	} else {
		s.cur = &fileObj{path: s.Path}
		s.files[s.Path] = s.cur
	}
	return nil
}

// lineLocked appends the line for the next seq, stamped t, to s.buf.
func (s *Stream) lineLocked(t time.Time) {
	start := len(s.buf)
	s.buf, _ = s.gen.Line(s.buf, t)
	marker := "/chaos/" + s.Name + "/" + strconv.FormatUint(s.next, 10)
	line := bytes.Replace(s.buf[start:], []byte(placeholder), []byte(marker), 1)
	s.buf = append(s.buf[:start], line...)
	s.cur.add(s.next)
	s.next++
}

// write appends n lines in one write, as a web server writes whole lines.
func (s *Stream) write(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(n, time.Now())
}

func (s *Stream) writeLocked(n int, t time.Time) error {
	if s.f == nil {
		if err := s.openLocked(); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	for range n {
		s.lineLocked(t)
	}
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("write %s: %w", s.Path, err)
	}
	return nil
}

// writeOddLocked writes one line of class lineOdd: why says which fault.
// partial drops its newline.
func (s *Stream) writeOddLocked(t time.Time, why string, partial bool) error {
	if s.f == nil {
		if err := s.openLocked(); err != nil {
			return err
		}
	}
	seq := s.next
	s.buf = s.buf[:0]
	s.lineLocked(t)
	if partial {
		s.buf = bytes.TrimRight(s.buf, "\n")
	}
	s.special[seq], s.why[seq] = lineOdd, why
	if _, err := s.f.Write(s.buf); err != nil {
		return fmt.Errorf("write %s: %w", s.Path, err)
	}
	return nil
}

// run is the stream's writer: about rate lines a second in small bursts,
// stamped with the current time, until ctx ends.
func (s *Stream) run(ctx context.Context, l *Logs) {
	defer l.wg.Done()
	select {
	case <-ctx.Done():
		return
	case <-s.started:
	}
	const tick = 20 * time.Millisecond
	perTick := max(1, s.rate/50)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		n := s.rng.IntN(2*perTick + 1)
		silent := time.Duration(0)
		if s.bursty && s.rng.IntN(150) == 0 { // about every 3 s of writing
			silent = time.Duration(2000+s.rng.IntN(6000)) * time.Millisecond
		}
		var err error
		if n > 0 {
			err = s.writeLocked(n, time.Now())
		}
		s.mu.Unlock()
		if err != nil {
			l.errorf("stream %s: %v", s.Name, err)
			return
		}
		if silent > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(silent):
			}
		}
	}
}

// Start lets the writers of every stream that has one begin (a stream may
// be held back: see Hold), and runs them until ctx ends; Wait waits for them.
func (l *Logs) Start(ctx context.Context) {
	for _, s := range l.Streams() {
		l.startWriter(ctx, s)
	}
}

func (l *Logs) startWriter(ctx context.Context, s *Stream) {
	if s.rate > 0 {
		l.wg.Add(1)
		go s.run(ctx, l)
	}
}

// Release lets a held stream's writer begin.
func (s *Stream) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.started:
	default:
		close(s.started)
		s.rotatable = s.rate > 0 && s.Style != ""
	}
}

// Wait waits until every writer has returned (after ctx ended).
func (l *Logs) Wait() { l.wg.Wait() }

// Close closes every live file.
func (l *Logs) Close() {
	for _, s := range l.Streams() {
		s.mu.Lock()
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
		s.mu.Unlock()
	}
}

// --- the workload -----------------------------------------------------------

// Layout is the shape of the log tree; the collector's config is built from
// it.
type Layout struct {
	VhostGlob string // site www: vhosts/**/access*.log
	APIPath   string // site api: one literal path
	LatePath  string // site late (start_at: end); "" without StartAtEnd
}

// Setup creates the streams a run with these kinds needs and everything
// that must exist before the collector's first start. maxPending is the
// collector's batch.max_pending.
func (l *Logs) Setup(ks []Kind, maxPending int) (Layout, error) {
	lay := Layout{
		VhostGlob: filepath.Join(l.Root, "vhosts", "**", "access*.log"),
		APIPath:   filepath.Join(l.Root, "api", "api.log"),
	}
	var styles []Kind
	for _, k := range []Kind{RotateCreate, RotateCopyTruncate, RotateDelayCompress} {
		if hasKind(ks, k) {
			styles = append(styles, k)
		}
	}
	if len(styles) == 0 {
		styles = []Kind{RotateCreate} // for no-newline and delete-rotated
	}
	style := func(i int) Kind { return styles[i%len(styles)] }
	// The busy streams every run has, under two sources: a ** glob over
	// vhost directories and one literal path. c falls silent for seconds.
	base := []struct {
		name, site, rel string
		rate            int
		bursty          bool
	}{
		{"a", "www", "vhosts/a/access.log", 300, false},
		{"b", "www", "vhosts/b/access_ssl.log", 150, false},
		{"c", "www", "vhosts/c/sub/access.log", 100, true},
		{"api", "api", "api/api.log", 200, false},
	}
	for i, b := range base {
		s := l.add(b.name, b.site, b.rel, style(i), b.rate)
		s.bursty = b.bursty
		s.Release()
	}
	if hasKind(ks, IdleFiles) {
		// More quiet live logs than batches, each with one line to start;
		// the nemesis adds a line to one now and then.
		for i := 1; i <= maxPending+1; i++ {
			s := l.add(fmt.Sprintf("q%d", i), "www", fmt.Sprintf("vhosts/quiet-%d/access.log", i), "", 0)
			if err := s.write(1); err != nil {
				return lay, err
			}
			s.Release()
		}
		// A vhost with five rotated files of history at the first start.
		s := l.add("old", "www", "vhosts/old/access.log", "", 0)
		if err := l.history(s, []string{".5.gz", ".4.gz", ".3.gz", ".2.gz", ".1", ""}, 300, lineNormal); err != nil {
			return lay, err
		}
		s.Release()
	}
	if hasKind(ks, StartAtEnd) {
		lay.LatePath = filepath.Join(l.Root, "late", "access.log")
		s := l.add("late", "late", "late/access.log", style(len(base)), 100)
		if err := l.history(s, []string{".2.gz", ".1", ""}, 200, lineMustAbsent); err != nil {
			return lay, err
		}
		// Held until the collector has opened the live file (Release).
	}
	return lay, nil
}

// history writes n lines into each of the stream's files named by suffix
// (oldest first; "" is the live file), with class c, an hour back in time
// and a minute apart per file, so that modification times order them too.
func (l *Logs) history(s *Stream, suffixes []string, n int, c int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := time.Now().Add(-time.Hour)
	for i, suf := range suffixes {
		path := s.Path + suf
		obj := &fileObj{path: path}
		s.buf = s.buf[:0]
		saved := s.cur
		s.cur = obj
		for range n {
			if c != lineNormal {
				s.special[s.next] = c
			}
			s.lineLocked(t0.Add(time.Duration(i) * time.Minute))
		}
		s.cur = saved
		data := s.buf
		if strings.HasSuffix(suf, ".gz") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			zw.Write(data)
			zw.Close()
			data = b.Bytes()
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		mt := t0.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(path, mt, mt); err != nil {
			return err
		}
		s.files[path] = obj
	}
	return s.openLocked()
}

// --- file faults --------------------------------------------------------------

// pickStream chooses among the streams that ok accepts.
func (l *Logs) pickStream(pick uint64, ok func(*Stream) bool) *Stream {
	var c []*Stream
	for _, s := range l.Streams() {
		s.mu.Lock()
		good := ok(s)
		s.mu.Unlock()
		if good {
			c = append(c, s)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[pick%uint64(len(c))]
}

func rotatable(s *Stream) bool { return s.rotatable }

// Apply runs one file fault; it reports what it did, or "" when nothing
// could be done (no stream fits yet).
func (l *Logs) Apply(ctx context.Context, e Event) (string, error) {
	switch e.Kind {
	case RotateCreate, RotateCopyTruncate, RotateDelayCompress:
		s := l.pickStream(e.Pick, func(s *Stream) bool { return s.rotatable && s.Style == e.Kind })
		if s == nil {
			return "", nil
		}
		return "rotated " + s.Name, l.rotate(s, s.Style, 0, "")
	case DeleteRotated:
		s := l.pickStream(e.Pick, rotatable)
		if s == nil {
			return "", nil
		}
		return "rotated " + s.Name + " keeping 2", l.rotate(s, s.Style, 2, "")
	case NoNewline:
		s := l.pickStream(e.Pick, rotatable)
		if s == nil {
			return "", nil
		}
		return "unterminated last line, rotated " + s.Name, l.rotate(s, s.Style, 0, "no-newline")
	case Pre1970:
		s := l.pickStream(e.Pick, rotatable)
		if s == nil {
			return "", nil
		}
		s.mu.Lock()
		err := s.writeOddLocked(time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), "pre-1970", false)
		s.mu.Unlock()
		return "line dated 1969 in " + s.Name, err
	case IdleFiles:
		s := l.pickStream(e.Pick, func(s *Stream) bool { return s.rate == 0 && strings.HasPrefix(s.Name, "q") })
		if s == nil {
			return "", nil
		}
		return "one line to " + s.Name, s.write(1)
	case SameFirstLine:
		return l.sameFirstLine(ctx)
	}
	return "", fmt.Errorf("%s is not a file fault", e.Kind)
}

// sameFirstLine makes two new vhost logs starting with the same line, then
// lets a writer append to each.
func (l *Logs) sameFirstLine(ctx context.Context) (string, error) {
	l.mu.Lock()
	l.dups++
	k := l.dups
	l.mu.Unlock()
	shared := l.add(fmt.Sprintf("dup%d", k), "www", "", "", 0)
	shared.mu.Lock()
	shared.cur = &fileObj{}
	shared.buf = shared.buf[:0]
	shared.lineLocked(time.Now())
	first := slices.Clone(shared.buf)
	shared.special[0], shared.expect[0] = lineShared, 2
	shared.mu.Unlock()
	for _, side := range []string{"a", "b"} {
		name := fmt.Sprintf("dup%d-%s", k, side)
		s := l.add(name, "www", fmt.Sprintf("vhosts/%s/access.log", name), "", 50)
		s.mu.Lock()
		err := s.openLocked()
		if err == nil {
			_, err = s.f.Write(first)
		}
		s.mu.Unlock()
		if err != nil {
			return "", err
		}
		s.Release()
		l.startWriter(ctx, s)
	}
	return fmt.Sprintf("dup%d-a and dup%d-b start with the same line", k, k), nil
}

var rotatedNum = regexp.MustCompile(`\.(\d+)(\.gz)?$`)

// rotatedFiles lists the stream's rotated files as number -> path.
func (s *Stream) rotatedLocked() map[int]string {
	out := map[int]string{}
	for p := range s.files {
		if p == s.Path || !strings.HasPrefix(p, s.Path+".") {
			continue
		}
		if m := rotatedNum.FindStringSubmatch(p[len(s.Path):]); m != nil {
			n, _ := strconv.Atoi(m[1])
			out[n] = p
		}
	}
	return out
}

func (s *Stream) renameLocked(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	obj := s.files[from]
	delete(s.files, from)
	if obj != nil {
		obj.path = to
		s.files[to] = obj
	}
	return nil
}

// shiftLocked renames every rotated file numbered >= from up by one,
// highest first, as logrotate does before it rotates.
func (s *Stream) shiftLocked(from int) error {
	rot := s.rotatedLocked()
	nums := make([]int, 0, len(rot))
	for n := range rot {
		if n >= from {
			nums = append(nums, n)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	for _, n := range nums {
		p := rot[n]
		to := s.Path + "." + strconv.Itoa(n+1) + strings.TrimPrefix(p[len(s.Path):], "."+strconv.Itoa(n))
		if err := s.renameLocked(p, to); err != nil {
			return err
		}
	}
	return nil
}

// compress gzips path into path.gz in pieces (a reader may see a partial
// .gz, as with gzip itself), then removes path.
func (s *Stream) compress(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := os.Create(path + ".gz")
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	for len(data) > 0 {
		n := min(len(data), 64<<10)
		zw.Write(data[:n])
		zw.Flush()
		data = data[n:]
		time.Sleep(time.Millisecond)
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if obj := s.files[path]; obj != nil {
		s.files[path+".gz"] = &fileObj{path: path + ".gz", ranges: slices.Clone(obj.ranges)}
	}
	delete(s.files, path)
	return os.Remove(path)
}

// rotate rotates the stream's live file in a logrotate style; keep > 0
// deletes rotated files numbered above keep afterwards; odd != "" first
// ends the live file with a line without its newline.
func (l *Logs) rotate(s *Stream, style Kind, keep int, odd string) error {
	s.mu.Lock()
	if odd != "" {
		// The unterminated line ends a file that has lines: a file whose
		// only content is half a line has no identity (its first line is
		// not complete) and is another case than finding 7's.
		if s.cur == nil || len(s.cur.ranges) == 0 {
			if err := s.writeLocked(1, time.Now()); err != nil {
				s.mu.Unlock()
				return err
			}
		}
		if err := s.writeOddLocked(time.Now(), odd, true); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	var toCompress string
	var err error
	switch style {
	case RotateCreate:
		if err = s.shiftLocked(1); err == nil {
			err = s.renameLocked(s.Path, s.Path+".1")
		}
		if err == nil && odd == "" {
			// The web server writes to the renamed file until it reopens.
			s.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			s.mu.Lock()
		}
		toCompress = s.Path + ".1"
	case RotateDelayCompress:
		// logrotate -v: renaming .2.gz to .3.gz, .1 to .2, the log to .1;
		// then compressing .2.
		if err = s.shiftLocked(1); err == nil {
			err = s.renameLocked(s.Path, s.Path+".1")
		}
		if _, ok := s.files[s.Path+".2"]; ok {
			toCompress = s.Path + ".2"
		}
		if err == nil && odd == "" {
			s.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			s.mu.Lock()
		}
	case RotateCopyTruncate:
		// The writer is held from the copy to the truncation: lines written
		// in between are lost by logrotate itself, a window the collector
		// cannot close (README), so the harness does not open it.
		if err = s.shiftLocked(1); err == nil {
			err = copyFile(s.Path, s.Path+".1")
		}
		if err == nil {
			s.files[s.Path+".1"] = &fileObj{path: s.Path + ".1", ranges: slices.Clone(s.cur.ranges)}
			err = s.f.Truncate(0)
			s.cur.ranges = nil
		}
		toCompress = s.Path + ".1"
	default:
		err = fmt.Errorf("no rotation style %q", style)
	}
	if err == nil && style != RotateCopyTruncate {
		old := s.f
		s.f = nil
		err = s.openLocked()
		old.Close()
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rotate %s (%s): %w", s.Path, style, err)
	}
	if toCompress != "" {
		time.Sleep(30 * time.Millisecond)
		if err := s.compress(toCompress); err != nil {
			return fmt.Errorf("rotate %s: compress: %w", s.Path, err)
		}
	}
	if keep > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		for n, p := range s.rotatedLocked() {
			if n <= keep {
				continue
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			for _, r := range s.files[p].ranges {
				for seq := r.lo; seq <= r.hi; seq++ {
					s.lost[seq] = true
				}
			}
			delete(s.files, p)
		}
	}
	return nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
