package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Standalone mode queries the engine (the sweeper, the live view) while the
// collector inserts into it, from other goroutines and so other OS threads.
func TestQueriesWhileInserting(t *testing.T) {
	lib := testenv.RequireChdb(t)
	ctx := context.Background()
	st, err := embedded.Open(ctx, embedded.Options{LibPath: lib, DataPath: t.TempDir(), Database: "hitcount"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const batches, rows = 60, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	queries := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := st.Engine().Query(ctx, "SELECT path, sum(hits) FROM hitcount.hits_1m GROUP BY path ORDER BY 2 DESC LIMIT 10", "TSV"); err != nil {
				t.Error(err)
				return
			}
			queries++
		}
	})
	h := parser.Hit{Method: []byte("GET"), Status: 200, UserAgent: []byte("ua"), RemoteAddr: []byte("10.0.0.1")}
	for i := range batches {
		b := sink.NewBatch(rows)
		b.Reset("www", 7)
		for j := range rows {
			h.Unix = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC).Unix() + int64(j)
			h.Path = []byte(fmt.Sprintf("/p%d", j%50))
			off := int64(i*rows+j) * 100
			b.Add(&h, off, off+100)
		}
		if err := st.Insert(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	out, err := st.Engine().Query(ctx, "SELECT count(), (SELECT sum(hits) FROM hitcount.hits_1m) FROM hitcount.hits", "TSV")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d\t%d\n", batches*rows, batches*rows); string(out) != want {
		t.Fatalf("rows, rollup = %q, want %q", out, want)
	}
	if queries == 0 {
		t.Fatal("no query ran during the inserts: the test checked nothing")
	}
	t.Logf("%d batches inserted while %d queries ran", batches, queries)
}
