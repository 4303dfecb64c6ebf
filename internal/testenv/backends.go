package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/sink"
)

// Store is everything the collector and the sweeper ask of a backend (the
// server sink or the embedded store), on one database.
type Store interface {
	Insert(ctx context.Context, b *sink.Batch) error
	Settle(ctx context.Context, source uint64) (int64, bool, error)
	Committed(ctx context.Context) (sink.Progress, error)
	Holds(ctx context.Context, source uint64, span sink.Span) (sink.Held, error)
	MarkProgress(ctx context.Context, site string, source uint64, last int64) error
	RecordSource(ctx context.Context, site string, id uint64, path string) error
	ClaimSources(ctx context.Context, c sink.Claim) (time.Time, []sink.Owner, error)
	Deduplicates() bool
	Select(ctx context.Context, q string, args []any, fn func(scan func(dest ...any) error) error) error
	InsertRows(ctx context.Context, table, columns string, rows [][]any) error
	Database() string
	Close() error
}

// Backends are the two stores a shared suite runs on: a ClickHouse 18.16
// server and the embedded engine (ClickHouse 26).
var Backends = []string{"server", "embedded"}

// EachBackend runs fn as a subtest per backend with a fresh database on it.
// Subtests run one after another. A test that calls t.Parallel first runs
// alongside others; its embedded subtest waits while another test holds the
// engine (see engineGate).
func EachBackend(t *testing.T, fn func(t *testing.T, db *Database)) {
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) { fn(t, NewDatabase(t, b)) })
	}
}

// Database is a fresh database on a backend. It can be opened in this
// process, or described to a child process through the environment (Env,
// DatabaseFromEnv). The embedded engine's data directory can be open in one
// process at a time, so a test that hands it to a child closes its own Store
// first.
type Database struct {
	Backend string
	Addr    string // server
	Data    string // embedded: the data directory
	Name    string
	Server  *ClickHouseServer // server: the test's server, for faults
}

// NewDatabase makes a fresh database on backend ("server" starts a
// ClickHouse server for the test).
func NewDatabase(t testing.TB, backend string) *Database {
	t.Helper()
	d := &Database{Backend: backend, Name: fmt.Sprintf("t%d", rand.Uint32())}
	switch backend {
	case "server":
		d.Server = ClickHouse(t)
		d.Addr = d.Server.Addr()
	case "embedded":
		RequireChdb(t)
		HoldEngine(t)
		d.Data = filepath.Join(t.TempDir(), "data")
	default:
		t.Fatalf("no backend %q", backend)
	}
	return d
}

// Open opens the database, creating the schema; the store is closed when the
// test ends (closing it earlier is fine).
func (d *Database) Open(t testing.TB) Store {
	t.Helper()
	s, err := d.OpenStore(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatalf("open %s store: %v", d.Backend, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// OpenStore opens the database outside a test (in a child process); inserts
// on a server time out after insertTimeout.
func (d *Database) OpenStore(ctx context.Context, insertTimeout time.Duration) (Store, error) {
	if d.Backend == "embedded" {
		return embedded.Open(ctx, embedded.Options{LibPath: ChdbLibPath(), DataPath: d.Data, Database: d.Name})
	}
	s, err := sink.Open(ctx, sink.Options{Addr: []string{d.Addr}, Database: d.Name, InsertTimeout: insertTimeout})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Env describes the database to a child process.
func (d *Database) Env() []string {
	return []string{"HC_BACKEND=" + d.Backend, "HC_ADDR=" + d.Addr, "HC_DATA=" + d.Data, "HC_DB=" + d.Name}
}

// DatabaseFromEnv is the database a parent described with Env.
func DatabaseFromEnv() *Database {
	return &Database{Backend: os.Getenv("HC_BACKEND"), Addr: os.Getenv("HC_ADDR"), Data: os.Getenv("HC_DATA"), Name: os.Getenv("HC_DB")}
}

// Count runs a query returning one number.
func Count(ctx context.Context, s Store, q string) (uint64, error) {
	var n uint64
	err := s.Select(ctx, q, nil, func(scan func(...any) error) error { return scan(&n) })
	return n, err
}

// ServerDatabase is a fresh database on a server the test already started.
func ServerDatabase(ch *ClickHouseServer) *Database {
	return &Database{Backend: "server", Addr: ch.Addr(), Name: fmt.Sprintf("t%d", rand.Uint32()), Server: ch}
}

// Fresh is another fresh database on d's backend, for t: a new database on
// the same server, or a new embedded data directory (taking the engine for t,
// see NewDatabase; d's own store must be closed before it is opened).
func (d *Database) Fresh(t testing.TB) *Database {
	t.Helper()
	if d.Server != nil {
		return ServerDatabase(d.Server)
	}
	return NewDatabase(t, d.Backend)
}
