// Package ops serves the operational endpoints every hitcount process has:
// /metrics (Prometheus), /healthz (the process is alive and serving) and
// /readyz (it can do its job: its store is reachable).
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry returns a registry with the Go runtime and process collectors.
func Registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler returns the mux with the three endpoints. ready returns nil when the
// process can do its job, else the reason it cannot.
func Handler(reg *prometheus.Registry, ready func() error) http.Handler {
	return HandlerWith(reg, ready, nil)
}

// HandlerWith is Handler plus more endpoints (path -> handler).
func HandlerWith(reg *prometheus.Registry, ready func() error, more map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	for path, h := range more {
		mux.Handle(path, h)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Serve listens on addr and serves h until ctx ends. The listener is opened
// before Serve returns its first error, so a taken port fails start-up loudly.
// On a loopback address only requests for a loopback host are answered: a
// web page that rebinds its own name to 127.0.0.1 sends that name as Host,
// and would otherwise read /metrics (log file paths) from the operator's
// browser.
func Serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	return ServeOn(ctx, ln, h)
}

// ServeOn is Serve on a listener opened beforehand (so that a port in use
// fails before anything else starts); it closes ln.
func ServeOn(ctx context.Context, ln net.Listener, h http.Handler) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		h = loopbackOnly(h)
	}
	return ServeListener(ctx, ln, h)
}

func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !LoopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("host %q refused: this listener serves localhost only", r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// LoopbackHost reports whether a host, or a Host header with a port, names
// this machine's loopback: localhost or a loopback address.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ServeListener serves h on ln until ctx ends, then shuts down gracefully.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	return ServeServer(ctx, ln, &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second})
}

// ServeServer runs srv on ln until ctx ends, then shuts it down gracefully.
func ServeServer(ctx context.Context, ln net.Listener, srv *http.Server) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}
