package alerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"
)

// Message is one email, built from a crossing and its rule's templates.
type Message struct {
	ID      string // Message-ID with angle brackets
	Key     string // the crossing's key (names the outbox file)
	From    string
	To      []string
	Subject string
	Text    string
	HTML    string
	Date    time.Time
}

// Sender delivers a message. retryable says whether trying again later may
// succeed (a refused connection, a timeout, a 4xx) or not (a 5xx). An error
// that wraps ErrMaybeSent says the message may have been accepted (the
// connection failed or timed out after the whole message was sent, before
// the server's reply): the sweeper then re-sends it at most once.
type Sender interface {
	Send(ctx context.Context, m *Message) (retryable bool, err error)
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, m *Message) (bool, error)

// Send implements Sender.
func (f SenderFunc) Send(ctx context.Context, m *Message) (bool, error) { return f(ctx, m) }

// headerSafe makes text from the network (paths, hosts) safe for a header:
// control characters are escaped (textSafe), so no CR or LF can start a new
// header line, and the length stays sane (cut at a character boundary).
func headerSafe(s string) string {
	s = textSafe(s)
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func (m *Message) build() (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return nil, fmt.Errorf("from %q: %w", m.From, err)
	}
	if err := msg.To(m.To...); err != nil {
		return nil, fmt.Errorf("to %v: %w", m.To, err)
	}
	msg.Subject(headerSafe(m.Subject))
	msg.SetMessageIDWithValue(strings.Trim(m.ID, "<>"))
	msg.SetDateWithValue(m.Date)
	msg.SetGenHeader("X-Hitcount-Crossing", m.Key)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// Outbox writes messages as .eml files, one per crossing: writing the same
// crossing again replaces its file, so a retry never makes a second message.
type Outbox struct{ Dir string }

// Send implements Sender.
func (o Outbox) Send(_ context.Context, m *Message) (bool, error) {
	msg, err := m.build()
	if err != nil {
		return false, err
	}
	// Messages quote access logs (paths, hosts), which are adm-only on most
	// systems: a directory created here is private and so is every file. A
	// directory that exists keeps its mode: an operator may give a group
	// (a mail pickup, say) access on purpose.
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return true, fmt.Errorf("outbox: %w", err)
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return false, fmt.Errorf("outbox: %w", err)
	}
	path := filepath.Join(o.Dir, m.Key+".eml")
	// A new temporary file each time (0600): a leftover of a crash, whatever
	// its mode, is never written into and renamed over the message.
	tmp, err := os.CreateTemp(o.Dir, m.Key+".eml.tmp*")
	if err != nil {
		return true, fmt.Errorf("outbox: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	// Synced before the rename and the directory after it: the crossing is
	// marked sent once this returns, so a power cut must not take the
	// message back.
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return true, fmt.Errorf("outbox: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return true, fmt.Errorf("outbox: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return true, fmt.Errorf("outbox: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return true, fmt.Errorf("outbox: %w", err)
	}
	if d, err := os.Open(o.Dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return true, fmt.Errorf("outbox: sync %s: %w", o.Dir, err)
		}
	}
	return false, nil
}

// SMTPOptions configure an SMTP sender.
type SMTPOptions struct {
	Host     string
	Port     int
	TLS      string // starttls | tls | none
	Username string
	Password string
	Timeout  time.Duration
	// RootCAs verify the server's certificate; nil: the system's roots.
	RootCAs *x509.CertPool
}

// SMTP sends through an SMTP server with go-mail.
type SMTP struct{ opts SMTPOptions }

// NewSMTP checks the options; TLS is mandatory unless "none" was chosen (which
// the config allows only to a loopback host).
func NewSMTP(o SMTPOptions) *SMTP { return &SMTP{opts: o} }

// Send implements Sender.
func (s *SMTP) Send(ctx context.Context, m *Message) (bool, error) {
	msg, err := m.build()
	if err != nil {
		return false, err
	}
	c, err := s.client()
	if err != nil {
		return false, err
	}
	err = c.DialAndSendWithContext(ctx, msg)
	if msg.IsDelivered() {
		// The server accepted the message; what failed came after (the
		// RSET or QUIT go-mail sends next). Retried, it would arrive twice.
		return false, nil
	}
	if err != nil {
		if maybeSent(err) {
			err = fmt.Errorf("%w: %w", ErrMaybeSent, err)
		}
		return retryable(err), fmt.Errorf("smtp %s:%d: %w", s.opts.Host, s.opts.Port, err)
	}
	return false, nil
}

// client is a go-mail client as the options say: the one Send and Check
// both use, so that a check tries exactly what a send does.
func (s *SMTP) client() (*gomail.Client, error) {
	opts := []gomail.Option{gomail.WithPort(s.opts.Port), gomail.WithTimeout(s.opts.Timeout)}
	switch s.opts.TLS {
	case "tls":
		opts = append(opts, gomail.WithSSL(), gomail.WithTLSPolicy(gomail.TLSMandatory))
	case "none":
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.opts.RootCAs != nil {
		opts = append(opts, gomail.WithTLSConfig(&tls.Config{ServerName: s.opts.Host, RootCAs: s.opts.RootCAs, MinVersion: tls.VersionTLS12}))
	}
	if s.opts.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.opts.Username), gomail.WithPassword(s.opts.Password))
	}
	c, err := gomail.NewClient(s.opts.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp client: %w", err)
	}
	return c, nil
}

