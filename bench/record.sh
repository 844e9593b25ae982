#!/bin/bash
# Run benchmarks through bench/run.sh and keep the full output, with a
# description of the machine, in bench/results/<date>-<description>.txt.
#
#   bash bench/record.sh DESCRIPTION [NAME...]
#
# DESCRIPTION becomes part of the file name (letters, digits, '-').  The
# environment is passed on to run.sh (OVSNAP, OVSNAPD, FILEOPS, FUSE_PASSTHROUGH, BENCH_DIR).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
desc=$1
shift
case $desc in *[!A-Za-z0-9-]* | '') echo "record: bad description '$desc'" >&2; exit 2 ;; esac

mkdir -p "$here/results"
out=$here/results/$(date -u +%Y-%m-%d)-$desc.txt
{
	echo "# ovsnap benchmark results: $desc"
	echo "date:    $(date -u +%FT%TZ)"
	echo "commit:  $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo unknown)$(
		git -C "$here/.." diff --quiet HEAD -- cmd lib bench 2>/dev/null || echo ' (+ uncommitted changes)')"
	echo "kernel:  $(uname -r)"
	echo "cpu:     $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
	echo "memory:  $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "disk:    $(df -P "${BENCH_DIR:-/var/tmp}" | awk 'NR == 2 { print $1 }') under ${BENCH_DIR:-/var/tmp} (images are loop files on it)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the start"
	echo "limits:  open files $(ulimit -Sn) soft, $(ulimit -Hn) hard"
	echo
} >"$out"
status=0
bash "$here/run.sh" "$@" 2>&1 | tee -a "$out" || status=$?
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out"
echo "record: wrote $out" >&2
exit "$status"
