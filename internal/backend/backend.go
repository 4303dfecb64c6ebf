// Package backend opens the store a configuration names: a ClickHouse server
// (the clickhouse section) or the embedded engine (embedded.path, standalone
// mode). Both hold the same schema and answer the same queries, so the
// collector, the sweeper and the query command do not care which it is.
package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/chdb"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/sink"
)

// Store is what every command asks of a backend: the collector's inserts and
// progress, and the queries and writes of the sweeper and the query command.
type Store interface {
	Insert(ctx context.Context, b *sink.Batch) error
	Settle(ctx context.Context, source uint64) (int64, bool, error)
	Committed(ctx context.Context) (sink.Progress, error)
	Holds(ctx context.Context, source uint64, span sink.Span) (sink.Held, error)
	MarkProgress(ctx context.Context, site string, source uint64, last int64) error
	RecordSource(ctx context.Context, site string, id uint64, path string) error
	ClaimSources(ctx context.Context, c sink.Claim) (time.Time, []sink.Owner, error)
	Deduplicates() bool
	alerts.DB
	Database() string
	Close() error
}

// Backend is an open store and what else differs between the two kinds.
type Backend struct {
	Store
	// Embedded is true on the embedded engine.
	Embedded bool
	// Version is the engine's ClickHouse version.
	Version sink.Version
	// KeeperMap runs KeeperMap claims on this store.
	KeeperMap alerts.KeeperMapSQL
	// Server is the server connection (nil on the embedded engine).
	Server *sink.Sink
	// Engine is the embedded engine (nil on a server).
	Engine *chdb.Engine
	// Where says what was opened, for logs.
	Where string

	lib string // the embedded engine's library
}

// Exclusive reports whether no other process inserts into the store (the
// embedded engine serves its directory to one process).
func (b *Backend) Exclusive() bool { return b.Embedded }

// Open opens the configured store and brings its schema up to date. A
// server that is not up yet is retried until ctx ends.
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Backend, error) {
	if cfg.ClickHouse == nil {
		lib, err := LibraryPath(cfg)
		if err != nil {
			return nil, err
		}
		path := cfg.Resolve(cfg.Embedded.Path)
		st, err := embedded.Open(ctx, embedded.Options{LibPath: lib, DataPath: path, Database: "hitcount", Logger: log})
		if errors.Is(err, chdb.ErrDataDirLocked) {
			return nil, fmt.Errorf("embedded.path %s: %w: the embedded engine serves one process per directory; stop the other hitcount process, or run the collector and sweeper together with `hitcount run`", path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("embedded.path %s: %w", path, err)
		}
		e := st.Engine()
		v, _ := st.Version(ctx)
		return &Backend{Store: st, Embedded: true, Version: v, KeeperMap: alerts.EngineSQL{Engine: e}, Engine: e,
			Where: "embedded engine at " + e.DataPath(), lib: lib}, nil
	}
	// Before connecting, so it shows while the server is not reachable yet.
	for _, w := range cfg.ClickHouseWarnings() {
		log.Warn(w.Msg, "field", w.Field, "config", fmt.Sprintf("%s:%d", w.File, w.Line))
	}
	opts, err := ServerOptions(cfg)
	if err != nil {
		return nil, err
	}
	opts.Logger = log
	s, err := sink.Connect(ctx, opts, func(err error, wait time.Duration) {
		log.Warn("clickhouse not reachable yet; retrying", "err", err, "retry_in", wait)
	})
	if le := (*sink.LoginError)(nil); errors.As(err, &le) {
		// Fatal at start: retrying cannot succeed, and a process that waits
		// for ever looks healthy to its supervisor while it ships nothing.
		// (Once running, a refused login is retried: see the collector.)
		return nil, &LoginError{Err: le, Hint: passwordHint(cfg)}
	}
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, s, log); err != nil {
		s.Close()
		return nil, err
	}
	if err := checkQuorum(ctx, s, log); err != nil {
		s.Close()
		return nil, err
	}
	return &Backend{Store: s, Version: s.Version(), KeeperMap: alerts.ConnSQL{Conn: s.Conn()}, Server: s,
		Where: fmt.Sprintf("clickhouse %s at %v%s", s.Version(), opts.Addr, map[bool]string{true: ", cluster " + opts.Cluster}[opts.Cluster != ""])}, nil
}

