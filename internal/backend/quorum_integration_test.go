package backend

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/testenv"
)

// A start in cluster mode says what an acknowledged batch guarantees, and
// refuses an insert_quorum larger than the replicas the tables have (every
// insert would be refused for good). insert_quorum reaches the sink.
func TestOpenChecksTheQuorum(t *testing.T) {
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	for _, tc := range []struct {
		name    string
		quorum  int
		log     string // in the start's log, or the error
		refused bool
	}{
		{"off", 0, "cluster mode without insert_quorum: an acknowledged batch is on one replica until another fetches it", false},
		{"every replica", 2, "insert_quorum: an acknowledged batch is on every replica; while any replica is down, inserts wait", false},
		{"more than the replicas", 3, "clickhouse.insert_quorum is 3 but hc.hits_local has 2 replicas: no insert could ever be acknowledged", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := fmt.Sprintf("clickhouse: {addr: [%q], database: hc, cluster: web, insert_quorum: %d}\n", servers[0].Addr(), tc.quorum)
			cfg, err := config.Parse("t.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), tc.log) {
					t.Fatalf("open: %v; want %q", err, tc.log)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if got := b.Server.InsertQuorum(); got != tc.quorum {
				t.Errorf("the sink's quorum is %d, want %d", got, tc.quorum)
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, logs.String())
			}
		})
	}
}
