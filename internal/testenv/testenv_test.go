package testenv_test

import (
	"context"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/go-zookeeper/zk"
	"github.com/wneessen/go-mail"

	"github.com/hitcount/hitcount/internal/testenv"
)

type hit struct {
	Site string
	N    uint64
	TS   time.Time
}

func TestClickHouse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := testenv.ClickHouse(t)
	// 18.16 accepts the ORDER BY form of MergeTree, not only MergeTree(date, key, 8192).
	srv.Exec(t, "CREATE TABLE hits (site String, n UInt64, ts DateTime) ENGINE = MergeTree ORDER BY (site, ts)")

	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	want := []hit{{"a.example", 1, base}, {"a.example", 2, base.Add(time.Second)}, {"b.example", 3, base}}
	conn := srv.Conn(t)
	// 18.16 needs the column list spelled out.
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO hits (site, n, ts)")
	if err != nil {
		t.Fatalf("prepare batch: %v", err)
	}
	var sites []string
	var ns []uint64
	var tss []time.Time
	for _, h := range want {
		sites, ns, tss = append(sites, h.Site), append(ns, h.N), append(tss, h.TS)
	}
	for i, col := range []any{sites, ns, tss} {
		if err := batch.Column(i).Append(col); err != nil {
			t.Fatalf("append column %d: %v", i, err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("send batch: %v", err)
	}
	if got := selectHits(ctx, t, srv); !slices.Equal(got, want) {
		t.Fatalf("select: got %v, want %v", got, want)
	}

	pid := srv.PID()
	srv.Stop()
	srv.Start()
	if srv.PID() == pid {
		t.Errorf("PID %d unchanged across restart", pid)
	}
	if got := selectHits(ctx, t, srv); !slices.Equal(got, want) {
		t.Fatalf("after restart: got %v, want %v", got, want)
	}

	srv.Freeze()
	// The handshake waits DialTimeout whatever the context says.
	opts := srv.Options()
	opts.DialTimeout = 300 * time.Millisecond
	frozen, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	frozenCtx, cancelFrozen := context.WithTimeout(ctx, 2*time.Second)
	if err := frozen.Ping(frozenCtx); err == nil {
		t.Errorf("ping answered while the server was frozen")
	}
	cancelFrozen()
	frozen.Close()
	srv.Thaw()
	if err := srv.Conn(t).Ping(ctx); err != nil {
		t.Errorf("ping after thaw: %v", err)
	}
}

func selectHits(ctx context.Context, t *testing.T, srv *testenv.ClickHouseServer) []hit {
	t.Helper()
	rows, err := srv.Conn(t).Query(ctx, "SELECT site, n, ts FROM hits ORDER BY site, ts")
	if err != nil {
		t.Fatalf("select: %v", err)
	}
	defer rows.Close()
	var got []hit
	for rows.Next() {
		var h hit
		if err := rows.Scan(&h.Site, &h.N, &h.TS); err != nil {
			t.Fatalf("scan: %v", err)
		}
		h.TS = h.TS.UTC()
		got = append(got, h)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	return got
}

func TestClickHouseReplicated(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	z := testenv.ZooKeeper(t)
	srv := testenv.ClickHouse(t,
		testenv.WithZooKeeper(z.Addr()),
		testenv.WithMacros(map[string]string{"shard": "01", "replica": "r1"}))
	srv.Exec(t, "CREATE TABLE r (k UInt32) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/r', '{replica}') ORDER BY k")
	srv.Exec(t, "INSERT INTO r (k) SELECT toUInt32(number) FROM numbers(2)")
	var n uint64
	if err := srv.Conn(t).QueryRow(ctx, "SELECT count() FROM r").Scan(&n); err != nil || n != 2 {
		t.Fatalf("count: %d, %v; want 2", n, err)
	}
	c := zkConnect(t, z)
	children, _, err := c.Children("/clickhouse/tables/01/r/replicas")
	if err != nil || !slices.Equal(children, []string{"r1"}) {
		t.Fatalf("replicas in zookeeper: %v, %v; want [r1]", children, err)
	}
}

func TestZooKeeper(t *testing.T) {
	t.Parallel()
	z := testenv.ZooKeeper(t)
	c := zkConnect(t, z)
	if _, err := c.Create("/hitcount", []byte("claimed"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	if data, _, err := c.Get("/hitcount"); err != nil || string(data) != "claimed" {
		t.Fatalf("get: %q, %v", data, err)
	}
	c.Close()

	z.Stop()
	z.Start()
	c = zkConnect(t, z)
	if data, _, err := c.Get("/hitcount"); err != nil || string(data) != "claimed" {
		t.Fatalf("get after restart: %q, %v", data, err)
	}
}

func zkConnect(t *testing.T, z *testenv.ZooKeeperServer) *zk.Conn {
	t.Helper()
	// The client logs from its own goroutines, which may outlive the test:
	// t.Logf would panic there.
	c, _, err := zk.Connect([]string{z.Addr()}, 10*time.Second, zk.WithLogger(silent{}))
	if err != nil {
		t.Fatalf("connect to zookeeper: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

type silent struct{}

func (silent) Printf(string, ...any) {}

func TestSMTP(t *testing.T) {
	t.Parallel()
	s := testenv.SMTP(t)
	send(t, s, "threshold crossed: a.example", "a.example: 1000 hits in 5m")
	s.Stop()
	s.Start()
	send(t, s, "threshold crossed: b.example", "b.example: 2000 hits in 5m")

	msgs := s.Messages(t)
	if len(msgs) != 2 {
		t.Fatalf("got %d messages, want 2", len(msgs))
	}
	for i, want := range []struct{ subject, body string }{
		{"threshold crossed: a.example", "a.example: 1000 hits in 5m"},
		{"threshold crossed: b.example", "b.example: 2000 hits in 5m"},
	} {
		m := msgs[i]
		if got := m.Header.Get("Subject"); got != want.subject {
			t.Errorf("message %d subject %q, want %q", i, got, want.subject)
		}
		body := io.Reader(m.Body)
		if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(body)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatalf("read body: %v", err)
		}
		if got := strings.TrimSpace(string(b)); got != want.body {
			t.Errorf("message %d body %q, want %q", i, got, want.body)
		}
	}
}

func send(t *testing.T, s *testenv.SMTPServer, subject, body string) {
	t.Helper()
	m := mail.NewMsg()
	if err := m.From("hitcount@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := m.To("ops@example.org"); err != nil {
		t.Fatal(err)
	}
	m.Subject(subject)
	m.SetBodyString(mail.TypeTextPlain, body)
	// Loopback and a server without STARTTLS: say so rather than rely on
	// go-mail's default, which is to require TLS.
	c, err := mail.NewClient(s.Host(), mail.WithPort(s.Port()), mail.WithTLSPolicy(mail.NoTLS))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DialAndSend(m); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func TestEmbedded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.Embedded(t)
	if err := e.Exec(ctx, "CREATE TABLE hits (site String, n UInt64) ENGINE = MergeTree ORDER BY site"); err != nil {
		t.Fatal(err)
	}
	if err := e.Exec(ctx, "INSERT INTO hits VALUES ('a.example', 1), ('b.example', 2)"); err != nil {
		t.Fatal(err)
	}
	out, err := e.Query(ctx, "SELECT site, n FROM hits ORDER BY site", "TSV")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a.example\t1\nb.example\t2\n"; string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}

// A refused port refuses, and stays taken: nothing else can listen on it.
func TestRefusedPort(t *testing.T) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.RefusedPort(t)))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("a connection to the refused port was accepted")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial the refused port: %v; want connection refused", err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatal("another listener took the refused port")
	}
}
