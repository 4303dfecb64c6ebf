// Package sink writes hits into a ClickHouse server over the native protocol
// and answers what it has committed: the truth the collector resumes from.
package sink

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/cenkalti/backoff/v5"
)

// Options say how to reach the server.
type Options struct {
	Addr          []string
	Database      string
	Username      string
	Password      string
	TLS           *tls.Config
	Compression   string // none | lz4 | zstd
	DialTimeout   time.Duration
	InsertTimeout time.Duration // past this an insert's outcome is unknown
	// Cluster, when set, is the cluster (in the servers' remote_servers) of
	// a replicated schema: see cluster.go.
	Cluster string
	// InsertQuorum, 2 or more in cluster mode, is how many replicas must
	// hold an insert before it is acknowledged (insert_quorum); 0 is off.
	// See quorum.go.
	InsertQuorum int
	// InsertQuorumTimeout bounds the server's wait for the quorum
	// (insert_quorum_timeout); longer than InsertTimeout
	// [DefaultInsertQuorumTimeout].
	InsertQuorumTimeout time.Duration
	// Logger hears what Migrate finds (a table that does not deduplicate);
	// nil is slog's default.
	Logger *slog.Logger
}

// Sink is a connection pool to one ClickHouse server or cluster entry point.
type Sink struct {
	conn          driver.Conn
	pinned        *sql.DB // cluster mode: statements that must share one connection
	cluster       string
	quorum        int           // insert_quorum on every connection, 0: off
	turn          chan struct{} // quorum inserts feeding the views, one at a time (quorum.go)
	db            string
	version       Version
	features      features
	insertTimeout time.Duration
	log           *slog.Logger
	dedup         atomic.Pointer[Dedup] // what the tables do with a re-sent batch, read by Migrate
	replicas      replicaState          // cluster mode: what the last wait for each replica found
	topo          struct {
		sync.Mutex
		shards int            // the cluster's, once read (localShard)
		tables *regexp.Regexp // this database's schema tables in a query (localTables)
	}
	opts     Options // as opened, defaults filled: cluster mode connects to each replica with them
	comp     *clickhouse.Compression
	repairMu sync.Mutex // one schema repair at a time (cluster_schema.go)
	// ownersLegacy: Migrate found source_owners without caught_up and could
	// not add it (columns.go): records are written without it.
	ownersLegacy atomic.Bool
	// visitorLegacy: Migrate found hits without visitor and could not add
	// it (columns.go): hits are inserted without it.
	visitorLegacy atomic.Bool
}

var hitsColumns = HitsColumns

