#!/usr/bin/env bash
# Server mode on one machine: sets up what is missing and runs the whole
# job against a ClickHouse server of its own, the collector shipping an
# access log into it (the one you give, or live demo traffic), the sweeper
# emailing threshold crossings into the run's outbox as .eml files, and
# every 10 s the top pages counted so far. Ctrl-C (or SIGTERM) stops it all
# cleanly, and the script exits.
#
# Each run has a directory of its own (scripts/layout.sh):
#   ./data/server/demo/    no log given: demo traffic (access.log), site "demo"
#   ./data/server/SITE/    a log you give, as site SITE (--site, or from the file name)
# holding hitcount.yaml (the collector's) and sweeper.yaml (written at each
# start), clickhouse/ (the server: data, config, logs), state/,
# sweeper-state/ and outbox/.
# Usage: scripts/run-server.sh [--site SITE] [ACCESS_LOG [FORMAT]]
#        (the README's first command, scripts/run.sh, runs the embedded engine instead)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
. scripts/layout.sh

site=""
if [ "${1:-}" = "--site" ]; then
	[ $# -ge 3 ] || { echo "run: --site SITE goes with an access log: scripts/run-server.sh --site SITE ACCESS_LOG [FORMAT]" >&2; exit 2; }
	site="$2"
	shift 2
fi
log="${1:-}"
format="${2:-auto}"
if [ -n "$log" ] && [ "$log" != "--check-log" ]; then
	[ -r "$log" ] && [ -f "$log" ] || { echo "run: cannot read $log" >&2; exit 1; }
	log="$(cd "$(dirname "$log")" && pwd)/$(basename "$log")"
	[ -n "$site" ] || site="$(site_of "$log")"
	check_site "$site" || exit 2
fi

build
if [ "$log" = "--check-log" ]; then
	exec bin/collector -check-log "$2" -format "${3:-auto}"
fi
scripts/setup.sh

if [ -z "$log" ]; then
	site=demo
	dir="$data/server/demo"
	log="$dir/access.log"
	start_at=beginning # every demo line counts
else
	dir="$data/server/$site"
	start_at=end # a busy site's history would trip the rules' old windows at once
fi
old_layout_note
mkdir -p "$dir/clickhouse"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
cat >"$dir/clickhouse/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/clickhouse/server.log</log><errorlog>$dir/clickhouse/error.log</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>$port</tcp_port>
  <path>$dir/clickhouse/db/</path>
  <tmp_path>$dir/clickhouse/tmp/</tmp_path>
  <user_files_path>$dir/clickhouse/user_files/</user_files_path>
  <format_schema_path>$dir/clickhouse/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
XML
cat >"$dir/clickhouse/users.xml" <<'XML'
<?xml version="1.0"?>
<yandex>
  <profiles><default><poll_interval>1</poll_interval></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
XML
pids=()
sleeper=""
# Children run in their own sessions so that Ctrl-C reaches only this script,
# which stops them in reverse order: the collector flushes into a server that
# is still up.
cleanup() {
	trap - INT TERM EXIT
	[ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
# A signal stops the children and then the script: a trap that only
# returned would go back to the loop below, which prints for ever.
stop() {
	cleanup
	echo "run: stopped" >&2
	exit 0
}
trap stop INT TERM
trap cleanup EXIT
setsid /usr/sbin/clickhouse-server --config-file="$dir/clickhouse/config.xml" >"$dir/clickhouse/stdout.log" 2>&1 &
pids+=($!)

if [ "$site" = demo ]; then
	setsid bin/loggen -rate 200 -o "$log" &
	pids+=($!)
	echo "run: no log given; writing live demo traffic (200 requests/s) to $log" >&2
else
	echo "run: shipping $log as site \"$site\" into the server under $dir (read from its end on the first start; --site SITE names it otherwise)" >&2
fi
cat >"$dir/hitcount.yaml" <<YAML
# Written by scripts/run-server.sh at each start: the collector's config
# (sweeper.yaml is the same with its own http.listen and state_dir).
clickhouse:
  addr: [127.0.0.1:$port]
  database: hitcount
sources:
  - path: $log
    format: $format
    site: "$site"
    start_at: $start_at
batch: {rows: 50000, delay: 1s}
http: {listen: "127.0.0.1:$(free_port)"}
state_dir: ./state
outbox: ./outbox
sweep: {every: 30s, lateness: 5m}
rules:
  # With the demo's 200 requests/s these cross within a minute or two.
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
setsid bin/collector -config "$dir/hitcount.yaml" &
pids+=($!)
# The sweeper's ops endpoint needs its own port, and its own state.
sed -e "s|listen: \"127.0.0.1:[0-9]*\"|listen: \"127.0.0.1:$(free_port)\"|" -e "s|state_dir: ./state|state_dir: ./sweeper-state|" \
	"$dir/hitcount.yaml" >"$dir/sweeper.yaml"
setsid bin/sweeper -config "$dir/sweeper.yaml" &
pids+=($!)
echo "run: collector shipping $log into ClickHouse on 127.0.0.1:$port; sweeper writing crossings to $dir/outbox; Ctrl-C to stop" >&2
while :; do
	# In the background and waited for, so that a signal is handled at once,
	# not after the sleep.
	sleep 10 &
	sleeper=$!
	wait "$sleeper" || true
	clickhouse-client --port "$port" --query "SELECT path, sum(hits) AS hits FROM hitcount.hits_1m GROUP BY path ORDER BY hits DESC LIMIT 10 FORMAT PrettyCompact" 2>/dev/null || true
	echo "emails in $dir/outbox: $(ls "$dir/outbox" 2>/dev/null | grep -c '\.eml$' || true)"
done
