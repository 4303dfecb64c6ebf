# Sourced by scripts/run.sh and scripts/run-server.sh: the one layout of
# ./data they share, and the checks both make before starting anything.
#
#   ./data/demo/             run.sh with no log: demo traffic, site "demo"
#   ./data/SITE/             run.sh ACCESS_LOG: that log as site SITE
#   ./data/server/demo/      run-server.sh with no log
#   ./data/server/SITE/      run-server.sh ACCESS_LOG
#
# Each run's directory holds the config it runs (hitcount.yaml, written at
# each start), its store (chdb/, or clickhouse/ for the server), the
# collector's state/ and the outbox/ of .eml files; the demo's also its
# access.log. Runs never share a store, a config or an outbox.

data="$root/data"
export PATH="$PATH:/usr/local/go/bin"

# build puts every binary into ./bin (static, no cgo).
build() {
	command -v go >/dev/null 2>&1 || { echo "run: Go is not installed (https://go.dev/dl/, >= 1.26)" >&2; exit 1; }
	mkdir -p "$root/bin"
	CGO_ENABLED=0 go build -o "$root/bin/" ./cmd/...
}

# port_in_use HOST:PORT succeeds when something already accepts connections
# there (port 0, "pick one", never is).
port_in_use() {
	local host="${1%:*}" port="${1##*:}"
	host="${host#[}"
	host="${host%]}"
	[ -n "$port" ] && [ "$port" != 0 ] || return 1
	[ -n "$host" ] || host=127.0.0.1
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null
}

# site_of LOG is the site a log is counted as when --site is not given: its
# file name without .gz, .log and an "access" part (www.example.com-access.log
# gives www.example.com); this machine's short host name when nothing is left
# (access.log).
site_of() {
	local b
	b="$(basename "$1")"
	b="${b%.gz}"
	b="${b%.log}"
	b="${b%access}"
	b="${b%[-_.]}"
	[ -n "$b" ] || b="$(hostname -s 2>/dev/null || true)"
	[ -n "$b" ] || b=local
	printf '%s' "$b" | tr -c 'A-Za-z0-9._-' '_'
}

# check_site SITE refuses names that would share a directory with another
# kind of run, or that are not a plain directory name.
check_site() {
	case "$1" in
	demo | server)
		echo "run: site \"$1\" is taken by the layout (./data/demo is the demo's, ./data/server run-server.sh's): give a log its own with --site SITE" >&2
		return 1
		;;
	"" | . | .. | *[!A-Za-z0-9._-]*)
		echo "run: site \"$1\": use letters, digits, '.', '_' and '-' only (it names the run's directory under ./data)" >&2
		return 1
		;;
	esac
}

# old_layout_note says where an older run.sh's files are: they are left as
# they were, and no longer used.
old_layout_note() {
	local old=()
	[ -f "$data/hitcount.yaml" ] && old+=("$data/hitcount.yaml")
	[ -f "$data/sweeper.yaml" ] && old+=("$data/sweeper.yaml")
	[ -e "$data/chdb/status" ] && old+=("$data/chdb")
	[ -d "$data/clickhouse/db" ] && old+=("$data/clickhouse")
	[ -d "$data/outbox" ] && [ ! -e "$data/outbox/hitcount.yaml" ] && old+=("$data/outbox")
	[ -d "$root/outbox" ] && old+=("$root/outbox")
	[ ${#old[@]} -eq 0 ] && return 0
	echo "run: ${old[*]} are from an older scripts/run.sh or run-server.sh, which shared them; each run now has its own directory under $data (these are left as they are: delete them when done)" >&2
}
