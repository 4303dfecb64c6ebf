#!/usr/bin/env bash
# A sweep's time with 1x and 10x stored hits at the same touched pages, in one
# run against a real ClickHouse server (target: ratio <= 2); then the same for
# below and no_traffic rules, which read a day of windows, for spike and drop
# rules, which read a day of windows and 7 days of baselines, and for a sweep
# that builds and sends a weekly and a monthly report from the rollups, and for
# rules with count: visitors, which merge uniqExact states (issue 19).
# Usage: bench/sweep-scaling.sh [STORED_HITS]   (default 1,000,000; 10x is added)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
BENCH_STORED="${1:-1000000}" go test -run '^$' -bench SweepFlatWhileStoredGrows -benchtime 1x -timeout 30m ./bench/sweep/ | grep -E '^sweep|FAIL|ok'
