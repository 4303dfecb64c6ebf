package sink

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Version is a ClickHouse server version, for choosing what the schema may use.
type Version struct{ Major, Minor, Patch uint64 }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor uint64) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// features are the schema choices a server version allows. 18.16 (Debian's)
// has none of them; 26.x (the embedded engine) has all.
type features struct {
	lowCardinality bool // LowCardinality(String) without the experimental setting (19.x+)
	codecs         bool // column CODECs (19.11+)
	dedupToken     bool // insert_deduplication_token + non_replicated_deduplication_window (22.x+)
}

func featuresOf(v Version) features {
	return features{
		lowCardinality: v.AtLeast(20, 1),
		codecs:         v.AtLeast(20, 1),
		dedupToken:     v.AtLeast(22, 2),
	}
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// schema returns the statements that create (idempotently) every table, for a
// database db on a server with features f.
//
// hits: one row per parsed line. ORDER BY (site, path, ts) because the questions
// asked of it are "this page over time" and "top pages of a site in a range":
// both read a contiguous key range; the primary index is sparse, so a long
// key costs nothing per row. PARTITION BY month keeps parts few (a partition per
// day would multiply them for little gain) and lets an operator drop old months
// with one ALTER ... DROP PARTITION. (source_id, offset) is the line's identity,
// what makes every line exactly once checkable.
//
// ingest_progress: the highest committed offset of each source, maintained by
// materialized views from the same inserts into hits and rejects, so the
// collector's resume query reads a handful of rows, not the hits table.
//
// hits_1m: per-minute counts by page, the rollup the sweeper and analytics read.
func schema(db string, f features) []string {
	lc := func(t string) string {
		if f.lowCardinality {
			return "LowCardinality(" + t + ")"
		}
		return t
	}
	codec := func(c string) string {
		if f.codecs {
			return " CODEC(" + c + ")"
		}
		return ""
	}
	hitsSettings := ""
	if f.dedupToken {
		// A retried insert with the same token is dropped by the server, for
		// the hits table and, with deduplicate_blocks_in_dependent_materialized_views,
		// for each rollup fed by a view: every target table keeps the window.
		hitsSettings = " SETTINGS non_replicated_deduplication_window = 1000"
	}
	q := func(s string) string { return strings.ReplaceAll(s, "{db}", db) }
	return []string{
		q("CREATE DATABASE IF NOT EXISTS {db}"),
		q(`CREATE TABLE IF NOT EXISTS {db}.hits (
	ts DateTime` + codec("Delta, LZ4") + `,
	site ` + lc("String") + `,
	host ` + lc("String") + `,
	method ` + lc("String") + `,
	path String,
	query String,
	protocol ` + lc("String") + `,
	status UInt16,
	bytes UInt64,
	referer String,
	user_agent String,
	client String,
	remote_user String,
	request_time_us UInt32,
	source_id UInt64,
	offset UInt64` + codec("Delta, LZ4") + `,
	visitor ` + visitorColumn + `
) ENGINE = MergeTree
PARTITION BY toYYYYMM(ts)
ORDER BY (site, path, ts)` + hitsSettings),
		q(`CREATE TABLE IF NOT EXISTS {db}.rejects (
	inserted DateTime,
	site String,
	source_id UInt64,
	offset UInt64,
	reason String,
	line String
) ENGINE = MergeTree
PARTITION BY toYYYYMM(inserted)
ORDER BY (site, inserted)` + hitsSettings),
		q(`CREATE TABLE IF NOT EXISTS {db}.sources (
	source_id UInt64,
	site String,
	path String,
	seen DateTime
) ENGINE = ReplacingMergeTree(seen)
ORDER BY (site, source_id)`),
		// source_owners: which collector ships each source, so a second
		// one on the same file leaves it alone (owners.go), and until when
		// it has committed all of it (caught_up: the completeness of a
		// site's windows for the sweeper).
		q(`CREATE TABLE IF NOT EXISTS {db}.source_owners (
	source_id UInt64,
	site String,
	collector String,
	host String,
	path String,
	started DateTime,
	seen DateTime,
	released UInt8,
	caught_up DateTime
) ENGINE = ReplacingMergeTree(seen)
ORDER BY (source_id, collector)`),
		q(`CREATE TABLE IF NOT EXISTS {db}.ingest_progress (
	site String,
	source_id UInt64,
	max_offset AggregateFunction(max, UInt64),
	last_insert AggregateFunction(max, DateTime)
) ENGINE = AggregatingMergeTree
ORDER BY (site, source_id)` + hitsSettings),
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.ingest_progress_hits TO {db}.ingest_progress AS
SELECT site, source_id, maxState(offset) AS max_offset, maxState(now()) AS last_insert
FROM {db}.hits GROUP BY site, source_id`),
		// Rejected lines advance progress too: otherwise a file ending in
		// rejected lines would be re-read after every restart.
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.ingest_progress_rejects TO {db}.ingest_progress AS
SELECT site, source_id, maxState(offset) AS max_offset, maxState(now()) AS last_insert
FROM {db}.rejects GROUP BY site, source_id`),
		q(`CREATE TABLE IF NOT EXISTS {db}.hits_1m (
	minute DateTime,
	site ` + lc("String") + `,
	host ` + lc("String") + `,
	path String,
	method ` + lc("String") + `,
	status UInt16,
	bot UInt8,
	hits UInt64,
	bytes UInt64
) ENGINE = SummingMergeTree((hits, bytes))
PARTITION BY toYYYYMM(minute)
ORDER BY (site, path, minute, host, method, status, bot)` + hitsSettings),
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.hits_1m_mv TO {db}.hits_1m AS
SELECT toStartOfMinute(ts) AS minute, site, host, path, method, status,
	match(user_agent, '` + BotPattern + `') AS bot,
	count() AS hits, sum(bytes) AS bytes
FROM {db}.hits GROUP BY minute, site, host, path, method, status, bot`),
		// The sweeper's inputs and state. hits_touched says which pages got
		// hits in which minutes, by the minute they were ingested, so a sweep
		// reads only what changed since the last one (late hits included).
		q(`CREATE TABLE IF NOT EXISTS {db}.hits_touched (
	ingested DateTime,
	site String,
	path String,
	minute DateTime,
	hits UInt64
) ENGINE = SummingMergeTree(hits)
PARTITION BY toYYYYMMDD(ingested)
ORDER BY (ingested, site, path, minute)` + hitsSettings),
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.hits_touched_mv TO {db}.hits_touched AS
SELECT toStartOfMinute(now()) AS ingested, site, path, toStartOfMinute(ts) AS minute, count() AS hits
FROM {db}.hits GROUP BY ingested, site, path, minute`),
		// hits_visitors_1m: the distinct visitors (visitor.go) per page and
		// minute, as an aggregate state that merges across minutes into a
		// window of any size: uniqExactMerge(visitors) over the window's
		// rows is the window's exact count. uniqExact, not uniqCombined:
		// a state holds 8 bytes per distinct visitor of its minute and
		// page, small at this grain, and a count compared with a
		// threshold or a floor should not move by an estimate's error.
		// Same key as hits_1m, so a rule's filters read it alike.
		q(`CREATE TABLE IF NOT EXISTS {db}.hits_visitors_1m (
	minute DateTime,
	site ` + lc("String") + `,
	host ` + lc("String") + `,
	path String,
	method ` + lc("String") + `,
	status UInt16,
	bot UInt8,
	visitors AggregateFunction(uniqExact, UInt64)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (site, path, minute, host, method, status, bot)` + hitsSettings),
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.hits_visitors_1m_mv TO {db}.hits_visitors_1m AS
SELECT toStartOfMinute(ts) AS minute, site, host, path, method, status,
	match(user_agent, '` + BotPattern + `') AS bot,
	uniqExactState(visitor) AS visitors
FROM {db}.hits GROUP BY minute, site, host, path, method, status, bot`),
		// hits_1d serves lifetime rules: a page's whole history in one row a day.
		q(`CREATE TABLE IF NOT EXISTS {db}.hits_1d (
	day Date,
	site String,
	host String,
	path String,
	method String,
	status UInt16,
	bot UInt8,
	hits UInt64
) ENGINE = SummingMergeTree(hits)
PARTITION BY toYYYYMM(day)
ORDER BY (site, path, day, host, method, status, bot)` + hitsSettings),
		q(`CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.hits_1d_mv TO {db}.hits_1d AS
SELECT toDate(ts) AS day, site, host, path, method, status,
	match(user_agent, '` + BotPattern + `') AS bot, count() AS hits
FROM {db}.hits GROUP BY day, site, host, path, method, status, bot`),
		// crossings: every threshold crossing and each change of its state, one
		// row per change; the latest version of a key is its state.
		q(`CREATE TABLE IF NOT EXISTS {db}.crossings (
	key String,
	rule String,
	site String,
	path String,
	window_start DateTime,
	threshold UInt64,
	count UInt64,
	state String,
	version UInt64,
	owner String,
	fencing UInt64,
	attempts UInt32,
	message_id String,
	error String,
	updated DateTime,
	kind String,
	note String
) ENGINE = ReplacingMergeTree(version)
ORDER BY key`),
		// sweeps: one row per finished sweep; the latest watermark is where the
		// next one starts reading hits_touched.
		q(`CREATE TABLE IF NOT EXISTS {db}.sweeps (
	finished DateTime,
	watermark DateTime,
	owner String,
	crossings UInt32,
	sent UInt32
) ENGINE = MergeTree
ORDER BY finished`),
	}
}

// visitorColumn is hits.visitor's type. The collector always sends it;
// the default serves rows inserted without it (a collector older than the
// column, a hand-made INSERT): a hash of the stored client and user agent,
// another function than the collector's, so such rows count as other
// visitors than the same pair sent by a current collector.
const visitorColumn = "UInt64 DEFAULT cityHash64(client, user_agent)"

// BotPattern is the RE2 pattern that marks a user agent as a bot in hits_1m.
const BotPattern = `(?i)(bot|crawl|spider|slurp|curl|wget|python-requests|go-http-client|httpclient|headless)`

// Migrate creates the database and every table that does not exist yet. Every
// statement is idempotent, so any number of collectors may run it at once.
// Objects that exist already are not created again: a current schema needs
// no CREATE right (least-privilege users). In cluster mode each replica of
// the addresses gets the schema by itself, a down one is skipped (see
// cluster_schema.go).
//
// Then it reads what the tables an insert writes do with a re-sent batch
// (Deduplicates), giving each of the schema's plain MergeTree tables that
// lacks non_replicated_deduplication_window the setting on a server that
// has it (ALTER TABLE ... MODIFY SETTING). A user who may not ALTER (the
// least-privilege collector) leaves such a table as it is: Deduplicates is
// then false, each such table is logged with why, and `collector -migrate`
// run by an administrator fixes it.
func (s *Sink) Migrate(ctx context.Context) error {
	if err := s.create(ctx); err != nil {
		return err
	}
	var alter func(context.Context, string) error
	if s.cluster == "" && s.features.dedupToken {
		alter = func(ctx context.Context, stmt string) error { return s.conn.Exec(ctx, stmt) }
	}
	suffix := ""
	if s.cluster != "" {
		suffix = "_local"
	}
	d, err := checkDedup(ctx, s, alter, s.db, s.version, suffix)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	s.dedup.Store(&d)
	d.log(s.log)
	return nil
}

// create creates what is missing of the schema: on the server, or in
// cluster mode on each replica of the addresses that answers (see
// cluster_schema.go), and then on the one the pool is connected to, which
// must have it.
func (s *Sink) create(ctx context.Context) error {
	stmts := s.schemaStatements()
	if s.cluster != "" {
		s.createOnReplicas(ctx, stmts)
	}
	missing, err := createOn(ctx, s.conn, s.db, stmts)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	s.noteColumns(missing)
	return nil
}

// noteColumns records which added columns the tables of the server the
// pool reaches lack (addColumns), and says so.
func (s *Sink) noteColumns(missing map[string]string) {
	caughtUp, visitor := true, true
	for col := range missing {
		if strings.HasSuffix(col, ".caught_up") {
			caughtUp = false
		}
		if strings.HasSuffix(col, ".visitor") {
			visitor = false
		}
	}
	s.ownersLegacy.Store(!caughtUp)
	s.visitorLegacy.Store(!visitor)
	s.logMissingColumns(missing)
}

// schemaStatements are the statements of the sink's schema: the server's,
// or a replica's in cluster mode.
func (s *Sink) schemaStatements() []string {
	stmts := schema(s.db, s.features)
	if s.cluster != "" {
		stmts = clusterSchema(stmts, s.cluster)
	}
	return stmts
}

// createOn runs on conn's server each of stmts that creates an object of
// database db the server does not have, then adds to its tables the
// columns they lack (addColumns), and returns those it could not add.
func createOn(ctx context.Context, conn driver.Conn, db string, stmts []string) (map[string]string, error) {
	have, err := existing(ctx, conn, db)
	if err != nil {
		return nil, err
	}
	create := func(views bool) error {
		for _, stmt := range stmts {
			if IsView(stmt) != views {
				continue
			}
			if m := objectRE.FindStringSubmatch(stmt); m != nil && have[m[1]] {
				continue
			}
			if err := conn.Exec(ctx, stmt); err != nil {
				first, _, _ := strings.Cut(stmt, "(")
				return fmt.Errorf("%s: %w", strings.TrimSpace(first), explainCreate(err))
			}
		}
		return nil
	}
	if err := create(false); err != nil {
		return nil, err
	}
	cols := func(ctx context.Context) (map[string]bool, error) {
		out := map[string]bool{}
		rows, err := conn.Query(ctx, ColumnsQuery, db)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return nil, err
			}
			out[n] = true
		}
		return out, rows.Err()
	}
	exec := func(ctx context.Context, stmt string) error { return conn.Exec(ctx, stmt) }
	missing, err := addColumns(ctx, cols, exec, db, stmts)
	if err != nil {
		return nil, err
	}
	// Views last: a new view may read a column just added to an older
	// table (hits_visitors_1m_mv reads hits.visitor). One that cannot be
	// made for want of it is left for `collector -migrate`.
	if err := create(true); err != nil {
		if _, lacks := missing["hits.visitor"]; lacks {
			return missing, nil
		}
		if _, lacks := missing["hits_local.visitor"]; lacks {
			return missing, nil
		}
		return nil, err
	}
	return missing, nil
}

// IsView reports whether a schema statement creates a materialized view:
// Migrate runs those after the tables have their added columns.
func IsView(stmt string) bool { return strings.HasPrefix(stmt, "CREATE MATERIALIZED VIEW") }

// objectRE finds what a schema statement creates: a database or db.table.
var objectRE = regexp.MustCompile(`^CREATE (?:DATABASE|TABLE|MATERIALIZED VIEW) IF NOT EXISTS ([\w.]+)`)

// existing lists database db (as its name) and its tables (as db.name) if
// they exist on conn's server.
func existing(ctx context.Context, conn driver.Conn, db string) (map[string]bool, error) {
	have := map[string]bool{}
	rows, err := conn.Query(ctx, "SELECT name FROM system.databases WHERE name = ? UNION ALL SELECT concat(database, '.', name) FROM system.tables WHERE database = ?", db, db)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		have[n] = true
	}
	return have, rows.Err()
}

// Schema returns the statements that create every table of database db on a
// server of version v: the same schema for a ClickHouse server and the
// embedded engine.
func Schema(db string, v Version) []string { return schema(db, featuresOf(v)) }

// HitsColumns is the column list of inserts into hits, in Batch order.
const HitsColumns = "ts, site, host, method, path, query, protocol, status, bytes, referer, user_agent, client, remote_user, request_time_us, source_id, offset, visitor"
