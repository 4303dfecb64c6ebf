package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// States a crossing goes through. Every change is a new row in the
// crossings table; the row of highest rank (its version, see Rank) is the
// state. The protocol that moves them is described at Sweeper.deliver.
const (
	StateDetected = "detected" // recorded, not sent yet (or to be retried)
	StateClaimed  = "claimed"  // a sweeper held its claim and was sending (still so if it died)
	// StateUnconfirmed: the message was sent whole and no reply came (see
	// ErrMaybeSent): it is sent once more, same Message-ID, and no more.
	StateUnconfirmed = "unconfirmed"
	StateSent        = "sent"   // the SMTP server (or the outbox) accepted it
	StateFailed      = "failed" // gave up: refused, out of attempts, or its template fails
)

// Rank is a crossing row's version: the order of the protocol's steps, not
// of anyone's clock. Sent outranks everything and failed everything else,
// whoever wrote them and whenever; among the steps before, each attempt
// outranks the one before it, and within one attempt the claim outranks the
// row it was claimed from. The table is a ReplacingMergeTree on this
// version, so a merge keeps exactly the row that is the state.
//
// Versions written before ranks (a replica's wall clock in nanoseconds) are
// below 1<<61 until 2043: every ranked row outranks them. Sweepers of both
// kinds must not run at once (upgrade them together).
func Rank(state string, attempts uint32) uint64 {
	switch state {
	case StateSent:
		return 3 << 61
	case StateFailed:
		return 2 << 61
	}
	r := uint64(1)<<61 | uint64(attempts)<<1
	if state == StateClaimed {
		r |= 1
	}
	return r
}

// Row is one version of a crossing.
type Row struct {
	Crossing
	// Kind is the rule's kind, or KindNoData for a no-data notice; "" is a
	// threshold (rows written before kinds).
	Kind       string
	Site, Path string
	Count      int64
	// Note is what the sweeper noted on finding it (held back; who is
	// behind), for the message.
	Note     string
	State    string
	Version  uint64
	Owner    string
	Fencing  uint64
	Attempts uint32
	MsgID    string
	Error    string
	Updated  time.Time // when this version was written (by the sweeper's clock)
}

// DB is what the store needs of ClickHouse, a server (sink.Sink) or the
// embedded engine (embedded.Store): queries with ? parameters, read row by
// row, and inserts of whole blocks into the store's database.
type DB interface {
	// Select runs q and calls fn for each row; scan fills fn's destinations
	// (*string, *uint64, *uint32, *time.Time, ...).
	Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error
	// InsertRows inserts rows (values in the order of columns) into table
	// (database.table) as one block.
	InsertRows(ctx context.Context, table, columns string, rows [][]any) error
}

// Store reads rollups and keeps crossing state in ClickHouse.
type Store struct {
	db     DB
	dbName string
}

// NewStore uses the tables of database name in db.
func NewStore(db DB, name string) *Store { return &Store{db: db, dbName: name} }

// Touch is a page that got hits in a minute.
type Touch struct {
	Site, Path string
	Minute     time.Time
	Long       bool // the path is longer than maxPath; Path is its start (TouchedPage)
}

