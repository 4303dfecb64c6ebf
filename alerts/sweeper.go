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
	texttemplate "text/template"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hitcount/hitcount/config"
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
	// Now is this replica's clock: only the Date header of messages is
	// read from it. Every decision by time reads the store's clock
	// (Store.Now), so replicas whose clocks disagree still agree.
	Now func() time.Time
	// MarkTimeout bounds recording a send's outcome once the message is
	// out: it goes on after the sweep's context is cancelled (a SIGTERM
	// between the server's acceptance and the mark), for at most this long [30s].
	MarkTimeout time.Duration
	// Clock is the time decisions are made by [Store.Now]: tests move it.
	Clock func(context.Context) (time.Time, error)
	// SendBudget is the time a lease-bound claim must still have when its
	// message goes (a delivery's worth); a claim with less is left for a
	// later pass instead of being sent on [0: not checked]. Claims held by a
	// session (keeper, Claim.Expires zero) are not checked.
	SendBudget time.Duration
	// MaxTouched is how many touched (page, minute) pairs one pass reads and
	// counts [5000]. A bigger backlog is read over several passes (Result.More)
	// before the watermark moves, so what a pass holds in memory, and how long
	// it goes without sending, stay bounded whatever requests arrive: with
	// paths cut at 16 KiB (longer ones are not counted), ~80 MiB at most.
	MaxTouched int
	// Fault, when set, is called after each step of sending a crossing
	// ("recorded", "reread", "claimed", "sent", "marked") so tests can
	// crash or stall there.
	Fault func(step string)
}

