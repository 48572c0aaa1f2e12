#!/usr/bin/env bash
# Issue 4's targets measured in rounds, each with the host's steal beside it (perf/README.md).
#
#   perf/rounds.sh [ROUNDS] [BENCH]
#
# A round is one `producer-filter-map-inproc --seconds 8 --shards 1` run (≥ 20 M rows/s) and one
# `producer-filter-map --seconds 8 --shards 1 --batch-rows 1024 --half-load --pin` run (full speed
# over loopback ≥ 5 M rows/s, then p99 ≤ 1 ms at half that rate). Prints one markdown table row
# per round and how many rounds met each target. BENCH defaults to the release build of
# nervix-bench in CARGO_TARGET_DIR (or ./target). Needs python3 to read the JSON lines.
set -euo pipefail

rounds=${1:-4}
bench=${2:-${CARGO_TARGET_DIR:-target}/release/nervix-bench}
[ -x "$bench" ] || { echo "no bench binary at $bench (cargo build --release -p nervix-bench)" >&2; exit 2; }

# Prints the named fields of the JSON object on the last line of stdin, space-separated;
# a list prints as a/b.
fields() {
  python3 -c '
import json, sys
record = json.loads(sys.stdin.read().strip().splitlines()[-1])
def show(v):
    return "/".join(str(x) for x in v) if isinstance(v, list) else str(v)
print(" ".join(show(record.get(k)) for k in sys.argv[1:]))' "$@"
}

echo "| round | in-process rows/s | its steal ms | loopback rows/s | its steal ms | half-load p50 µs | p99 µs | max µs | 50 ms slots with a row > 1 ms | half-load steal ms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
met_inproc=0 met_loopback=0 met_p99=0
for round in $(seq "$rounds"); do
  read -r inproc inproc_steal < <("$bench" producer-filter-map-inproc --seconds 8 --shards 1 --json 2>/dev/null \
    | fields rows_per_sec host_steal_ms)
  read -r full full_steal p50 p99 max slow_slots slots half_steal < <("$bench" producer-filter-map --seconds 8 \
    --shards 1 --batch-rows 1024 --half-load --pin --json 2>/dev/null \
    | fields full_rows_per_sec full_host_steal_ms p50_us p99_us max_us slots_over_1ms slots_50ms \
      host_steal_ms)
  echo "| $round | $inproc | $inproc_steal | $full | $full_steal | $p50 | $p99 | $max | $slow_slots of $slots | $half_steal |"
  python3 -c "import sys; sys.exit(0 if float('$inproc') >= 20e6 else 1)" && met_inproc=$((met_inproc + 1))
  python3 -c "import sys; sys.exit(0 if float('$full') >= 5e6 else 1)" && met_loopback=$((met_loopback + 1))
  python3 -c "import sys; sys.exit(0 if float('$p99') <= 1000 else 1)" && met_p99=$((met_p99 + 1))
done
echo
echo "in-process >= 20 M rows/s: $met_inproc of $rounds; loopback >= 5 M rows/s: $met_loopback of $rounds; half-load p99 <= 1 ms: $met_p99 of $rounds"
