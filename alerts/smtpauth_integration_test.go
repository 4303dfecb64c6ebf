package alerts_test

import (
	"context"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A send through a relay with a private CA (smtp.ca_file) and a login, in
// both TLS modes, as -check-smtp tries it: the message arrives once. With a
// wrong password nothing arrives and the send stays retryable: a crossing
// waits for the password to be fixed, rather than turning into a final
// "failed" because of a setting.
func TestSendWithCAFileAndLogin(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"starttls", "tls"} {
		t.Run(mode, func(t *testing.T) {
			srv := testenv.AuthSMTP(t, "alerts", "right", mode)
			pem, err := os.ReadFile(srv.CAFile)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(pem)
			msg := &alerts.Message{ID: "<ca-file@example.com>", Key: "k", From: "hitcount <a@example.com>", To: []string{"ops@example.com"},
				Subject: "s", Text: "t", Date: time.Now()}
			for _, c := range []struct {
				password  string
				delivered int
				retryable bool
			}{{"wrong", 0, true}, {"right", 1, false}} {
				s := alerts.NewSMTP(alerts.SMTPOptions{Host: "127.0.0.1", Port: srv.Port, TLS: mode, Username: "alerts", Password: c.password, Timeout: 5 * time.Second, RootCAs: roots})
				retry, err := s.Send(context.Background(), msg)
				if (err == nil) != (c.delivered == 1) || retry != c.retryable || srv.Messages() != c.delivered {
					t.Errorf("password %s: retryable %v, err %v, %d delivered; want %d delivered, retryable %v", c.password, retry, err, srv.Messages(), c.delivered, c.retryable)
				}
			}
		})
	}
}
