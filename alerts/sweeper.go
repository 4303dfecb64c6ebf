package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"sort"
	"strings"
	"time"
)

// Options tune a Sweeper.
type Options struct {
	Lateness     time.Duration // how far before the watermark a sweep re-reads [10m]
	Lease        time.Duration // claim lease [2m]
	MaxCrossings int           // crossings sent per pass before starting another [1000]
	MaxAttempts  uint32        // sends before a crossing is marked failed [5]
	DigestAfter  int           // more crossings than this for the same recipients make one digest [10]
	From         string        // sender address
	Owner        string        // this sweeper's name in the state table
	DryRun       bool          // detect and report, change nothing
	Logger       *slog.Logger
	Metrics      *Metrics
	Now          func() time.Time
	// MaxTouched is how many touched (page, minute) pairs one pass reads and
	// counts [5000]. A bigger backlog is read over several passes (Result.More)
	// before the watermark moves, so what a pass holds in memory, and how long
	// it goes without sending, stay bounded whatever requests arrive: with
	// paths cut at 16 KiB (longer ones are not counted), ~80 MiB at most.
	MaxTouched int
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
	round  *round // the scan the next pass continues, nil when it starts one
}

// round is one scan of hits_touched from the watermark (less the lateness) to
// a fixed end, read MaxTouched pairs per pass. It lives in memory only, and
// that is enough: the watermark moves to hi once the last page is counted, so
// a process that dies mid-round starts the scan over from the old watermark
// (redoing work, never skipping any; crossings already recorded are known by
// key and not recorded twice). A stored cursor would save the redo, but needs
// a column the sweeps table does not have, and a cursor naming a path would
// itself be attacker-sized text to bind.
type round struct {
	lo, hi time.Time
	offset int // pairs of [lo, hi] already counted and recorded
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
	if o.MaxTouched <= 0 {
		o.MaxTouched = 5000
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.DigestAfter <= 0 {
		o.DigestAfter = 10
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
	More     bool // MaxCrossings was reached, or touched pages are left to read: run again at once
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

// Sweep runs one pass: detect crossings among the next MaxTouched pages
// touched since the last watermark (minus the allowed lateness), record the
// new ones, then claim, re-check, send and mark each pending one. The pass
// that reads the last touched page records the new watermark; until then
// Result.More asks for another pass at once.
//
// Pages and rules fail alone: a count query that no retry can fix is logged,
// counted by rule (hitcount_sweeper_rule_errors_total) and skipped, and the
// watermark still advances (see count). Errors that may pass (the store is
// down, a timeout) are retried a few times, then fail the pass; the round is
// kept, so the next pass resumes where this one stopped.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	if s.o.DryRun {
		return s.dryRun(ctx)
	}
	var res Result
	t0 := s.o.Now()
	if s.round == nil {
		rd, err := s.newRound(ctx, t0)
		if err != nil {
			return res, err
		}
		s.round = rd
	}
	rd := s.round
	touched, err := s.store.TouchedPage(ctx, rd.lo, rd.hi, rd.offset, s.o.MaxTouched)
	if err != nil {
		return res, err
	}
	found, err := s.detect(ctx, touched)
	if err != nil {
		return res, err
	}
	fresh, err := s.unrecorded(ctx, found, nil)
	if err != nil {
		return res, err
	}
	res.Detected = fresh
	if err := s.store.Write(ctx, fresh); err != nil {
		return res, err
	}
	rd.offset += len(touched)
	s.o.Metrics.crossings(len(fresh))
	if len(fresh) > 0 {
		s.o.Fault("recorded")
	}
	finished := len(touched) < s.o.MaxTouched

	pending, err := s.store.Pending(ctx)
	if err != nil {
		return res, err
	}
	groups := s.plan(pending)
	attempted := 0
	for _, g := range groups {
		if ctx.Err() != nil {
			break
		}
		if attempted >= s.o.MaxCrossings {
			res.More = true
			break
		}
		attempted += len(g)
		sent, failed, err := s.deliver(ctx, g)
		if err != nil {
			return res, err
		}
		res.Sent += sent
		res.Failed += failed
	}
	res.Pending = max(0, len(pending)-res.Sent-res.Failed)
	s.o.Metrics.waiting(res.Pending)
	if finished {
		if err := s.store.Finish(ctx, rd.hi, s.o.Owner, len(fresh), res.Sent); err != nil {
			return res, err
		}
		s.round = nil
	} else {
		res.More = true
	}
	s.o.Metrics.sweep(s.o.Now().Sub(t0))
	return res, nil
}

// newRound starts a scan at the watermark, less the lateness, up to now.
func (s *Sweeper) newRound(ctx context.Context, now time.Time) (*round, error) {
	wm, ok, err := s.store.Watermark(ctx)
	if err != nil {
		return nil, err
	}
	lo := now.Add(-s.o.Lateness)
	if ok {
		lo = wm.Add(-s.o.Lateness)
	}
	return &round{lo: lo, hi: now}, nil
}

// dryRun detects what a sweep would record, reading every page of the round
// in one call (a dry run is a one-off report), and changes nothing.
func (s *Sweeper) dryRun(ctx context.Context) (Result, error) {
	var res Result
	rd, err := s.newRound(ctx, s.o.Now())
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for {
		touched, err := s.store.TouchedPage(ctx, rd.lo, rd.hi, rd.offset, s.o.MaxTouched)
		if err != nil {
			return res, err
		}
		found, err := s.detect(ctx, touched)
		if err != nil {
			return res, err
		}
		fresh, err := s.unrecorded(ctx, found, seen)
		if err != nil {
			return res, err
		}
		res.Detected = append(res.Detected, fresh...)
		rd.offset += len(touched)
		if len(touched) < s.o.MaxTouched {
			break
		}
	}
	pending, err := s.store.Pending(ctx)
	res.Pending = len(pending) + len(res.Detected)
	return res, err
}

// unrecorded returns the crossings of found that the state table does not
// have yet (nor seen, when given), as rows ready to write.
func (s *Sweeper) unrecorded(ctx context.Context, found []Row, seen map[string]bool) ([]Row, error) {
	keys := make([]string, len(found))
	for i := range found {
		keys[i] = found[i].Key()
	}
	known, err := s.store.Latest(ctx, keys)
	if err != nil {
		return nil, err
	}
	var fresh []Row
	for _, r := range found {
		k := r.Key()
		if _, ok := known[k]; ok || seen[k] {
			continue
		}
		if seen != nil {
			seen[k] = true
		}
		r.State, r.Version, r.Owner, r.MsgID, r.Updated = StateDetected, s.version(), s.o.Owner, r.MessageID(domainOf(s.o.From)), s.o.Now()
		fresh = append(fresh, r)
	}
	return fresh, nil
}

func (s *Sweeper) rule(name string) *Rule {
	for _, r := range s.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// plan groups the crossings due now into messages: one each, or, when more
// than DigestAfter wait for the same recipients, digests of up to
// MaxCrossings. Crossings backing off after a failed send wait.
func (s *Sweeper) plan(pending []Row) [][]Row {
	byRecipients := map[string][]Row{}
	var order []string
	for _, row := range pending {
		if row.State == StateDetected && row.Attempts > 0 && s.o.Now().Before(row.Updated.Add(retryAfter(row.Attempts))) {
			continue
		}
		r := s.rule(row.Rule)
		if r == nil {
			s.o.Logger.Warn("crossing of a rule no longer configured: left pending", "rule", row.Rule, "page", row.Site+row.Path)
			continue
		}
		to := append([]string(nil), r.To...)
		sort.Strings(to)
		k := strings.Join(to, ",")
		if _, ok := byRecipients[k]; !ok {
			order = append(order, k)
		}
		byRecipients[k] = append(byRecipients[k], row)
	}
	var out [][]Row
	for _, k := range order {
		rows := byRecipients[k]
		if len(rows) <= s.o.DigestAfter {
			for _, row := range rows {
				out = append(out, []Row{row})
			}
			continue
		}
		for len(rows) > 0 {
			n := min(len(rows), s.o.MaxCrossings)
			out = append(out, rows[:n])
			rows = rows[n:]
		}
	}
	return out
}

type held struct {
	row   Row
	claim Claim
}

// deliver claims, re-checks, sends and marks one message's crossings.
func (s *Sweeper) deliver(ctx context.Context, rows []Row) (sent, failed int, err error) {
	var mine []held
	var claimedRows []Row
	for _, row := range rows {
		claim, ok, err := s.claims.Claim(ctx, row.Key(), s.o.Lease)
		if err != nil {
			return 0, 0, fmt.Errorf("claim %s: %w", row.Key(), err)
		}
		s.o.Metrics.claim(ok)
		if !ok {
			continue
		}
		c := row
		c.State, c.Version, c.Owner, c.Fencing, c.Updated = StateClaimed, s.version(), s.o.Owner, claim.Token, s.o.Now()
		mine = append(mine, held{c, claim})
		claimedRows = append(claimedRows, c)
	}
	defer func() {
		for _, h := range mine {
			s.claims.Release(context.WithoutCancel(ctx), h.row.Key(), h.claim)
		}
	}()
	if len(mine) == 0 {
		return 0, 0, nil
	}
	if err := s.store.Write(ctx, claimedRows); err != nil {
		return 0, 0, err
	}
	s.o.Fault("claimed")

	// Re-check just before sending: still unsent, and the claims still ours.
	keys := make([]string, len(mine))
	for i, h := range mine {
		keys[i] = h.row.Key()
	}
	latest, err := s.store.Latest(ctx, keys)
	if err != nil {
		return 0, 0, err
	}
	live := mine[:0]
	for _, h := range mine {
		if cur := latest[h.row.Key()]; cur.State == StateSent || cur.State == StateFailed {
			continue
		}
		if valid, err := s.claims.Valid(ctx, h.row.Key(), h.claim); err != nil {
			return 0, 0, err
		} else if !valid {
			s.o.Logger.Warn("claim lost before sending; another sweeper will send it", "page", h.row.Site+h.row.Path)
			continue
		}
		live = append(live, h)
	}
	if len(live) == 0 {
		return 0, 0, nil
	}
	msg, err := s.message(ctx, live)
	if err != nil {
		return 0, 0, err
	}
	retry, sendErr := s.sender.Send(ctx, msg)
	if sendErr == nil {
		s.o.Fault("sent")
	}
	var marks []Row
	for _, h := range live {
		// Marking checks the fencing token: a claim that expired while
		// sending (a paused process) must not overwrite its successor's record.
		if valid, err := s.claims.Valid(ctx, h.row.Key(), h.claim); err != nil {
			return 0, 0, err
		} else if !valid {
			s.o.Logger.Warn("claim expired while sending; not marking", "page", h.row.Site+h.row.Path, "sent", sendErr == nil)
			continue
		}
		mark := h.row
		mark.Version, mark.Updated = s.version(), s.o.Now()
		switch {
		case sendErr == nil:
			mark.State, mark.Error = StateSent, ""
			s.o.Metrics.sent()
			sent++
		case !retry || mark.Attempts+1 >= s.o.MaxAttempts:
			mark.State, mark.Attempts, mark.Error = StateFailed, mark.Attempts+1, sendErr.Error()
			s.o.Logger.Error("giving up on a crossing's email", "page", mark.Site+mark.Path, "attempts", mark.Attempts, "err", sendErr)
			s.o.Metrics.failed()
			failed++
		default:
			mark.State, mark.Attempts, mark.Error = StateDetected, mark.Attempts+1, sendErr.Error()
			s.o.Logger.Warn("sending failed; will retry", "page", mark.Site+mark.Path, "attempts", mark.Attempts, "err", sendErr)
			s.o.Metrics.retried()
		}
		marks = append(marks, mark)
	}
	if err := s.store.Write(ctx, marks); err != nil {
		return 0, 0, err
	}
	if sent > 0 {
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

func (s *Sweeper) message(ctx context.Context, live []held) (*Message, error) {
	if len(live) > 1 {
		return s.digest(live)
	}
	row := live[0].row
	r := s.rule(row.Rule)
	v := view{Rule: row.Rule, Site: row.Site, Path: row.Path, Count: row.Count, Threshold: row.Threshold}
	if r.Window.Size > 0 {
		v.Windowed = true
		v.WindowName = r.WindowName
		v.WindowStart = row.WindowStart.In(r.Window.loc())
		v.WindowEnd = r.Window.End(v.WindowStart)
		step := max(time.Minute, (r.Window.Size / 12).Truncate(time.Minute))
		v.SeriesStep = step.String()
		series, err := retry(ctx, func() ([]Point, error) {
			return s.store.Series(ctx, r, row.Site, row.Path, v.WindowStart, v.WindowEnd, step)
		})
		if err != nil && !permanent(err) {
			return nil, err
		}
		if err != nil {
			// The series only illustrates the message: a query the store
			// refuses for good must not keep the crossing from being sent.
			s.o.Logger.Error("sending without the hits series: its query fails for good", "rule", r.Name, "page", clip(row.Site+row.Path), "err", clipErr(err))
			s.o.Metrics.ruleError(r.Name)
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

var digestHTML = htmltemplate.Must(htmltemplate.New("digest").Parse(`<p>{{len .}} pages passed their thresholds:</p>
<table><tr><th>page</th><th>hits</th><th>threshold</th><th>rule</th><th>window from</th></tr>
{{range .}}<tr><td>{{.Site}}{{.Path}}</td><td>{{.Count}}</td><td>{{.Threshold}}</td><td>{{.Rule}}</td><td>{{.WindowStart.Format "2006-01-02 15:04 MST"}}</td></tr>
{{end}}</table>`))

// digest is one message for many crossings to the same recipients. Its
// Message-ID is derived from the crossings it carries.
func (s *Sweeper) digest(live []held) (*Message, error) {
	rows := make([]Row, len(live))
	keys := make([]string, len(live))
	for i, h := range live {
		rows[i], keys[i] = h.row, h.row.Key()
	}
	sort.Strings(keys)
	id := Crossing{Rule: "digest", Subject: strings.Join(keys, ",")}.Key()
	var text, html bytes.Buffer
	fmt.Fprintf(&text, "%d pages passed their thresholds:\n\n", len(rows))
	var pages []string
	for _, r := range rows {
		fmt.Fprintf(&text, "  %s%s  %d hits (threshold %d, rule %s, window from %s)\n", textSafe(r.Site), textSafe(r.Path), r.Count, r.Threshold, textSafe(r.Rule), r.WindowStart.Format(time.RFC3339))
		pages = append(pages, r.Path)
	}
	if err := digestHTML.Execute(&html, rows); err != nil {
		return nil, fmt.Errorf("digest: %w", err)
	}
	return &Message{
		ID: "<hitcount.digest." + id + "@" + domainOf(s.o.From) + ">", Key: "digest-" + id, From: s.o.From,
		To: s.rule(rows[0].Rule).To, Subject: fmt.Sprintf("[hitcount] %d pages passed their thresholds: %s", len(rows), strings.Join(pages, ", ")),
		Text: text.String(), HTML: html.String(), Date: s.o.Now(),
	}, nil
}

// ErrNoRules is returned when nothing is configured to sweep.
var ErrNoRules = errors.New("no rules")