// Open connects and reads the server version. It does not create the schema
// (Migrate does).
func Open(ctx context.Context, o Options) (*Sink, error) {
	if !identRE.MatchString(o.Database) {
		return nil, fmt.Errorf("open clickhouse: database name %q is not an identifier", o.Database)
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.InsertTimeout == 0 {
		o.InsertTimeout = 30 * time.Second
	}
	comp := &clickhouse.Compression{Method: clickhouse.CompressionNone}
	switch o.Compression {
	case "", "none":
	case "lz4":
		comp.Method = clickhouse.CompressionLZ4
	case "zstd":
		comp.Method = clickhouse.CompressionZSTD
	default:
		return nil, fmt.Errorf("open clickhouse: unknown compression %q", o.Compression)
	}
	if o.Cluster != "" && !identRE.MatchString(o.Cluster) {
		return nil, fmt.Errorf("open clickhouse: cluster name %q is not an identifier", o.Cluster)
	}
	if err := checkQuorum(o); err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	// The configured database is the session's, so a user allowed only that
	// database can log in; before the first start has created it, "default".
	s, err := open(ctx, o, comp, o.Database)
	var ex *clickhouse.Exception
	if errors.As(err, &ex) && ex.Code == 81 { // UNKNOWN_DATABASE
		s, err = open(ctx, o, comp, "default")
	}
	return s, err
}

func open(ctx context.Context, o Options, comp *clickhouse.Compression, database string) (*Sink, error) {
	copts := clientOptions(o, comp, database)
	conn, err := clickhouse.Open(copts)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %v: %w", o.Addr, err)
	}
	s := &Sink{conn: conn, db: o.Database, insertTimeout: o.InsertTimeout, cluster: o.Cluster, quorum: o.InsertQuorum, turn: make(chan struct{}, 1), log: o.Logger, opts: o, comp: comp}
	if o.Cluster != "" {
		s.pinned = clickhouse.OpenDB(copts)
	}
	if err := s.readVersion(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// clientOptions are the client's options for the servers of o, in a
// session on database.
func clientOptions(o Options, comp *clickhouse.Compression, database string) *clickhouse.Options {
	return &clickhouse.Options{
		Addr:         o.Addr,
		Auth:         clickhouse.Auth{Database: database, Username: o.Username, Password: o.Password},
		TLS:          o.TLS,
		Compression:  comp,
		DialTimeout:  o.DialTimeout,
		DialStrategy: dialInOrder,
		// The socket read timeout bounds every call; an insert is bounded
		// separately by its context.
		ReadTimeout:     o.InsertTimeout,
		MaxOpenConns:    8,
		MaxIdleConns:    4,
		ConnMaxLifetime: time.Hour,
		Settings:        quorumSettings(o),
	}
}

// logger is where the sink says what it finds and does.
func (s *Sink) logger() *slog.Logger {
	if s.log == nil {
		return slog.Default()
	}
	return s.log
}

// Connect is Open retried until the server answers or ctx ends: a collector
// started while ClickHouse is down waits for it (its log files keep the lines)
// instead of exiting. onRetry, if set, hears about each failed attempt. A
// login the server refuses (LoginRefused) is not retried: it is returned at
// once as a *LoginError, since only an operator can fix it.
func Connect(ctx context.Context, o Options, onRetry func(err error, wait time.Duration)) (*Sink, error) {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	bo.Reset()
	for {
		s, err := Open(ctx, o)
		if err == nil {
			return s, nil
		}
		if LoginRefused(err) {
			return nil, &LoginError{User: o.Username, Addr: o.Addr, Err: err}
		}
		wait := bo.NextBackOff()
		if onRetry != nil {
			onRetry(err, wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to clickhouse: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
	}
}

func (s *Sink) readVersion(ctx context.Context) error {
	v, err := s.conn.ServerVersion()
	if err != nil {
		return fmt.Errorf("open clickhouse: server version: %w", err)
	}
	s.version = Version{v.Version.Major, v.Version.Minor, v.Version.Patch}
	s.features = featuresOf(s.version)
	return nil
}

// Version is the server's version.
func (s *Sink) Version() Version { return s.version }

// Database is the database holding the tables.
func (s *Sink) Database() string { return s.db }

// Conn exposes the pool to other packages that query the same server (the
// sweeper, analytics).
func (s *Sink) Conn() driver.Conn { return s.conn }

// Close closes the pool.
func (s *Sink) Close() error {
	if s.pinned != nil {
		s.pinned.Close()
	}
	return s.conn.Close()
}

// Ping checks the server answers.
func (s *Sink) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

func (s *Sink) queryContext(ctx context.Context, id string, renewed bool) context.Context {
	opts := []clickhouse.QueryOption{clickhouse.WithQueryID(id)}
	switch {
	case s.features.dedupToken:
		opts = append(opts, clickhouse.WithSettings(clickhouse.Settings{
			"insert_deduplication_token":                         id,
			"deduplicate_blocks_in_dependent_materialized_views": 1,
		}))
	case renewed:
		// Without a token a replicated table drops a block by its checksum,
		// whatever its id: lines it dropped once as a duplicate of a block
		// it does not hold would be dropped again. A renewed batch is sent
		// without deduplication; the collector settles its unknown outcome
		// from the tables, never by sending it again identically.
		opts = append(opts, clickhouse.WithSettings(clickhouse.Settings{"insert_deduplicate": 0}))
	}
	return clickhouse.Context(ctx, opts...)
}

// rejectsQueryID is the query_id of a batch's rejects insert.
func rejectsQueryID(id string) string { return id + "-rejects" }

// Insert writes the batch's rows as one block (atomic on a MergeTree table),
// then its reject samples. Any error means the outcome is unknown: the caller
// must WaitIdle for the batch and then re-read Committed before sending again.
func (s *Sink) Insert(ctx context.Context, b *Batch) error {
	id := b.ID()
	release, err := s.takeTurn(ctx)
	if err != nil {
		return fmt.Errorf("insert batch %s: %w", id, err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, s.insertTimeout)
	defer cancel()
	if b.Rows() > 0 {
		// withSchema: a replica rebuilt empty gets its tables (cluster_schema.go).
		if err := s.withSchema(ctx, func() error {
			return s.whileRefused(ctx, func() error { return s.insertHits(s.queryContext(ctx, id, b.Renewed()), b) })
		}); err != nil {
			return fmt.Errorf("insert batch %s (%d rows): %w", id, b.Rows(), err)
		}
	}
	// After the rows, so that a committed reject offset implies its batch's rows
	// are committed (both feed ingest_progress).
	if len(b.Rejects) > 0 {
		if err := s.withSchema(ctx, func() error {
			return s.whileRefused(ctx, func() error { return s.insertRejects(s.queryContext(ctx, rejectsQueryID(id), b.Renewed()), b) })
		}); err != nil {
			return fmt.Errorf("insert rejects of batch %s: %w", id, err)
		}
	}
	return nil
}

func (s *Sink) insertHits(ctx context.Context, b *Batch) (err error) {
	columns := hitsColumns
	if s.visitorLegacy.Load() {
		columns = strings.TrimSuffix(columns, ", visitor")
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("hits")+" ("+columns+")")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			batch.Abort()
		}
	}()
	// site and source_id are one value per batch, repeated per row.
	site := make([]string, b.Rows())
	source := make([]uint64, b.Rows())
	for i := range site {
		site[i], source[i] = b.Site, b.SourceID
	}
	cols := []any{b.ts, site, b.host.views(), b.method.views(), b.path.views(), b.query.views(), b.protocol.views(),
		b.status, b.bytes, b.referer.views(), b.userAgent.views(), b.client.views(), b.remoteUser.views(),
		b.requestTime, source, b.offset, b.visitor}
	names := strings.Split(columns, ", ")
	for i, c := range cols[:len(names)] {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("column %s: %w", names[i], err)
		}
	}
	return batch.Send()
}

func (s *Sink) insertRejects(ctx context.Context, b *Batch) (err error) {
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("rejects")+" (inserted, site, source_id, offset, reason, line)")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			batch.Abort()
		}
	}()
	at := b.RejectsTime()
	for _, r := range b.Rejects {
		if err := batch.Append(at, b.Site, b.SourceID, uint64(r.Offset), r.Reason, r.Line); err != nil {
			return err
		}
	}
	return batch.Send()
}

