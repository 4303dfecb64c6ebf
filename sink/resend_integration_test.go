package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// resendBatch is a batch of hits and sampled rejects, read a while ago.
func resendBatch(source uint64) *sink.Batch {
	b := sink.NewBatch(10)
	b.Reset("www", source)
	b.ReadAt = time.Now().Add(-time.Minute)
	now := time.Now().Unix()
	for i := range 10 {
		off := int64(i * 100)
		if i%3 == 1 {
			b.AddReject(off, off+100, "status: expected a three-digit status", fmt.Appendf(nil, "garbage line %d", i))
			continue
		}
		b.Add(&parser.Hit{Unix: now, Method: []byte("GET"), Path: []byte(fmt.Sprint("/p", i)), Status: 200}, off, off+100)
	}
	return b
}

// insertTwice sends b, waits past a second (a stamp taken at send time
// would differ), and sends it again, as the collector does after an unknown
// outcome.
func insertTwice(t *testing.T, ctx context.Context, st interface {
	Insert(context.Context, *sink.Batch) error
}, b *sink.Batch) {
	t.Helper()
	if err := st.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := st.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// A batch sent again is the same rows, rejects included: on a store that
// does not deduplicate (18.16, one server) the two sends' reject rows are
// identical, column for column.
func TestResentBatchIsIdentical(t *testing.T) {
	t.Parallel()
	d := testenv.NewDatabase(t, "server")
	st := d.Open(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := resendBatch(0x5e4d)
	insertTwice(t, ctx, st, b)
	var rows, distinct, hits, distinctHits uint64
	err := st.Select(ctx, fmt.Sprintf(`SELECT
		(SELECT count() FROM %[1]s.rejects), (SELECT uniqExact(inserted, site, source_id, offset, reason, line) FROM %[1]s.rejects),
		(SELECT count() FROM %[1]s.hits), (SELECT uniqExact(`+sink.HitsColumns+`) FROM %[1]s.hits)`, d.Name), nil,
		func(scan func(...any) error) error { return scan(&rows, &distinct, &hits, &distinctHits) })
	if err != nil {
		t.Fatal(err)
	}
	n, h := uint64(len(b.Rejects)), uint64(b.Rows())
	if rows != 2*n || distinct != n || hits != 2*h || distinctHits != h {
		t.Errorf("two sends: %d reject rows, %d distinct; %d hits, %d distinct; want %d and %d, %d and %d", rows, distinct, hits, distinctHits, 2*n, n, 2*h, h)
	}
}

// On a store that deduplicates, a batch sent twice leaves each sampled
// reject once, as it leaves each hit once: the embedded engine, and two
// 18.16 replicas (cluster mode), where replicated tables drop a block whose
// checksum they have seen, so the second send must be byte-identical.
func TestResentBatchRejectsOnce(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, ctx context.Context, st testenv.Store, db, suffix string, b *sink.Batch) {
		t.Helper()
		if !st.Deduplicates() {
			t.Fatal("the store does not deduplicate")
		}
		insertTwice(t, ctx, st, b)
		var rejects, hits, progress uint64
		err := st.Select(ctx, fmt.Sprintf(`SELECT (SELECT count() FROM %[1]s.rejects%[2]s), (SELECT count() FROM %[1]s.hits%[2]s),
			(SELECT sum(hits) FROM %[1]s.hits_1m%[2]s)`, db, suffix), nil,
			func(scan func(...any) error) error { return scan(&rejects, &hits, &progress) })
		if err != nil {
			t.Fatal(err)
		}
		if rejects != uint64(len(b.Rejects)) || hits != uint64(b.Rows()) || progress != uint64(b.Rows()) {
			t.Errorf("after two sends: %d rejects, %d hits, rollup %d; want %d, %d, %d", rejects, hits, progress, len(b.Rejects), b.Rows(), b.Rows())
		}
	}
	t.Run("embedded", func(t *testing.T) {
		d := testenv.NewDatabase(t, "embedded")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		check(t, ctx, d.Open(t), d.Name, "", resendBatch(0xe3bd))
	})
	t.Run("cluster", func(t *testing.T) {
		zk := testenv.ZooKeeper(t)
		servers := testenv.ClickHouseCluster(t, zk, "web", 2)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s, err := sink.Open(ctx, sink.Options{Addr: []string{servers[0].Addr()}, Database: "hc", Cluster: "web"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		// Replicated tables deduplicate without a token: read from the
		// tables an insert writes on this replica, not assumed.
		checkDedupTables(t, s.Dedup(), "hc", "_local", true, "")
		for _, tb := range s.Dedup().Tables {
			if !strings.HasPrefix(tb.Engine, "Replicated") {
				t.Errorf("%s: engine %s", tb.Table, tb.Engine)
			}
		}
		check(t, ctx, s, "hc", "_local", resendBatch(0xc1a5))
	})
}
