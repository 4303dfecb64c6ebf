#!/usr/bin/env bash
# The README's first command: sets up what is missing (the embedded engine,
# libchdb.so) and runs the whole job in one process on the embedded store
# (standalone mode): the collector tailing the access log you give, or live
# demo traffic; the sweeper every 30 s with two sample rules, writing each
# crossing as an .eml file to the run's outbox; every 10 s a live view of the
# counts. Ctrl-C stops it cleanly.
#
# Each run has a directory of its own (scripts/layout.sh):
#   ./data/demo/    no log given: demo traffic (access.log), site "demo"
#   ./data/SITE/    a log you give, as site SITE (--site, or from the file name)
# holding hitcount.yaml (written at each start), chdb/ (the store), state/
# and outbox/. So a real log is never counted as the demo: its own site and
# store, read from its end, and crossings of its own.
# Usage: scripts/run.sh [--site SITE] [ACCESS_LOG [FORMAT]]
#        scripts/run.sh --check-log ACCESS_LOG [FORMAT]   (parse only, JSON report)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
. scripts/layout.sh

site=""
if [ "${1:-}" = "--site" ]; then
	[ $# -ge 3 ] || { echo "run: --site SITE goes with an access log: scripts/run.sh --site SITE ACCESS_LOG [FORMAT]" >&2; exit 2; }
	site="$2"
	shift 2
fi
log="${1:-}"
format="${2:-auto}"
listen="${HITCOUNT_HTTP_LISTEN:-127.0.0.1:9464}"
if [ "$log" != "--check-log" ]; then
	# Before building or starting anything.
	if port_in_use "$listen"; then
		echo "run: $listen, where hitcount serves /metrics, is in use by another process (another run.sh?): stop it, or choose a free address with HITCOUNT_HTTP_LISTEN=127.0.0.1:PORT" >&2
		exit 1
	fi
	if [ -n "$log" ]; then
		[ -r "$log" ] && [ -f "$log" ] || { echo "run: cannot read $log" >&2; exit 1; }
		log="$(cd "$(dirname "$log")" && pwd)/$(basename "$log")"
		[ -n "$site" ] || site="$(site_of "$log")"
		check_site "$site" || exit 2
	fi
fi

build
if [ "$log" = "--check-log" ]; then
	exec bin/collector -check-log "$2" -format "${3:-auto}"
fi
scripts/setup.sh --embedded-only

demo=()
if [ -z "$log" ]; then
	site=demo
	dir="$data/demo"
	log="$dir/access.log"
	demo=(-demo "$log" -demo-rate 200)
	echo "run: no log given; writing live demo traffic (200 requests/s) to $log" >&2
	start_at=beginning # every demo line counts
else
	dir="$data/$site"
	start_at=end # a busy site's history would trip the rules' old windows at once
	if [ -d "$dir/chdb" ]; then
		echo "run: shipping $log as site \"$site\" into $dir, resuming where the last run stopped" >&2
	else
		echo "run: shipping $log as site \"$site\" into $dir, a store of its own; read from its end: lines written from now on count (--site SITE names it otherwise)" >&2
	fi
fi
old_layout_note
mkdir -p "$dir"
# The sample rules: with the demo's 200 requests/s (about 15% on /pricing,
# some on /blog/*) both cross within the first sweeps.
cat >"$dir/hitcount.yaml" <<YAML
# Written by scripts/run.sh at each start; copy it to start your own (see
# docs/configuration.md). Relative paths are relative to this file.
embedded:
  path: ./chdb
sources:
  - path: $log
    format: $format
    site: "$site"
    start_at: $start_at
batch: {rows: 50000, delay: 1s}
# From HITCOUNT_HTTP_LISTEN (default 127.0.0.1:9464).
http: {listen: "$listen"}
state_dir: ./state
outbox: ./outbox
sweep: {every: 30s, lateness: 5m}
rules:
  - name: pricing-busy
    match: {site: "$site", path: /pricing}
    threshold: 500
    window: 5m
    to: [ops@example.com]
  - name: blog-milestones
    match: {site: "$site", path: "/blog/*", exclude_bots: true}
    milestones: [100, 1000, 10000]
    window: lifetime
    to: [editors@example.com]
YAML
echo "run: config $dir/hitcount.yaml; emails go to $dir/outbox; /metrics on $listen; Ctrl-C stops" >&2
exec bin/hitcount run -config "$dir/hitcount.yaml" -live 10s "${demo[@]}"
