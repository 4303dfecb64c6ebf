package alerts

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the sweeper's Prometheus series; a nil *Metrics records nothing.
type Metrics struct {
	Sweeps        prometheus.Counter
	SweepSeconds  prometheus.Histogram
	Crossings     prometheus.Counter
	Claims        *prometheus.CounterVec
	Emails        *prometheus.CounterVec
	Waiting       prometheus.Gauge
	LastSweepTime prometheus.Gauge
	// RuleErrors counts, by rule, the queries that failed for a reason no
	// retry can fix (one page's, or the rule's own): recorded and skipped so
	// the other rules and pages go on.
	RuleErrors *prometheus.CounterVec
	// PagesSkipped counts touched pages not counted at all, by reason.
	PagesSkipped *prometheus.CounterVec
	// Orphaned is how many pending crossings belong to rules this sweeper
	// does not have (removed or renamed): left pending, never sent by it.
	Orphaned prometheus.Gauge
	// RulesHeld is 1 for a below or no_traffic rule whose ended windows
	// are not complete: its site's collectors are behind or gone.
	RulesHeld *prometheus.GaugeVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Sweeps:        prometheus.NewCounter(prometheus.CounterOpts{Name: "hitcount_sweeper_sweeps_total", Help: "Sweeps finished."}),
		SweepSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hitcount_sweeper_sweep_seconds", Help: "Duration of a sweep.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Crossings:     prometheus.NewCounter(prometheus.CounterOpts{Name: "hitcount_sweeper_crossings_total", Help: "Threshold crossings recorded."}),
		Claims:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hitcount_sweeper_claims_total", Help: "Claims on crossings, won or lost."}, []string{"result"}),
		Emails:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hitcount_sweeper_emails_total", Help: "Emails by result: sent, retried, failed."}, []string{"result"}),
		Waiting:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "hitcount_sweeper_crossings_waiting", Help: "Crossings recorded and not sent yet after the last sweep."}),
		LastSweepTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hitcount_sweeper_last_sweep_timestamp_seconds", Help: "When the last sweep finished."}),
		RuleErrors:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hitcount_sweeper_rule_errors_total", Help: "Queries of a rule that failed for good (the page or the rule is skipped; other rules go on)."}, []string{"rule"}),
		PagesSkipped:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hitcount_sweeper_pages_skipped_total", Help: "Touched pages never counted, by reason (path_too_long)."}, []string{"reason"}),
		Orphaned:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "hitcount_sweeper_crossings_orphaned", Help: "Pending crossings of rules this sweeper does not have (removed or renamed), at the last sweep."}),
		RulesHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hitcount_sweeper_rules_held",
			Help: "1 while a below or no_traffic rule is held: a window has ended but its site's collectors have not committed their logs past it (the sweeper log names the collector and file)."}, []string{"rule"}),
	}
	reg.MustRegister(m.Sweeps, m.SweepSeconds, m.Crossings, m.Claims, m.Emails, m.Waiting, m.LastSweepTime, m.RuleErrors, m.PagesSkipped, m.Orphaned, m.RulesHeld)
	return m
}

func (m *Metrics) held(rule string, held bool) {
	if m != nil {
		m.RulesHeld.WithLabelValues(rule).Set(map[bool]float64{true: 1}[held])
	}
}

func (m *Metrics) crossings(n int) {
	if m != nil {
		m.Crossings.Add(float64(n))
	}
}

func (m *Metrics) claim(won bool) {
	if m != nil {
		m.Claims.WithLabelValues(map[bool]string{true: "won", false: "lost"}[won]).Inc()
	}
}

func (m *Metrics) sent() {
	if m != nil {
		m.Emails.WithLabelValues("sent").Inc()
	}
}

func (m *Metrics) retried() {
	if m != nil {
		m.Emails.WithLabelValues("retried").Inc()
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.Emails.WithLabelValues("failed").Inc()
	}
}

func (m *Metrics) waiting(n int) {
	if m != nil {
		m.Waiting.Set(float64(n))
	}
}

func (m *Metrics) orphaned(n int) {
	if m != nil {
		m.Orphaned.Set(float64(n))
	}
}

func (m *Metrics) ruleError(rule string) {
	if m != nil {
		m.RuleErrors.WithLabelValues(rule).Inc()
	}
}

func (m *Metrics) skipped(reason string, n int) {
	if m != nil {
		m.PagesSkipped.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *Metrics) sweep(d time.Duration) {
	if m != nil {
		m.Sweeps.Inc()
		m.SweepSeconds.Observe(d.Seconds())
		m.LastSweepTime.SetToCurrentTime()
	}
}