// Settle waits until no insert of the source is running on the server, then
// returns the offset of its last committed line (ok is false when nothing of it
// is committed). Only then is the answer final: an insert the server is still
// running, from this process or from a killed predecessor, may yet commit.
// It fails when the server cannot be asked; callers retry.
func (s *Sink) Settle(ctx context.Context, source uint64) (int64, bool, error) {
	prefix := fmt.Sprintf("hitcount-%016x-%%", source)
	for {
		var running uint64
		if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.processes WHERE query_id LIKE ?", prefix).Scan(&running); err != nil {
			return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
		}
		if running == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return 0, false, fmt.Errorf("settle source %016x: %w", source, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if s.cluster != "" {
		// An incomplete replica (a part only a replica that is down has)
		// still answers what it has, with the *IncompleteError: the
		// collector may know more of the source itself.
		var off uint64
		var n uint64
		err := s.replicaRead(ctx, []string{"ingest_progress"}, true, func(c *sql.Conn) error {
			return c.QueryRowContext(ctx, "SELECT count(), max(o) FROM (SELECT maxMerge(max_offset) AS o FROM "+s.table("ingest_progress")+
				" WHERE source_id = ? GROUP BY source_id)", source).Scan(&n, &off)
		})
		if err != nil && !errors.As(err, new(*IncompleteError)) {
			return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
		}
		if err != nil {
			err = fmt.Errorf("settle source %016x: %w", source, err)
		}
		return int64(off), n > 0, err
	}
	rows, err := s.conn.Query(ctx, "SELECT maxMerge(max_offset) FROM "+s.db+".ingest_progress WHERE source_id = ? GROUP BY source_id", source)
	if err != nil {
		return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
	}
	defer rows.Close()
	var off uint64
	found := false
	for rows.Next() {
		if err := rows.Scan(&off); err != nil {
			return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
		}
		found = true
	}
	if err := rows.Err(); err != nil {
		return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
	}
	return int64(off), found, nil
}

// Progress is what the server has committed.
type Progress struct {
	// Offsets maps a source to the offset of its last committed line (a hit or
	// a sampled reject). Resume after that line.
	Offsets map[uint64]int64
	// Sites holds every site with any committed line: a source unknown to a
	// known site is new since the collector first ran and is read from its
	// beginning, whatever start_at says.
	Sites map[string]bool
}

// Committed reads the committed progress of every source.
func (s *Sink) Committed(ctx context.Context) (Progress, error) {
	p := Progress{Offsets: map[uint64]int64{}, Sites: map[string]bool{}}
	if s.cluster != "" {
		err := s.replicaRead(ctx, []string{"ingest_progress"}, true, func(c *sql.Conn) error {
			rows, err := c.QueryContext(ctx, "SELECT site, source_id, maxMerge(max_offset) FROM "+s.table("ingest_progress")+" GROUP BY site, source_id")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var site string
				var id, off uint64
				if err := rows.Scan(&site, &id, &off); err != nil {
					return err
				}
				p.Offsets[id] = int64(off)
				p.Sites[site] = true
			}
			return rows.Err()
		})
		if err != nil {
			return p, fmt.Errorf("read committed offsets: %w", err)
		}
		return p, nil
	}
	rows, err := s.conn.Query(ctx, "SELECT site, source_id, maxMerge(max_offset) FROM "+s.db+".ingest_progress GROUP BY site, source_id")
	if err != nil {
		return p, fmt.Errorf("read committed offsets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var site string
		var id, off uint64
		if err := rows.Scan(&site, &id, &off); err != nil {
			return p, fmt.Errorf("read committed offsets: %w", err)
		}
		p.Offsets[id] = int64(off)
		p.Sites[site] = true
	}
	if err := rows.Err(); err != nil {
		return p, fmt.Errorf("read committed offsets: %w", err)
	}
	return p, nil
}

// recordSource notes a source's current path, for operators mapping source ids
// to files (the sources table). RecordSource (quorum.go) calls it.
func (s *Sink) recordSource(ctx context.Context, site string, id uint64, path string) error {
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table("sources")+" (source_id, site, path, seen)")
	if err != nil {
		return fmt.Errorf("record source %s: %w", path, err)
	}
	if err := batch.Append(id, site, path, time.Now()); err != nil {
		batch.Abort()
		return fmt.Errorf("record source %s: %w", path, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record source %s: %w", path, err)
	}
	return nil
}

// Deduplicates reports whether an identical batch inserted again is dropped,
// in hits and rejects and in every table their views write to, as Migrate
// read it from the tables (see dedup.go): false before Migrate has run.
func (s *Sink) Deduplicates() bool {
	d := s.dedup.Load()
	return d != nil && d.On()
}

// Dedup is what Migrate found the tables do with a re-sent batch.
func (s *Sink) Dedup() Dedup {
	if d := s.dedup.Load(); d != nil {
		return *d
	}
	return Dedup{}
}
