package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// States a crossing goes through. Every change is a new row in the
// crossings table; the latest version is the state.
const (
	StateDetected = "detected" // recorded, not sent yet (or to be retried)
	StateClaimed  = "claimed"  // a sweeper holds its claim and is sending
	StateSent     = "sent"     // the SMTP server (or the outbox) accepted it
	StateFailed   = "failed"   // gave up after the retry limit; kept, counted, logged
)

// Row is one version of a crossing.
type Row struct {
	Crossing
	Site, Path string
	Count      int64
	State      string
	Version    uint64
	Owner      string
	Fencing    uint64
	Attempts   uint32
	MsgID      string
	Error      string
	Updated    time.Time // when this version was written (by the sweeper's clock)
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
}

// Touched lists the (page, minute) pairs ingested in [lo, hi]: what a sweep
// must look at. Its cost follows the pages touched, not the hits stored.
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
	if r.ExcludeBots {
		sql = append(sql, "bot = 0")
	}
	if len(sql) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(sql, " AND "), args
}

// Counts returns the hits of each path of a site in [from, to) for a windowed
// rule (from the per-minute rollup), or over all time for a lifetime rule (from
// the per-day rollup).
func (s *Store) Counts(ctx context.Context, r *Rule, site string, paths []string, from, to time.Time) (map[string]int64, error) {
	f, fargs := filters(r)
	var q string
	// IN with a tuple, not has(array, path): IN uses the primary key, so the
	// cost follows the touched pages, not everything stored for the site.
	args := []any{site, inSet(paths)}
	if r.Window.Size > 0 {
		q = "SELECT path, sum(hits) FROM " + s.dbName + ".hits_1m WHERE site = ? AND path IN ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY path"
		args = append(args, from.Unix(), to.Unix())
	} else {
		q = "SELECT path, sum(hits) FROM " + s.dbName + ".hits_1d WHERE site = ? AND path IN ?" + f + " GROUP BY path"
	}
	out := map[string]int64{}
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
		return nil, fmt.Errorf("count hits for rule %s: %w", r.Name, err)
	}
	return out, nil
}

// Point is one interval of a page's series.
type Point struct {
	Time time.Time
	Hits int64
}

// Series returns hits per step for one page in [from, to), for the message.
func (s *Store) Series(ctx context.Context, r *Rule, site, path string, from, to time.Time, step time.Duration) ([]Point, error) {
	f, fargs := filters(r)
	stepS := int64(step / time.Second)
	q := "SELECT toDateTime(intDiv(toUInt32(minute) - ?, ?) * ? + ?) AS t, sum(hits) FROM " + s.dbName + ".hits_1m WHERE site = ? AND path = ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY t ORDER BY t"
	args := append([]any{from.Unix(), stepS, stepS, from.Unix(), site, path, from.Unix(), to.Unix()}, fargs...)
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
		return nil, fmt.Errorf("read series of %s: %w", path, err)
	}
	return out, nil
}

const rowColumns = "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated"

// Write appends crossing versions.
func (s *Store) Write(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	vals := make([][]any, len(rows))
	for i, r := range rows {
		vals[i] = []any{r.Key(), r.Rule, r.Site, r.Path, r.WindowStart, uint64(r.Threshold), uint64(r.Count), r.State,
			r.Version, r.Owner, r.Fencing, r.Attempts, r.MsgID, r.Error, r.Updated}
	}
	if err := s.db.InsertRows(ctx, s.dbName+".crossings", rowColumns, vals); err != nil {
		return fmt.Errorf("write crossings: %w", err)
	}
	return nil
}

const latestColumns = `key, argMax(rule, version), argMax(site, version), argMax(path, version), argMax(window_start, version),
	argMax(threshold, version), argMax(count, version), argMax(state, version), max(version), argMax(owner, version),
	argMax(fencing, version), argMax(attempts, version), argMax(message_id, version), argMax(error, version), argMax(updated, version)`

func (s *Store) latest(ctx context.Context, where, having string, args ...any) ([]Row, error) {
	q := "SELECT " + latestColumns + " FROM " + s.dbName + ".crossings" + where + " GROUP BY key" + having + " ORDER BY max(version)"
	var out []Row
	err := s.db.Select(ctx, q, args, func(scan func(...any) error) error {
		var r Row
		var key string
		var threshold, count uint64
		if err := scan(&key, &r.Rule, &r.Site, &r.Path, &r.WindowStart, &threshold, &count, &r.State, &r.Version,
			&r.Owner, &r.Fencing, &r.Attempts, &r.MsgID, &r.Error, &r.Updated); err != nil {
			return err
		}
		r.Subject, r.Threshold, r.Count = r.Site+r.Path, int64(threshold), int64(count)
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
	rows, err := s.latest(ctx, " WHERE key IN ?", "", inSet(keys))
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.Key()] = r
	}
	return out, nil
}

// Pending returns the crossings not sent yet (detected, or claimed by a
// sweeper that may have died), oldest first.
func (s *Store) Pending(ctx context.Context) ([]Row, error) {
	return s.latest(ctx, "", " HAVING argMax(state, version) IN ('"+StateDetected+"', '"+StateClaimed+"')")
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

// Finish records a sweep.
func (s *Store) Finish(ctx context.Context, watermark time.Time, owner string, crossings, sent int) error {
	row := []any{time.Now(), watermark, owner, uint32(crossings), uint32(sent)}
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
