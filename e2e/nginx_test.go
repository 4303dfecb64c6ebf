// Package e2e runs the whole product on real traffic: nginx serving requests
// driven by wrk, logrotate rotating its log mid-run, the collector shipping it,
// the sweeper emailing crossings to a real SMTP server.
package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func build(t *testing.T, dir, pkg string) string {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, "github.com/hitcount/hitcount/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// countLines counts the lines of the live log and every rotated one.
func countLines(t *testing.T, dir string) (lines int, files int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "access.log*"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = f
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(f)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines++
		}
		f.Close()
		files++
	}
	return lines, files
}

// cpuSeconds reads a live process's user+system CPU time.
func cpuSeconds(t *testing.T, pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func TestRealTraffic(t *testing.T) {
	for _, style := range []string{"create", "copytruncate"} {
		t.Run(style, func(t *testing.T) { realTraffic(t, style) })
	}
}

func realTraffic(t *testing.T, style string) {
	for _, bin := range []string{"/usr/sbin/nginx", "/usr/bin/wrk", "/usr/sbin/logrotate"} {
		testenv.Require(t, filepath.Base(bin), bin)
	}
	ch := testenv.ClickHouse(t)
	smtp := testenv.SMTP(t)
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	os.MkdirAll(logs, 0o755)
	port := freePort(t)
	// nginx: a combined access log, a few pages.
	nginxConf := filepath.Join(dir, "nginx.conf")
	// As root, nginx's workers would drop to "nobody" and could not reopen the
	// log logrotate creates: keep them as the user running the test.
	user := ""
	if os.Getuid() == 0 {
		user = "user root root;"
	}
	os.WriteFile(nginxConf, []byte(user+fmt.Sprintf(`
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
  access_log %[2]s/access.log combined;
  client_body_temp_path %[1]s/tmp; proxy_temp_path %[1]s/tmp; fastcgi_temp_path %[1]s/tmp; uwsgi_temp_path %[1]s/tmp; scgi_temp_path %[1]s/tmp;
  server {
    listen 127.0.0.1:%[3]d;
    location / { return 200 "ok\n"; }
  }
}
`, dir, logs, port)), 0o644)
	nginx := exec.Command("/usr/sbin/nginx", "-c", nginxConf, "-p", dir, "-g", "daemon off;")
	nginx.Stderr = os.Stderr
	if err := nginx.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { nginx.Process.Signal(syscall.SIGQUIT); nginx.Wait() }()
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	bins := t.TempDir()
	collectorBin, sweeperBin := build(t, bins, "cmd/collector"), build(t, bins, "cmd/sweeper")
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: e2e}
sources: [{path: %s/access.log, site: www, start_at: beginning}]
batch: {rows: 50000, delay: 500ms}
http: {listen: ""}
state_dir: %s/state
sweep: {every: 1h, digest_after: 1000}
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "hitcount <alerts@example.com>"}
rules:
  - {name: pricing, match: {path: /pricing}, milestones: [1000, 5000, 20000], window: lifetime, to: [ops@example.com]}
  - {name: blog, match: {path: "/blog/*"}, milestones: [500, 2000], window: lifetime, to: [editors@example.com]}
`, ch.Addr(), logs, dir, smtp.Port())), 0o644)
	collector := exec.Command(collectorBin, "-config", cfg, "-log-level", "warn")
	collector.Stderr = os.Stderr
	if err := collector.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { collector.Process.Signal(syscall.SIGKILL); collector.Wait() }()

	// logrotate as operators configure it for nginx.
	rotateConf := filepath.Join(dir, "logrotate.conf")
	how := "create 0644\n  delaycompress\n  postrotate\n    kill -USR1 $(cat " + dir + "/nginx.pid)\n  endscript"
	if style == "copytruncate" {
		how = "copytruncate"
	}
	os.WriteFile(rotateConf, []byte(fmt.Sprintf("%s/access.log {\n  rotate 10\n  compress\n  missingok\n  %s\n}\n", logs, how)), 0o644)
	rotate := func() {
		out, err := exec.Command("/usr/sbin/logrotate", "-f", "-s", filepath.Join(dir, "logrotate.state"), rotateConf).CombinedOutput()
		if err != nil {
			t.Fatalf("logrotate: %v\n%s", err, out)
		}
	}
	wrk := func(path string, d time.Duration) {
		out, err := exec.Command("/usr/bin/wrk", "-t1", "-c4", "-d"+d.String(), fmt.Sprintf("http://127.0.0.1:%d%s", port, path)).CombinedOutput()
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out)
		}
	}
	t0 := time.Now()
	rotations := 0
	for i, path := range []string{"/pricing", "/blog/launch", "/", "/blog/release-notes", "/pricing"} {
		wrk(path, 2*time.Second)
		if i < 3 {
			rotate()
			rotations++
			time.Sleep(300 * time.Millisecond) // nginx reopens its log
		}
	}
	nginx.Process.Signal(syscall.SIGQUIT) // flushes and closes its log
	nginx.Wait()
	logged, files := countLines(t, logs)

	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows uint64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := s.Conn().QueryRow(ctx, "SELECT count() FROM e2e.hits").Scan(&rows); err == nil && rows >= uint64(logged) {
			break
		}
	}
	time.Sleep(time.Second)
	var distinct, rollup uint64
	s.Conn().QueryRow(ctx, "SELECT count(), uniqExact(source_id, offset) FROM e2e.hits").Scan(&rows, &distinct)
	s.Conn().QueryRow(ctx, "SELECT sum(hits) FROM e2e.hits_1m").Scan(&rollup)
	cpu := cpuSeconds(t, collector.Process.Pid)
	if rows != uint64(logged) || distinct != rows || rollup != rows {
		t.Fatalf("nginx logged %d requests in %d files; hits holds %d rows (%d distinct), rollup %d", logged, files, rows, distinct, rollup)
	}

	// The sweeper: the expected crossings are the milestones each page's
	// count reached; each must arrive once.
	counts := map[string]uint64{}
	r, err := s.Conn().Query(ctx, "SELECT path, count() FROM e2e.hits GROUP BY path")
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var p string
		var n uint64
		r.Scan(&p, &n)
		counts[p] = n
	}
	r.Close()
	want := 0
	for p, n := range counts {
		var ms []uint64
		switch {
		case p == "/pricing":
			ms = []uint64{1000, 5000, 20000}
		case strings.HasPrefix(p, "/blog/"):
			ms = []uint64{500, 2000}
		}
		for _, m := range ms {
			if n >= m {
				want++
			}
		}
	}
	out, err := exec.Command(sweeperBin, "-config", cfg, "-once").CombinedOutput()
	if err != nil {
		t.Fatalf("sweeper: %v\n%s", err, out)
	}
	msgs := smtp.Messages(t)
	if len(msgs) != want || want == 0 {
		t.Fatalf("%d emails, want %d (counts %v)", len(msgs), want, counts)
	}
	t.Logf("%s: %d requests served and logged in %d files (%d rotations), %d rows, %d emails for %d crossings; collector %.2f CPU s = %.2f CPU s per million lines; %v",
		style, logged, files, rotations, rows, len(msgs), want, cpu, cpu/float64(logged)*1e6, time.Since(t0).Round(time.Second))
}
