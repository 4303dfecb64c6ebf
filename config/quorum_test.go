package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// insert_quorum needs a cluster and is 0 or at least 2; the server waits
// for the quorum longer than the collector waits for the insert, whether
// insert_quorum_timeout is given or left at its default (10m).
func TestInsertQuorum(t *testing.T) {
	const cluster = "clickhouse:\n  addr: [h:1]\n  cluster: web\n"
	for _, tc := range []struct {
		name, yaml string
		quorum     int
		timeout    time.Duration
		want       []string
	}{
		{"off by default", cluster, 0, 10 * time.Minute, nil},
		{"two replicas, default timeout", cluster + "  insert_quorum: 2\n", 2, 10 * time.Minute, nil},
		{"a timeout of its own", cluster + "  insert_quorum: 3\n  insert_quorum_timeout: 2m\n  insert_timeout: 1m\n", 3, 2 * time.Minute, nil},
		{"one is every insert", cluster + "  insert_quorum: 1\n", 0, 0, []string{
			"t.yaml:4:18: clickhouse.insert_quorum: must be 0 (off) or at least 2 (replicas that hold an insert before it is acknowledged), got 1"}},
		{"negative", cluster + "  insert_quorum: -2\n", 0, 0, []string{
			"t.yaml:4:18: clickhouse.insert_quorum: must be 0 (off) or at least 2 (replicas that hold an insert before it is acknowledged), got -2"}},
		{"without a cluster", "clickhouse:\n  addr: [h:1]\n  insert_quorum: 2\n", 0, 0, []string{
			"t.yaml:3:18: clickhouse.insert_quorum: needs clickhouse.cluster: a quorum counts the replicas of a cluster's shard"}},
		{"a timeout without a quorum", cluster + "  insert_quorum_timeout: 5m\n", 0, 0, []string{
			"t.yaml:4:26: clickhouse.insert_quorum_timeout: is given but insert_quorum is off: no insert waits for a quorum; set insert_quorum or remove it"}},
		{"a quorum that did not decode says only that", cluster + "  insert_quorum: two\n  insert_quorum_timeout: 5m\n", 0, 0, []string{
			`t.yaml:4:18: clickhouse.insert_quorum: must be a whole number, got "two"`}},
		{"the server gives up first", cluster + "  insert_quorum: 2\n  insert_quorum_timeout: 30s\n", 0, 0, []string{
			"t.yaml:5:26: clickhouse.insert_quorum_timeout: must be longer than insert_timeout (30s), got 30s: an insert the server stops waiting for has written hits but not the rollups, and its re-send never writes them; one the collector stops waiting for completes on the server once the quorum is reached"}},
		{"insert_timeout past the default quorum timeout", cluster + "  insert_quorum: 2\n  insert_timeout: 15m\n", 0, 0, []string{
			"t.yaml:5:19: clickhouse.insert_timeout: must be shorter than insert_quorum_timeout (10m0s, the default), got 15m0s: an insert the server stops waiting for has written hits but not the rollups, and its re-send never writes them; one the collector stops waiting for completes on the server once the quorum is reached; raise insert_quorum_timeout"}},
		{"a timeout under a second", cluster + "  insert_quorum: 2\n  insert_quorum_timeout: 500ms\n  insert_timeout: 100ms\n", 0, 0, []string{
			"t.yaml:5:26: clickhouse.insert_quorum_timeout: must be at least 1s, got 500ms",
			"t.yaml:6:19: clickhouse.insert_timeout: must be at least 1s, got 100ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("t.yaml", []byte(tc.yaml))
			var got []string
			if err != nil {
				var es Errors
				if !errors.As(err, &es) {
					t.Fatalf("err %T, want Errors", err)
				}
				got = strings.Split(err.Error(), "\n")
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if err == nil && (c.ClickHouse.InsertQuorum != tc.quorum || c.ClickHouse.InsertQuorumTimeout.Duration != tc.timeout) {
				t.Errorf("insert_quorum %d, insert_quorum_timeout %v; want %d, %v", c.ClickHouse.InsertQuorum, c.ClickHouse.InsertQuorumTimeout.Duration, tc.quorum, tc.timeout)
			}
		})
	}
}