// migrate brings the schema up to date, waiting out a server that cannot
// answer (a replica killed or restarting mid-statement, its Keeper away) as
// Connect waits for one that is not up yet: a collector started during a
// replica's restart must not exit, its log files keep the lines. A statement
// refused for what it is (access, a cluster not configured) fails at once.
func migrate(ctx context.Context, s *sink.Sink, log *slog.Logger) error {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 200 * time.Millisecond
	bo.MaxInterval = 10 * time.Second
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := s.Migrate(ctx)
		if err != nil && !sink.Unavailable(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(bo), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, wait time.Duration) {
		log.Warn("clickhouse could not answer while bringing the schema up to date; retrying", "err", err, "retry_in", wait)
	}))
	return err
}

// LibraryPath finds libchdb.so: embedded.library, $HITCOUNT_CHDB_LIB, the
// repository's .cache next to the binary (scripts/setup.sh puts it there),
// /usr/local/lib, /usr/lib. The first that exists wins; if none does, the
// error says where it looked and how to get it.
func LibraryPath(cfg *config.Config) (string, error) {
	if cfg.Embedded.Library != "" {
		return cfg.Resolve(cfg.Embedded.Library), nil // a missing file is chdb.ErrLibraryMissing, with the path
	}
	if p := os.Getenv("HITCOUNT_CHDB_LIB"); p != "" {
		return p, nil
	}
	var places []string
	if exe, err := os.Executable(); err == nil {
		places = append(places, filepath.Join(filepath.Dir(exe), "..", ".cache", "chdb", "current", "libchdb.so"))
	}
	places = append(places, "/usr/local/lib/libchdb.so", "/usr/lib/libchdb.so")
	for _, p := range places {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in %v: run scripts/setup.sh --embedded-only, set embedded.library or HITCOUNT_CHDB_LIB, or configure a clickhouse server", chdb.ErrLibraryMissing, places)
}

// ServerOptions are the connection options of the clickhouse section, with
// the password read from where it says.
func ServerOptions(cfg *config.Config) (sink.Options, error) {
	ch := cfg.ClickHouse
	pw, err := ch.Password()
	if err != nil {
		return sink.Options{}, err
	}
	o := sink.Options{
		Addr: ch.Addr, Database: ch.Database, Username: ch.Username, Password: pw.Reveal(),
		Compression: ch.Compression, DialTimeout: ch.DialTimeout.Duration, InsertTimeout: ch.InsertTimeout.Duration,
		Cluster: ch.Cluster, InsertQuorum: ch.InsertQuorum, InsertQuorumTimeout: ch.InsertQuorumTimeout.Duration,
	}
	if ch.TLS.Enabled {
		t := &tls.Config{ServerName: ch.TLS.ServerName, InsecureSkipVerify: ch.TLS.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
		if ch.TLS.CAFile != "" {
			pem, err := os.ReadFile(cfg.Resolve(ch.TLS.CAFile))
			if err != nil {
				return o, fmt.Errorf("clickhouse.tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return o, fmt.Errorf("clickhouse.tls.ca_file %s: no certificate in it", ch.TLS.CAFile)
			}
			t.RootCAs = pool
		}
		o.TLS = t
	}
	return o, nil
}

// LoginError is the server refusing the configured login at start-up: the
// commands exit with ExitLoginRefused and this message instead of waiting.
type LoginError struct {
	Err  *sink.LoginError
	Hint string // what in the config to check
}

func (e *LoginError) Error() string {
	return e.Err.Error() + ": check " + e.Hint + " (not retried: it stays refused until the password or the server's users change)"
}

func (e *LoginError) Unwrap() error { return e.Err }

// ExitLoginRefused is the exit status of a command whose ClickHouse login
// was refused at start: EX_CONFIG of sysexits.h, which the systemd units
// name in RestartPreventExitStatus, so that a wrong password stops the
// unit, with this reason in its journal, instead of restarting it every
// few seconds.
const ExitLoginRefused = 78

// passwordHint names where the configured login comes from.
func passwordHint(cfg *config.Config) string {
	ch := cfg.ClickHouse
	user := ch.Username
	if user == "" {
		user = "default"
	}
	where := fmt.Sprintf("clickhouse.username (%s)", user)
	switch {
	case ch.PasswordEnv != "":
		where += fmt.Sprintf(" and the password in $%s (clickhouse.password_env)", ch.PasswordEnv)
	case ch.PasswordFile != "":
		where += fmt.Sprintf(" and the password in %s (clickhouse.password_file)", cfg.Resolve(ch.PasswordFile))
	default:
		where += ", with no password (clickhouse.password_env or password_file gives one),"
	}
	return where + " in " + cfg.File
}
