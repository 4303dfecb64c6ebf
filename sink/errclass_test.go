package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/hitcount/hitcount/internal/chdb"
)

// server is an insert error as the server sink returns it.
func server(code int32, msg string) error {
	return fmt.Errorf("insert batch hitcount-0000000000000001-0-100 (2 rows): %w", &clickhouse.Exception{Code: code, Name: "DB::Exception", Message: msg})
}

// engine is an insert error as the embedded store returns it.
func engine(code int, name, msg string) error {
	return fmt.Errorf("insert batch hitcount-0000000000000001-0-100 (2 rows): %w",
		&chdb.QueryError{Code: code, Name: name, Message: fmt.Sprintf("Code: %d. DB::Exception: %s. (%s)", code, msg, name)})
}

// The quorum refusals and timeout as 18.16 words them.
const (
	quorumDown       = "Number of alive replicas (1) is less than requested quorum (2)."
	quorumPending    = "Quorum for previous write has not been satisfied yet. Status: version: 1\npart_name: 202611_1_1_0\nrequired_number_of_replicas: 2\nactual_number_of_replicas: 1\nreplicas:\nr1\n"
	quorumTimeoutMsg = "Unknown status, client must retry. Reason: Code: 159, e.displayText() = DB::Exception: Timeout while waiting for quorum, e.what() = DB::Exception"
)

