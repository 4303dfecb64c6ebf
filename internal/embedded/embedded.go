// Package embedded is the collector's store on the embedded ClickHouse engine
// (chDB, loaded at run time): the same schema and the same contract as the
// server sink, for standalone mode on one machine.
//
// The engine runs inside the collector's process, so a kill -9 during an
// insert can stop it after the hits part and some views' parts are written but
// before the others. The collector records each batch in flight before
// inserting it and, after a restart, inserts exactly that batch again under the
// same insert_deduplication_token; with
// deduplicate_blocks_in_dependent_materialized_views the engine keeps what it
// has and writes only the missing parts.
package embedded

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/sink"
)

// Options say which library and data directory to use.
type Options struct {
	LibPath  string
	DataPath string
	Database string
	// SkipMigrate opens the store as its tables are: nothing created or
	// altered (Migrate does that). Deduplicates still reads the tables.
	SkipMigrate bool
	// Logger hears what Migrate finds (a table that does not deduplicate);
	// nil is slog's default.
	Logger *slog.Logger
}

// Store writes and reads hits in the embedded engine. The engine belongs to
// this process alone (chDB refuses a second process on a data directory), so
// an insert never outlives the process that made it: there is nothing to
// settle after a crash, only the committed offsets to read.
type Store struct {
	e     *chdb.Engine
	db    string
	bufs  sync.Pool // *[]byte statement buffers, one per concurrent insert
	log   *slog.Logger
	dedup atomic.Pointer[sink.Dedup]
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Open opens the engine on the data directory and brings the schema up to
// date (Migrate), unless o.SkipMigrate.
func Open(ctx context.Context, o Options) (*Store, error) {
	if !identRE.MatchString(o.Database) {
		return nil, fmt.Errorf("embedded store: database name %q is not an identifier", o.Database)
	}
	e, err := chdb.Open(ctx, chdb.Options{LibPath: o.LibPath, DataPath: o.DataPath})
	if err != nil {
		return nil, err
	}
	s := &Store{e: e, db: o.Database, log: o.Logger, bufs: sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}}
	// DateTime text is read and written as UTC (see scanTSV), and the daily
	// rollup's days are UTC days, as on a server configured as deploy/ says.
	if err := e.Exec(ctx, "SET session_timezone = 'UTC'"); err != nil {
		e.Close()
		return nil, fmt.Errorf("embedded store: %w", err)
	}
	if o.SkipMigrate {
		err = s.checkDedup(ctx, false)
	} else {
		err = s.Migrate(ctx)
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the engine.
func (s *Store) Close() error { return s.e.Close() }

// Engine is the engine, for queries by other components of the same process.
func (s *Store) Engine() *chdb.Engine { return s.e }

// Version is the engine's ClickHouse version.
func (s *Store) Version(ctx context.Context) (sink.Version, error) {
	var v sink.Version
	out, err := s.e.Query(ctx, "SELECT version()", "TSV")
	if err != nil {
		return v, fmt.Errorf("embedded store: version: %w", err)
	}
	parts := strings.SplitN(strings.TrimSpace(string(out)), ".", 3)
	v.Major, _ = strconv.ParseUint(parts[0], 10, 64)
	if len(parts) > 1 {
		v.Minor, _ = strconv.ParseUint(parts[1], 10, 64)
	}
	return v, nil
}

// Migrate creates what is missing of the schema, adds the columns added
// since a table was made (sink.AddColumns), gives each table an insert
// writes that lacks non_replicated_deduplication_window (created by an older
// hitcount) the setting, and reads whether they all deduplicate
// (Deduplicates).
func (s *Store) Migrate(ctx context.Context) error {
	v, err := s.Version(ctx)
	if err != nil {
		return err
	}
	create := func(views bool) error {
		for _, stmt := range sink.Schema(s.db, v) {
			if sink.IsView(stmt) != views {
				continue
			}
			if err := s.e.Exec(ctx, stmt); err != nil {
				first, _, _ := strings.Cut(stmt, "(")
				return fmt.Errorf("embedded store: migrate: %s: %w", strings.TrimSpace(first), err)
			}
		}
		return nil
	}
	if err := create(false); err != nil {
		return err
	}
	// Tables made by an older hitcount lack the columns added since; the
	// engine's user may alter anything, so none stays missing. Views come
	// after: a new one may read an added column.
	missing, err := sink.AddColumns(ctx, s, s.e.Exec, s.db, v)
	if err != nil {
		return fmt.Errorf("embedded store: migrate: %w", err)
	}
	for col, why := range missing {
		return fmt.Errorf("embedded store: migrate: add column %s: %s", col, why)
	}
	if err := create(true); err != nil {
		return err
	}
	return s.checkDedup(ctx, true)
}

// checkDedup reads what the tables do with a re-sent batch, first bringing
// them up to the schema if migrate.
func (s *Store) checkDedup(ctx context.Context, migrate bool) error {
	v, err := s.Version(ctx)
	if err != nil {
		return err
	}
	var alter func(context.Context, string) error
	if migrate {
		alter = s.e.Exec
	}
	d, err := sink.CheckDedup(ctx, s, alter, s.db, v, s.log)
	if err != nil {
		return fmt.Errorf("embedded store: %w", err)
	}
	s.dedup.Store(&d)
	return nil
}

// Insert writes the batch's rows as one block, then its reject samples, with
// the batch id as deduplication token (the engine has it): an insert repeated
// after a crash that hid its outcome is dropped, not doubled.
//
// The collector ships files in parallel, so inserts run concurrently: each
// builds its statement in a buffer of its own from the pool.
func (s *Store) Insert(ctx context.Context, b *sink.Batch) error {
	id := b.ID()
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := (*bp)[:0]
	defer func() { *bp = buf[:0] }()
	if b.Rows() > 0 {
		buf = append(buf[:0], "INSERT INTO "+s.db+".hits ("+sink.HitsColumns+") SETTINGS insert_deduplication_token = '"+id+"', deduplicate_blocks_in_dependent_materialized_views = 1 FORMAT TSV\n"...)
		buf = b.AppendTSV(buf)
		if err := s.e.Exec(ctx, string(buf)); err != nil {
			return fmt.Errorf("insert batch %s (%d rows): %w", id, b.Rows(), err)
		}
	}
	if len(b.Rejects) > 0 {
		buf = append(buf[:0], "INSERT INTO "+s.db+".rejects (inserted, site, source_id, offset, reason, line) SETTINGS insert_deduplication_token = '"+id+"-rejects', deduplicate_blocks_in_dependent_materialized_views = 1 FORMAT TSV\n"...)
		buf = b.AppendRejectsTSV(buf)
		if err := s.e.Exec(ctx, string(buf)); err != nil {
			return fmt.Errorf("insert rejects of batch %s: %w", id, err)
		}
	}
	return nil
}

// Settle returns the offset of the source's last committed line.
func (s *Store) Settle(ctx context.Context, source uint64) (int64, bool, error) {
	out, err := s.e.Query(ctx, fmt.Sprintf("SELECT maxMerge(max_offset) FROM %s.ingest_progress WHERE source_id = %d GROUP BY source_id", s.db, source), "TSV")
	if err != nil {
		return 0, false, fmt.Errorf("settle source %016x: %w", source, err)
	}
	line := strings.TrimSpace(string(out))
	if line == "" {
		return 0, false, nil
	}
	off, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("settle source %016x: %q: %w", source, line, err)
	}
	return off, true, nil
}

// Committed reads the committed progress of every source.
func (s *Store) Committed(ctx context.Context) (sink.Progress, error) {
	p := sink.Progress{Offsets: map[uint64]int64{}, Sites: map[string]bool{}}
	out, err := s.e.Query(ctx, "SELECT site, source_id, maxMerge(max_offset) FROM "+s.db+".ingest_progress GROUP BY site, source_id", "TSV")
	if err != nil {
		return p, fmt.Errorf("read committed offsets: %w", err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		f := strings.Split(string(line), "\t")
		if len(f) != 3 {
			continue
		}
		id, err1 := strconv.ParseUint(f[1], 10, 64)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return p, fmt.Errorf("read committed offsets: bad row %q", line)
		}
		p.Offsets[id] = off
		p.Sites[unescapeTSV(f[0])] = true
	}
	return p, nil
}

// RecordSource notes a source's current path.
func (s *Store) RecordSource(ctx context.Context, site string, id uint64, path string) error {
	q := fmt.Sprintf("INSERT INTO %s.sources (source_id, site, path, seen) FORMAT TSV\n%d\t%s\t%s\t%d\n", s.db, id,
		escapeTSV(site), escapeTSV(path), time.Now().Unix())
	if err := s.e.Exec(ctx, q); err != nil {
		return fmt.Errorf("record source %s: %w", path, err)
	}
	return nil
}

var tsvEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

// tsvUnescaper undoes every escape the engine writes in TSV output.
var tsvUnescaper = strings.NewReplacer(`\\`, `\`, `\t`, "\t", `\n`, "\n", `\r`, "\r", `\'`, "'", `\0`, "\x00",
	`\b`, "\b", `\f`, "\f", `\a`, "\a", `\v`, "\v")

func escapeTSV(s string) string   { return tsvEscaper.Replace(s) }
func unescapeTSV(s string) string { return tsvUnescaper.Replace(s) }

// Deduplicates reports whether an identical batch inserted again is dropped
// everywhere it lands: the engine takes insert_deduplication_token, so it is
// so when hits, rejects and every table their views write to keep a
// deduplication window, as the tables say (read at Open and Migrate).
func (s *Store) Deduplicates() bool {
	d := s.dedup.Load()
	return d != nil && d.On()
}

// Dedup is what the tables do with a re-sent batch, table by table.
func (s *Store) Dedup() sink.Dedup {
	if d := s.dedup.Load(); d != nil {
		return *d
	}
	return sink.Dedup{}
}

// Database is the database holding the tables.
func (s *Store) Database() string { return s.db }
