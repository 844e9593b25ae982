#!/bin/bash
# Benchmark runner (skeleton): runs bench/NAME-bench.sh for each NAME given,
# or every bench/*-bench.sh without arguments (that is what `make bench`
# does).  Each benchmark creates and removes its own loop images and quotes
# its results as ratios against a baseline measured in the same run.
#
#   bash bench/run.sh --list          list the benchmarks, run nothing
#   bash bench/run.sh [NAME...]       run them (root; needs free space)
#
# Environment: OVSNAP, OVSNAPD, FILEOPS, FUSE_PASSTHROUGH (set by `make bench`), BENCH_DIR
# (where images go, default /var/tmp), BENCH_MIN_FREE_GB (default 13).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

list() {
	local f

	for f in "$here"/*-bench.sh; do
		[ -e "$f" ] || continue
		f=${f##*/}
		echo "${f%-bench.sh}"
	done
}

if [ "${1:-}" = --list ]; then
	list
	exit 0
fi
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
fi

names=("$@")
[ "${#names[@]}" -gt 0 ] || mapfile -t names < <(list)
if [ "${#names[@]}" -eq 0 ]; then
	echo "bench: no benchmarks in $here"
	exit 0
fi
for n in "${names[@]}"; do
	[ -f "$here/$n-bench.sh" ] || { echo "bench: no benchmark '$n' (try --list)" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "bench: run as root (benchmarks mount loop images)" >&2
	exit 1
fi
# Refuse up front rather than fill the disk halfway through.
free_gb=$(df -P -BG "${BENCH_DIR:-/var/tmp}" | awk 'NR == 2 { sub(/G/, "", $4); print $4 }')
if [ "$free_gb" -lt "${BENCH_MIN_FREE_GB:-13}" ]; then
	echo "bench: only ${free_gb} GiB free under ${BENCH_DIR:-/var/tmp}; need ${BENCH_MIN_FREE_GB:-13}" >&2
	exit 1
fi

status=0
for n in "${names[@]}"; do
	echo "==== $n"
	bash "$here/$n-bench.sh" || { status=$?; echo "bench: $n failed ($status)" >&2; }
done
exit "$status"
