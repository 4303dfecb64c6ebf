package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// Options tune a Sweeper.
type Options struct {
	Lateness     time.Duration // how far before the watermark a sweep re-reads [10m]
	Lease        time.Duration // claim lease [2m]
	MaxCrossings int           // crossings sent per pass before starting another [1000]
	MaxAttempts  uint32        // sends before a crossing is marked failed [5]
	From         string        // sender address
	Owner        string        // this sweeper's name in the state table
	DryRun       bool          // detect and report, change nothing
	Logger       *slog.Logger
	Metrics      *Metrics
	Now          func() time.Time
	// Fault, when set, is called after each step of sending a crossing
	// ("recorded", "claimed", "sent", "marked") so tests can crash there.
	Fault func(step string)
}

// Sweeper finds crossings and announces each once.
type Sweeper struct {
	store  *Store
	rules  []*Rule
	claims Claimer
	sender Sender
	o      Options
	last   uint64 // last version written, to keep versions strictly increasing
}

// NewSweeper returns a sweeper.
func NewSweeper(store *Store, rules []*Rule, claims Claimer, sender Sender, o Options) *Sweeper {
	if o.Lateness <= 0 {
		o.Lateness = 10 * time.Minute
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.MaxCrossings <= 0 {
		o.MaxCrossings = 1000
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Fault == nil {
		o.Fault = func(string) {}
	}
	return &Sweeper{store: store, rules: rules, claims: claims, sender: sender, o: o}
}

// Result says what a sweep did.
type Result struct {
	Detected []Row // crossings recorded (or, in a dry run, that would be)
	Sent     int
	Failed   int
	Pending  int  // crossings still waiting after this pass
	More     bool // MaxCrossings was reached: run again at once
}

// retryAfter is how long a crossing whose email failed waits before the next
// attempt: 30 s, doubling per attempt, at most an hour. A sweep runs every few
// minutes, so in practice the first retries happen on the next sweeps.
func retryAfter(attempts uint32) time.Duration {
	d := 30 * time.Second
	for i := uint32(1); i < attempts && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

func (s *Sweeper) version() uint64 {
	v := uint64(s.o.Now().UnixNano())
	if v <= s.last {
		v = s.last + 1
	}
	s.last = v
	return v
}

// Sweep runs one pass: detect crossings among the pages touched since the
// last watermark (minus the allowed lateness), record the new ones, then
// claim, re-check, send and mark each pending one.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	var res Result
	t0 := s.o.Now()
	hi := t0
	wm, ok, err := s.store.Watermark(ctx)
	if err != nil {
		return res, err
	}
	lo := hi.Add(-s.o.Lateness)
	if ok {
		lo = wm.Add(-s.o.Lateness)
	}
	found, err := s.detect(ctx, lo, hi)
	if err != nil {
		return res, err
	}
	// Record only what the state table does not have yet.
	keys := make([]string, len(found))
	for i := range found {
		keys[i] = found[i].Key()
	}
	known, err := s.store.Latest(ctx, keys)
	if err != nil {
		return res, err
	}
	var fresh []Row
	for _, r := range found {
		if _, ok := known[r.Key()]; !ok {
			r.State, r.Version, r.Owner, r.MsgID, r.Updated = StateDetected, s.version(), s.o.Owner, r.MessageID(domainOf(s.o.From)), s.o.Now()
			fresh = append(fresh, r)
		}
	}
	res.Detected = fresh
	if s.o.DryRun {
		pending, err := s.store.Pending(ctx)
		res.Pending = len(pending) + len(fresh)
		return res, err
	}
	if err := s.store.Write(ctx, fresh); err != nil {
		return res, err
	}
	s.o.Metrics.crossings(len(fresh))
	if len(fresh) > 0 {
		s.o.Fault("recorded")
	}

	pending, err := s.store.Pending(ctx)
	if err != nil {
		return res, err
	}
	attempted := 0
	for _, row := range pending {
		if ctx.Err() != nil {
			break
		}
		if row.State == StateDetected && row.Attempts > 0 && s.o.Now().Before(row.Updated.Add(retryAfter(row.Attempts))) {
			continue // backing off after a failed send
		}
		if attempted >= s.o.MaxCrossings {
			res.More = true
			break
		}
		attempted++
		sent, failed, err := s.deliver(ctx, row)
		if err != nil {
			return res, err
		}
		if sent {
			res.Sent++
		}
		if failed {
			res.Failed++
		}
	}
	res.Pending = max(0, len(pending)-res.Sent-res.Failed)
	s.o.Metrics.waiting(res.Pending)
	if err := s.store.Finish(ctx, hi, s.o.Owner, len(fresh), res.Sent); err != nil {
		return res, err
	}
	s.o.Metrics.sweep(s.o.Now().Sub(t0))
	return res, nil
}

// detect computes the crossings of every rule among the touched pages.
func (s *Sweeper) detect(ctx context.Context, lo, hi time.Time) ([]Row, error) {
	touched, err := s.store.Touched(ctx, lo, hi)
	if err != nil {
		return nil, err
	}
	type group struct {
		site  string
		start time.Time
	}
	var out []Row
	for _, r := range s.rules {
		// Pages of each window that got hits, per site.
		windows := map[group]map[string]bool{}
		for _, t := range touched {
			if !r.Matches(t.Site, t.Path) {
				continue
			}
			g := group{t.Site, r.Window.Start(t.Minute)}
			if windows[g] == nil {
				windows[g] = map[string]bool{}
			}
			windows[g][t.Path] = true
		}
		for g, set := range windows {
			paths := make([]string, 0, len(set))
			for p := range set {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			counts, err := s.store.Counts(ctx, r, g.site, paths, g.start, r.Window.End(g.start))
			if err != nil {
				return nil, err
			}
			for _, p := range paths {
				for _, th := range r.crossed(counts[p]) {
					out = append(out, Row{
						Crossing: Crossing{Rule: r.Name, Subject: g.site + p, WindowStart: g.start.UTC(), Threshold: th},
						Site:     g.site, Path: p, Count: counts[p],
					})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

func (s *Sweeper) rule(name string) *Rule {
	for _, r := range s.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// deliver claims, re-checks, sends and marks one crossing.
func (s *Sweeper) deliver(ctx context.Context, row Row) (sent, failed bool, err error) {
	log := s.o.Logger.With("rule", row.Rule, "page", row.Site+row.Path, "threshold", row.Threshold, "window", row.WindowStart)
	r := s.rule(row.Rule)
	if r == nil {
		log.Warn("crossing of a rule no longer configured: left pending")
		return false, false, nil
	}
	claim, ok, err := s.claims.Claim(ctx, row.Key(), s.o.Lease)
	if err != nil {
		return false, false, fmt.Errorf("claim %s: %w", row.Key(), err)
	}
	s.o.Metrics.claim(ok)
	if !ok {
		return false, false, nil
	}
	defer s.claims.Release(context.WithoutCancel(ctx), row.Key(), claim)
	claimed := row
	claimed.State, claimed.Version, claimed.Owner, claimed.Fencing, claimed.Updated = StateClaimed, s.version(), s.o.Owner, claim.Token, s.o.Now()
	if err := s.store.Write(ctx, []Row{claimed}); err != nil {
		return false, false, err
	}
	s.o.Fault("claimed")

	msg, err := s.message(ctx, r, row)
	if err != nil {
		return false, false, err
	}
	// Re-check just before sending: still unsent, and the claim still ours.
	latest, err := s.store.Latest(ctx, []string{row.Key()})
	if err != nil {
		return false, false, err
	}
	if cur := latest[row.Key()]; cur.State == StateSent || cur.State == StateFailed {
		return false, false, nil
	}
	if valid, err := s.claims.Valid(ctx, row.Key(), claim); err != nil || !valid {
		log.Warn("claim lost before sending; another sweeper will send it", "err", err)
		return false, false, err
	}
	retry, sendErr := s.sender.Send(ctx, msg)
	if sendErr == nil {
		s.o.Fault("sent")
	}
	// Marking checks the fencing token: a claim that expired while sending
	// (a paused process) must not overwrite what its successor recorded.
	if valid, err := s.claims.Valid(ctx, row.Key(), claim); err != nil {
		return false, false, err
	} else if !valid {
		log.Warn("claim expired while sending; not marking", "sent", sendErr == nil)
		return false, false, nil
	}
	mark := claimed
	mark.Version, mark.Updated = s.version(), s.o.Now()
	switch {
	case sendErr == nil:
		mark.State, mark.Error = StateSent, ""
		s.o.Metrics.sent()
		sent = true
	case !retry || row.Attempts+1 >= s.o.MaxAttempts:
		mark.State, mark.Attempts, mark.Error = StateFailed, row.Attempts+1, sendErr.Error()
		log.Error("giving up on a crossing's email", "attempts", mark.Attempts, "err", sendErr)
		s.o.Metrics.failed()
		failed = true
	default:
		mark.State, mark.Attempts, mark.Error = StateDetected, row.Attempts+1, sendErr.Error()
		log.Warn("sending failed; will retry", "attempts", mark.Attempts, "err", sendErr)
		s.o.Metrics.retried()
	}
	if err := s.store.Write(ctx, []Row{mark}); err != nil {
		return false, false, err
	}
	if sent {
		s.o.Fault("marked")
	}
	return sent, failed, nil
}

// view is what templates see.
type view struct {
	Rule, Site, Path       string
	Count, Threshold       int64
	Windowed               bool
	WindowName             string
	WindowStart, WindowEnd time.Time
	Series                 []Point
	SeriesStep             string
}

func (s *Sweeper) message(ctx context.Context, r *Rule, row Row) (*Message, error) {
	v := view{Rule: row.Rule, Site: row.Site, Path: row.Path, Count: row.Count, Threshold: row.Threshold}
	if r.Window.Size > 0 {
		v.Windowed = true
		v.WindowName = r.WindowName
		v.WindowStart = row.WindowStart.In(r.Window.loc())
		v.WindowEnd = r.Window.End(v.WindowStart)
		step := max(time.Minute, (r.Window.Size / 12).Truncate(time.Minute))
		v.SeriesStep = step.String()
		series, err := s.store.Series(ctx, r, row.Site, row.Path, v.WindowStart, v.WindowEnd, step)
		if err != nil {
			return nil, err
		}
		for i := range series {
			series[i].Time = series[i].Time.In(r.Window.loc())
		}
		v.Series = series
	}
	var subj, text, html bytes.Buffer
	if err := r.Subject.Execute(&subj, v); err != nil {
		return nil, fmt.Errorf("rule %s: subject: %w", r.Name, err)
	}
	if err := r.Text.Execute(&text, v); err != nil {
		return nil, fmt.Errorf("rule %s: text: %w", r.Name, err)
	}
	if err := r.HTML.Execute(&html, v); err != nil { // html/template escapes page text
		return nil, fmt.Errorf("rule %s: html: %w", r.Name, err)
	}
	return &Message{
		ID: row.MsgID, Key: row.Key(), From: s.o.From, To: r.To,
		Subject: subj.String(), Text: text.String(), HTML: html.String(), Date: s.o.Now(),
	}, nil
}

// ErrNoRules is returned when nothing is configured to sweep.
var ErrNoRules = errors.New("no rules")
