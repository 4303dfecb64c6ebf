package chdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"
)

// Options says which library to load and which data directory to serve.
type Options struct {
	// LibPath is the path of libchdb.so.
	LibPath string
	// DataPath is the engine's data directory (its --path); created if missing.
	DataPath string
	// ExtraArgs are more engine arguments, e.g. "--config-file=/etc/x.xml".
	// Server-level ones only take effect for the first connection of a process.
	ExtraArgs []string
}

// Engine is one connection to the embedded engine on one data directory.
// Its methods are safe for concurrent use; statements run one at a time.
type Engine struct {
	lib      *library
	dataPath string
	// mu is a one-slot semaphore rather than a sync.Mutex so that a caller
	// waiting for a long statement can give up when its context ends.
	mu   chan struct{}
	conn unsafe.Pointer // chdb_connection*; nil once closed
}

// Open loads the library and connects to the engine on opts.DataPath.
func Open(ctx context.Context, opts Options) (*Engine, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if opts.DataPath == "" {
		return nil, fmt.Errorf("open engine: Options.DataPath is empty")
	}
	// The engine compares directories as strings: /x and /x/ are different.
	dataPath, err := filepath.Abs(opts.DataPath)
	if err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	lib, err := loadLibrary(opts.LibPath)
	if err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	// The data holds copies of access logs, which are adm-only on most
	// systems: a directory created here is private. One that exists keeps
	// its mode (an operator may give a group access on purpose), and what the
	// engine creates inside is behind this one.
	if err := os.MkdirAll(dataPath, 0o700); err != nil {
		return nil, fmt.Errorf("open engine: %w", err)
	}
	// A directory another process serves is refused here, before
	// connecting: the engine refuses it too, but says so on stderr ("Code:
	// 76 ... Cannot lock file .../status"), noise under the answer of a
	// `hitcount query` that then asks the running job instead.
	if locked, note := statusLocked(dataPath); locked && !heldInProcess(dataPath) {
		return nil, fmt.Errorf("open engine: %w: %s%s", ErrDataDirLocked, dataPath, note)
	}
	args := append([]string{"clickhouse", "--path=" + dataPath}, opts.ExtraArgs...)

	signals := snapshotSignals()
	lib.setSignalHandlersEnabled(0)
	conn := lib.connectArgs(args)
	signals.restoreHost()
	if conn == nil {
		return nil, fmt.Errorf("open engine: %w", connectFailure(dataPath))
	}
	return &Engine{lib: lib, dataPath: dataPath, mu: make(chan struct{}, 1), conn: conn}, nil
}

// DataPath is the absolute data directory the engine serves.
func (e *Engine) DataPath() string { return e.dataPath }

// Exec runs statements whose output is not wanted (DDL, INSERT, ...).
func (e *Engine) Exec(ctx context.Context, sql string) error {
	_, err := e.Query(ctx, sql, "Null")
	return err
}

// Query runs sql and returns its output in a ClickHouse format such as "TSV",
// "JSONEachRow" or "RowBinary". A rejected statement is a *QueryError.
func (e *Engine) Query(ctx context.Context, sql, format string) ([]byte, error) {
	return e.QueryMax(ctx, sql, format, -1)
}

// ErrResultTooLarge says a result was over the size its caller allows.
var ErrResultTooLarge = errors.New("result too large")

// QueryMax is Query for a result of at most max bytes (max < 0: any size):
// a larger one is ErrResultTooLarge, refused before it is copied into Go's
// memory. The engine's own limits count its blocks, not the text of a
// format (an Enum's name is one byte in a block and any length in TSV).
func (e *Engine) QueryMax(ctx context.Context, sql, format string, max int) ([]byte, error) {
	if err := e.lock(ctx); err != nil {
		return nil, err
	}
	defer e.unlock()
	if e.conn == nil {
		return nil, ErrClosed
	}
	// chdb_query_n takes the chdb_connection that chdb_connect returned a pointer to.
	conn := *(*uintptr)(e.conn)
	res := e.lib.queryN(conn, sql, uintptr(len(sql)), format, uintptr(len(format)))
	if res == 0 {
		return nil, newQueryError(sql, "engine returned no result")
	}
	defer e.lib.destroyResult(res)
	if msg := e.lib.resultError(res); msg != nil {
		return nil, newQueryError(sql, goString(msg))
	}
	n := e.lib.resultLength(res)
	if max >= 0 && n > uintptr(max) {
		return nil, fmt.Errorf("%w: %d bytes, more than %d: add a LIMIT or select fewer columns", ErrResultTooLarge, n, max)
	}
	out := make([]byte, n)
	if n > 0 {
		copy(out, unsafe.Slice((*byte)(e.lib.resultBuffer(res)), n))
	}
	return out, nil
}

// Close ends the connection, waiting for a running statement. When the last
// Engine on a directory closes, the engine releases the directory, and this
// process may open another one. Closing twice is harmless.
func (e *Engine) Close() error {
	e.mu <- struct{}{}
	defer e.unlock()
	if e.conn != nil {
		e.lib.closeConn(e.conn)
		e.conn = nil
	}
	return nil
}

func (e *Engine) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case e.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) unlock() { <-e.mu }
