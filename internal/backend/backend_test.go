package backend

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/config"
)

// Every command that opens a ClickHouse server warns at start when the
// password would cross the network in clear text (a host that is not
// loopback, TLS off), before it connects: the warning shows even while the
// server is not reachable yet. Loopback or TLS: no warning.
func TestOpenWarnsOfPlaintextPassword(t *testing.T) {
	t.Setenv("HC_TEST_CH_PW", "s3cret-ch-pw")
	cases := []struct {
		name, clickhouse string
		warn             bool
	}{
		{"remote host, tls off", "{addr: [\"192.0.2.1:9000\"], password_env: HC_TEST_CH_PW, dial_timeout: 100ms}", true},
		{"loopback", "{addr: [\"127.0.0.1:1\"], password_env: HC_TEST_CH_PW, dial_timeout: 100ms}", false},
		{"remote host, tls on", "{addr: [\"192.0.2.1:9440\"], password_env: HC_TEST_CH_PW, dial_timeout: 100ms, tls: {enabled: true}}", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("t.yaml", []byte("clickhouse: "+c.clickhouse+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if b, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil))); err == nil {
				b.Close()
				t.Fatal("opened a server that does not exist")
			}
			got := strings.Contains(logs.String(), "crosses the network in clear text")
			if got != c.warn {
				t.Errorf("warning logged: %v, want %v; log:\n%s", got, c.warn, logs.String())
			}
			if strings.Contains(logs.String(), "s3cret-ch-pw") {
				t.Errorf("the password is in the log:\n%s", logs.String())
			}
		})
	}
}
