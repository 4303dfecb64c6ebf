package collector

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hitcount/hitcount/sink"
)

// A file whose batch is still being committed takes a second batch only
// while another stays free for the other files, and gets one as soon as its
// own is done: one file waiting on its store can never hold the whole pool.
func TestSecondBatchLeavesOneForOtherFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &Collector{opts: Options{BatchRows: 10}, free: make(chan *sink.Batch, 2), freed: make(chan struct{}),
		unshipped: map[*sink.Batch]time.Time{}}
	c.free <- nil
	c.free <- nil
	var busy atomic.Bool
	first, err := c.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busy.Store(true) // first is being committed, and waits
	second := make(chan *sink.Batch, 1)
	go func() {
		b, err := c.acquireSecond(ctx, &busy)
		if err != nil {
			t.Error(err)
		}
		second <- b
	}()
	notYet := func(when string) {
		t.Helper()
		select {
		case <-second:
			t.Fatalf("%s: the file took a second batch while its first was being committed and no other would be left", when)
		case <-time.After(100 * time.Millisecond):
		}
	}
	notYet("one batch free")
	other, err := c.acquire(ctx)
	if err != nil {
		t.Fatalf("another file could not take the batch left free: %v", err)
	}
	c.release(other)
	notYet("the other file's batch given back")
	busy.Store(false)
	c.release(first)
	select {
	case b := <-second:
		if b == nil {
			t.Fatal("no batch")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the file's own batch was done, and it still waits for a second")
	}
}

// With batches to spare, a second batch is taken at once: reading goes on
// while the first is committed.
func TestSecondBatchWithBatchesToSpare(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &Collector{opts: Options{BatchRows: 10}, free: make(chan *sink.Batch, 4), freed: make(chan struct{}),
		unshipped: map[*sink.Batch]time.Time{}}
	for range 4 {
		c.free <- nil
	}
	var busy atomic.Bool
	if _, err := c.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	busy.Store(true)
	if _, err := c.acquireSecond(ctx, &busy); err != nil {
		t.Fatal(err)
	}
	if n := len(c.free); n != 2 {
		t.Errorf("%d batches free after the second, want 2", n)
	}
}