// Sweeper finds crossings and announces each once.
type Sweeper struct {
	store  *Store
	rules  []*Rule
	claims Claimer
	sender Sender
	o      Options
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
	// ingested is cut to the minute: a round reaching back less than a
	// minute before the watermark would miss rows of the minute it ends in.
	o.Lateness = max(o.Lateness, time.Minute)
	if o.MarkTimeout <= 0 {
		o.MarkTimeout = 30 * time.Second
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
	if o.Clock == nil {
		o.Clock = store.Now
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
	// Notes say, for each below and no_traffic rule evaluated in this
	// pass, what it evaluated or why it is held (for the dry run).
	Notes []string
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
	t0 := time.Now()
	now, err := s.o.Clock(ctx)
	if err != nil {
		return res, err
	}
	var complete []Row
	if s.round == nil {
		rd, err := s.newRound(ctx, now)
		if err != nil {
			return res, err
		}
		// Below and no_traffic rules once per round, at its start: they
		// read the rollups, not the touched pages.
		if complete, res.Notes, err = s.detectComplete(ctx, now); err != nil {
			return res, err
		}
		reports, notes, err := s.detectReports(ctx, now)
		if err != nil {
			return res, err
		}
		complete, res.Notes = append(complete, reports...), append(res.Notes, notes...)
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
	found = append(found, complete...)
	fresh, err := s.unrecorded(ctx, found, nil, now)
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
	groups := s.plan(pending, now)
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
		sent, failed, err := s.deliver(ctx, g, now)
		if err != nil {
			return res, err
		}
		res.Sent += sent
		res.Failed += failed
	}
	res.Pending = max(0, len(pending)-res.Sent-res.Failed)
	s.o.Metrics.waiting(res.Pending)
	if finished {
		if err := s.store.finish(ctx, s.o.Clock, rd.hi, s.o.Owner, len(fresh), res.Sent); err != nil {
			return res, err
		}
		s.round = nil
	} else {
		res.More = true
	}
	s.o.Metrics.sweep(time.Since(t0))
	return res, nil
}

// newRound starts a scan at the watermark, less the lateness, up to now (the
// store's clock, which also wrote ingested). A watermark ahead of now (left
// by a sweeper of an older version whose clock ran ahead, and kept by
// max()) is read as now: otherwise every sweep would miss new hits until
// real time caught up with it.
func (s *Sweeper) newRound(ctx context.Context, now time.Time) (*round, error) {
	wm, ok, err := s.store.Watermark(ctx)
	if err != nil {
		return nil, err
	}
	lo := now.Add(-s.o.Lateness)
	if ok && wm.Before(now) {
		lo = wm.Add(-s.o.Lateness)
	}
	return &round{lo: lo, hi: now}, nil
}

// dryRun detects what a sweep would record, reading every page of the round
// in one call (a dry run is a one-off report), and changes nothing.
func (s *Sweeper) dryRun(ctx context.Context) (Result, error) {
	var res Result
	now, err := s.o.Clock(ctx)
	if err != nil {
		return res, err
	}
	rd, err := s.newRound(ctx, now)
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	complete, notes, err := s.detectComplete(ctx, now)
	if err != nil {
		return res, err
	}
	reports, reportNotes, err := s.detectReports(ctx, now)
	if err != nil {
		return res, err
	}
	complete, res.Notes = append(complete, reports...), append(notes, reportNotes...)
	fresh, err := s.unrecorded(ctx, complete, seen, now)
	if err != nil {
		return res, err
	}
	res.Detected = append(res.Detected, fresh...)
	for {
		touched, err := s.store.TouchedPage(ctx, rd.lo, rd.hi, rd.offset, s.o.MaxTouched)
		if err != nil {
			return res, err
		}
		found, err := s.detect(ctx, touched)
		if err != nil {
			return res, err
		}
		fresh, err := s.unrecorded(ctx, found, seen, now)
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
// have yet (nor seen, when given), as rows ready to write. Two replicas may
// both find one new and both write it: the rows are the same but for owner
// and time, rank alike, and a merge keeps one.
func (s *Sweeper) unrecorded(ctx context.Context, found []Row, seen map[string]bool, now time.Time) ([]Row, error) {
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
		r.State, r.Owner, r.MsgID, r.Updated = StateDetected, s.o.Owner, r.MessageID(domainOf(s.o.From)), now
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

// due reports whether a pending crossing may be tried now: not while it
// backs off after a failed send (by the store's clock, which wrote Updated).
func due(row Row, now time.Time) bool {
	return row.State == StateClaimed || row.Attempts == 0 || !now.Before(row.Updated.Add(retryAfter(row.Attempts)))
}

// rowsOf is the rows of claims held.
func rowsOf(hs []held) []Row {
	out := make([]Row, len(hs))
	for i, h := range hs {
		out[i] = h.row
	}
	return out
}

// allDue reports whether every row may be tried now.
func allDue(rows []Row, now time.Time) bool {
	for _, r := range rows {
		if !due(r, now) {
			return false
		}
	}
	return true
}

// resentDigest: the crossing's last message, which may have gone, was a
// digest: it goes again as that digest (its Message-ID, whatever crossings
// are left of it).
func resentDigest(row Row) bool {
	return mayHaveGone(row) && strings.HasPrefix(row.MsgID, "<hitcount.digest.")
}

// plan groups the crossings due now into messages: one each, or, when more
// than DigestAfter wait for the same recipients, digests of up to
// MaxCrossings. Crossings backing off after a failed send wait. A message
// that may have gone out (mayHaveGone) is sent again as it was, alone: a
// crossing under its own Message-ID, a digest's crossings together under
// the digest's, never joined with what else is pending, so the receiving
// side can drop the copy.
func (s *Sweeper) plan(pending []Row, now time.Time) [][]Row {
	byRecipients := map[string][]Row{}
	var order []string
	again := map[string][]Row{}
	var againOrder []string
	orphans := 0
	for _, row := range pending {
		if !due(row, now) && !mayHaveGone(row) {
			continue
		}
		r := s.rule(row.Rule)
		if r == nil {
			// Left pending, not failed: a replica deployed with the rule
			// renamed must not fail the crossings of the others, which
			// still have it. Counted and logged once per pass.
			orphans++
			continue
		}
		if mayHaveGone(row) {
			if _, ok := again[row.MsgID]; !ok {
				againOrder = append(againOrder, row.MsgID)
			}
			again[row.MsgID] = append(again[row.MsgID], row)
			continue
		}
		to := append([]string(nil), r.To...)
		sort.Strings(to)
		k := strings.Join(to, ",")
		if row.Kind == KindReport {
			k = "\x00" + row.Key() // a report is a message of its own, never a digest's line
		}
		if _, ok := byRecipients[k]; !ok {
			order = append(order, k)
		}
		byRecipients[k] = append(byRecipients[k], row)
	}
	s.o.Metrics.orphaned(orphans)
	if orphans > 0 {
		s.o.Logger.Warn("crossings of rules no longer configured are left pending (see docs/operations.md: Rules removed or renamed)", "crossings", orphans)
	}
	var out [][]Row
	for _, id := range againOrder {
		// A message that may have gone goes again whole or not at all:
		// when its last try's members back off differently (one had failed
		// alone before), it waits for the last of them.
		if g := again[id]; allDue(g, now) {
			sort.Slice(g, func(i, j int) bool { return g[i].Key() < g[j].Key() })
			out = append(out, g)
		}
	}
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

// mayHaveGone: the crossing's last message may have reached the server: its
// sender died holding the claim (claimed), or no reply came (unconfirmed). It
// is sent again as the same message, and a send after it that gets no reply
// either is its last.
func mayHaveGone(row Row) bool {
	return row.State == StateClaimed || row.State == StateUnconfirmed
}

// unanswered: a send of the crossing got no reply. The error recorded then
// says so, and every row after it carries it (the claim copies it, a refusal
// keeps it): the send after it is the one re-send it gets.
func unanswered(row Row) bool {
	return strings.Contains(row.Error, ErrMaybeSent.Error())
}

// resendLost: the crossing's one re-send after no reply was in flight when
// its sender died. It may have arrived; it is not sent a third time.
func resendLost(row Row) bool {
	return row.State == StateClaimed && unanswered(row)
}

// deliver claims, re-checks, sends and marks one message's crossings.
//
// The protocol, for each crossing. Rows are only ever added; the state is the
// row of highest rank (Rank), so a step can never be undone by a row that
// a slower or skewed replica writes later:
//
//	detected(n) ─claim, re-read─▶ claimed(n) ─accepted─────────────▶ sent (final)
//	     ▲                            │ ├─refused (5xx), attempts used,
//	     │                            │ │ template fails ──────────▶ failed (final)
//	     └── 4xx, unreachable ────────┘ └─no reply after the whole message
//	         (detected(n+1), backoff)       ─▶ unconfirmed(n+1)
//
// A crossing found claimed (its sender died) or unconfirmed may have gone
// out: it is sent again as the same message (its recorded Message-ID, a
// digest as that digest, never with other crossings); a 4xx or an
// unreachable server leaves it unconfirmed, and no reply again fails it
// ("it may have arrived"). Under the claim, the crossing's state is read
// again before anything is written or sent: whatever another replica
// recorded before it released its claim is seen, so a crossing is sent again
// only when its last sender died (or lost its claim) between the server's
// acceptance and the mark, or no reply came: the documented window, one copy
// per such fault, same Message-ID. The mark that follows an accepted send is
// written even when the context is cancelled (retried for up to
// MarkTimeout) and even when the claim has lapsed meanwhile: the message is
// out, and sent outranks whatever the successor writes.
func (s *Sweeper) deliver(ctx context.Context, rows []Row, now time.Time) (sent, failed int, err error) {
	var mine []held
	defer func() { s.release(ctx, mine) }()
	// A message that may have gone is sent again whole, by one replica: its
	// crossings are claimed in key order (plan sorts them), and a claim
	// another holds ends the attempt, so two replicas never split it
	// between them (each re-sending a part under the one Message-ID).
	whole := len(rows) > 0 && mayHaveGone(rows[0])
	for _, row := range rows {
		claim, ok, err := s.claims.Claim(ctx, row.Key(), s.o.Lease)
		if err != nil {
			return 0, 0, fmt.Errorf("claim %s: %w", row.Key(), err)
		}
		s.o.Metrics.claim(ok)
		if ok {
			mine = append(mine, held{row, claim})
		} else if whole {
			return 0, 0, nil
		}
	}
	if len(mine) == 0 {
		return 0, 0, nil
	}

	// Re-read under the claims: the pending list is as old as the pass,
	// and another replica may have sent (or tried) since.
	keys := make([]string, len(mine))
	for i, h := range mine {
		keys[i] = h.row.Key()
	}
	latest, err := s.store.Latest(ctx, keys)
	if err != nil {
		return 0, 0, err
	}
	s.o.Fault("reread")
	// What may have gone out goes again as it went, apart from the rest:
	// the group was planned on the old list, and another replica's message
	// may have taken some of its crossings since.
	parts := map[string][]held{}
	var order []string
	var lost []Row
	for _, h := range mine {
		cur, ok := latest[h.row.Key()]
		if !ok || cur.State == StateSent || cur.State == StateFailed || (!due(cur, now) && !mayHaveGone(cur)) {
			continue
		}
		if resendLost(cur) {
			cur.State, cur.Owner, cur.Updated = StateFailed, s.o.Owner, now
			cur.Error = "re-sent after no reply, and its sender stopped before the outcome; it may have arrived: " + cur.Error
			s.o.Logger.Error("giving up on a crossing's email: its re-send's sender stopped mid-send (it may have arrived)", "page", clip(cur.Site+cur.Path))
			s.o.Metrics.failed()
			lost = append(lost, cur)
			continue
		}
		h.row = cur
		k := ""
		if mayHaveGone(cur) {
			k = cur.MsgID
		}
		if _, ok := parts[k]; !ok {
			order = append(order, k)
		}
		parts[k] = append(parts[k], h)
	}
	if err := s.record(ctx, lost); err != nil {
		return 0, 0, err
	}
	failed = len(lost)
	for _, k := range order {
		if k != "" && !allDue(rowsOf(parts[k]), now) {
			continue // whole or not at all, as plan
		}
		n, f, err := s.send(ctx, parts[k], now)
		sent, failed = sent+n, failed+f
		if err != nil {
			return sent, failed, err
		}
	}
	return sent, failed, nil
}

// send sends one message of crossings held and re-read, and records the
// outcome.
func (s *Sweeper) send(ctx context.Context, live []held, now time.Time) (sent, failed int, err error) {
	msg, err := s.message(ctx, live)
	var tmplErr *templateError
	if errors.As(err, &tmplErr) {
		// The rule's template fails on this crossing: no retry can fix it,
		// and it must not stop the sweep. Failed, with the reason.
		s.o.Logger.Error("not sending a crossing: its rule's template fails", "rule", tmplErr.rule, "page", clip(live[0].row.Site+live[0].row.Path), "err", err)
		marks := make([]Row, len(live))
		for i, h := range live {
			marks[i] = h.row
			marks[i].State, marks[i].Error, marks[i].Owner, marks[i].Updated = StateFailed, clipErr(err), s.o.Owner, now
			s.o.Metrics.failed()
		}
		return 0, len(marks), s.record(ctx, marks)
	}
	if err != nil {
		return 0, 0, err
	}
	// The claims must still be ours, and a lease must have a delivery's
	// worth of time left (SendBudget): one that lapses mid-send lets a
	// successor send too. A claim short of time waits for a later pass,
	// which claims it afresh. Checked before the claimed rows are written:
	// a claimed row says a message may have gone, and one left by a send
	// that never started would make the next attempt the re-send of a
	// silence that never was.
	for _, h := range live {
		if valid, err := s.claims.Valid(ctx, h.row.Key(), h.claim); err != nil {
			return 0, 0, err
		} else if !valid {
			s.o.Logger.Warn("claim lost before sending; another sweeper will send it", "page", clip(h.row.Site+h.row.Path))
			return 0, 0, nil
		}
		if left := h.claim.Expires.Sub(s.o.Now()); s.o.SendBudget > 0 && !h.claim.Expires.IsZero() && left < s.o.SendBudget {
			s.o.Logger.Warn("claim has too little time left for a delivery; sending on a later pass", "page", clip(h.row.Site+h.row.Path), "left", left, "needed", s.o.SendBudget)
			return 0, 0, nil
		}
	}

	claimed := make([]Row, len(live))
	gone := make([]bool, len(live)) // as each was before this attempt
	for i := range live {
		gone[i] = mayHaveGone(live[i].row)
		c := &live[i].row
		c.State, c.Owner, c.Fencing, c.MsgID, c.Updated = StateClaimed, s.o.Owner, live[i].claim.Token, msg.ID, now
		claimed[i] = *c
	}
	if err := s.store.Write(ctx, claimed); err != nil {
		// The insert may have landed even so (a cancel or a lost reply
		// after the server took it): a claimed row nothing was sent under
		// would read as a message that may have gone. Recorded as an
		// attempt that sent nothing, which outranks it.
		undo := make([]Row, len(live))
		for i, h := range live {
			undo[i] = s.notSent(h.row, gone[i], "not sent: the claim could not be recorded: "+clipErr(err), now)
		}
		if rerr := s.record(ctx, undo); rerr != nil {
			return 0, 0, errors.Join(err, rerr)
		}
		return 0, 0, err
	}
	s.o.Fault("claimed")
	retry, sendErr := s.sender.Send(ctx, msg)
	if sendErr == nil {
		s.o.Fault("sent")
	}
	// From here on the outcome is recorded whatever happens to ctx.
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.MarkTimeout)
	defer cancel()
	noReply := errors.Is(sendErr, ErrMaybeSent)
	var marks []Row
	for i, h := range live {
		mark := h.row
		mark.Updated = now
		switch {
		case sendErr == nil:
			mark.State, mark.Error = StateSent, ""
			s.o.Metrics.sent()
			sent++
			marks = append(marks, mark)
			continue
		case noReply && gone[i]:
			// Sent again without an answer: no further copy.
			mark.State, mark.Attempts, mark.Error = StateFailed, mark.Attempts+1, "sent again without a reply; it may have arrived: "+sendErr.Error()
			s.o.Logger.Error("giving up on a crossing's email: sent again, no reply (it may have arrived)", "page", clip(mark.Site+mark.Path), "err", sendErr)
			s.o.Metrics.failed()
			failed++
		case noReply:
			mark.State, mark.Attempts, mark.Error = StateUnconfirmed, mark.Attempts+1, sendErr.Error()
			s.o.Logger.Warn("no reply after sending; it will be sent once more with the same Message-ID", "page", clip(mark.Site+mark.Path), "err", sendErr)
			s.o.Metrics.retried()
		case !retry || mark.Attempts+1 >= s.o.MaxAttempts:
			mark.State, mark.Attempts, mark.Error = StateFailed, mark.Attempts+1, sendErr.Error()
			s.o.Logger.Error("giving up on a crossing's email", "page", clip(mark.Site+mark.Path), "attempts", mark.Attempts, "err", sendErr)
			s.o.Metrics.failed()
			failed++
		default:
			mark = s.notSent(h.row, gone[i], sendErr.Error(), now)
			s.o.Logger.Warn("sending failed; will retry", "page", clip(mark.Site+mark.Path), "attempts", mark.Attempts, "as_the_same_message", gone[i], "err", sendErr)
			s.o.Metrics.retried()
		}
		// A refusal is recorded only under a live claim: a claim lost
		// while sending belongs to a successor, whose own record counts.
		// A send without a reply is recorded whatever became of the claim,
		// as a sent one is: it may have arrived, and left claimed, the
		// crossing would go out again as if this copy had never been
		// (the sweeper chaos run, seed 20261125: a third copy).
		if noReply {
			marks = append(marks, mark)
			continue
		}
		if valid, err := s.claims.Valid(mctx, h.row.Key(), h.claim); err != nil || !valid {
			s.o.Logger.Warn("claim lost while sending; the failure is not recorded", "page", clip(mark.Site+mark.Path), "err", err)
			continue
		}
		marks = append(marks, mark)
	}
	if err := s.record(ctx, marks); err != nil {
		return 0, 0, err
	}
	if sent > 0 {
		s.o.Fault("marked")
	}
	return sent, failed, nil
}

// notSent is row after an attempt that sent nothing (refused, unreachable,
// or its claim not recorded), to be tried again after a backoff. If an
// earlier message may have gone (gone), the next try is still that message,
// and still the one re-send after no reply if there was one: unconfirmed,
// keeping its Message-ID and the no-reply mark. Otherwise the next try is a
// new message, which may join a new digest under that digest's id.
func (s *Sweeper) notSent(row Row, gone bool, reason string, now time.Time) Row {
	row.Attempts++
	row.Updated = now
	if !gone {
		row.State, row.Error, row.MsgID = StateDetected, reason, row.MessageID(domainOf(s.o.From))
		return row
	}
	if unanswered(row) {
		reason = ErrMaybeSent.Error() + "; then: " + reason
	}
	row.State, row.Error = StateUnconfirmed, reason
	return row
}

// record writes an attempt's outcome, retried for up to MarkTimeout whatever
// happens to ctx: a store that fails once must not turn a delivered message
// into one sent again (the claims are released only after this).
func (s *Sweeper) record(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.MarkTimeout)
	defer cancel()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval = 100*time.Millisecond, 5*time.Second
	// Retry runs on a context nothing cancels and stops by elapsed time, so
	// that it returns the store's last error rather than the deadline's.
	_, err := backoff.Retry(context.WithoutCancel(ctx), func() (struct{}, error) { return struct{}{}, s.store.Write(mctx, rows) },
		backoff.WithBackOff(bo), backoff.WithMaxElapsedTime(s.o.MarkTimeout),
		backoff.WithNotify(func(err error, wait time.Duration) {
			s.o.Logger.Warn("cannot record what was sent yet; retrying", "crossings", len(rows), "err", err, "retry_in", wait)
		}))
	if err != nil {
		return fmt.Errorf("record the outcome of %d crossings: %w", len(rows), err)
	}
	return nil
}

// release drops the claims, even when ctx is done.
func (s *Sweeper) release(ctx context.Context, mine []held) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.MarkTimeout)
	defer cancel()
	for _, h := range mine {
		if err := s.claims.Release(rctx, h.row.Key(), h.claim); err != nil {
			s.o.Logger.Warn("cannot release a claim; it lapses with its lease", "page", clip(h.row.Site+h.row.Path), "err", err)
		}
	}
}

// templateError is a rule's template failing on a crossing.
type templateError struct {
	rule string
	err  error
}

func (e *templateError) Error() string { return fmt.Sprintf("rule %s: %v", e.rule, e.err) }
func (e *templateError) Unwrap() error { return e.err }

// view is what templates see.
type view struct {
	Rule, Site, Path       string
	Count, Threshold       int64
	Windowed               bool
	WindowName             string
	WindowStart, WindowEnd time.Time
	Series                 []Point
	SeriesStep             string
	// Kind is the rule's kind (threshold, milestones, below, no_traffic),
	// or no_data for a no-data notice.
	Kind string
	// Note is what the sweeper noted on finding the crossing: held back
	// and since when; for a no-data notice, which collector and file are
	// behind.
	Note string
	// Since: no_traffic, when the silence began (the minute after the last
	// hit); no_data, when the site's data stopped being complete
	// (SinceText: "never" when no collector ever caught up).
	Since     time.Time
	SinceText string
	// Silence is a no_traffic rule's silence, as configured (2h).
	Silence string
	// Spike and drop (Threshold is Factor too): the baseline (a median:
	// "120" or "120.5"), what it is the median of, its K windows, how many
	// of them were known, and the rule's floor (Min, or MinBaseline).
	Factor, Min, MinBaseline int64
	Baseline, BaselineOf     string
	BaselineWindows          []BaselineWindow
	Known                    int
	// Report is a report's content (report.go); nil for other kinds.
	Report *Report
	// Unit is what the rule counts: hits or visitors (Count, Threshold
	// and the series are in it).
	Unit string
}

func (s *Sweeper) message(ctx context.Context, live []held) (*Message, error) {
	if len(live) > 1 || resentDigest(live[0].row) {
		return s.digest(live)
	}
	row := live[0].row
	r := s.rule(row.Rule)
	if row.Kind == KindReport {
		return s.reportMessage(ctx, row, r)
	}
	v := view{Rule: row.Rule, Site: row.Site, Path: row.Path, Count: row.Count, Threshold: row.Threshold, Kind: row.Kind, Note: row.Note, Unit: r.metric().unit}
	if v.Kind == "" {
		v.Kind = r.Kind
	}
	subjectT, textT, htmlT := r.Subject, r.Text, r.HTML
	switch v.Kind {
	case KindNoData:
		// Built in: the rule's own templates describe its crossings.
		subjectT, textT, htmlT = noDataSubjectT, noDataTextT, noDataHTMLT
		v.Since = row.WindowStart.In(r.Window.loc())
		v.SinceText = stamp(row.WindowStart, r.Window.loc())
	case config.KindNoTraffic:
		v.Since = row.WindowStart.In(r.Window.loc())
		v.SinceText = stamp(row.WindowStart, r.Window.loc())
		v.Silence = durationText(r.NoTraffic)
	case config.KindSpike, config.KindDrop:
		r.changeView(&v, row)
	}
	if r.Window.Size > 0 && v.Kind != KindNoData {
		v.Windowed = true
		v.WindowName = r.WindowName
		v.WindowStart = row.WindowStart.In(r.Window.loc())
		v.WindowEnd = r.Window.End(v.WindowStart)
		step := max(time.Minute, (r.Window.Size / 12).Truncate(time.Minute))
		v.SeriesStep = step.String()
		whole := r.scope == scopeSite && (v.Kind == config.KindBelow || r.baselined())
		series, err := retry(ctx, func() ([]Point, error) {
			return s.store.series(ctx, r, row.Site, row.Path, whole, v.WindowStart, v.WindowEnd, step)
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
	return s.render(r, row, v, subjectT, textT, htmlT)
}

// render executes a crossing's templates on v into its message.
func (s *Sweeper) render(r *Rule, row Row, v view, subjectT, textT *texttemplate.Template, htmlT *htmltemplate.Template) (*Message, error) {
	var subj, text, html bytes.Buffer
	if err := subjectT.Execute(&subj, v); err != nil {
		return nil, &templateError{r.Name, fmt.Errorf("subject: %w", err)}
	}
	if err := textT.Execute(&text, v); err != nil {
		return nil, &templateError{r.Name, fmt.Errorf("text: %w", err)}
	}
	if err := htmlT.Execute(&html, v); err != nil { // html/template escapes page text
		return nil, &templateError{r.Name, fmt.Errorf("html: %w", err)}
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
// Message-ID is derived from the crossings it carries, or is the one a
// previous send of it recorded (plan regroups such a digest): the set that
// passes the re-check may differ from the one sent before, the id must not.
func (s *Sweeper) digest(live []held) (*Message, error) {
	rows := make([]Row, len(live))
	keys := make([]string, len(live))
	for i, h := range live {
		rows[i], keys[i] = h.row, h.row.Key()
	}
	sort.Strings(keys)
	id := Crossing{Rule: "digest", Subject: strings.Join(keys, ",")}.Key()
	msgID := "<hitcount.digest." + id + "@" + domainOf(s.o.From) + ">"
	if resentDigest(rows[0]) {
		msgID = rows[0].MsgID
		id, _, _ = strings.Cut(strings.TrimPrefix(msgID, "<hitcount.digest."), "@")
	}
	var text, html bytes.Buffer
	var pages []string
	subject := fmt.Sprintf("[hitcount] %d pages passed their thresholds: ", len(rows))
	if thresholdsOnly(rows) && s.hitsOnly(rows) {
		fmt.Fprintf(&text, "%d pages passed their thresholds:\n\n", len(rows))
		for _, r := range rows {
			fmt.Fprintf(&text, "  %s%s  %d hits (threshold %d, rule %s, window from %s)\n", textSafe(r.Site), textSafe(r.Path), r.Count, r.Threshold, textSafe(r.Rule), r.WindowStart.Format(time.RFC3339))
			pages = append(pages, r.Path)
		}
		if err := digestHTML.Execute(&html, rows); err != nil {
			return nil, fmt.Errorf("digest: %w", err)
		}
	} else {
		subject = fmt.Sprintf("[hitcount] %d alerts: ", len(rows))
		fmt.Fprintf(&text, "%d alerts:\n\n", len(rows))
		lines := make([]digestLine, len(rows))
		for i, r := range rows {
			lines[i] = s.digestLine(r)
			fmt.Fprintf(&text, "  %s\n", textSafe(lines[i].Text))
			pages = append(pages, r.Site+r.Path)
		}
		if err := mixedDigestHTML.Execute(&html, lines); err != nil {
			return nil, fmt.Errorf("digest: %w", err)
		}
	}
	return &Message{
		ID: msgID, Key: "digest-" + id, From: s.o.From,
		To: s.rule(rows[0].Rule).To, Subject: subject + strings.Join(pages, ", "),
		Text: text.String(), HTML: html.String(), Date: s.o.Now(),
	}, nil
}

// thresholdsOnly reports whether every row is a threshold's or a
// milestone's crossing (their digest is worded as it always was).
func thresholdsOnly(rows []Row) bool {
	for _, r := range rows {
		if r.Kind != "" && r.Kind != config.KindThreshold && r.Kind != config.KindMilestones {
			return false
		}
	}
	return true
}

// digestLine is one alert of a digest mixing kinds.
type digestLine struct {
	Rule, Page, Text string
}

var mixedDigestHTML = htmltemplate.Must(htmltemplate.New("digest").Parse(`<p>{{len .}} alerts:</p>
<table><tr><th>alert</th><th>rule</th></tr>
{{range .}}<tr><td>{{.Text}}</td><td>{{.Rule}}</td></tr>
{{end}}</table>`))

// digestLine describes row in one line (unescaped: the caller escapes).
func (s *Sweeper) digestLine(row Row) digestLine {
	loc := time.UTC
	r := s.rule(row.Rule)
	if r != nil {
		loc = r.Window.loc()
	}
	page := row.Site + row.Path
	l := digestLine{Rule: row.Rule, Page: page}
	switch row.Kind {
	case config.KindBelow:
		name := ""
		if r != nil {
			name = " " + r.WindowName
		}
		l.Text = fmt.Sprintf("%s: %d %s in the%s window from %s, below %d", page, row.Count, s.unit(row.Rule), name, stamp(row.WindowStart, loc), row.Threshold)
	case config.KindSpike, config.KindDrop:
		l.Text = changeLine(row, r, loc)
	case config.KindNoTraffic:
		l.Text = fmt.Sprintf("%s: no hit since %s (%s or more)", page, stamp(row.WindowStart, loc), durationText(time.Duration(row.Threshold)*time.Second))
	case KindNoData:
		l.Text = fmt.Sprintf("site %s: no data since %s. %s", row.Site, stamp(row.WindowStart, loc), row.Note)
	default:
		l.Text = fmt.Sprintf("%s: %d %s, passing %d (window from %s)", page, row.Count, s.unit(row.Rule), row.Threshold, stamp(row.WindowStart, loc))
	}
	return l
}

// ErrNoRules is returned when nothing is configured to sweep.
var ErrNoRules = errors.New("no rules")
