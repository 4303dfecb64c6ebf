package alerts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/chdb"
)

// Chunks keep every value, in order, and no chunk of several values binds
// more than the budget, however many values, however long, however full of
// characters the binders escape.
func TestChunks(t *testing.T) {
	var vals []string
	for i := range 500 {
		switch i % 4 {
		case 0:
			vals = append(vals, "/p"+fmt.Sprint(i))
		case 1:
			vals = append(vals, strings.Repeat("'", 3000)) // doubles when bound
		case 2:
			vals = append(vals, strings.Repeat("\\", 9000))
		default:
			vals = append(vals, strings.Repeat("x", 70_000)) // over the budget alone
		}
	}
	const budget = 64 << 10
	var joined []string
	for _, c := range chunks(vals, budget) {
		size := 0
		for _, v := range c {
			size += literalSize(v)
		}
		if len(c) > 1 && size > budget {
			t.Fatalf("a chunk of %d values binds %d bytes, over %d", len(c), size, budget)
		}
		if len(c) == 0 {
			t.Fatal("an empty chunk")
		}
		joined = append(joined, c...)
	}
	if strings.Join(joined, "\x00") != strings.Join(vals, "\x00") {
		t.Fatal("chunks lost or reordered values")
	}
	if got := chunks(nil, budget); len(got) != 0 {
		t.Fatalf("chunks of nothing: %v", got)
	}
	if n := literalSize(`a'b\c`); n != 5+2+4 {
		t.Fatalf("literalSize = %d, want 11", n)
	}
}

// Only the store's verdicts on the query itself are permanent; anything that
// may pass is not.
func TestPermanent(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&clickhouse.Exception{Code: 62, Message: "Max query size exceeded"}, true},
		{fmt.Errorf("count: %w", &clickhouse.Exception{Code: 427}), true},
		{fmt.Errorf("count: %w", &chdb.QueryError{Code: 62}), true},
		{&chdb.QueryError{Code: 168}, true},
		{&clickhouse.Exception{Code: 241, Message: "Memory limit exceeded"}, false},
		{&clickhouse.Exception{Code: 159, Message: "Timeout exceeded"}, false},
		{&chdb.QueryError{Code: 0, Message: "engine returned no result"}, false},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{context.DeadlineExceeded, false},
		{errors.New("bind: 2 arguments for 3 placeholders"), false},
	} {
		if got := permanent(c.err); got != c.want {
			t.Errorf("permanent(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// clip cuts on a character boundary and says how long the text was.
func TestClip(t *testing.T) {
	s := strings.Repeat("é", 150) // 300 bytes
	got := clip(s)
	if !strings.HasSuffix(got, "...(300 bytes)") || !strings.HasPrefix(got, strings.Repeat("é", 100)) {
		t.Fatalf("clip = %q", got)
	}
	if clip("/short") != "/short" {
		t.Fatal("clip changed a short text")
	}
}
