package collector

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// positions is a local hint, never the truth of what was shipped (that is in
// ClickHouse): where a source first seen with start_at: end started, so that a
// crash before its first insert does not move the start to a later end and
// skip the lines in between; each source's batch in flight (see
// positionsFile.InFlight); and what the store last acknowledged of each
// source, for when the store cannot answer in full (positionsFile.Acked).
// Written atomically; missing means empty; corrupt is a loud error naming
// the file.
type positions struct {
	path     string
	mu       sync.Mutex
	m        map[uint64]int64
	inFlight map[uint64]sink.Span
	// formats: how each batch in flight was parsed; headersAt: where the
	// header block in force at each source's acked line starts.
	formats   map[uint64][]parseSpan
	acked     map[uint64]int64
	headersAt map[uint64]int64
	sites     map[string]bool
	// absent is when each source with an entry was last missed by a scan
	// (in memory: a restart starts the clock again, which only keeps an
	// entry longer).
	absent map[uint64]time.Time
}

// positionsFile is the file's shape: ids in hex.
type positionsFile struct {
	// Start is where a never-seen source started (start_at: end).
	Start map[string]int64 `json:"start"`
	// InFlight is each source's batch handed to the store and not yet
	// acknowledged, [first line, last line, min ts, max ts]: after a crash
	// its outcome is learnt from the store (see shipper).
	InFlight map[string][5]int64 `json:"in_flight,omitempty"`
	// InFlightFormats is how each batch in flight was parsed: the format
	// (and header lines: W3C's #Fields) in force at its first line, and
	// each switch within it (format: auto). The batch is read again with
	// exactly these, not under a fresh detection, which may pick another
	// format and store its lines twice or not at all (found by the
	// adversary of issue 17). Missing (an older version): detected again.
	InFlightFormats map[string][]parseSpan `json:"in_flight_formats,omitempty"`
	// Acked is the last line of each source the store acknowledged, and
	// Sites the sites with any: written with the in-flight record's clearing
	// (no write of its own). The store stays the truth; these are read only
	// when a cluster replica lacks parts it cannot fetch (a replica that
	// holds them is down), so that a source this collector shipped goes on
	// from where it knows it stopped instead of waiting for that replica.
	Acked map[string]int64 `json:"acked,omitempty"`
	Sites []string         `json:"sites,omitempty"`
	// HeadersAt is where the block of header lines (W3C's "#Fields:") in
	// force at each source's Acked line starts: a file resumed after it
	// looks for a later block only after that line, however far the
	// resume offset is from the block (found by the adversary of issue
	// 17: a search bounded to 16 MiB took the file's first block).
	HeadersAt map[string]int64 `json:"headers_at,omitempty"`
}

func loadPositions(dir string) (*positions, error) {
	// It holds names and offsets of access logs, adm-only on most systems:
	// created private. One that exists keeps the mode its operator gave it
	// (group access may be on purpose).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	p := &positions{path: filepath.Join(dir, "positions.json"), m: map[uint64]int64{}, inFlight: map[uint64]sink.Span{},
		formats: map[uint64][]parseSpan{}, acked: map[uint64]int64{}, headersAt: map[uint64]int64{},
		sites: map[string]bool{}, absent: map[uint64]time.Time{}}
	data, err := os.ReadFile(p.path)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read positions hint: %w", err)
	}
	var raw positionsFile
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("positions hint %s is corrupt (delete it to start over; ClickHouse keeps what was shipped): %w", p.path, err)
	}
	for k, v := range raw.Start {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("positions hint %s is corrupt: key %q", p.path, k)
		}
		p.m[id] = v
	}
	for k, v := range raw.InFlight {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("positions hint %s is corrupt: key %q", p.path, k)
		}
		// A record of an older version has no times (MaxTS 0, unknown) and
		// no time of its rejects (0: a replay stamps them anew).
		p.inFlight[id] = sink.Span{First: v[0], Last: v[1], MinTS: v[2], MaxTS: v[3], RejectsAt: v[4]}
	}
	for k, v := range raw.InFlightFormats {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("positions hint %s is corrupt: key %q", p.path, k)
		}
		p.formats[id] = v
	}
	for k, v := range raw.Acked {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("positions hint %s is corrupt: key %q", p.path, k)
		}
		p.acked[id] = v
	}
	for k, v := range raw.HeadersAt {
		id, err := strconv.ParseUint(k, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("positions hint %s is corrupt: key %q", p.path, k)
		}
		p.headersAt[id] = v
	}
	for _, site := range raw.Sites {
		p.sites[site] = true
	}
	return p, nil
}

// hasAny reports whether any of ids has a start kept.
func (p *positions) hasAny(ids ...uint64) bool {
	_, ok := p.hint(ids...)
	return ok
}

