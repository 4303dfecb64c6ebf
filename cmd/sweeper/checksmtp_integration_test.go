package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
)

// sweeper -check-smtp against real aiosmtpd servers: it connects, takes TLS
// as configured, logs in and quits, sending no mail; each failure (a login
// refused, a server that is not there, a certificate not trusted, no
// STARTTLS offered) exits 1 naming the step and the setting to check.
func TestCheckSMTP(t *testing.T) {
	secure := testenv.AuthSMTP(t, "alerts", "right", "starttls") // STARTTLS, then AUTH
	smtps := testenv.AuthSMTP(t, "alerts", "right", "tls")       // TLS from the start (SMTPS)
	plainAuth := testenv.AuthSMTP(t, "alerts", "right", "none")  // AUTH offered without TLS (loopback)
	plain := testenv.SMTP(t)                                     // no STARTTLS, no AUTH
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	dir := t.TempDir()
	t.Setenv("HITCOUNT_TEST_SMTP_PW", "right")
	t.Setenv("HITCOUNT_TEST_SMTP_WRONG", "wrong")
	cases := []struct {
		name, smtp string
		code       int
		want       string
	}{
		{"starttls and login", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: starttls, username: alerts, password_env: HITCOUNT_TEST_SMTP_PW, ca_file: %s, from: a@b.c, timeout: 5s}", secure.Port, secure.CAFile),
			0, fmt.Sprintf("smtp 127.0.0.1:%d: connected, STARTTLS, logged in as alerts, quit; no mail sent", secure.Port)},
		{"login refused", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: starttls, username: alerts, password_env: HITCOUNT_TEST_SMTP_WRONG, ca_file: %s, from: a@b.c, timeout: 5s}", secure.Port, secure.CAFile),
			1, fmt.Sprintf("sweeper: smtp 127.0.0.1:%d: the server refused the login of alerts (check smtp.username and the password): ", secure.Port)},
		{"tls and login", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: tls, username: alerts, password_env: HITCOUNT_TEST_SMTP_PW, ca_file: %s, from: a@b.c, timeout: 5s}", smtps.Port, smtps.CAFile),
			0, fmt.Sprintf("smtp 127.0.0.1:%d: connected, TLS, logged in as alerts, quit; no mail sent", smtps.Port)},
		{"certificate not trusted", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: starttls, username: alerts, password_env: HITCOUNT_TEST_SMTP_PW, from: a@b.c, timeout: 5s}", secure.Port),
			1, fmt.Sprintf("sweeper: smtp 127.0.0.1:%d: the server's certificate is not trusted (smtp.ca_file names the CA of a private relay): ", secure.Port)},
		{"unreachable", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: starttls, from: a@b.c, timeout: 5s}", closedPort),
			1, fmt.Sprintf("sweeper: smtp 127.0.0.1:%d: cannot connect (check smtp.host and smtp.port, and that the server runs): ", closedPort)},
		{"no STARTTLS offered", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: starttls, from: a@b.c, timeout: 5s}", plain.Port()),
			1, fmt.Sprintf("sweeper: smtp 127.0.0.1:%d: TLS failed (smtp.tls is starttls): ", plain.Port())},
		// A send would fail the same way: go-mail sends PLAIN or LOGIN only
		// over TLS, and aiosmtpd offers nothing else.
		{"none on loopback with a login", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: none, username: alerts, password_env: HITCOUNT_TEST_SMTP_PW, from: a@b.c, timeout: 5s}", plainAuth.Port),
			1, fmt.Sprintf("sweeper: smtp 127.0.0.1:%d: no login without TLS: hitcount sends a password in clear (PLAIN, LOGIN) only over TLS", plainAuth.Port)},
		{"none on loopback, no login", fmt.Sprintf("{host: 127.0.0.1, port: %d, tls: none, from: a@b.c, timeout: 5s}", plain.Port()),
			0, fmt.Sprintf("smtp 127.0.0.1:%d: connected, no TLS (tls: none), no login (no smtp.username), quit; no mail sent", plain.Port())},
		{"no smtp section", "", 1, "sweeper: no smtp section to try: crossings are written as .eml files to " + filepath.Join(dir, "outbox")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, fmt.Sprintf("hitcount-%d.yaml", i))
			yaml := "rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]\noutbox: ./outbox\n"
			if c.smtp != "" {
				yaml += "smtp: " + c.smtp + "\n"
			}
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"-check-smtp", "-config", cfg}, &stdout, &stderr)
			t.Logf("stdout %q stderr %q", stdout.String(), stderr.String())
			if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d with %q", code, stdout.String(), stderr.String(), c.code, c.want)
			}
		})
	}
	if n := secure.Messages() + smtps.Messages() + plainAuth.Messages() + len(plain.Messages(t)); n != 0 {
		t.Errorf("the checks delivered %d messages; want none", n)
	}
}