// Check does what a send does before the message, and stops there: it
// connects, says EHLO, takes TLS as configured (STARTTLS, or TLS from the
// start), logs in when a username is set, and quits. No mail is sent. The
// error says which step failed and why.
func (s *SMTP) Check(ctx context.Context) (string, error) {
	c, err := s.client()
	if err != nil {
		return "", err
	}
	where := fmt.Sprintf("smtp %s:%d", s.opts.Host, s.opts.Port)
	if err := c.DialWithContext(ctx); err != nil {
		return "", fmt.Errorf("%s: %s: %w", where, checkStep(err, s.opts), err)
	}
	var did []string
	switch s.opts.TLS {
	case "tls":
		did = append(did, "TLS")
	case "none":
		did = append(did, "no TLS (tls: none)")
	default:
		did = append(did, "STARTTLS")
	}
	if s.opts.Username != "" {
		did = append(did, fmt.Sprintf("logged in as %s", s.opts.Username))
	} else {
		did = append(did, "no login (no smtp.username)")
	}
	if err := c.Close(); err != nil {
		return "", fmt.Errorf("%s: QUIT: %w", where, err)
	}
	return fmt.Sprintf("%s: connected, %s, quit; no mail sent", where, strings.Join(did, ", ")), nil
}

// checkStep names the step of a check that err failed, for the operator.
func checkStep(err error, o SMTPOptions) string {
	var ne *net.OpError
	var cerr *tls.CertificateVerificationError
	var herr x509.HostnameError
	var uerr x509.UnknownAuthorityError
	switch {
	case errors.As(err, &cerr) || errors.As(err, &herr) || errors.As(err, &uerr):
		return "the server's certificate is not trusted (smtp.ca_file names the CA of a private relay)"
	case errors.As(err, &ne) && ne.Op == "dial":
		return "cannot connect (check smtp.host and smtp.port, and that the server runs)"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no answer within smtp.timeout (%v)", o.Timeout)
	case errors.Is(err, gomail.ErrNoSupportedAuthDiscovered):
		if o.TLS == "none" {
			return "no login without TLS: hitcount sends a password in clear (PLAIN, LOGIN) only over TLS, and the server offers no SCRAM-SHA or CRAM-MD5; use tls: starttls or tls, or no smtp.username"
		}
		return "the server offers no login mechanism hitcount knows (SCRAM-SHA, NTLM, CRAM-MD5, PLAIN, LOGIN)"
	case strings.Contains(err.Error(), "STARTTLS") || strings.Contains(err.Error(), "TLS"):
		return "TLS failed (smtp.tls is " + o.TLS + ")"
	case strings.Contains(strings.ToLower(err.Error()), "auth"):
		return fmt.Sprintf("the server refused the login of %s (check smtp.username and the password)", o.Username)
	}
	return "failed"
}

// ErrMaybeSent marks a send whose outcome is unknown: the whole message was
// written, and no reply to it came (a timeout, a dropped connection, a
// cancelled context). RFC 5321 gives a server 10 minutes for that reply; a
// server that took longer than smtp.timeout has often delivered the message.
var ErrMaybeSent = errors.New("no reply after the message was sent; it may have been delivered")

// maybeSent reports a failure of the final step of DATA (the "." and its
// reply) that is not a reply: the server may have accepted the message. A
// 4xx or 5xx reply there is an answer, and a failure before it (connection,
// MAIL, RCPT, DATA command, writing the body) means the server never had
// the whole message.
func maybeSent(err error) bool {
	var se *gomail.SendError
	if !errors.As(err, &se) || se.Reason != gomail.ErrSMTPDataClose {
		return false
	}
	return se.ErrorCode() == 0
}

// retryable classifies an SMTP failure: permanent (5xx) failures are not
// retried; connection problems, timeouts and 4xx are.
func retryable(err error) bool {
	var se *gomail.SendError
	if errors.As(err, &se) {
		if se.IsTemp() {
			return true
		}
		if code := se.ErrorCode(); code >= 500 && code < 600 {
			return false
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return true
}

// domainOf is the domain of an address, for Message-IDs.
func domainOf(addr string) string {
	a, err := mail.ParseAddress(addr)
	if err != nil {
		return "hitcount.invalid"
	}
	if i := strings.LastIndexByte(a.Address, '@'); i >= 0 {
		return a.Address[i+1:]
	}
	return "hitcount.invalid"
}
