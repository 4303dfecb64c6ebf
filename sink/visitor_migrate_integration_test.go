package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// A database made before visitors (hits without its visitor column, no
// hits_visitors_1m and no view feeding it) is brought up to the schema by
// Migrate on the 18.16 server: the column is added before the view that
// reads it is created, rows already stored keep counting as hits, and new
// batches count their visitors.
func TestMigrateAddsVisitors(t *testing.T) {
	t.Parallel()
	ch := testenv.ClickHouse(t)
	ctx := context.Background()
	s, err := sink.Open(ctx, sink.Options{Addr: []string{ch.Addr()}, Database: "vis", InsertTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	ch.Exec(t, "DROP TABLE vis.hits_visitors_1m_mv")
	ch.Exec(t, "DROP TABLE vis.hits_visitors_1m")
	ch.Exec(t, "ALTER TABLE vis.hits DROP COLUMN visitor")
	// An older collector's rows, without the column.
	ch.Exec(t, "INSERT INTO vis.hits (ts, site, path, client, user_agent, source_id, offset) SELECT now(), 'www', '/old', '203.0.113.1', 'Mozilla/5.0', 1, 0")

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate an older database: %v", err)
	}
	b := sink.NewBatch(10)
	b.Reset("www", 2)
	b.Clients = sink.Clients{Key: sink.VisitorKey("k")}
	at := time.Now().Unix()
	for i, c := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.2", "198.51.100.3"} {
		h := parser.Hit{Unix: at, Method: []byte("GET"), Path: []byte("/new"), Status: 200, RemoteAddr: []byte(c), UserAgent: []byte("Mozilla/5.0")}
		b.Add(&h, int64(i*100), int64(i*100+100))
	}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]uint64{
		"SELECT uniqExactMerge(visitors) FROM vis.hits_visitors_1m WHERE path = '/new'":                 3,
		"SELECT count() FROM vis.hits WHERE path = '/old' AND visitor = cityHash64(client, user_agent)": 1,
		"SELECT sum(hits) FROM vis.hits_1m":                                                             5,
	} {
		var n uint64
		if err := s.Conn().QueryRow(ctx, q).Scan(&n); err != nil || n != want {
			t.Errorf("%s = %d (%v), want %d", q, n, err, want)
		}
	}
}
