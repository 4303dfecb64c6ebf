#!/usr/bin/env bash
# Collector end to end (pre-written 2-million-line log -> parse -> ClickHouse
# server) against `clickhouse-client --query "INSERT ... FORMAT TSV"` loading the
# same rows, already parsed, into an identical table of the same real server, in
# one run. Prints both rates, the ratio (target >= 1.0) and the collector's peak RSS.
# Usage: bench/collector-vs-client.sh [LINES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
BENCH_LINES="${1:-2000000}" go test -run '^$' -bench CollectorVsClickHouseClient -benchtime 1x -timeout 30m ./bench/e2e/ | grep -E '^rows|ratio|FAIL|ok'
