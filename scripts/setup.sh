#!/usr/bin/env bash
# Installs what hitcount's tests and embedded mode need, idempotently:
#   - Debian packages: the ClickHouse 18.16 server and client, ZooKeeper, an SMTP
#     server (aiosmtpd), mtail (benchmark baseline), nginx-light, wrk and
#     logrotate (the end-to-end test on real traffic), and for the deploy/ tests
#     docker-compose (validates the compose file; no Docker engine needed) and
#     systemd (systemd-analyze verifies the units; nothing is started);
#   - libchdb.so (the embedded ClickHouse engine) from the npm package
#     @chdb/lib-linux-x64-gnu, pinned and checksum-verified, unpacked into .cache/.
# Quick (well under a second) when everything is already there.
# Usage: scripts/setup.sh [--embedded-only]
set -euo pipefail

CHDB_VERSION="26.7.3-stable.1"
CHDB_SHA256="c0d32b129e988f2b9a9a31c9141aecf5e1e2453f9a079efc4d36ab8e3f92b2ad"
DEB_PACKAGES=(clickhouse-server clickhouse-client zookeeper python3-aiosmtpd mtail nginx-light wrk logrotate docker-compose systemd)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${HITCOUNT_CACHE:-$root/.cache}"
chdb_dir="$cache/chdb/$CHDB_VERSION"

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"
	elif command -v sudo >/dev/null 2>&1; then sudo "$@"
	else log "need root (or sudo) to run: $*"; exit 1
	fi
}

install_debs() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing Debian packages: ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The packages may start system services; the tests run their own instances on
	# their own ports, so stop the system ones if they came up.
	for svc in clickhouse-server zookeeper nginx; do
		as_root service "$svc" stop >/dev/null 2>&1 || true
	done
}

install_chdb() {
	if [ -f "$chdb_dir/libchdb.so" ] && [ -f "$chdb_dir/.verified" ]; then return 0; fi
	command -v npm >/dev/null 2>&1 || install_debs npm
	log "fetching libchdb.so $CHDB_VERSION from npm (@chdb/lib-linux-x64-gnu)"
	local tmp
	tmp="$(mktemp -d)"
	trap 'rm -rf "$tmp"' RETURN
	(cd "$tmp" && npm pack --silent "@chdb/lib-linux-x64-gnu@$CHDB_VERSION" >/dev/null 2>&1)
	local tgz
	tgz="$(ls "$tmp"/*.tgz)"
	local got
	got="$(sha256sum "$tgz" | cut -d' ' -f1)"
	if [ "$got" != "$CHDB_SHA256" ]; then
		log "checksum mismatch for $tgz: got $got, want $CHDB_SHA256"
		exit 1
	fi
	mkdir -p "$chdb_dir"
	tar -xzf "$tgz" -C "$tmp" package/libchdb.so
	mv "$tmp/package/libchdb.so" "$chdb_dir/libchdb.so"
	echo "$CHDB_SHA256" >"$chdb_dir/.verified"
	ln -sfn "$CHDB_VERSION" "$cache/chdb/current"
	log "libchdb.so at $chdb_dir/libchdb.so"
}

if [ "${1:-}" != "--embedded-only" ]; then
	install_debs "${DEB_PACKAGES[@]}"
fi
install_chdb
command -v go >/dev/null 2>&1 || { log "Go is not on PATH (expected /usr/local/go/bin); install Go >= 1.26"; exit 1; }
