// Package queryhttp serves read-only SQL over HTTP from a running standalone
// job (POST /query on its ops listener), because its embedded engine admits
// no other process; and it is the client `hitcount query` falls back to.
package queryhttp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/hitcount/hitcount/internal/tableout"
)

// Runner answers one SQL statement as text.
type Runner func(ctx context.Context, sql string) (columns, types []string, rows [][]string, err error)

// maxSQL bounds a request body.
const maxSQL = 1 << 20

// intoOutfile would let a caller write files as the job's user.
var intoOutfile = regexp.MustCompile(`(?i)\binto\s+outfile\b`)

// Handler serves POST /query: the body is the statement, ?format= one of
// tableout.Formats (table by default). The runner must be read-only; this
// handler only refuses what a read-only session still allows and must not
// (INTO OUTFILE).
func Handler(run Runner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST the SQL statement as the body", http.StatusMethodNotAllowed)
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
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSQL))
		if err != nil {
			http.Error(w, "read the statement: "+err.Error(), http.StatusBadRequest)
			return
		}
		sql := strings.TrimSuffix(strings.TrimSpace(string(body)), ";")
		if sql == "" {
			http.Error(w, "no SQL in the body", http.StatusBadRequest)
			return
		}
		if intoOutfile.MatchString(sql) {
			http.Error(w, "INTO OUTFILE is not served over HTTP: stop the job and use hitcount query", http.StatusBadRequest)
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

// Loopback reports whether listen (host:port) is on a loopback address:
// the endpoint is served only there.
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Query sends sql to the /query endpoint at listen and writes the answer to
// out.
func Query(ctx context.Context, listen, sql, format string, out io.Writer) error {
	u := "http://" + listen + "/query?format=" + url.QueryEscape(format)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(sql))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &UnreachableError{URL: u, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
	}
	_, err = io.Copy(out, resp.Body)
	return err
}

// UnreachableError says no job answered at the endpoint.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("and no running job answers at %s (%v)", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
