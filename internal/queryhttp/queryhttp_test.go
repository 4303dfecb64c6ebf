package queryhttp

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	var ran []string
	h := Handler(func(_ context.Context, sql string) ([]string, []string, [][]string, error) {
		ran = append(ran, sql)
		if sql == "bad" {
			return nil, nil, nil, errors.New("Syntax error")
		}
		return []string{"n"}, []string{"UInt64"}, [][]string{{"7"}}, nil
	}, 2)
	for _, c := range []struct {
		method, host, origin, format, body string
		code                               int
		out                                string
	}{
		{"POST", "localhost", "", "", "SELECT 7 AS n;", 200, "n\n-\n7\n(1 rows)\n"},
		{"POST", "127.0.0.1:9464", "", "json", "SELECT 7 AS n", 200, `{"n":7}` + "\n"},
		{"POST", "[::1]:9464", "", "tsv", "SELECT 7 AS n", 200, "n\n7\n"},
		{"GET", "localhost", "", "", "SELECT 1", 405, "POST"},
		{"POST", "localhost", "", "xml", "SELECT 1", 400, "want one of"},
		{"POST", "localhost", "", "", "  ", 400, "no SQL"},
		{"POST", "localhost", "", "", "bad", 400, "Syntax error"},
		// What a web page can send: an Origin always, or a rebound host name.
		{"POST", "localhost", "http://attacker.example", "", "SELECT 1", 403, "web pages"},
		{"POST", "localhost", "null", "", "SELECT 1", 403, "web pages"},
		{"POST", "attacker.example", "", "", "SELECT 1", 403, "only localhost"},
		{"POST", "localhost.attacker.example:9464", "", "", "SELECT 1", 403, "only localhost"},
	} {
		req := httptest.NewRequest(c.method, "/query?format="+c.format, strings.NewReader(c.body))
		req.Host = c.host
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.out) {
			t.Errorf("%s %q host %q origin %q format %q: %d %q; want %d with %q", c.method, c.body, c.host, c.origin, c.format, rec.Code, rec.Body.String(), c.code, c.out)
		}
	}
	if len(ran) != 4 || ran[0] != "SELECT 7 AS n;" {
		t.Errorf("the runner saw %q; want only the four allowed requests", ran)
	}
}

// Two requests run at once, each holding its slot until its answer is
// written; a third is refused at once.
func TestHandlerSlots(t *testing.T) {
	entered, hold := make(chan struct{}), make(chan struct{})
	h := Handler(func(ctx context.Context, sql string) ([]string, []string, [][]string, error) {
		if sql == "slow" {
			entered <- struct{}{}
			<-hold
		}
		return []string{"n"}, []string{"UInt64"}, [][]string{{"1"}}, nil
	}, 2)
	post := func(body string) int {
		req := httptest.NewRequest("POST", "/query", strings.NewReader(body))
		req.Host = "localhost"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- post("slow") }()
		<-entered
	}
	if code := post("fast"); code != 503 {
		t.Errorf("a third request while two run: %d, want 503", code)
	}
	close(hold)
	for range 2 {
		if code := <-done; code != 200 {
			t.Errorf("a slow request: %d, want 200", code)
		}
	}
	if code := post("fast"); code != 200 {
		t.Errorf("after the slow ones: %d, want 200", code)
	}
}
