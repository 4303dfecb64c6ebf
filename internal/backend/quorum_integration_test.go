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
// refuses an insert_quorum larger than the shard's replicas (every insert
// would be refused for good); fewer replicas with tables than the quorum (one
// was down when they were created) is said. insert_quorum reaches the sink.
func TestOpenChecksTheQuorum(t *testing.T) {
	zk := testenv.ZooKeeper(t)
	servers := testenv.ClickHouseCluster(t, zk, "web", 2)
	both := fmt.Sprintf("%q, %q", servers[0].Addr(), servers[1].Addr())
	for _, tc := range []struct {
		name, db, addr string
		quorum         int
		log            string // in the start's log, or the error
		refused        bool
	}{
		{"off", "hc", both, 0, "cluster mode without insert_quorum: an acknowledged batch is on one replica until another fetches it", false},
		{"every replica", "hc", both, 2, "insert_quorum: an acknowledged batch is on every replica; while any replica is down, inserts wait", false},
		{"more than the replicas", "hc", both, 3, "clickhouse.insert_quorum is 3 but the shard has 2 replicas in cluster web: no insert could ever be acknowledged", true},
		// r2 is not in addr, so its tables are not created.
		{"a replica without its tables", "hq", fmt.Sprintf("%q", servers[0].Addr()), 2, "fewer replicas have their tables than insert_quorum: every insert is refused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := fmt.Sprintf("clickhouse: {addr: [%s], database: %s, cluster: web, insert_quorum: %d}\n", tc.addr, tc.db, tc.quorum)
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
