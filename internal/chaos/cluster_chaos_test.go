package chaos_test

import (
	"testing"

	"github.com/hitcount/hitcount/internal/chaos"
	"github.com/hitcount/hitcount/internal/testenv"
)

// TestCollectorChaosCluster runs the real collector binary in cluster mode
// under a seeded random schedule of faults: two ClickHouse 18.16 replicas of
// one shard and ZooKeeper, the collector listing both, replicas killed,
// paused past the insert timeout, stopped for several insert timeouts, and
// left lagging with their fetches stopped (sometimes while the other one is
// killed), beside the file and collector faults of the other stores. Once
// both replicas are back and the collector is quiet, each replica is synced
// and checked on its own tables: every line once in hits_local (or, for a
// line the store may refuse, once in rejects_local), the rollup agreeing,
// and both replicas holding the same rows. About 2 minutes in all.
//
//	CHAOS_SEED=N          repeat a run (the seed is printed, and in any failure);
//	                      its parity picks the address order, [r1, r2] or [r2, r1]
//	CHAOS_DURATION=5m     longer fault phase (default 60s)
//	CHAOS_FAULTS=all      every kind, the ones failing today too (chaos.Blocked),
//	                      and stalls of the kinds blocked for them fail;
//	                      or a comma list: CHAOS_FAULTS=stop-fetches,replica-kill
//	CHAOS_KEEP=1          keep a passing run's files too (collector log,
//	                      samples.txt, replicas.txt, the replicas' logs)
//	CHAOS_ARTIFACTS=DIR   where a failed run's files are kept
func TestCollectorChaosCluster(t *testing.T) {
	t.Parallel()
	set, err := chaos.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos: %s", set.Reproduce(chaos.StoreCluster))
	zk := testenv.ZooKeeper(t)
	replicas := chaos.ClusterShape(set.Seed, testenv.ClickHouseCluster(t, zk, chaos.ClusterName, 2))
	env := chaos.Env{Store: chaos.StoreCluster, Bin: collectorBin, Dir: t.TempDir(), Replicas: replicas, Settings: set, Logf: t.Logf}
	res := chaos.Run(t, env)
	t.Logf("\n%s", res.Summary())
	if res.Failed() {
		t.Logf("collector log, last lines:\n%s", res.LogTail)
		t.Fatalf("%s", res.FailureMessage())
	}
}
