#!/usr/bin/env bash
# Standalone mode (hitcount run: log file -> parse -> embedded ClickHouse 26 in
# the same process) against server mode (the collector binary -> a ClickHouse
# 18.16 server on loopback) shipping the same pre-written log, in one run.
# Prints both rates, CPU seconds, peak RSS and the ratio standalone/server.
# Usage: bench/standalone-vs-server.sh [LINES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
BENCH_LINES="${1:-2000000}" go test -run '^$' -bench StandaloneVsServer -benchtime 1x -timeout 30m ./bench/standalone/ | grep -E '^rows|ratio|FAIL|ok'