// The messages are the stores' own, measured on 18.16 and 26.7 where noted.
func TestPermanent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
	}{
		{"no error", nil, false},
		{"timeout", fmt.Errorf("insert batch x: %w", context.DeadlineExceeded), false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{"connection dropped", fmt.Errorf("insert batch x: %w", io.ErrUnexpectedEOF), false},
		{"client-side error without a code", errors.New("clickhouse [AppendRow]: converting string to UInt16 is unsupported"), false},
		// 26.7, measured.
		{"embedded: too many partitions", engine(252, "TOO_MANY_PARTS", "Too many partitions for single INSERT block (more than 100). The limit is controlled by 'max_partitions_per_insert_block' setting"), true},
		{"server: too many partitions", server(252, "Too many partitions for single INSERT block (more than 100). The limit is controlled by 'max_partitions_per_insert_block' setting."), true},
		{"server: too many parts (merges behind)", server(252, "Too many parts (300). Merges are processing significantly slower than inserts."), false},
		{"embedded: too many parts (merges behind)", engine(252, "TOO_MANY_PARTS", "Too many parts (3001 with average size of 1.00 MiB) in table 'db.hits'. Merges are processing significantly slower than inserts"), false},
		// 18.16 and 26.7, measured: a throwIf in a MATERIALIZED column, and in a view.
		{"server: throwIf in a column", server(395, "Value passed to 'throwIf' function is non zero"), true},
		{"server: throwIf in a view", server(395, "Value passed to 'throwIf' function is non zero: while pushing to view db.guard_mv"), true},
		{"embedded: throwIf in a view", engine(395, "FUNCTION_THROW_IF_VALUE_IS_NON_ZERO", "Value passed to 'throwIf' function is non-zero: while pushing to view db.guard_mv"), true},
		{"embedded: constraint", engine(469, "VIOLATED_CONSTRAINT", "Constraint `c1` for table db.hits is violated at row 6"), true},
		{"server: constraint", server(469, "Constraint `c1` for table db.hits is violated at row 6"), true},
		// A view's target of another shape: every block fails alike until an
		// operator fixes it (TestFailingViewExactlyOnce), measured.
		{"server: type mismatch in a view", server(53, "Type mismatch for column site. Column has type UInt8, got type String: while pushing to view db.hits_1d_mv"), false},
		{"embedded: parse error in a view", engine(6, "CANNOT_PARSE_TEXT", "Cannot parse string 'www' as UInt8: syntax error at begin of string: while pushing to view db.hits_1d_mv"), false},
		{"embedded: parse error on the rows", engine(6, "CANNOT_PARSE_TEXT", "Cannot parse input: expected '\\t' before: 'x'"), true},
		{"embedded: datetime", engine(41, "CANNOT_PARSE_DATETIME", "Cannot parse DateTime"), true},
		{"server: value out of range", server(321, "Value out of range of data type"), true},
		{"server: conversion", server(70, "Conversion from String to UInt8 is not supported"), true},
		// Transient whatever the rows.
		{"server: query id running", server(216, "Query with id = hitcount-0000000000000001-0-100 is already running."), false},
		{"server: memory", server(241, "Memory limit (for query) exceeded"), false},
		{"embedded: memory", engine(241, "MEMORY_LIMIT_EXCEEDED", "Memory limit (total) exceeded"), false},
		{"server: unknown table", server(60, "Table db.hits doesn't exist."), false},
		{"server: read-only", server(164, "Cannot execute query in readonly mode"), false},
		{"server: access denied", server(497, "default: Not enough privileges."), false},
		{"server: timeout", server(159, "Timeout exceeded: elapsed 30.1 seconds"), false},
		{"server: cancelled", server(394, "Query was cancelled"), false},
		{"embedded: keeper", engine(999, "KEEPER_EXCEPTION", "Session expired"), false},
		// Quorum inserts (insert_quorum), 18.16, measured
		// (quorum_integration_test.go): transient, never split.
		{"server: too few live replicas for the quorum", server(285, quorumDown), false},
		{"server: previous quorum pending", server(286, quorumPending), false},
		{"server: another quorum insert started", server(286, "Another quorum insert has been already started"), false},
		{"server: previous quorum pending in a view", server(286, quorumPending+": while pushing to view hc.hits_1m_mv"), false},
		{"server: quorum timeout", server(319, quorumTimeoutMsg), false},
		// The outermost code decides.
		{"embedded: nested", fmt.Errorf("x: %w", &chdb.QueryError{Code: 241, Message: "Code: 241. DB::Exception: Code: 6. DB::Exception: Cannot parse"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Permanent(tc.err); got != tc.permanent {
				t.Errorf("Permanent(%v) = %v, want %v", tc.err, got, tc.permanent)
			}
		})
	}
}

func TestRefusedReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{server(395, "Value passed to 'throwIf' function is non zero"), "store refused: Code: 395. Value passed to 'throwIf' function is non zero"},
		{engine(252, "TOO_MANY_PARTS", "Too many partitions for single INSERT block (more than 100)"),
			"store refused: Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100). (TOO_MANY_PARTS)"},
		{errors.New("no code"), "store refused: no code"},
	} {
		if got := RefusedReason(tc.err); got != tc.want {
			t.Errorf("RefusedReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	long := RefusedReason(server(395, strings.Repeat("x", 5000)))
	if len(long) != maxReason || !strings.HasPrefix(long, "store refused: Code: 395. xxx") {
		t.Errorf("a long reason is %d bytes (%q...), want %d", len(long), long[:40], maxReason)
	}
}

// Start-up waits out a store that cannot answer and exits on one that
// refuses what it is asked.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"no error", nil, false},
		{"cancelled (stopping)", fmt.Errorf("migrate: %w", context.Canceled), false},
		{"connection dropped mid-statement (a replica killed)", fmt.Errorf("migrate: query processing: failed to read packet: %w", io.EOF), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"deadline", fmt.Errorf("migrate: %w", context.DeadlineExceeded), true},
		{"ON CLUSTER waiting for a down replica", server(159, "Watching task /clickhouse/task_queue/ddl/query-0000000001 is executing longer than distributed_ddl_task_timeout"), true},
		{"replica read-only", server(242, "Table is in readonly mode"), true},
		{"keeper", engine(999, "KEEPER_EXCEPTION", "Session expired"), true},
		{"access denied", server(497, "hitcount: Not enough privileges. To execute this query it's necessary to have grant CREATE TABLE ON hc.hits"), false},
		{"syntax", server(62, "Syntax error: failed at position 1"), false},
		{"unknown cluster", server(170, "Requested cluster 'web' not found"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable(tc.err); got != tc.unavailable {
				t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.unavailable)
			}
		})
	}
}
