package alerts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/alerts"
	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// env is a fresh database with hits, on a real ClickHouse 18.16 server or
// the embedded engine.
type env struct {
	t     *testing.T
	store testenv.Store
	db    string
	next  int64
}

func newEnv(t *testing.T, d *testenv.Database) *env {
	t.Helper()
	return &env{t: t, store: d.Open(t), db: d.Name}
}

// hits inserts n hits on a page at time at, as the collector would.
func (e *env) hits(site, path string, n int, at time.Time, ua string) {
	e.t.Helper()
	b := sink.NewBatch(n)
	b.Reset(site, 7)
	h := parser.Hit{Unix: at.Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200, UserAgent: []byte(ua), RemoteAddr: []byte("10.0.0.1")}
	for range n {
		b.Add(&h, e.next, e.next+100)
		e.next += 100
	}
	if err := e.store.Insert(context.Background(), b); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) rules(yaml string) []*alerts.Rule {
	e.t.Helper()
	rules, err := compileRules(yaml)
	if err != nil {
		e.t.Fatal(err)
	}
	return rules
}

func compileRules(yaml string) ([]*alerts.Rule, error) {
	cfg, err := config.Parse("rules.yaml", []byte(yaml))
	if err != nil {
		return nil, err
	}
	return alerts.CompileRules(cfg.Rules)
}

func (e *env) states() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	err := e.store.Select(context.Background(), "SELECT st, count() FROM (SELECT key, argMax(state, version) AS st FROM "+e.db+".crossings GROUP BY key) GROUP BY st", nil,
		func(scan func(...any) error) error {
			var st string
			var n uint64
			if err := scan(&st, &n); err != nil {
				return err
			}
			out[st] = int(n)
			return nil
		})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

const rulesYAML = `
sources: [{path: /x, site: www.example.com}]
rules:
  - name: pricing-hot
    match: {site: www.example.com, path: /pricing}
    threshold: 100
    window: 1h
    timezone: Europe/Berlin
    to: [ops@example.com]
  - name: blog-milestones
    match: {path: /blog/*, exclude_bots: true}
    milestones: [10, 50]
    window: lifetime
    to: [editors@example.com, "Ed <ed@example.com>"]
`

// Every crossing is recorded once and emailed once, over a real SMTP server;
// sweeping again sends nothing new; late hits produce the crossing of the
// window they belong to; the state table agrees with the mailbox.
func TestSweepSendsEachCrossingOnce(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testSweepSendsEachCrossingOnce)
}

func testSweepSendsEachCrossingOnce(t *testing.T, d *testenv.Database) {
	smtp := testenv.SMTP(t)
	e := newEnv(t, d)
	now := time.Now().Truncate(time.Minute)
	e.hits("www.example.com", "/pricing", 120, now, "Mozilla/5.0")                        // crosses 100 in this hour
	e.hits("www.example.com", "/blog/a\r\nBcc: evil@example.com", 60, now, "Mozilla/5.0") // crosses 10 and 50; a hostile path
	e.hits("www.example.com", "/blog/b", 30, now, "Googlebot/2.1")                        // bots excluded: no crossing
	// Late hits: logged three hours ago, ingested now.
	e.hits("www.example.com", "/pricing", 150, now.Add(-3*time.Hour), "Mozilla/5.0")

	sender := alerts.NewSMTP(alerts.SMTPOptions{Host: smtp.Host(), Port: smtp.Port(), TLS: "none", Timeout: 10 * time.Second})
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), e.rules(rulesYAML), claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test"})
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Detected) != 4 || res.Sent != 4 {
		t.Fatalf("detected %d, sent %d; want 4 and 4 (pricing now, pricing 3 h ago, blog 10, blog 50): %+v", len(res.Detected), res.Sent, res.Detected)
	}
	for range 2 {
		res, err = sw.Sweep(context.Background())
		if err != nil || len(res.Detected) != 0 || res.Sent != 0 {
			t.Fatalf("a repeated sweep detected %d, sent %d (%v)", len(res.Detected), res.Sent, err)
		}
	}
	msgs := smtp.Messages(t)
	if len(msgs) != 4 {
		t.Fatalf("mailbox holds %d messages, want 4", len(msgs))
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		id := m.Header.Get("Message-Id")
		if ids[id] {
			t.Errorf("Message-ID %s twice", id)
		}
		ids[id] = true
		if m.Header.Get("Bcc") != "" || strings.Contains(m.Header.Get("Subject"), "\n") {
			t.Errorf("a path injected a header: %v", m.Header)
		}
	}
	if st := e.states(); st["sent"] != 4 || len(st) != 1 {
		t.Errorf("state table %v, want 4 sent", st)
	}
}

// The outbox transport writes one .eml per crossing; a second local sweeper on
// the same state directory is refused.
func TestOutboxAndSecondSweeperRefused(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testOutboxAndSecondSweeperRefused)
}

func testOutboxAndSecondSweeperRefused(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	e.hits("www.example.com", "/pricing", 101, time.Now(), "Mozilla/5.0")
	state := t.TempDir()
	claims, err := alerts.OpenLocalClaims(state, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	if _, err := alerts.OpenLocalClaims(state, time.Now); err == nil || !strings.Contains(err.Error(), "another sweeper") {
		t.Fatalf("second sweeper: err = %v, want refusal", err)
	}
	outbox := t.TempDir()
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), e.rules(rulesYAML), claims, alerts.Outbox{Dir: outbox},
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test"})
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(outbox, "*.eml"))
	if len(files) != 1 {
		t.Fatalf("outbox holds %d files, want 1", len(files))
	}
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), "Message-Id: <hitcount.") && !strings.Contains(string(data), "Message-ID: <hitcount.") {
		t.Errorf("no deterministic Message-ID in:\n%s", data)
	}
}

// More crossings for the same recipients than digest_after make one digest
// message, with page text escaped in its HTML part; each crossing is marked
// sent once.
func TestDigest(t *testing.T) {
	t.Parallel()
	testenv.EachBackend(t, testDigest)
}

func testDigest(t *testing.T, d *testenv.Database) {
	e := newEnv(t, d)
	now := time.Now()
	for i := range 12 {
		e.hits("www.example.com", fmt.Sprintf("/blog/post-%d<script>", i), 11, now, "Mozilla/5.0")
	}
	claims, err := alerts.OpenLocalClaims(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	var got []*alerts.Message
	sender := alerts.SenderFunc(func(_ context.Context, m *alerts.Message) (bool, error) { got = append(got, m); return false, nil })
	sw := alerts.NewSweeper(alerts.NewStore(e.store, e.db), e.rules(rulesYAML), claims, sender,
		alerts.Options{From: "hitcount <alerts@example.com>", Owner: "test", DigestAfter: 10})
	res, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || res.Sent != 12 {
		t.Fatalf("%d messages for %d sent crossings, want 1 digest for 12", len(got), res.Sent)
	}
	if strings.Contains(got[0].HTML, "<script>") || !strings.Contains(got[0].HTML, "&lt;script&gt;") {
		t.Errorf("page text not escaped in the digest's HTML:\n%s", got[0].HTML)
	}
	if len(got[0].To) != 2 || !strings.HasPrefix(got[0].ID, "<hitcount.digest.") {
		t.Errorf("digest to %v with id %s", got[0].To, got[0].ID)
	}
	if res, err := sw.Sweep(context.Background()); err != nil || res.Sent != 0 {
		t.Fatalf("a second sweep sent %d (%v)", res.Sent, err)
	}
	if st := e.states(); st["sent"] != 12 || len(st) != 1 {
		t.Errorf("state table %v, want 12 sent", st)
	}
}
