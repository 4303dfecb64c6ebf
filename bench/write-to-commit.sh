#!/usr/bin/env bash
# Write-to-commit latency of the collector, in one run: the real collector
# ships a file to which a writer appends one line at a time (a quiet site, a
# line every 1-3 s; a busy one, ~200 lines/s), with BatchDelay 1s and 50ms, for
# each wait at the end of a file (poll: checked every Poll; watch: woken by
# inotify, Poll bounding the wait). Prints p50/p95/max/mean per case, then the
# CPU the wait costs (200 idle files; one file at 1,000 lines/s).
# The commit is the store's acknowledgement of the insert, seen by wrapping the
# store the collector is given: nothing in the collector is changed for it.
# Usage: bench/write-to-commit.sh   (env: BENCH_STORE=embedded|server,
#   BENCH_QUIET_LINES=60, BENCH_BUSY_LINES=2000, BENCH_IDLE_FILES=200,
#   BENCH_CPU_SECONDS=10, BENCH_CPU_ROUNDS=3, BENCH_MODES=regexp of waits,
#   BENCH_CASES=regexp of cases:
#   quiet-1s, busy-50ms, cpu-idle, cpu-busy-1s,
#   ...). About 15 minutes with the defaults.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
export HITCOUNT_CHDB_LIB="${HITCOUNT_CHDB_LIB:-$root/.cache/chdb/current/libchdb.so}"
go test -run '^$' -bench 'WriteToCommit|CPU' -benchtime 1x -timeout 60m ./bench/latency/ |
	grep -vE '^(goos|goarch|pkg|cpu:|Benchmark)'
