package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/service"
	"github.com/hitcount/hitcount/internal/testenv"
)

// officialMain is the log_format of the official nginx image's nginx.conf,
// verbatim (its access_log uses it).
const officialMain = `    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';`

// hit is what a line must become in hits.
type hit struct {
	path      string
	status    uint16
	requestUS uint32 // request_time_us; 0 where the format has no request time
	client    string
}

// Logs as three servers write them by default ship with format: auto (the
// default: the sources below name no format), every line once with its
// fields and no reject, on both stores: a stock nginx log in the official
// image's main format written by a real nginx, a Debian Apache log with
// %D appended to its combined format, and a Caddy JSON log.
func TestStockLogsShipWithFormatAuto(t *testing.T) {
	testenv.Require(t, "nginx", "/usr/sbin/nginx")
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		dir := t.TempDir()
		nginxLog, nginxWant := nginxMainLog(t, dir)
		apacheLog, apacheWant := apacheLogWithD(t, dir)
		caddyLog, caddyWant := caddyLog(t, dir)

		store := d.Open(t)
		cfg, err := config.Parse(filepath.Join(dir, "hitcount.yaml"), []byte(fmt.Sprintf(`embedded: {path: %[1]s/unused}
sources:
  - {path: %[2]s, site: nginx, start_at: beginning}
  - {path: %[3]s, site: apache, start_at: beginning}
  - {path: %[4]s, site: caddy, start_at: beginning}
batch: {delay: 200ms}
state_dir: %[1]s/state
`, dir, nginxLog, apacheLog, caddyLog)))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cfg.Sources {
			if s.Format != "auto" {
				t.Fatalf("source %s: format %q by default, want auto", s.Path, s.Format)
			}
		}
		logs := &syncBuffer{}
		c, err := service.NewCollector(cfg, store, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()

		total := len(nginxWant) + len(apacheWant) + len(caddyWant)
		count := func(q string) uint64 {
			n, err := testenv.Count(ctx, store, q)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		db := store.Database()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && count("SELECT count() FROM "+db+".hits")+count("SELECT count() FROM "+db+".rejects") < uint64(total) {
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // anything doubled would show now
		for _, src := range []struct {
			site, format string
			want         []hit
		}{{"nginx", "main", nginxWant}, {"apache", "%D", apacheWant}, {"caddy", "caddy", caddyWant}} {
			t.Run(src.site, func(t *testing.T) {
				if n := count("SELECT count() FROM " + db + ".rejects WHERE site = '" + src.site + "'"); n != 0 {
					t.Errorf("%d rejects, want 0; detection said:\n%s", n, said(logs, src.site))
				}
				var got []hit
				err := store.Select(ctx, "SELECT path, status, request_time_us, client FROM "+db+".hits WHERE site = ? ORDER BY offset", []any{src.site},
					func(scan func(...any) error) error {
						var h hit
						if err := scan(&h.path, &h.status, &h.requestUS, &h.client); err != nil {
							return err
						}
						got = append(got, h)
						return nil
					})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(src.want) {
					t.Fatalf("%d rows, want %d (every line once); detection said:\n%s", len(got), len(src.want), said(logs, src.site))
				}
				for i := range got {
					if got[i] != src.want[i] {
						t.Errorf("line %d: %+v, want %+v", i+1, got[i], src.want[i])
					}
				}
				if !strings.Contains(said(logs, src.site), "format="+src.format) && !strings.Contains(said(logs, src.site), src.format) {
					t.Errorf("the detected format is not named %q:\n%s", src.format, said(logs, src.site))
				}
			})
		}
	})
}

// said is what the collector logged about a site's file's format.
func said(logs *syncBuffer, site string) string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "site="+site) && strings.Contains(l, "format") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// nginxMainLog serves requests with a real nginx logging in the official
// image's main format, and returns the log and what each line must become.
func nginxMainLog(t *testing.T, dir string) (string, []hit) {
	t.Helper()
	logs := filepath.Join(dir, "nginx")
	os.MkdirAll(filepath.Join(logs, "tmp"), 0o755)
	port := freePort(t)
	user := ""
	if os.Getuid() == 0 {
		user = "user root root;"
	}
	conf := filepath.Join(logs, "nginx.conf")
	os.WriteFile(conf, []byte(user+fmt.Sprintf(`
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 64; }
http {
%[3]s

    access_log  %[1]s/access.log  main;
    client_body_temp_path %[1]s/tmp; proxy_temp_path %[1]s/tmp; fastcgi_temp_path %[1]s/tmp; uwsgi_temp_path %[1]s/tmp; scgi_temp_path %[1]s/tmp;
    server {
        listen 127.0.0.1:%[2]d;
        location / { return 200 "ok\n"; }
        location /missing/ { return 404; }
    }
}
`, logs, port, officialMain)), 0o644)
	nginx := exec.Command("/usr/sbin/nginx", "-c", conf, "-p", logs, "-g", "daemon off;")
	nginx.Stderr = os.Stderr
	if err := nginx.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			nginx.Process.Signal(syscall.SIGQUIT) // flushes and closes its log
			nginx.Wait()
		}
	}
	defer stop()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var want []hit
	for i := 0; i < 100; i++ {
		// A refused connection logs nothing; the one that answers is the
		// log's first line.
		if resp, err := http.Get(base + "/ready"); err == nil {
			resp.Body.Close()
			want = append(want, hit{path: "/ready", status: 200, client: "127.0.0.1"})
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := &http.Client{}
	for i := range 250 {
		path, status := fmt.Sprintf("/page/%d", i%37), uint16(200)
		if i%9 == 0 {
			path, status = fmt.Sprintf("/missing/%d", i), 404
		}
		req, _ := http.NewRequest("GET", base+path+"?q="+fmt.Sprint(i), nil)
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) e2e")
		if i%2 == 0 {
			req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d, 10.0.0.1", i%200))
		}
		if i%3 == 0 {
			req.Header.Set("Referer", "https://www.example.com/from/"+fmt.Sprint(i))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want = append(want, hit{path: path, status: status, client: "127.0.0.1"})
	}
	stop()
	return filepath.Join(logs, "access.log"), want
}

// apacheLogWithD writes lines as Debian's Apache writes them with %D
// appended to its combined LogFormat:
// LogFormat "%h %l %u %t \"%r\" %>s %O \"%{Referer}i\" \"%{User-Agent}i\" %D".
func apacheLogWithD(t *testing.T, dir string) (string, []hit) {
	t.Helper()
	var b strings.Builder
	var want []hit
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.FixedZone("", 3600))
	for i := range 300 {
		ts := start.Add(time.Duration(i) * 1300 * time.Millisecond)
		path, status := fmt.Sprintf("/docs/%d", i%23), uint16(200)
		if i%11 == 0 {
			path, status = "/nope", 404
		}
		client := fmt.Sprintf("192.0.2.%d", i%250)
		us := uint32(150 + i*37)
		fmt.Fprintf(&b, "%s - - [%s] \"GET %s HTTP/1.1\" %d %d \"-\" \"Mozilla/5.0 (Windows NT 10.0; Win64; x64)\" %d\n",
			client, ts.Format("02/Jan/2006:15:04:05 -0700"), path, status, 300+i, us)
		want = append(want, hit{path: path, status: status, requestUS: us, client: client})
	}
	path := filepath.Join(dir, "apache", "access.log")
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// caddyLog writes Caddy's documented access log example
// (caddyserver.com/docs/caddyfile/directives/log) with varying times,
// paths, clients, statuses and durations.
func caddyLog(t *testing.T, dir string) (string, []hit) {
	t.Helper()
	var b strings.Builder
	var want []hit
	for i := range 200 {
		ts := 1795870536.5241024 + float64(i)*0.75
		uri, path, status := fmt.Sprintf("/blog/%d?utm=%d", i%19, i), fmt.Sprintf("/blog/%d", i%19), uint16(200)
		if i%7 == 0 {
			uri, path, status = "/missing", "/missing", 404
		}
		client := fmt.Sprintf("203.0.113.%d", i%250)
		durUS := uint32(900 + i*13)
		fmt.Fprintf(&b, `{"level":"info","ts":%.7f,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"%s","remote_port":"41342","client_ip":"%s","proto":"HTTP/2.0","method":"GET","host":"localhost","uri":"%s","headers":{"User-Agent":["curl/7.82.0"],"Accept":["*/*"],"Accept-Encoding":["gzip, deflate, br"]},"tls":{"resumed":false,"version":772,"cipher_suite":4865,"proto":"h2","server_name":"example.com"}},"bytes_read":0,"user_id":"","duration":%.6f,"size":10900,"status":%d,"resp_headers":{"Server":["Caddy"],"Content-Encoding":["gzip"],"Content-Type":["text/html; charset=utf-8"],"Vary":["Accept-Encoding"]}}`+"\n",
			ts, client, client, uri, float64(durUS)/1e6, status)
		want = append(want, hit{path: path, status: status, requestUS: durUS, client: client})
	}
	path := filepath.Join(dir, "caddy", "access.log")
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// syncBuffer is a log written by the collector's goroutines and read by
// the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
