#!/usr/bin/env bash
# The README's test command: installs what the tests need (idempotent), then runs
# vet and the whole suite, race detector on. Extra arguments go to `go test`
# (for example: scripts/test.sh -run Parser ./parser/).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
scripts/setup.sh
export HITCOUNT_CHDB_LIB="${HITCOUNT_CHDB_LIB:-$root/.cache/chdb/current/libchdb.so}"
go vet ./...
# The longest packages first: go test starts packages in the order given, two
# at a time on two cores, and the collector's (about 10 min) started last
# would end the run alone.
if [ $# -eq 0 ]; then set -- ./internal/collector ./alerts ./cmd/sweeper ./...; fi
go test -race -count=1 -timeout 20m "$@"
