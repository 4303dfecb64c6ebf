#!/usr/bin/env bash
# Whole-file parse-and-count: `collector -check-log` against `mtail --one_shot`
# running an equivalent per-path counter program, on the same generated combined
# log, in one run. Prints both rates and the ratio (target: >= 10x).
# Usage: bench/checklog-vs-mtail.sh [LINES]   (default 1,000,000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$PATH:/usr/local/go/bin"
command -v mtail >/dev/null || { echo "mtail missing: run scripts/setup.sh" >&2; exit 1; }
n="${1:-1000000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/" ./cmd/collector ./cmd/loggen
"$work/loggen" -n "$n" -o "$work/access.log"
mkdir "$work/progs"
# The same job as -check-log's top_paths: hits per path without the query string.
cat >"$work/progs/paths.mtail" <<'MTAIL'
counter hits by path
/^\S+ \S+ \S+ \[[^\]]+\] "[A-Z]+ (?P<path>[^ ?"]*)[^"]*" \d{3} \S+ "[^"]*" "[^"]*"$/ {
  hits[$path]++
}
MTAIL
now() { date +%s.%N; }
t0=$(now)
"$work/collector" -check-log "$work/access.log" -format combined >"$work/ours.json"
t1=$(now)
mtail -one_shot -one_shot_format json -progs "$work/progs" -logs "$work/access.log" -logtostderr=false -log_dir "$work" >"$work/mtail.json" 2>"$work/mtail.err"
t2=$(now)
python3 - "$n" "$t0" "$t1" "$t2" "$work/ours.json" "$work/mtail.json" <<'PY'
import json, sys
n, t0, t1, t2 = int(sys.argv[1]), *map(float, sys.argv[2:5])
ours = json.load(open(sys.argv[5]))
mt = json.load(open(sys.argv[6]))
# Both must have counted the same thing before their speeds mean anything.
top = {p: h for p, h in ours["top_paths"]}
m = {}
for v in mt.values():
    for metric in (v if isinstance(v, list) else [v]):
        if metric.get("Name") == "hits":
            for lv in metric.get("LabelValues", []):
                m[lv["Labels"][0]] = lv["Value"]["Value"]
mismatch = [p for p in top if m.get(p) != top[p]]
a, b = t1 - t0, t2 - t1
print(f"lines {n}: collector -check-log {a:.2f}s ({n/a:,.0f} lines/s), mtail --one_shot {b:.2f}s ({n/b:,.0f} lines/s), ratio {b/a:.1f}x")
print("counts agree on the top paths" if not mismatch else f"COUNTS DIFFER on {len(mismatch)} paths: {mismatch[:5]}")
sys.exit(1 if mismatch else 0)
PY
