#!/usr/bin/env bash
# Server mode on one machine: sets up what is missing and runs the whole
# job against a ClickHouse server of its own under ./data/clickhouse, the
# collector shipping an access log into it (the one you give, or live demo
# traffic generated into ./data/demo/access.log), the sweeper emailing threshold
# crossings into ./data/outbox as .eml files, and every 10 s the top pages
# counted so far. Ctrl-C stops it all cleanly.
# Usage: scripts/run-server.sh [ACCESS_LOG [FORMAT]]
#        (the README's first command, scripts/run.sh, runs the embedded engine instead)
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
scripts/setup.sh

data="$root/data"
mkdir -p "$data/clickhouse" "$data/demo"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
cat >"$data/clickhouse/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$data/clickhouse/server.log</log><errorlog>$data/clickhouse/error.log</errorlog></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>$port</tcp_port>
  <path>$data/clickhouse/db/</path>
  <tmp_path>$data/clickhouse/tmp/</tmp_path>
  <user_files_path>$data/clickhouse/user_files/</user_files_path>
  <format_schema_path>$data/clickhouse/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
XML
cat >"$data/clickhouse/users.xml" <<'XML'
<?xml version="1.0"?>
<yandex>
  <profiles><default><poll_interval>1</poll_interval></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
XML
pids=()
# Children run in their own sessions so that Ctrl-C reaches only this script,
# which stops them in reverse order: the collector flushes into a server that
# is still up.
cleanup() {
	trap - INT TERM EXIT
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap cleanup INT TERM EXIT
setsid /usr/sbin/clickhouse-server --config-file="$data/clickhouse/config.xml" >"$data/clickhouse/stdout.log" 2>&1 &
pids+=($!)

log="${1:-}"
format="${2:-auto}"
if [ -z "$log" ]; then
	log="$data/demo/access.log"
	setsid bin/loggen -rate 200 -o "$log" &
	pids+=($!)
	echo "run: no log given; writing live demo traffic (200 requests/s) to $log" >&2
fi
log="$(cd "$(dirname "$log")" && pwd)/$(basename "$log")"
cat >"$data/hitcount.yaml" <<YAML
clickhouse:
  addr: [127.0.0.1:$port]
  database: hitcount
sources:
  - path: $log
    format: $format
    site: demo
    start_at: beginning
batch: {rows: 50000, delay: 1s}
http: {listen: "127.0.0.1:0"}
state_dir: $data/state
outbox: $data/outbox
sweep: {every: 30s, lateness: 5m}
rules:
  # With the demo's 200 requests/s these cross within a minute or two.
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
# http listen 127.0.0.1:0 would pick a random port; give a fixed free one.
sed -i "s|127.0.0.1:0|127.0.0.1:$(free_port)|" "$data/hitcount.yaml"
setsid bin/collector -config "$data/hitcount.yaml" &
pids+=($!)
# The sweeper's ops endpoint needs its own port.
sed "s|listen: \"127.0.0.1:[0-9]*\"|listen: \"127.0.0.1:$(free_port)\"|" "$data/hitcount.yaml" >"$data/sweeper.yaml"
sed -i "s|state_dir: $data/state|state_dir: $data/sweeper-state|" "$data/sweeper.yaml"
setsid bin/sweeper -config "$data/sweeper.yaml" &
pids+=($!)
echo "run: collector shipping $log into ClickHouse on 127.0.0.1:$port; sweeper writing crossings to $data/outbox; Ctrl-C to stop" >&2
while sleep 10; do
	clickhouse-client --port "$port" --query "SELECT path, sum(hits) AS hits FROM hitcount.hits_1m GROUP BY path ORDER BY hits DESC LIMIT 10 FORMAT PrettyCompact" 2>/dev/null || true
	echo "emails in $data/outbox: $(ls "$data/outbox" 2>/dev/null | grep -c '\.eml$' || true)"
done
