#!/bin/bash
# Lookups while files are deleted (issue 13 item 2): a volume on XFS with
# folders L (${LOOKUPS:-60000} empty files) and D (${FILES:-20000} files
# of 4 KiB made through the mount after the take, so that the daemon's
# nodes of most of them hold no fd: its fd cache keeps at most 4096).  D's
# files are deleted through the mount (ovs-fileops delete) while a loop
# stat's L's files, each one a LOOKUP, until the delete ends: the lookups'
# median and longest latency, and the delete's time.  With bpftrace
# installed, also the daemon's open_by_handle_at calls (how many failed,
# how many took over 0.5 ms, the longest): made under the daemon's node
# lock (as before 2026-12-07), a slow one holds up every lookup.
# With OVSNAPD_BASE=/path/to/ovsnapd (another build), its daemon serves
# an identical fresh volume in the same rounds, in turns; ${ROUNDS:-2}
# rounds, each one's figures printed.
# Run as root: OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   bash bench/removal-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

LOOKUPS=${LOOKUPS:-60000}
FILES=${FILES:-20000}
ROUNDS=${ROUNDS:-2}
OVSNAPD_BASE=${OVSNAPD_BASE:-}
OVSNAPD_NEW=${OVSNAPD:-$(dirname "$OVSNAP")/ovsnapd}

bench_setup removal
bench_header "ovsnap: lookups while files are deleted"
echo "L: $LOOKUPS files; D: $FILES files of 4 KiB; $ROUNDS round(s)"
[ -n "$OVSNAPD_BASE" ] && echo "base: $OVSNAPD_BASE"
command -v bpftrace >/dev/null || echo "(no bpftrace: the daemon's system calls are not traced)"
mkimg xfs "${IMG_SIZE:-4G}"
nvol=0

cat >"$work/probe.py" <<'PY'
import os, sys, time
top, n, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lat = []
for i in range(n):
    if os.path.exists(stop):
        break
    t = time.perf_counter()
    os.stat("%s/f%08d" % (top, i))
    lat.append(time.perf_counter() - t)
if not lat:
    print("lookups 0 (the delete ended first)")
    sys.exit(0)
lat.sort()
k = len(lat)
print("lookups %d, median %.0f us, longest %.1f ms" % (k, lat[k // 2] * 1e6, lat[-1] * 1e3))
PY

# one_run NAME DAEMON: prints one line of figures
one_run() {
	local name=$1 d=$2 src pid bp= t0 t1 probe

	nvol=$((nvol + 1))
	src=$work/xfs/v$nvol
	mkdir -p "$src/L" "$src/D"
	"$FILEOPS" create "$src/L" "$LOOKUPS" 0 >/dev/null
	OVSNAPD=$d "$OVSNAP" take "$src" >/dev/null
	pid=$(bench_daemon_of "$src")
	[ -n "$pid" ] || { echo "bench: no daemon for $src" >&2; exit 1; }
	"$FILEOPS" create "$src/D" "$FILES" 4096 >/dev/null
	sync
	if command -v bpftrace >/dev/null; then
		bpftrace -e "
tracepoint:syscalls:sys_enter_open_by_handle_at /pid == $pid/ { @o[tid] = nsecs; }
tracepoint:syscalls:sys_exit_open_by_handle_at /@o[tid]/ {
	\$d = (nsecs - @o[tid]) / 1000; @opens = count(); @longest_us = max(\$d);
	if (args->ret < 0) { @failed = count(); }
	if (\$d > 500) { @over_500us = count(); }
	delete(@o[tid]); }
END { clear(@o); }" >"$work/bpf" 2>&1 &
		bp=$!
		sleep 3	# attached
	fi
	rm -f "$work/stop"
	t0=$(now)
	("$FILEOPS" delete "$src/D" "$FILES" >/dev/null; touch "$work/stop") &
	probe=$(python3 "$work/probe.py" "$src/L" "$LOOKUPS" "$work/stop")
	wait $!
	t1=$(now)
	printf '%-6s delete %s ms; %s' "$name" "$(ms "$t0" "$t1")" "$probe"
	if [ -n "$bp" ]; then
		kill -INT "$bp" 2>/dev/null || true
		wait "$bp" || true
		printf '; daemon: %s' "$(awk -F': *' '/^@/ { sub(/^@/, "", $1); printf "%s %s, ", $1, $2 }' "$work/bpf" | sed 's/, $//')"
	fi
	echo
	"$OVSNAP" deactivate "$src" >/dev/null
}

echo
for ((r = 1; r <= ROUNDS; r++)); do
	one_run "new" "$OVSNAPD_NEW"
	[ -n "$OVSNAPD_BASE" ] && one_run "base" "$OVSNAPD_BASE"
done
exit 0