// Touched lists all the (page, minute) pairs ingested in [lo, hi] at once,
// for tools and tests; its cost follows the pages touched, not the hits
// stored. The sweeper reads them in bounded pages (TouchedPage): requests
// decide how many there are and how long their paths.
func (s *Store) Touched(ctx context.Context, lo, hi time.Time) ([]Touch, error) {
	var out []Touch
	err := s.db.Select(ctx, "SELECT site, path, minute FROM "+s.dbName+".hits_touched WHERE ingested >= toDateTime(?) AND ingested <= toDateTime(?) GROUP BY site, path, minute",
		[]any{lo.Unix(), hi.Unix()}, func(scan func(...any) error) error {
			var t Touch
			if err := scan(&t.Site, &t.Path, &t.Minute); err != nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read touched pages: %w", err)
	}
	return out, nil
}

// TouchedPage is one page of the (page, minute) pairs ingested in [lo, hi], in
// a fixed order (site, path, minute), starting at offset: how a sweep reads
// its input in bounded pieces (see Options.MaxTouched). Grouping over every
// ingested minute makes the order stable: rows ingested while a sweep pages
// through only add pairs, which shifts later pairs to higher offsets (read
// twice, harmless) and never skips one; merges change nothing once grouped.
//
// A path longer than maxPath comes back cut to its first 256 bytes with
// Long set: the sweeper does not count such pages (see maxPath), and reading
// them whole would let a few requests fill its memory.
func (s *Store) TouchedPage(ctx context.Context, lo, hi time.Time, offset, limit int) ([]Touch, error) {
	var out []Touch
	q := "SELECT site, if(length(path) <= ?, path, substring(path, 1, 256)), length(path), minute FROM " + s.dbName +
		".hits_touched WHERE ingested >= toDateTime(?) AND ingested <= toDateTime(?) GROUP BY site, path, minute ORDER BY site, path, minute LIMIT ?, ?"
	err := s.db.Select(ctx, q, []any{uint64(maxPath), lo.Unix(), hi.Unix(), uint64(offset), uint64(limit)}, func(scan func(...any) error) error {
		var t Touch
		var n uint64
		if err := scan(&t.Site, &t.Path, &n, &t.Minute); err != nil {
			return err
		}
		t.Long = n > maxPath
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read touched pages: %w", err)
	}
	return out, nil
}

// maxPath is the longest path the sweeper counts, in bytes. Longer request
// lines than this are refused by nginx (8 KiB) and Apache (8190 bytes) in
// their default configuration, so a longer path is almost surely hostile; and
// a path must fit in one count query (maxBound) with room to spare. Pages
// with longer paths are skipped, logged and counted
// (hitcount_sweeper_pages_skipped_total), never alerted on.
const maxPath = 16 << 10

// maxBound is the most literal text (quotes and escapes included) that one
// query binds from the data: paths, crossing keys. Both stores send SQL text
// (the server driver and the embedded engine bind ? as literals) and both
// refuse a query over max_query_size, 256 KiB by default; a quarter of that
// leaves room for the rest of the query and for a server configured lower.
// A query whose bound values come from requests must be cut to this size, or
// a few long URLs make it fail on every sweep.
const maxBound = 64 << 10

// literalSize is the length of s as a quoted SQL string literal at most: each
// byte the binders escape (backslash, quote, NUL) takes two.
func literalSize(s string) int {
	n := len(s) + 4 // the quotes and the ", " between elements
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', '\'', 0:
			n++
		}
	}
	return n
}

