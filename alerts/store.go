package alerts

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
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

// Store reads rollups and keeps crossing state in ClickHouse.
type Store struct {
	conn driver.Conn
	db   string
}

// NewStore uses the tables of database db.
func NewStore(conn driver.Conn, db string) *Store { return &Store{conn: conn, db: db} }

// Touch is a page that got hits in a minute.
type Touch struct {
	Site, Path string
	Minute     time.Time
}

// Touched lists the (page, minute) pairs ingested in [lo, hi]: what a sweep
// must look at. Its cost follows the pages touched, not the hits stored.
func (s *Store) Touched(ctx context.Context, lo, hi time.Time) ([]Touch, error) {
	rows, err := s.conn.Query(ctx, "SELECT site, path, minute FROM "+s.db+".hits_touched WHERE ingested >= toDateTime(?) AND ingested <= toDateTime(?) GROUP BY site, path, minute",
		lo.Unix(), hi.Unix())
	if err != nil {
		return nil, fmt.Errorf("read touched pages: %w", err)
	}
	defer rows.Close()
	var out []Touch
	for rows.Next() {
		var t Touch
		if err := rows.Scan(&t.Site, &t.Path, &t.Minute); err != nil {
			return nil, fmt.Errorf("read touched pages: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
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
		q = "SELECT path, sum(hits) FROM " + s.db + ".hits_1m WHERE site = ? AND path IN ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY path"
		args = append(args, from.Unix(), to.Unix())
	} else {
		q = "SELECT path, sum(hits) FROM " + s.db + ".hits_1d WHERE site = ? AND path IN ?" + f + " GROUP BY path"
	}
	rows, err := s.conn.Query(ctx, q, append(args, fargs...)...)
	if err != nil {
		return nil, fmt.Errorf("count hits for rule %s: %w", r.Name, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var p string
		var n uint64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("count hits for rule %s: %w", r.Name, err)
		}
		out[p] = int64(n)
	}
	return out, rows.Err()
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
	q := "SELECT toDateTime(intDiv(toUInt32(minute) - ?, ?) * ? + ?) AS t, sum(hits) FROM " + s.db + ".hits_1m WHERE site = ? AND path = ? AND minute >= toDateTime(?) AND minute < toDateTime(?)" + f + " GROUP BY t ORDER BY t"
	args := append([]any{from.Unix(), stepS, stepS, from.Unix(), site, path, from.Unix(), to.Unix()}, fargs...)
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read series of %s: %w", path, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var p Point
		var n uint64
		if err := rows.Scan(&p.Time, &n); err != nil {
			return nil, fmt.Errorf("read series of %s: %w", path, err)
		}
		p.Hits = int64(n)
		out = append(out, p)
	}
	return out, rows.Err()
}

const rowColumns = "key, rule, site, path, window_start, threshold, count, state, version, owner, fencing, attempts, message_id, error, updated"

// Write appends crossing versions.
func (s *Store) Write(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.db+".crossings ("+rowColumns+")")
	if err != nil {
		return fmt.Errorf("write crossings: %w", err)
	}
	for _, r := range rows {
		if err := b.Append(r.Key(), r.Rule, r.Site, r.Path, r.WindowStart, uint64(r.Threshold), uint64(r.Count), r.State,
			r.Version, r.Owner, r.Fencing, r.Attempts, r.MsgID, r.Error, r.Updated); err != nil {
			b.Abort()
			return fmt.Errorf("write crossings: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("write crossings: %w", err)
	}
	return nil
}

const latestColumns = `key, argMax(rule, version), argMax(site, version), argMax(path, version), argMax(window_start, version),
	argMax(threshold, version), argMax(count, version), argMax(state, version), max(version), argMax(owner, version),
	argMax(fencing, version), argMax(attempts, version), argMax(message_id, version), argMax(error, version), argMax(updated, version)`

func (s *Store) latest(ctx context.Context, where, having string, args ...any) ([]Row, error) {
	q := "SELECT " + latestColumns + " FROM " + s.db + ".crossings" + where + " GROUP BY key" + having + " ORDER BY max(version)"
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read crossings: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var key string
		var threshold, count uint64
		if err := rows.Scan(&key, &r.Rule, &r.Site, &r.Path, &r.WindowStart, &threshold, &count, &r.State, &r.Version,
			&r.Owner, &r.Fencing, &r.Attempts, &r.MsgID, &r.Error, &r.Updated); err != nil {
			return nil, fmt.Errorf("read crossings: %w", err)
		}
		r.Subject, r.Threshold, r.Count = r.Site+r.Path, int64(threshold), int64(count)
		out = append(out, r)
	}
	return out, rows.Err()
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
	if err := s.conn.QueryRow(ctx, "SELECT count(), max(watermark) FROM "+s.db+".sweeps").Scan(&n, &wm); err != nil {
		return time.Time{}, false, fmt.Errorf("read watermark: %w", err)
	}
	return wm, n > 0, nil
}

// Finish records a sweep.
func (s *Store) Finish(ctx context.Context, watermark time.Time, owner string, crossings, sent int) error {
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.db+".sweeps (finished, watermark, owner, crossings, sent)")
	if err != nil {
		return fmt.Errorf("record sweep: %w", err)
	}
	if err := b.Append(time.Now(), watermark, owner, uint32(crossings), uint32(sent)); err != nil {
		b.Abort()
		return fmt.Errorf("record sweep: %w", err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record sweep: %w", err)
	}
	return nil
}

// OtherSweepers lists the sweepers other than owner that finished a sweep on
// this database since t: how a local-claims sweeper notices a second one
// running elsewhere against the same state.
func (s *Store) OtherSweepers(ctx context.Context, owner string, since time.Time) ([]string, error) {
	rows, err := s.conn.Query(ctx, "SELECT owner, max(finished) FROM "+s.db+".sweeps WHERE finished >= toDateTime(?) AND owner != ? GROUP BY owner", since.Unix(), owner)
	if err != nil {
		return nil, fmt.Errorf("read recent sweepers: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		var at time.Time
		if err := rows.Scan(&o, &at); err != nil {
			return nil, fmt.Errorf("read recent sweepers: %w", err)
		}
		out = append(out, fmt.Sprintf("%s (last sweep %s)", o, at.UTC().Format(time.RFC3339)))
	}
	return out, rows.Err()
}
