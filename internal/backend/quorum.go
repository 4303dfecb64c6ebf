package backend

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hitcount/hitcount/sink"
)

// checkQuorum says at start what an acknowledged insert guarantees in
// cluster mode, and refuses an insert_quorum no insert could ever reach:
// more replicas than the shard has in remote_servers would leave every line
// waiting in the log files for good. Fewer replicas with their tables than
// the quorum (one was down when the schema was created) is said, not
// refused: a migrate once it is up mends it.
func checkQuorum(ctx context.Context, s *sink.Sink, log *slog.Logger) error {
	if s.Cluster() == "" {
		return nil
	}
	q := s.InsertQuorum()
	if q == 0 {
		log.Info("cluster mode without insert_quorum: an acknowledged batch is on one replica until another fetches it, and lost if that replica's disk dies first")
		return nil
	}
	r, err := s.QuorumReplicas(ctx)
	if err != nil {
		// Advisory but for the impossible quorum, which the refusals of
		// every insert (TOO_LESS_LIVE_REPLICAS) will show in the log too.
		log.Warn("cannot read how many replicas the tables have", "insert_quorum", q, "err", err)
		return nil
	}
	switch {
	case r.Configured < q:
		return fmt.Errorf("clickhouse.insert_quorum is %d but the shard has %d replicas in cluster %s: no insert could ever be acknowledged", q, r.Configured, s.Cluster())
	case r.Configured == q:
		log.Info("insert_quorum: an acknowledged batch is on every replica; while any replica is down, inserts wait (the lines stay in the log files)",
			"insert_quorum", q, "replicas", r.Configured, "active", r.Active)
	default:
		log.Info("insert_quorum: an acknowledged batch is on that many replicas; inserts go on while enough replicas are up",
			"insert_quorum", q, "replicas", r.Configured, "active", r.Active, "may_be_down", r.Configured-q)
	}
	if r.Registered < q {
		log.Warn("fewer replicas have their tables than insert_quorum: every insert is refused (the lines wait in the log files) until more have them; run collector -migrate once they are up",
			"insert_quorum", q, "with_tables", r.Registered, "replicas", r.Configured)
	}
	return nil
}
