package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// -check-config explains each rule in one line; `sweeper -once -dry-run`
// says what each below rule would fire now and why, and which is held and
// by which collector and file, and changes nothing (issue 19).
func TestDryRunExplainsBelowRules(t *testing.T) {
	ch := testenv.ClickHouse(t)
	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "belowcmd"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var now time.Time
	if err := s.Select(ctx, "SELECT now()", nil, func(scan func(...any) error) error { return scan(&now) }); err != nil {
		t.Fatal(err)
	}
	insert := func(site, path string, n int, at time.Time) {
		b := sink.NewBatch(n)
		b.Reset(site, uint64(len(site+path)))
		h := parser.Hit{Unix: at.Unix(), Method: []byte("GET"), Path: []byte(path), Status: 200}
		for i := range n {
			b.Add(&h, int64(i*100), int64(i*100+100))
		}
		if err := s.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	twoHoursAgo := now.Add(-2 * time.Hour).Truncate(time.Hour)
	insert("www.example.com", "/old", 1, now.Add(-72*time.Hour))
	insert("www.example.com", "/checkout", 3, twoHoursAgo.Add(5*time.Minute))
	insert("shop", "/", 1, now.Add(-72*time.Hour))
	rows := [][]any{
		{uint64(1), "www.example.com", "c1", "web-1", "/var/log/nginx/access.log", now.Add(-72 * time.Hour), now, uint8(0), now},
		{uint64(2), "shop", "c2", "web-2", "/var/log/nginx/shop.log", now.Add(-72 * time.Hour), now, uint8(0), now.Add(-3 * time.Hour)},
	}
	if err := s.InsertRows(ctx, "belowcmd.source_owners", sink.OwnersColumns, rows); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: belowcmd}
sources: [{path: /var/log/x.log, site: www.example.com}, {path: /var/log/y.log, site: shop}]
http: {listen: ""}
state_dir: state
outbox: outbox
rules:
  - {name: checkout, match: {site: www.example.com, path: /checkout}, below: 50, window: 1h, no_data_after: 0, to: [ops@example.com]}
  - {name: shop-low, match: {site: shop}, below: 10, window: 1h, no_data_after: 30m, to: [ops@example.com]}
`, ch.Addr())), 0o644)

	var out, errb bytes.Buffer
	if code := run(ctx, []string{"-check-config", "-config", cfg}, &out, &errb); code != 0 {
		t.Fatalf("check-config exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"rule checkout: fires when /checkout on www.example.com has fewer than 50 hits in a complete 1h window, UTC; 1 recipient(s)",
		"rule shop-low: fires when site shop has fewer than 10 hits in a complete 1h window, UTC; a notice if its collectors have not caught up for 30m",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-check-config printed:\n%s\nwant a line with %q", out.String(), want)
		}
	}

	out.Reset()
	if code := run(ctx, []string{"-config", cfg, "-once", "-dry-run"}, &out, &errb); code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errb.String())
	}
	t.Logf("dry run:\n%s", out.String())
	for _, want := range []string{
		fmt.Sprintf("would fire: rule checkout: www.example.com/checkout had 3 hits in the complete window %s to %s, below 50",
			twoHoursAgo.UTC().Format("2006-01-02 15:04 MST"), twoHoursAgo.Add(time.Hour).UTC().Format("2006-01-02 15:04 MST")),
		"held: rule shop-low: site shop complete only until " + now.Add(-3*time.Hour).UTC().Format("2006-01-02 15:04 MST") + " (collector c2 on web-2, file /var/log/nginx/shop.log)",
		"would notify: rule shop-low: no data from site shop since",
		"rule checkout: site www.example.com complete until",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the dry run lacks %q", want)
		}
	}
	var n uint64
	if err := s.Select(ctx, "SELECT count() FROM belowcmd.crossings", nil, func(scan func(...any) error) error { return scan(&n) }); err != nil || n != 0 {
		t.Errorf("the dry run recorded %d crossings (%v)", n, err)
	}
	if f, _ := filepath.Glob(filepath.Join(dir, "outbox", "*.eml")); len(f) != 0 {
		t.Errorf("the dry run wrote %d messages", len(f))
	}
}
