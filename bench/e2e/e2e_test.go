// Package e2e measures the collector end to end (log file -> parse ->
// ClickHouse) against clickhouse-client loading the same rows, already parsed,
// as TSV into an identical table on the same real server, in one run.
// Run it through bench/collector-vs-client.sh.
package e2e

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

const hitsColumns = "ts, site, host, method, path, query, protocol, status, bytes, referer, user_agent, client, remote_user, request_time_us, source_id, offset"

func BenchmarkCollectorVsClickHouseClient(b *testing.B) {
	lines, _ := strconv.Atoi(os.Getenv("BENCH_LINES"))
	if lines == 0 {
		lines = 2_000_000
	}
	ch := testenv.ClickHouse(b)
	ctx := context.Background()
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
	for _, db := range []string{"by_collector", "by_client"} {
		s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: db})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	tsvPath := filepath.Join(dir, "rows.tsv")
	if err := writeTSV(logPath, tsvPath); err != nil {
		b.Fatal(err)
	}

	// clickhouse-client loading the parsed rows.
	tsv, err := os.Open(tsvPath)
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := strings.Cut(ch.Addr(), ":")
	client := exec.Command("clickhouse-client", "--host", host, "--port", port,
		"--query", "INSERT INTO by_client.hits ("+hitsColumns+") FORMAT TSV")
	client.Stdin = tsv
	client.Stderr = os.Stderr
	t0 := time.Now()
	if err := client.Run(); err != nil {
		b.Fatalf("clickhouse-client: %v", err)
	}
	clientSecs := time.Since(t0).Seconds()
	tsv.Close()
	if n := count(b, ch, "by_client"); n != uint64(lines) {
		b.Fatalf("clickhouse-client loaded %d rows, want %d", n, lines)
	}

	// The collector binary shipping the log from its first line.
	bin := filepath.Join(dir, "collector")
	build := exec.Command("go", "build", "-o", bin, "github.com/hitcount/hitcount/cmd/collector")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build collector: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse:
  addr: [%q]
  database: by_collector
sources:
  - path: %q
    format: combined
    site: bench
    start_at: beginning
batch:
  rows: 50000
  delay: 1s
http:
  listen: ""
state_dir: %q
`, ch.Addr(), logPath, filepath.Join(dir, "state"))), 0o644)
	col := exec.Command(bin, "-config", cfg)
	col.Stderr = os.Stderr
	t0 = time.Now()
	if err := col.Start(); err != nil {
		b.Fatal(err)
	}
	var peak int64
	for count(b, ch, "by_collector") < uint64(lines) {
		peak = max(peak, peakRSS(col.Process.Pid))
		if time.Since(t0) > 5*time.Minute {
			b.Fatal("collector did not ship every line in 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	collectorSecs := time.Since(t0).Seconds()
	peak = max(peak, peakRSS(col.Process.Pid))
	col.Process.Signal(syscall.SIGTERM)
	col.Wait()
	if n := count(b, ch, "by_collector"); n != uint64(lines) {
		b.Fatalf("collector shipped %d rows, want %d", n, lines)
	}
	cr, kr := float64(lines)/collectorSecs, float64(lines)/clientSecs
	fmt.Printf("rows %d: collector %.2fs (%.0f rows/s, peak RSS %d MB), clickhouse-client TSV %.2fs (%.0f rows/s), ratio %.2fx\n",
		lines, collectorSecs, cr, peak>>20, clientSecs, kr, cr/kr)
	b.ReportMetric(cr, "collector_rows/s")
	b.ReportMetric(kr, "client_rows/s")
	b.ReportMetric(cr/kr, "ratio")
	b.ReportMetric(float64(peak>>20), "peak_rss_MB")
}

func count(b *testing.B, ch *testenv.ClickHouseServer, db string) uint64 {
	var n uint64
	if err := ch.Conn(b).QueryRow(context.Background(), "SELECT count() FROM "+db+".hits").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// writeTSV parses the log once and writes the rows the collector would insert,
// in the hits table's column order.
func writeTSV(logPath, tsvPath string) error {
	in, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(tsvPath)
	if err != nil {
		return err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	p, err := parser.New("combined")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var h parser.Hit
	var off int64
	esc := strings.NewReplacer("\\", "\\\\", "\t", "\\t", "\n", "\\n")
	for sc.Scan() {
		line := sc.Bytes()
		if err := p.Parse(line, &h); err == nil {
			fmt.Fprintf(w, "%d\tbench\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t1\t%d\n",
				h.Unix, esc.Replace(string(h.Host)), h.Method, esc.Replace(string(h.Path)), esc.Replace(string(h.Query)), h.Protocol,
				h.Status, h.Bytes, esc.Replace(string(h.Referer)), esc.Replace(string(h.UserAgent)), h.RemoteAddr, esc.Replace(string(h.RemoteUser)),
				h.RequestTime.Microseconds(), off)
		}
		off += int64(len(line)) + 1
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return w.Flush()
}

func peakRSS(pid int) int64 {
	n, _ := testenv.PeakRSS(pid) // 0 once it has exited: the maximum taken before stands
	return n
}
