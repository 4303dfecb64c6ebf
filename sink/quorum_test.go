package sink

import (
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Only a refusal that wrote nothing is sent again at once by the sink: one
// raised while pushing to a view came after hits took the rows.
func TestQuorumRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"previous quorum pending", server(286, quorumPending), true},
		{"another quorum insert started", server(286, "Another quorum insert has been already started"), true},
		{"pending in a view's table", server(286, quorumPending+": while pushing to view hc.hits_1m_mv"), false},
		{"replica down", server(285, quorumDown), false},
		{"quorum timeout: written", server(319, quorumTimeoutMsg), false},
		{"query id running", server(216, "Query with id = x is already running."), false},
		{"no error", nil, false},
		{"no exception", fmt.Errorf("insert: %w", errTest), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quorumRefused(tc.err); got != tc.want {
				t.Errorf("quorumRefused(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

var errTest = fmt.Errorf("connection reset")

// The settings every connection carries: plain ints (the driver encodes
// 18.16's settings as numbers), the timeout in milliseconds.
func TestQuorumSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want clickhouse.Settings
		err  bool
	}{
		{"off", Options{Cluster: "web", InsertTimeout: time.Second}, nil, false},
		{"default timeout", Options{Cluster: "web", InsertQuorum: 2, InsertTimeout: 30 * time.Second},
			clickhouse.Settings{"insert_quorum": 2, "insert_quorum_timeout": 600000}, false},
		{"a timeout of its own", Options{Cluster: "web", InsertQuorum: 3, InsertTimeout: 30 * time.Second, InsertQuorumTimeout: 90 * time.Second},
			clickhouse.Settings{"insert_quorum": 3, "insert_quorum_timeout": 90000}, false},
		{"one", Options{Cluster: "web", InsertQuorum: 1, InsertTimeout: time.Second}, nil, true},
		{"no cluster", Options{InsertQuorum: 2, InsertTimeout: time.Second}, nil, true},
		{"the server would give up first", Options{Cluster: "web", InsertQuorum: 2, InsertTimeout: time.Minute, InsertQuorumTimeout: time.Minute}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkQuorum(tc.o)
			var got clickhouse.Settings
			if err == nil {
				got = quorumSettings(tc.o)
			}
			if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("quorumSettings = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
