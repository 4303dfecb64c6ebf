package ops

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEndpoints(t *testing.T) {
	reg := Registry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hitcount_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(3)
	var ready atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- ServeListener(ctx, ln, Handler(reg, func() error {
			if !ready.Load() {
				return errors.New("clickhouse unreachable")
			}
			return nil
		}))
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "hitcount_test_total 3") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "clickhouse unreachable") {
		t.Errorf("/readyz while not ready: %d %s", code, body)
	}
	ready.Store(true)
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