// hint returns the start kept for the first of ids that has one.
func (p *positions) hint(ids ...uint64) (int64, bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if v, ok := p.m[id]; ok {
			return v, true
		}
	}
	return 0, false
}

func (p *positions) set(id uint64, off int64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[id] = off
	return p.save()
}

// setInFlight records the batch about to be inserted, durably, before the
// insert starts, with the formats its lines were parsed with.
func (p *positions) setInFlight(id uint64, span sink.Span, formats []parseSpan) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight[id] = span
	if len(formats) > 0 {
		p.formats[id] = formats
	} else {
		delete(p.formats, id)
	}
	return p.save()
}

// clearInFlight forgets a source's batch in flight once the store has
// acknowledged it, up to its line at last, of site: a record left behind
// would be inserted again at the next reopen of the source (a restart, or
// the gzip of a finished file under delaycompress), and trust a
// deduplication window that may have passed. headersAt is where the header
// block in force at last starts (-1: none).
func (p *positions) clearInFlight(id uint64, site string, last, headersAt int64) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.acked[id]; !ok || last > cur {
		p.acked[id] = last
		if headersAt >= 0 {
			p.headersAt[id] = headersAt
		} else {
			delete(p.headersAt, id)
		}
	}
	p.sites[site] = true
	if _, ok := p.inFlight[id]; !ok {
		return nil
	}
	delete(p.inFlight, id)
	delete(p.formats, id)
	return p.save()
}

// getHeaders returns the last line of a source the store acknowledged and
// where the header block in force there starts, if known.
func (p *positions) getHeaders(id uint64) (acked, headersAt int64, ok bool) {
	if p == nil {
		return 0, 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	acked, ok = p.acked[id]
	headersAt, has := p.headersAt[id]
	return acked, headersAt, ok && has
}

// getFormats returns how a source's batch in flight was parsed, if known.
func (p *positions) getFormats(id uint64) []parseSpan {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.formats[id]
}

// getAcked returns the last line of a source the store acknowledged to this
// collector, if it has a record of it.
func (p *positions) getAcked(id uint64) (int64, bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.acked[id]
	return v, ok
}

// ackedSites lists the sites this collector has had lines of acknowledged.
func (p *positions) ackedSites() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for s := range p.sites {
		out = append(out, s)
	}
	return out
}

func (p *positions) getInFlight(id uint64) (sink.Span, bool) {
	if p == nil {
		return sink.Span{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.inFlight[id]
	return v, ok
}

// prune forgets the entries of sources that no present file has had for
// after: their files were rotated away and deleted, and an entry would only
// make the file grow with every log ever read.
func (p *positions) prune(present map[uint64]bool, now time.Time, after time.Duration) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	check := func(id uint64) bool {
		if present[id] {
			delete(p.absent, id)
			return false
		}
		since, ok := p.absent[id]
		if !ok {
			p.absent[id] = now
			return false
		}
		return now.Sub(since) >= after
	}
	for id := range p.m {
		if check(id) {
			delete(p.m, id)
			changed = true
		}
	}
	for id := range p.inFlight {
		if check(id) {
			delete(p.inFlight, id)
			delete(p.formats, id)
			changed = true
		}
	}
	for id := range p.acked {
		if check(id) {
			delete(p.acked, id)
			delete(p.headersAt, id)
			changed = true
		}
	}
	for id := range p.absent {
		_, a := p.m[id]
		_, b := p.inFlight[id]
		_, c := p.acked[id]
		if !a && !b && !c {
			delete(p.absent, id)
		}
	}
	if !changed {
		return nil
	}
	return p.save()
}

func (p *positions) save() error {
	f := positionsFile{Start: map[string]int64{}, InFlight: map[string][5]int64{}, Acked: map[string]int64{},
		InFlightFormats: map[string][]parseSpan{}, HeadersAt: map[string]int64{}}
	for k, v := range p.m {
		f.Start[strconv.FormatUint(k, 16)] = v
	}
	for k, v := range p.inFlight {
		f.InFlight[strconv.FormatUint(k, 16)] = [5]int64{v.First, v.Last, v.MinTS, v.MaxTS, v.RejectsAt}
	}
	for k, v := range p.acked {
		f.Acked[strconv.FormatUint(k, 16)] = v
	}
	for k, v := range p.formats {
		f.InFlightFormats[strconv.FormatUint(k, 16)] = v
	}
	for k, v := range p.headersAt {
		f.HeadersAt[strconv.FormatUint(k, 16)] = v
	}
	for s := range p.sites {
		f.Sites = append(f.Sites, s)
	}
	sort.Strings(f.Sites)
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeAtomic(p.path, data)
}

// writeAtomic writes data to path through a temporary file, fsync and rename, so
// a crash leaves the old file or the new one, never half of either.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
