#!/usr/bin/env bash
# The README's first command: sets up what is missing and runs the most complete
# job this build has. Today that is the log check: it parses an access log (the
# one you give, or a freshly generated demo log) and prints what the collector
# would ship: lines, parsed, rejected with reasons, top pages, speed.
# Usage: scripts/run.sh [ACCESS_LOG [FORMAT]]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "run: Go is not installed (https://go.dev/dl/, >= 1.26)" >&2; exit 1; }
mkdir -p bin
CGO_ENABLED=0 go build -o bin/ ./cmd/...
log="${1:-}"
if [ -z "$log" ]; then
	mkdir -p data
	log=data/demo-access.log
	rm -f "$log"
	bin/loggen -n 200000 -bad-every 5000 -o "$log"
	echo "run: no log given; generated $log (200000 lines, 1 in 5000 malformed)" >&2
fi
exec bin/collector -check-log "$log" -format "${2:-auto}"
