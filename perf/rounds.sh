#!/usr/bin/env bash
# Issue 4's targets measured in rounds, each with the host's steal beside it (perf/README.md).
#
#   perf/rounds.sh [ROUNDS] [BENCH]
#
# A round is one `producer-filter-map-inproc --seconds 8 --shards 1` run (≥ 20 M rows/s) and one
# `producer-filter-map --seconds 8 --shards 1 --batch-rows 1024 --half-load --pin` run (full speed
# over loopback ≥ 5 M rows/s, then p99 ≤ 1 ms at half that rate). Prints one markdown table row
# per round (with a 2 s `host-gaps` probe of the machine before it) and how many rounds met each
# target. BENCH defaults to the release build of nervix-bench in CARGO_TARGET_DIR (or ./target).
# Needs python3 to read the JSON lines.
set -euo pipefail

rounds=${1:-4}
bench=${2:-${CARGO_TARGET_DIR:-target}/release/nervix-bench}
[ -x "$bench" ] || { echo "no bench binary at $bench (cargo build --release -p nervix-bench)" >&2; exit 2; }

here=$(dirname "$0")
fields() { python3 "$here/json_fields.py" "$@"; }
at_least() { awk -v x="$1" -v bound="$2" 'BEGIN { exit !(x + 0 >= bound + 0) }'; }
at_most() { awk -v x="$1" -v bound="$2" 'BEGIN { exit !(x + 0 <= bound + 0) }'; }

echo "| round | host gaps ≥ 400 µs in 2 s, per CPU | in-process rows/s | its steal ms | loopback rows/s | its steal ms | half-load p50 µs | p99 µs | max µs | 50 ms slots with a row > 1 ms | half-load steal ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
met_inproc=0 met_loopback=0 met_p99=0
for round in $(seq "$rounds"); do
  host_gaps=$("$bench" host-gaps --seconds 2 --threshold-us 400 --json 2>/dev/null | fields 'cpus[].gaps')
  read -r inproc inproc_steal < <("$bench" producer-filter-map-inproc --seconds 8 --shards 1 --json 2>/dev/null \
    | fields rows_per_sec host_steal_ms)
  read -r full full_steal p50 p99 max slow_slots slots half_steal < <("$bench" producer-filter-map --seconds 8 \
    --shards 1 --batch-rows 1024 --half-load --pin --json 2>/dev/null \
    | fields full_rows_per_sec full_host_steal_ms p50_us p99_us max_us slots_over_1ms slots_50ms \
      host_steal_ms)
  echo "| $round | $host_gaps | $inproc | $inproc_steal | $full | $full_steal | $p50 | $p99 | $max | $slow_slots of $slots | $half_steal |"
  at_least "$inproc" 20e6 && met_inproc=$((met_inproc + 1))
  at_least "$full" 5e6 && met_loopback=$((met_loopback + 1))
  at_most "$p99" 1000 && met_p99=$((met_p99 + 1))
done
echo
echo "in-process >= 20 M rows/s: $met_inproc of $rounds; loopback >= 5 M rows/s: $met_loopback of $rounds; half-load p99 <= 1 ms: $met_p99 of $rounds"
