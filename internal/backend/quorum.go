package backend

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hitcount/hitcount/sink"
)

// checkQuorum says at start what an acknowledged insert guarantees in
// cluster mode, and refuses an insert_quorum no insert could ever reach:
// more replicas than hits_local has, counting those that are down, would
// leave every line waiting in the log files for good.
func checkQuorum(ctx context.Context, s *sink.Sink, log *slog.Logger) error {
	if s.Cluster() == "" {
		return nil
	}
	q := s.InsertQuorum()
	if q == 0 {
		log.Info("cluster mode without insert_quorum: an acknowledged batch is on one replica until another fetches it, and lost if that replica's disk dies first")
		return nil
	}
	total, active, err := s.QuorumReplicas(ctx)
	if err != nil {
		// Advisory but for the impossible quorum, which the refusals of
		// every insert (TOO_LESS_LIVE_REPLICAS) will show in the log too.
		log.Warn("cannot read how many replicas the tables have", "insert_quorum", q, "err", err)
		return nil
	}
	switch {
	case total < q:
		return fmt.Errorf("clickhouse.insert_quorum is %d but %s.hits_local has %d replicas: no insert could ever be acknowledged", q, s.Database(), total)
	case total == q:
		log.Info("insert_quorum: an acknowledged batch is on every replica; while any replica is down, inserts wait (the lines stay in the log files)",
			"insert_quorum", q, "replicas", total, "active", active)
	default:
		log.Info("insert_quorum: an acknowledged batch is on that many replicas; inserts go on while enough replicas are up",
			"insert_quorum", q, "replicas", total, "active", active, "may_be_down", total-q)
	}
	return nil
}
