package queryhttp

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLoopback(t *testing.T) {
	for listen, want := range map[string]bool{
		"127.0.0.1:9464": true, "[::1]:9464": true, "localhost:9464": true,
		"0.0.0.0:9464": false, ":9464": false, "10.0.0.5:9464": false, "example.com:9464": false, "": false,
	} {
		if got := Loopback(listen); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", listen, got, want)
		}
	}
}

func TestHandler(t *testing.T) {
	var ran []string
	h := Handler(func(_ context.Context, sql string) ([]string, []string, [][]string, error) {
		ran = append(ran, sql)
		if sql == "bad" {
			return nil, nil, nil, errors.New("Syntax error")
		}
		return []string{"n"}, []string{"UInt64"}, [][]string{{"7"}}, nil
	})
	for _, c := range []struct {
		method, format, body string
		code                 int
		out                  string
	}{
		{"POST", "", "SELECT 7 AS n;", 200, "n\n-\n7\n(1 rows)\n"},
		{"POST", "json", "SELECT 7 AS n", 200, `{"n":7}` + "\n"},
		{"GET", "", "SELECT 1", 405, "POST"},
		{"POST", "xml", "SELECT 1", 400, "want one of"},
		{"POST", "", "  ", 400, "no SQL"},
		{"POST", "", "SELECT 1 into\n OUTFILE '/tmp/x'", 400, "INTO OUTFILE"},
		{"POST", "", "bad", 400, "Syntax error"},
	} {
		req := httptest.NewRequest(c.method, "/query?format="+c.format, strings.NewReader(c.body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.out) {
			t.Errorf("%s %q format %q: %d %q; want %d with %q", c.method, c.body, c.format, rec.Code, rec.Body.String(), c.code, c.out)
		}
	}
	if len(ran) != 3 || ran[0] != "SELECT 7 AS n" {
		t.Errorf("the runner saw %q; want only the three valid statements, without the trailing semicolon", ran)
	}
}