// chunks cuts vals into consecutive runs whose literals fit in budget bytes
// together. A single value over budget is a run of its own (its query is
// then likely to fail, alone, where the caller can tell which value it was).
func chunks(vals []string, budget int) [][]string {
	var out [][]string
	start, size := 0, 0
	for i, v := range vals {
		n := literalSize(v)
		if i > start && size+n > budget {
			out = append(out, vals[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(vals) {
		out = append(out, vals[start:])
	}
	return out
}

// inSet binds strings as a tuple for IN (a []string would bind as an array).
func inSet(v []string) clickhouse.GroupSet {
	set := make([]any, len(v))
	for i, s := range v {
		set[i] = s
	}
	return clickhouse.GroupSet{Value: set}
}

// filters is the SQL for a rule's host, method, status and bot conditions.
func filters(r *Rule) (string, []any) {
	var sql []string
	var args []any
	if r.Host != "" {
		sql, args = append(sql, "host = ?"), append(args, r.Host)
	}
	if r.Method != "" {
		sql, args = append(sql, "method = ?"), append(args, r.Method)
	}
	if r.StatusLo > 0 {
		sql, args = append(sql, "status >= ? AND status <= ?"), append(args, r.StatusLo, r.StatusHi)
	}
	switch {
	case r.ExcludeBots && r.BotPattern != "":
		sql, args = append(sql, "NOT match(user_agent, ?)"), append(args, r.BotPattern)
	case r.ExcludeBots:
		sql = append(sql, "bot = 0")
	}
	if len(sql) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(sql, " AND "), args
}

// Counts returns the hits of each path of a site in [from, to) for a windowed
// rule (from the per-minute rollup), or over all time for a lifetime rule (from
// the per-day rollup). Paths are bound maxBound bytes per query at most,
// however many and however long they are.
func (s *Store) Counts(ctx context.Context, r *Rule, site string, paths []string, from, to time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	for _, part := range chunks(paths, maxBound) {
		if err := s.counts(ctx, r, site, part, from, to, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// counts adds the counts of paths to out, in one query.
func (s *Store) counts(ctx context.Context, r *Rule, site string, paths []string, from, to time.Time, out map[string]int64) error {
	if len(paths) == 0 {
		return nil
	}
	f, fargs := filters(r)
	m := r.metric()
	var q string
	// IN with a tuple, not has(array, path): IN uses the primary key, so the
	// cost follows the touched pages, not everything stored for the site.
	args := []any{site, inSet(paths)}
	switch {
	case r.Window.Size > 0 && r.BotPattern != "":
		// The rule's own bot pattern reads user agents, which only hits
		// has: its rows of the touched pages in the window, by the primary
		// key (site, path, ts). Windows are whole minutes, so the same rows
		// as hits_1m's minutes in [from, to). (Config refuses it on a
		// lifetime rule, which would read a page's whole history.)
		q = "SELECT path, " + m.raw + " FROM " + s.dbName + ".hits WHERE site = ? AND path IN ? AND ts >= toDateTime(?) AND ts < toDateTime(?)" + f + " GROUP BY path"
		args = append(args, from.Unix(), to.Unix())
	case r.Window.Size > 0:
		q = "SELECT path, " + m.agg + " FROM " + s.dbName + "." + m.rollup + " WHERE site = ? AND path IN ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY path"
		args = append(args, from.Unix(), to.Unix())
	default:
		q = "SELECT path, sum(hits) FROM " + s.dbName + ".hits_1d WHERE site = ? AND path IN ?" + f + " GROUP BY path"
	}
	err := s.db.Select(ctx, q, append(args, fargs...), func(scan func(...any) error) error {
		var p string
		var n uint64
		if err := scan(&p, &n); err != nil {
			return err
		}
		out[p] = int64(n)
		return nil
	})
	if err != nil {
		return fmt.Errorf("count hits of %d pages for rule %s: %w", len(paths), r.Name, err)
	}
	return nil
}

// Point is one interval of a page's series.
type Point struct {
	Time time.Time
	Hits int64
}

// Series returns hits per step for one page in [from, to), for the message.
func (s *Store) Series(ctx context.Context, r *Rule, site, path string, from, to time.Time, step time.Duration) ([]Point, error) {
	return s.series(ctx, r, site, path, false, from, to, step)
}

// series is Series for a page, or, whole, for the site (a below rule
// without a path).
func (s *Store) series(ctx context.Context, r *Rule, site, path string, whole bool, from, to time.Time, step time.Duration) ([]Point, error) {
	f, fargs := filters(r)
	stepS := int64(step / time.Second)
	page, args := " AND path = ?", []any{from.Unix(), stepS, stepS, from.Unix(), site, path, from.Unix(), to.Unix()}
	if whole {
		page, args = "", []any{from.Unix(), stepS, stepS, from.Unix(), site, from.Unix(), to.Unix()}
	}
	m := r.metric()
	q := "SELECT toDateTime(intDiv(toUInt32(minute) - ?, ?) * ? + ?) AS t, " + m.agg + " FROM " + s.dbName + "." + m.rollup + " WHERE site = ?" + page + " AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY t ORDER BY t"
	if r.BotPattern != "" {
		// From hits, as counts reads it for such a rule.
		q = "SELECT toDateTime(intDiv(toUInt32(ts) - ?, ?) * ? + ?) AS t, " + m.raw + " FROM " + s.dbName + ".hits WHERE site = ?" + page + " AND ts >= toDateTime(?) AND ts < toDateTime(?)" + f + " GROUP BY t ORDER BY t"
	}
	args = append(args, fargs...)
	var out []Point
	err := s.db.Select(ctx, q, args, func(scan func(...any) error) error {
		var p Point
		var n uint64
		if err := scan(&p.Time, &n); err != nil {
			return err
		}
		p.Hits = int64(n)
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read series of %s: %w", clip(path), err)
	}
	return out, nil
}

const rowColumns = "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated, kind, note"

// Write appends crossing versions, each ranked by its state (Rank; the
// rows' Version is not read).
func (s *Store) Write(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	vals := make([][]any, len(rows))
	for i, r := range rows {
		vals[i] = []any{r.Key(), r.Rule, r.Site, r.Path, r.WindowStart, uint64(r.Threshold), uint64(r.Count), r.State,
			Rank(r.State, r.Attempts), r.Owner, r.Fencing, r.Attempts, r.MsgID, r.Error, r.Updated, r.Kind, r.Note}
	}
	if err := s.db.InsertRows(ctx, s.dbName+".crossings", rowColumns, vals); err != nil {
		return fmt.Errorf("write crossings: %w", err)
	}
	return nil
}

const latestColumns = `key, argMax(rule, version), argMax(site, version), argMax(path, version), argMax(window_start, version),
	argMax(threshold, version), argMax(count, version), argMax(state, version), max(version), argMax(owner, version),
	argMax(fencing, version), argMax(attempts, version), argMax(message_id, version), argMax(error, version), argMax(updated, version),
	argMax(kind, version), argMax(note, version)`

func (s *Store) latest(ctx context.Context, where, having string, args ...any) ([]Row, error) {
	q := "SELECT " + latestColumns + " FROM " + s.dbName + ".crossings" + where + " GROUP BY key" + having + " ORDER BY max(version)"
	var out []Row
	err := s.db.Select(ctx, q, args, func(scan func(...any) error) error {
		var r Row
		var key string
		var threshold, count uint64
		if err := scan(&key, &r.Rule, &r.Site, &r.Path, &r.WindowStart, &threshold, &count, &r.State, &r.Version,
			&r.Owner, &r.Fencing, &r.Attempts, &r.MsgID, &r.Error, &r.Updated, &r.Kind, &r.Note); err != nil {
			return err
		}
		r.Subject, r.Threshold, r.Count = subjectOf(r.Kind, r.Site, r.Path), int64(threshold), int64(count)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read crossings: %w", err)
	}
	return out, nil
}

// Latest returns the current state of the given crossings, by key.
func (s *Store) Latest(ctx context.Context, keys []string) (map[string]Row, error) {
	out := map[string]Row{}
	if len(keys) == 0 {
		return out, nil
	}
	// Keys are short hashes, but a sweep can ask about any number of them
	// (every crossing its touched pages make): cut like the paths of Counts.
	for _, part := range chunks(keys, maxBound) {
		rows, err := s.latest(ctx, " WHERE key IN ?", "", inSet(part))
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.Key()] = r
		}
	}
	return out, nil
}

// Pending returns the crossings not sent yet (detected, or claimed by a
// sweeper that may have died), oldest first.
func (s *Store) Pending(ctx context.Context) ([]Row, error) {
	return s.latest(ctx, "", " HAVING argMax(state, version) IN ('"+StateDetected+"', '"+StateClaimed+"', '"+StateUnconfirmed+"')")
}

// Now is the store's clock. Every time a sweep decides by (what the scan of
// hits_touched covers, when a retry is due) is read from it: hits_touched's
// ingested is the server's clock, and replicas' clocks may be hours apart.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
		return time.Time{}, fmt.Errorf("read the store's clock: %w", err)
	}
	return now, nil
}

// Watermark is where the last sweep stopped reading hits_touched.
func (s *Store) Watermark(ctx context.Context) (time.Time, bool, error) {
	var n uint64
	var wm time.Time
	if err := s.db.Select(ctx, "SELECT count(), max(watermark) FROM "+s.dbName+".sweeps", nil, func(scan func(...any) error) error {
		return scan(&n, &wm)
	}); err != nil {
		return time.Time{}, false, fmt.Errorf("read watermark: %w", err)
	}
	return wm, n > 0, nil
}

// Finish records a sweep, dated by the store's clock: OtherSweepers compares
// the dates of sweepers whose own clocks may be hours apart.
func (s *Store) Finish(ctx context.Context, watermark time.Time, owner string, crossings, sent int) error {
	return s.finish(ctx, s.Now, watermark, owner, crossings, sent)
}

// finish records a sweep dated by clock (the sweeper's, Options.Clock,
// which is the store's but in tests).
func (s *Store) finish(ctx context.Context, clock func(context.Context) (time.Time, error), watermark time.Time, owner string, crossings, sent int) error {
	now, err := clock(ctx)
	if err != nil {
		return fmt.Errorf("record sweep: %w", err)
	}
	row := []any{now, watermark, owner, uint32(crossings), uint32(sent)}
	if err := s.db.InsertRows(ctx, s.dbName+".sweeps", "finished, watermark, owner, crossings, sent", [][]any{row}); err != nil {
		return fmt.Errorf("record sweep: %w", err)
	}
	return nil
}

// OtherSweepers lists the sweepers other than owner that finished a sweep on
// this database since t: how a local-claims sweeper notices a second one
// running elsewhere against the same state.
func (s *Store) OtherSweepers(ctx context.Context, owner string, since time.Time) ([]string, error) {
	var out []string
	err := s.db.Select(ctx, "SELECT owner, max(finished) FROM "+s.dbName+".sweeps WHERE finished >= toDateTime(?) AND owner != ? GROUP BY owner",
		[]any{since.Unix(), owner}, func(scan func(...any) error) error {
			var o string
			var at time.Time
			if err := scan(&o, &at); err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s (last sweep %s)", o, at.UTC().Format(time.RFC3339)))
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read recent sweepers: %w", err)
	}
	return out, nil
}
