package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// lockedBuffer is a log written by the command while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// setPassword gives the server's user collector this password (users.d,
// which the server reloads within seconds) and waits until it logs in.
func setPassword(t *testing.T, srv *testenv.ClickHouseServer, password string) {
	t.Helper()
	defer func() {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			s, err := sink.Open(context.Background(), sink.Options{Addr: []string{srv.Addr()}, Database: "default", Username: "collector", Password: password})
			if err == nil {
				s.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the password set in users.d does not log in: %v", err)
			}
		}
	}()
	sum := sha256.Sum256([]byte(password))
	users := `<yandex><users><collector><password_sha256_hex>` + hex.EncodeToString(sum[:]) +
		`</password_sha256_hex><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></collector></users></yandex>`
	if err := os.MkdirAll(filepath.Join(srv.Dir(), "users.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv.Dir(), "users.d", "collector.xml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A ClickHouse login the server refuses, against a real 18.16 server whose
// user collector has a password:
//   - at start-up it is fatal: exit 78 (EX_CONFIG, which the systemd units
//     do not restart on) at once, with a message naming the refusal, the
//     user and where the password comes from; never "not reachable yet;
//     retrying" for ever;
//   - once running (the password changed on the server under a running
//     collector) it is retried, as the lines wait in the log, but logged at
//     error level as a refused login, and /readyz says so; when the
//     password is right again every line ships.
func TestLoginRefused(t *testing.T) {
	srv := testenv.ClickHouse(t)
	setPassword(t, srv, "right")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	listen := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: logintest, username: collector, password_env: HITCOUNT_TEST_CH_PW}
sources: [{path: access.log, site: www, start_at: beginning}]
batch: {rows: 1000, delay: 100ms}
http: {listen: %q}
state_dir: state
`, srv.Addr(), listen)), 0o644)
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := loggen.New(loggen.Options{Seed: 18})
	if _, err := g.WriteN(f, 1000); err != nil {
		t.Fatal(err)
	}

	// Start-up with a wrong password.
	t.Setenv("HITCOUNT_TEST_CH_PW", "wrong")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var stderr lockedBuffer
	code := run(ctx, []string{"-config", cfg}, io.Discard, &stderr)
	cancel()
	want := fmt.Sprintf(`collector: clickhouse at [%s] refused the login of user "collector" (WRONG_PASSWORD, code 193: Wrong password for user collector): check clickhouse.username (collector) and the password in $HITCOUNT_TEST_CH_PW (clickhouse.password_env) in %s (not retried`, srv.Addr(), cfg)
	if code != backend.ExitLoginRefused || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "retrying") {
		t.Fatalf("wrong password at start: exit %d, stderr:\n%s\nwant exit %d with %q and no retry", code, stderr.String(), backend.ExitLoginRefused, want)
	}

	// Running: the right password, then the server's changes under it.
	t.Setenv("HITCOUNT_TEST_CH_PW", "right")
	ctx, cancel = context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-config", cfg}, io.Discard, &logs) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d after SIGTERM:\n%s", code, logs.String())
		}
	}()
	conn := srv.Conn(t)
	count := func() uint64 {
		var n uint64
		conn.QueryRow(context.Background(), "SELECT count() FROM logintest.hits").Scan(&n)
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within a minute; log:\n%s", what, logs.String())
			}
		}
	}
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + listen + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor("1000 rows", func() bool { return count() == 1000 })

	setPassword(t, srv, "rotated")
	srv.Stop() // the collector's connections end, and log in again
	srv.Start()
	if _, err := g.WriteN(f, 500); err != nil {
		t.Fatal(err)
	}
	waitFor("error-level log of the refused login", func() bool {
		return strings.Contains(logs.String(), `level=ERROR msg="clickhouse refuses the login (check the password and the server's users); insert failed;`)
	})
	var body string
	waitFor("/readyz naming the refused login", func() bool {
		c, b := readyz()
		body = b
		return c == http.StatusServiceUnavailable && strings.Contains(b, "not ready: clickhouse refuses the login:") && strings.Contains(b, "Wrong password for user collector")
	})
	t.Logf("/readyz while refused: %s", strings.TrimSpace(body))

	setPassword(t, srv, "right")
	waitFor("1500 rows once the password is right again", func() bool { return count() == 1500 })
	waitFor("/readyz 200", func() bool { c, _ := readyz(); return c == http.StatusOK })
}
