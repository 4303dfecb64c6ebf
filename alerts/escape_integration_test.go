package alerts_test

import (
	"context"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/internal/testenv"
)

// hostilePath is a path as a log may carry it: CR/LF to start a header and
// then a body line, a TAB, DEL, a C1 control (NEL, a line break to some
// clients) and markup.
const hostilePath = "/blog/a\r\nBcc: x@y\r\n\r\nInjected body line\t<script>\x7f\u0085end"

// Control characters in page text (paths come from logs) are escaped in the
// plain-text body and in headers: over a real SMTP server, the message has
// no Bcc header, no injected body line and no control character outside
// line ends; the HTML part is escaped by html/template.
func TestControlCharsEscapedInMail(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testControlCharsEscapedInMail)
}

func testControlCharsEscapedInMail(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	e.hits("www.example.com", hostilePath, 12, time.Now(), "Mozilla/5.0\r\nX-Injected: 1")
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	rules := e.rules(`
sources: [{path: /x, site: www.example.com}]
rules:
  - name: blog
    match: {path: /blog/*}
    threshold: 10
    window: lifetime
    to: [ops@example.com]
`)
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), rules, claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test"})
	if res, err := sw.Sweep(context.Background()); err != nil || res.Sent != 1 {
		t.Fatalf("sweep: sent %d, %v; want 1", res.Sent, err)
	}
	msgs := smtp.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	for _, h := range []string{"Bcc", "X-Injected"} {
		if v, ok := m.Header[h]; ok {
			t.Errorf("a path injected header %s: %q", h, v)
		}
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	checkNoControls(t, "subject", subject)
	if !strings.Contains(subject, `/blog/a\r\nBcc: x@y\r\n\r\nInjected body line\t<script>\x7f\u0085end`) {
		t.Errorf("subject %q does not show the path escaped", subject)
	}

	text, html := parts(t, m)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "Bcc:") || strings.HasPrefix(line, "Injected body line") {
			t.Errorf("the path injected a line into the text body: %q", line)
		}
		checkNoControls(t, "text line", line)
	}
	if !strings.Contains(text, `www.example.com/blog/a\r\nBcc: x@y\r\n\r\nInjected body line\t<script>\x7f\u0085end reached 12 hits`) {
		t.Errorf("text body does not show the path escaped:\n%s", text)
	}
	if strings.Contains(html, "<script>") || !strings.Contains(html, "&lt;script&gt;") {
		t.Errorf("page text not escaped in the HTML part:\n%s", html)
	}
}

// checkNoControls fails on any C0 control, DEL or C1 control in s.
func checkNoControls(t *testing.T, what, s string) {
	t.Helper()
	for i, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError {
			t.Errorf("%s has control %U at %d: %q", what, r, i, s)
			return
		}
	}
}

// parts decodes a multipart/alternative message into its text and HTML.
func parts(t *testing.T, m *mail.Message) (text, html string) {
	t.Helper()
	_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := r.NextRawPart()
		if err == io.EOF {
			return text, html
		}
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = p
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(p)
		}
		data, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			text = string(data)
		case "text/html":
			html = string(data)
		}
	}
}

// The same for a digest: more crossings for the same recipients than
// DigestAfter make one message listing every page.
func TestControlCharsEscapedInDigest(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testControlCharsEscapedInDigest)
}

func testControlCharsEscapedInDigest(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	const pages = 4
	for i := range pages {
		e.hits("www.example.com", hostilePath+string(rune('a'+i)), 12, time.Now(), "Mozilla/5.0")
	}
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	rules := e.rules(`
sources: [{path: /x, site: www.example.com}]
rules:
  - name: blog
    match: {path: /blog/*}
    threshold: 10
    window: lifetime
    to: [ops@example.com]
`)
	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), rules, claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", DigestAfter: pages - 1})
	if res, err := sw.Sweep(context.Background()); err != nil || res.Sent != pages {
		t.Fatalf("sweep: sent %d, %v; want %d", res.Sent, err, pages)
	}
	msgs := smtp.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("mailbox holds %d messages, want 1 digest", len(msgs))
	}
	text, html := parts(t, msgs[0])
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "Bcc:") || strings.HasPrefix(line, "Injected body line") {
			t.Errorf("a path injected a line into the digest's text body: %q", line)
		}
		checkNoControls(t, "digest text line", line)
	}
	if got := strings.Count(text, `/blog/a\r\nBcc: x@y\r\n\r\nInjected body line\t<script>\x7f\u0085end`); got != pages {
		t.Errorf("digest text shows %d escaped paths, want %d:\n%s", got, pages, text)
	}
	if strings.Contains(html, "<script>") {
		t.Errorf("page text not escaped in the digest's HTML part:\n%s", html)
	}
}
