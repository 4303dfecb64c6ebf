// Package queryhttp serves read-only SQL from a running standalone job to
// `hitcount query` (its embedded engine admits no other process), and is the
// client that command falls back to.
//
// It is served on a Unix socket in a 0700 directory under state_dir, never on
// TCP. A loopback TCP port is reachable by every local user and by every web
// page the operator's browser opens (a cross-origin text/plain POST needs no
// preflight; DNS rebinding defeats any Host check); a token in a 0600 file
// would close that too, but a socket whose directory only the job's user can
// enter needs no secret to keep, rotate or leak, and the kernel tells us who
// connected (SO_PEERCRED), which is checked as well.
package queryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hitcount/hitcount/internal/ops"
	"github.com/hitcount/hitcount/internal/tableout"
)

// Runner answers one SQL statement as text.
type Runner func(ctx context.Context, sql string) (columns, types []string, rows [][]string, err error)

// maxSQL bounds a request body.
const maxSQL = 1 << 20

// SocketPath is where a job with this state directory serves queries.
func SocketPath(stateDir string) string {
	return filepath.Join(stateDir, "query", "hitcount.sock")
}

// Handler serves POST /query: the body is the statement, ?format= one of
// tableout.Formats (table by default). The runner decides what it runs (see
// readonlysql); this handler refuses whatever a browser could have sent, and
// answers at most slots requests at once, each holding its slot until its
// answer is written: a third is told to retry at once rather than queue
// behind queries that may take their whole time limit, and the memory of
// answers being written is bounded by the slots.
func Handler(run Runner, slots int) http.Handler {
	sem := make(chan struct{}, max(1, slots))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Browsers send Origin on every cross-origin POST; hitcount query
		// never does. A Host other than loopback is a rebound name.
		if r.Header.Get("Origin") != "" {
			http.Error(w, "requests from web pages are refused", http.StatusForbidden)
			return
		}
		if !ops.LoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("host %q refused: only localhost", r.Host), http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST the SQL statement as the body", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path != "/query" {
			http.NotFound(w, r)
			return
		}
		format := r.URL.Query().Get("format")
		if format == "" {
			format = "table"
		}
		if !slices.Contains(tableout.Formats, format) {
			http.Error(w, fmt.Sprintf("format %q: want one of %v", format, tableout.Formats), http.StatusBadRequest)
			return
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		default:
			http.Error(w, "every query slot is busy: try again when a running query ends", http.StatusServiceUnavailable)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSQL))
		if err != nil {
			http.Error(w, "read the statement: "+err.Error(), http.StatusBadRequest)
			return
		}
		sql := strings.TrimSpace(string(body))
		if sql == "" {
			http.Error(w, "no SQL in the body", http.StatusBadRequest)
			return
		}
		cols, types, rows, err := run(r.Context(), sql)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if cols == nil {
			return
		}
		tableout.Write(w, format, cols, types, rows)
	})
}

// Listen opens the query socket of a job with this state directory. The
// directory is created 0700 (and made 0700 if it exists: it is the job's
// own); a socket left by a job that died is replaced, one that answers is
// another job's and is an error.
func Listen(stateDir string) (net.Listener, error) {
	path := SocketPath(stateDir)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("query socket: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("query socket: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("query socket: %s is not a directory of this user (uid %d): refusing to serve SQL from it", dir, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("query socket: %w", err)
		}
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("query socket %s: another job answers on it (same state_dir?)", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("query socket: remove the stale one: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("query socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("query socket: %w", err)
	}
	return &peerListener{Listener: ln, conns: make(chan struct{}, maxConns)}, nil
}

// Serve serves h on ln until ctx ends, with the time limits a socket that
// answers ad-hoc queries needs: a request is read within 10 s, an answer
// written within 90 s (a query may take 60), an idle connection closed after
// 5 s, so a client that stops reading cannot hold a slot, memory or a
// descriptor for long.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	return ops.ServeServer(ctx, ln, &http.Server{
		Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 90 * time.Second, IdleTimeout: 5 * time.Second, MaxHeaderBytes: 16 << 10,
	})
}

// maxConns bounds the connections open at once: each holds a descriptor of
// the job, which the collector needs for its log files.
const maxConns = 16

// peerListener accepts only connections from this user or root (the
// directory's mode already keeps others out; this holds even if an operator
// loosens it), at most maxConns at once.
type peerListener struct {
	net.Listener
	conns chan struct{}
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err != nil || (uid != uint32(os.Geteuid()) && uid != 0) {
			c.Close()
			continue
		}
		select {
		case l.conns <- struct{}{}:
			return &countedConn{Conn: c, release: func() { <-l.conns }}, nil
		default:
			c.Close()
		}
	}
}

// countedConn gives its place back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

func peerUID(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// Query sends sql to the job serving on socket and writes the answer to out.
func Query(ctx context.Context, socket, sql, format string, out io.Writer) error {
	client := &http.Client{Transport: &http.Transport{
		// One request per connection: the job serves a few at a time.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	u := "http://localhost/query?format=" + url.QueryEscape(format)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(sql))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/sql")
	resp, err := client.Do(req)
	if err != nil {
		return &UnreachableError{Socket: socket, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
	}
	_, err = io.Copy(out, resp.Body)
	return err
}

// UnreachableError says no job answered on the socket.
type UnreachableError struct {
	Socket string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("and no running job answers on %s (%v)", e.Socket, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
