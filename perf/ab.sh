#!/usr/bin/env bash
# Two builds of nervix-bench against each other on one scenario, alternating which runs first
# in each round, so minutes of host steal fall on both (perf/README.md).
#
#   perf/ab.sh ROUNDS BENCH_A BENCH_B SCENARIO [ARGS...]
#
# Prints one line per run: round, build, and the JSON fields named in FIELDS (default
# "rows_per_sec p99_us host_steal_ms"; for Nexmark e.g. FIELDS="events_per_sec_per_shard
# events_per_shard_cpu_s rows_out reference_rows host_steal_ms"). `--json` is added to ARGS.
# Needs python3 to read the JSON lines.
set -euo pipefail

[ $# -ge 4 ] || { sed -n 5,10p "$0" >&2; exit 2; }
rounds=$1 a=$2 b=$3
shift 3
fields=${FIELDS:-rows_per_sec p99_us host_steal_ms}
here=$(dirname "$0")

run() {
  local round=$1 build=$2 line
  # shellcheck disable=SC2086 # FIELDS is a list of words
  line=$("$build" "${@:3}" --json 2>/dev/null | python3 "$here/json_fields.py" $fields)
  echo "$round $build $line"
}

for round in $(seq "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then
    run "$round" "$a" "$@"; run "$round" "$b" "$@"
  else
    run "$round" "$b" "$@"; run "$round" "$a" "$@"
  fi
done
