package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplicaProblem says why this server's replicas are not complete (cluster
// mode: parts that only a replica that is down holds), nil when they are or
// the store is not a cluster. For /readyz.
func (b *Backend) ReplicaProblem() error {
	if b.Server == nil {
		return nil
	}
	return b.Server.ReplicaProblem()
}

// RecheckReplicas looks again at the replicas found incomplete, so that
// ReplicaProblem clears once the parts have come.
func (b *Backend) RecheckReplicas(ctx context.Context) {
	if b.Server != nil {
		b.Server.RecheckReplicas(ctx)
	}
}

// RegisterMetrics adds the store's gauges to reg: the parts each replicated
// table lacks and cannot fetch now. Registering twice (the collector and the
// sweeper in one process) is fine.
func (b *Backend) RegisterMetrics(reg prometheus.Registerer) error {
	if reg == nil || b.Server == nil {
		return nil
	}
	err := reg.Register(replicaCollector{b})
	if errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("register store metrics: %w", err)
	}
	return nil
}

var missingPartsDesc = prometheus.NewDesc("hitcount_replica_missing_parts",
	"Parts this server's replica of a table lacks and could not fetch at its last check (cluster mode): 0 when complete. "+
		"A part no active replica has stays until the replica holding it is back or removed (docs/cluster.md).",
	[]string{"table"}, nil)

type replicaCollector struct{ b *Backend }

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) { ch <- missingPartsDesc }

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.b.Server.Incomplete() {
		ch <- prometheus.MustNewConstMetric(missingPartsDesc, prometheus.GaugeValue, float64(len(e.Parts)), e.Table)
	}
}
