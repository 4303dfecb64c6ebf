package collector

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the collector's Prometheus series. They are registered on the
// registry passed to NewMetrics, never on a global one.
type Metrics struct {
	LinesRead     *prometheus.CounterVec
	LinesParsed   *prometheus.CounterVec
	LinesRejected *prometheus.CounterVec
	LinesRefused  *prometheus.CounterVec
	LinesSkipped  *prometheus.CounterVec
	// FormatMismatch is 1 for a file that rejects nearly all of its lines
	// (format.go).
	FormatMismatch *prometheus.GaugeVec
	RowsInserted   *prometheus.CounterVec
	Batches        *prometheus.CounterVec
	InsertSeconds  prometheus.Histogram
	BytesBehind    *prometheus.GaugeVec
	OldestAge      prometheus.Gauge
	OpenFiles      prometheus.Gauge
	FilesSkipped   *prometheus.CounterVec
	SourceFiles    *prometheus.GaugeVec
	ClickHouseUp   prometheus.Gauge
	// One collector per file (owners.go).
	SourcesRefused  prometheus.Gauge
	SourcesYielded  prometheus.Counter
	OwnersUnchecked prometheus.Gauge
}

// NewMetrics creates the series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		LinesRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_lines_read_total", Help: "Lines read from access logs (including re-reads after a failed insert).",
		}, []string{"site"}),
		LinesParsed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_lines_parsed_total", Help: "Lines that parsed into a hit.",
		}, []string{"site"}),
		LinesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_lines_rejected_total", Help: "Lines that did not parse (sampled into the rejects table).",
		}, []string{"site"}),
		LinesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_lines_refused_total",
			Help: "Lines the store refused for good when sent alone (a permanent error: too many partitions, a throwIf guard, a constraint, a value it cannot read), by outcome: rejected (recorded in the rejects table, reason 'store refused: ...'), lost (the rejects table refused it too: logged with its offset, stored nowhere).",
		}, []string{"site", "outcome"}),
		LinesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_lines_skipped_total",
			Help: "Lines that are part of the log's format, not requests (W3C's #Version: and #Fields: header lines): read past, neither a hit nor a reject.",
		}, []string{"site"}),
		FormatMismatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hitcount_collector_format_mismatch",
			Help: "1 while an open log file rejects nearly all of its lines (at least 90% of the last 500 to 1000, at least 50): it is not in the format it is parsed with. The collector's log names the format in use, a reject reason and the format that would accept the lines; with format: auto the file's format is detected again.",
		}, []string{"site", "path"}),
		RowsInserted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_rows_inserted_total", Help: "Hit rows committed to ClickHouse.",
		}, []string{"site"}),
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_batches_total", Help: "Batches by result: ok (committed), failed (an insert attempt failed: retried, or split when permanent), split (refused for good by the store: sent in two halves), resent (after an identical re-send the store did not hold all of the batch's lines: the missing ones sent under a new id), discarded (not sent after a shutdown with an unknown outcome, or a truncation).",
		}, []string{"result"}),
		InsertSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hitcount_collector_insert_seconds", Help: "Duration of successful batch inserts.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		BytesBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hitcount_collector_bytes_behind", Help: "Bytes of an open log file not yet committed to ClickHouse.",
		}, []string{"site", "file"}),
		OldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hitcount_collector_oldest_unshipped_seconds", Help: "Age of the oldest line read but not yet committed (0 when all is shipped).",
		}),
		OpenFiles: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hitcount_collector_open_files", Help: "Log files being read.",
		}),
		FilesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hitcount_collector_files_skipped_total",
			Help: "Paths a source matches that are not read, counted (and logged) once per path and reason: symlink (matched by a wildcard, a rotated sibling, or a symlinked directory below the glob's fixed part), not_regular (directory, FIFO, device, socket), symlink_owner (a configured symlink owned by neither root nor its target's owner).",
		}, []string{"site", "reason"}),
		SourceFiles: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hitcount_collector_source_files",
			Help: "Files a configured source matches now (live logs and their rotated siblings); 0 means a path that matches nothing: a typo, or a log not written yet.",
		}, []string{"site", "path"}),
		ClickHouseUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hitcount_collector_clickhouse_up", Help: "1 when the last insert or check against ClickHouse succeeded.",
		}),
		SourcesRefused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hitcount_collector_sources_refused",
			Help: "Log files not read because another collector ships them (its live record in source_owners is older): one collector per file. /readyz names each file and that collector.",
		}),
		SourcesYielded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hitcount_collector_sources_yielded_total",
			Help: "Log files this collector stopped reading because another collector had claimed them first without being seen at open (a replica lagged, or this collector's records went stale): lines the two read before may be stored twice.",
		}),
		OwnersUnchecked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hitcount_collector_owners_unchecked",
			Help: "1 while the store refuses source_owners to this collector (table missing, privilege not granted): files are shipped without checking that no other collector ships them. Fix: collector -migrate, deploy/sql/users.sql.",
		}),
	}
	reg.MustRegister(m.LinesRead, m.LinesParsed, m.LinesRejected, m.LinesRefused, m.LinesSkipped, m.FormatMismatch, m.RowsInserted, m.Batches,
		m.InsertSeconds, m.BytesBehind, m.OldestAge, m.OpenFiles, m.FilesSkipped, m.SourceFiles, m.ClickHouseUp,
		m.SourcesRefused, m.SourcesYielded, m.OwnersUnchecked)
	return m
}
