#!/usr/bin/env bash
# The README's first command: sets up what is missing (the embedded engine,
# libchdb.so) and runs the whole job in one process on the embedded store
# (standalone mode): the collector tailing the access log you give, or live
# demo traffic written to ./data/demo/access.log; the sweeper every 30 s with
# two sample rules, writing each crossing as an .eml file to ./outbox; every
# 10 s a live view of the counts. Ctrl-C stops it cleanly.
# Usage: scripts/run.sh [ACCESS_LOG [FORMAT]]
#        scripts/run.sh --check-log ACCESS_LOG [FORMAT]   (parse only, JSON report)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null 2>&1 || { echo "run: Go is not installed (https://go.dev/dl/, >= 1.26)" >&2; exit 1; }
mkdir -p bin
CGO_ENABLED=0 go build -o bin/ ./cmd/...
if [ "${1:-}" = "--check-log" ]; then
	exec bin/collector -check-log "$2" -format "${3:-auto}"
fi
scripts/setup.sh --embedded-only

data="$root/data"
mkdir -p "$data"
log="${1:-}"
format="${2:-auto}"
demo=()
if [ -z "$log" ]; then
	log="$data/demo/access.log"
	demo=(-demo "$log" -demo-rate 200)
	echo "run: no log given; writing live demo traffic (200 requests/s) to $log" >&2
	start_at=beginning # every demo line counts
else
	[ -r "$log" ] || { echo "run: cannot read $log" >&2; exit 1; }
	log="$(cd "$(dirname "$log")" && pwd)/$(basename "$log")"
	start_at=end # a busy site's history would trip the rules' old windows at once
fi
listen="${HITCOUNT_HTTP_LISTEN:-127.0.0.1:9464}"
# The sample rules: with the demo's 200 requests/s (about 15% on /pricing,
# some on /blog/*) both cross within the first sweeps.
cat >"$data/hitcount.yaml" <<YAML
# Written by scripts/run.sh; copy it to start your own (see
# docs/configuration.md). Relative paths are relative to this file.
embedded:
  path: ./chdb
sources:
  - path: $log
    format: $format
    site: demo
    start_at: $start_at
batch: {rows: 50000, delay: 1s}
http: {listen: "$listen"}
state_dir: ./state
outbox: $root/outbox
sweep: {every: 30s, lateness: 5m}
rules:
  - name: pricing-busy
    match: {site: demo, path: /pricing}
    threshold: 500
    window: 5m
    to: [ops@example.com]
  - name: blog-milestones
    match: {site: demo, path: "/blog/*", exclude_bots: true}
    milestones: [100, 1000, 10000]
    window: lifetime
    to: [editors@example.com]
YAML
echo "run: config $data/hitcount.yaml; emails go to $root/outbox; /metrics on $listen; Ctrl-C stops" >&2
exec bin/hitcount run -config "$data/hitcount.yaml" -live 10s "${demo[@]}"
