// Package standalone measures standalone mode (hitcount run: file -> parse ->
// embedded engine, in one process) against server mode (the collector
// binary -> a ClickHouse 18.16 server) shipping the same log, in one run.
// Run it through bench/standalone-vs-server.sh.
package standalone

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
)

func BenchmarkStandaloneVsServer(b *testing.B) {
	lines, _ := strconv.Atoi(os.Getenv("BENCH_LINES"))
	if lines == 0 {
		lines = 2_000_000
	}
	lib := testenv.RequireChdb(b)
	ch := testenv.ClickHouse(b)
	dir := b.TempDir()
	logPath := filepath.Join(dir, "access.log")
	f, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := loggen.New(loggen.Options{Seed: 42, Step: time.Millisecond}).WriteN(f, lines); err != nil {
		b.Fatal(err)
	}
	f.Close()
	bins := map[string]string{}
	for _, cmd := range []string{"collector", "hitcount"} {
		bins[cmd] = filepath.Join(dir, cmd)
		build := exec.Command("go", "build", "-o", bins[cmd], "github.com/hitcount/hitcount/cmd/"+cmd)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	common := fmt.Sprintf(`sources: [{path: %q, format: combined, site: bench, start_at: beginning}]
batch: {rows: 50000, delay: 1s}
rules: [{name: busy, match: {site: bench, path: /pricing}, threshold: 1000000000, window: 1h, to: [ops@example.com]}]
sweep: {every: 1m}
`, logPath)
	type result struct {
		secs, cpu float64
		rss       int64
	}
	run := func(name, store string, args ...string) result {
		port := freePort(b)
		sub := filepath.Join(dir, name)
		os.MkdirAll(sub, 0o755)
		cfg := filepath.Join(sub, "hitcount.yaml")
		os.WriteFile(cfg, []byte(store+common+fmt.Sprintf("http: {listen: \"127.0.0.1:%d\"}\nstate_dir: %q\noutbox: %q\n",
			port, filepath.Join(sub, "state"), filepath.Join(sub, "outbox"))), 0o644)
		cmd := exec.Command(args[0], append(args[1:], "-config", cfg, "-log-level", "warn")...)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var r result
		for {
			if n := inserted(port); n >= float64(lines) {
				break
			}
			r.rss = max(r.rss, rss(cmd.Process.Pid))
			if time.Since(t0) > 10*time.Minute {
				b.Fatalf("%s did not ship %d lines in 10 minutes", name, lines)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r.secs = time.Since(t0).Seconds()
		r.cpu = cpuSeconds(cmd.Process.Pid)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return r
	}
	server := run("server", fmt.Sprintf("clickhouse: {addr: [%q], database: bench}\n", ch.Addr()), bins["collector"])
	embedded := run("embedded", fmt.Sprintf("embedded: {path: %q, library: %q}\n", filepath.Join(dir, "embedded", "data"), lib), bins["hitcount"], "run")

	// Both stores hold every line once.
	var n uint64
	if err := ch.Conn(b).QueryRow(b.Context(), "SELECT count() FROM bench.hits").Scan(&n); err != nil || n != uint64(lines) {
		b.Fatalf("server holds %d rows (%v), want %d", n, err, lines)
	}
	out, err := exec.Command(bins["hitcount"], "query", "-config", filepath.Join(dir, "embedded", "hitcount.yaml"), "-format", "tsv", "SELECT count() FROM hitcount.hits").Output()
	if err != nil || !bytes.HasSuffix(bytes.TrimSpace(out), []byte("\n"+strconv.Itoa(lines))) {
		b.Fatalf("embedded store holds %q (%v), want %d rows", out, err, lines)
	}
	sr, er := float64(lines)/server.secs, float64(lines)/embedded.secs
	fmt.Printf("rows %d: server mode (collector -> ClickHouse 18.16) %.2fs (%.0f rows/s, collector CPU %.2fs, peak RSS %d MB); "+
		"standalone (hitcount run, embedded ClickHouse 26) %.2fs (%.0f rows/s, process CPU %.2fs incl. the engine, peak RSS %d MB); ratio standalone/server %.2fx\n",
		lines, server.secs, sr, server.cpu, server.rss>>20, embedded.secs, er, embedded.cpu, embedded.rss>>20, er/sr)
	b.ReportMetric(sr, "server_rows/s")
	b.ReportMetric(er, "standalone_rows/s")
	b.ReportMetric(er/sr, "ratio")
}

func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// inserted sums hitcount_collector_rows_inserted_total from /metrics (0
// while the process is not serving yet).
func inserted(port int) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "hitcount_collector_rows_inserted_total") {
			n, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += n // one series per site
		}
	}
	return sum
}

func rss(pid int) int64 {
	n, _ := testenv.PeakRSS(pid)
	return n
}

// cpuSeconds reads a live process's user+system CPU time.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}
