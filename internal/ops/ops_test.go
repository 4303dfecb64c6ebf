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

// A loopback listener answers requests for loopback hosts only: a page that
// rebinds its own name to 127.0.0.1 cannot read /metrics through the
// operator's browser.
func TestLoopbackListenerRefusesOtherHosts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Serve(ctx, addr, Handler(Registry(), func() error { return nil })) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	get := func(host string) int {
		for range 50 {
			req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue // not listening yet
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		t.Fatalf("nothing answers on %s", addr)
		return 0
	}
	for host, want := range map[string]int{
		addr: 200, "localhost:9464": 200, "[::1]:9464": 200,
		"attacker.example:9464": 403, "localhost.attacker.example": 403, "10.0.0.1": 403,
	} {
		if got := get(host); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:9464": true, "[::1]:9464": true, "localhost:9464": true, "LOCALHOST": true, "127.0.0.2": true,
		"0.0.0.0:9464": false, ":9464": false, "10.0.0.5:9464": false, "example.com:9464": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
