package alerts

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/chdb"
)

// Detection reads data that requests put there: paths of any length and
// number. Two rules keep it from being stopped by them:
//
//   - Size: no query binds more than maxBound bytes of paths or keys (Counts
//     and Latest cut their lists), no path longer than maxPath is counted, and
//     a pass reads at most Options.MaxTouched touched pairs.
//   - Isolation, for what still fails: an error the store will give again
//     whatever the moment (permanent: the query is refused as too big, or
//     malformed) is pinned on the page or the rule that causes it, recorded
//     (log with the rule's name, hitcount_sweeper_rule_errors_total) and
//     skipped, and the watermark advances past it: holding the watermark for
//     it would re-run the same failing query on every sweep and stop all
//     alerting for good, which is the attack. Any other error (store down,
//     timeout, network) says nothing about the data, so skipping would lose
//     crossings silently: it is retried within the pass, then fails the pass
//     without moving the watermark, and the next pass re-reads the same pages.

// queryAttempts is how often a count or series query runs before an error
// that may pass fails the pass; the waits between are retryWait, doubled.
const (
	queryAttempts = 3
	retryWait     = 250 * time.Millisecond
)

// retry runs q until it succeeds, fails permanently, fails queryAttempts
// times, or ctx ends.
func retry[T any](ctx context.Context, q func() (T, error)) (T, error) {
	wait := retryWait
	for attempt := 1; ; attempt++ {
		v, err := q()
		if err == nil || permanent(err) || attempt == queryAttempts || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// permanent reports whether err is the store refusing the query itself, so
// that running it again gets the same answer. Only ClickHouse's own verdicts
// on a query's text, size or arguments count; anything else (no code, a
// network error, a timeout, memory) may pass and is not permanent.
func permanent(err error) bool {
	var code int
	var ex *clickhouse.Exception
	var qe *chdb.QueryError
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &ex):
		code = int(ex.Code)
	case errors.As(err, &qe):
		code = qe.Code
	default:
		return false
	}
	switch code {
	case 6, // CANNOT_PARSE_TEXT
		36,  // BAD_ARGUMENTS
		38,  // CANNOT_PARSE_DATE
		41,  // CANNOT_PARSE_DATETIME
		42,  // NUMBER_OF_ARGUMENTS_DOESNT_MATCH
		43,  // ILLEGAL_TYPE_OF_ARGUMENT
		44,  // ILLEGAL_COLUMN
		46,  // UNKNOWN_FUNCTION
		47,  // UNKNOWN_IDENTIFIER
		53,  // TYPE_MISMATCH
		62,  // SYNTAX_ERROR, which includes "Max query size exceeded"
		69,  // ARGUMENT_OUT_OF_BOUND
		70,  // CANNOT_CONVERT_TYPE
		72,  // CANNOT_PARSE_NUMBER
		167, // TOO_DEEP_AST
		168, // AST_IS_TOO_BIG
		306, // TOO_DEEP_RECURSION
		427: // CANNOT_COMPILE_REGEXP
		return true
	}
	return false
}

// ruleState is what one pass learned about a rule's count query.
type ruleState struct {
	probed bool  // a failure was seen and the rule's query was tried on its own
	broken error // the rule's own query fails permanently: skip the rule this pass
}

// detect computes the crossings of every rule among the touched pages.
func (s *Sweeper) detect(ctx context.Context, touched []Touch) ([]Row, error) {
	type group struct {
		site  string
		start time.Time
	}
	var long []Touch
	for _, t := range touched {
		if t.Long {
			long = append(long, t)
		}
	}
	if len(long) > 0 {
		s.o.Logger.Warn("touched pages with paths too long to count: not alerted on", "pages", len(long),
			"limit_bytes", maxPath, "first", clip(long[0].Site+long[0].Path))
		s.o.Metrics.skipped("path_too_long", len(long))
	}
	var out []Row
	for _, r := range s.rules {
		// Pages of each window that got hits, per site.
		windows := map[group]map[string]bool{}
		for _, t := range touched {
			if t.Long || !r.Matches(t.Site, t.Path) {
				continue
			}
			g := group{t.Site, r.Window.Start(t.Minute)}
			if windows[g] == nil {
				windows[g] = map[string]bool{}
			}
			windows[g][t.Path] = true
		}
		groups := make([]group, 0, len(windows))
		for g := range windows {
			groups = append(groups, g)
		}
		sort.Slice(groups, func(i, j int) bool {
			if groups[i].site != groups[j].site {
				return groups[i].site < groups[j].site
			}
			return groups[i].start.Before(groups[j].start)
		})
		var st ruleState
		for _, g := range groups {
			paths := make([]string, 0, len(windows[g]))
			for p := range windows[g] {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			counts := map[string]int64{}
			for _, part := range chunks(paths, maxBound) {
				if err := s.count(ctx, r, &st, g.site, part, g.start, r.Window.End(g.start), counts); err != nil {
					return nil, err
				}
			}
			for _, p := range paths {
				n, ok := counts[p]
				if !ok {
					continue
				}
				for _, th := range r.crossed(n) {
					out = append(out, Row{
						Crossing: Crossing{Rule: r.Name, Subject: PageSubject(g.site, p), WindowStart: g.start.UTC(), Threshold: th},
						Site:     g.site, Path: p, Count: n,
					})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// count adds the counts of paths (one query's worth) to out. A permanent
// failure is narrowed down: first, is it the rule's query whatever the page
// (tried with one harmless path)? Then the rule is recorded once and skipped
// for the rest of the pass. Otherwise the pages are halved until the failing
// ones stand alone, each recorded and skipped, so one page cannot hide its
// neighbours' crossings. An error that is not permanent, after retries, is
// returned and fails the pass.
func (s *Sweeper) count(ctx context.Context, r *Rule, st *ruleState, site string, paths []string, from, to time.Time, out map[string]int64) error {
	if st.broken != nil {
		return nil
	}
	c, err := retry(ctx, func() (map[string]int64, error) { return s.store.Counts(ctx, r, site, paths, from, to) })
	if err == nil {
		for p, n := range c {
			out[p] = n
		}
		return nil
	}
	if !permanent(err) {
		return err
	}
	if !st.probed {
		st.probed = true
		_, perr := retry(ctx, func() (map[string]int64, error) { return s.store.Counts(ctx, r, site, []string{"/"}, from, to) })
		if perr != nil && !permanent(perr) {
			return perr
		}
		if perr != nil {
			st.broken = perr
			s.o.Logger.Error("the rule's count query fails for good: rule skipped in this pass", "rule", r.Name, "err", clipErr(perr))
			s.o.Metrics.ruleError(r.Name)
			return nil
		}
	}
	if len(paths) == 1 {
		s.o.Logger.Error("a page's count query fails for good: page skipped", "rule", r.Name, "page", clip(site+paths[0]), "err", clipErr(err))
		s.o.Metrics.ruleError(r.Name)
		return nil
	}
	mid := len(paths) / 2
	if err := s.count(ctx, r, st, site, paths[:mid], from, to, out); err != nil {
		return err
	}
	return s.count(ctx, r, st, site, paths[mid:], from, to, out)
}

// clip shortens request-made text for a log line.
func clip(s string) string { return clipTo(s, 200) }

// clipTo cuts s to about n bytes, saying how long it was.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:cut], len(s))
}

// clipErr shortens an error for a log line: the store's messages quote the
// query, and with it whatever the requests put in.
func clipErr(err error) string { return clipTo(err.Error(), 1000) }
