#!/bin/bash
# Live-path walk benchmark (issue 13 item 1, issue 12): `find -printf '%s'`
# (readdir and a stat of every entry) of an N-file tree (default 100,000)
# on a loop XFS, through
#   nothing (native),
#   the plain libfuse passthrough (bench/fuse-passthrough, --dir-fds) of
#     the same native tree, as most FUSE servers answer (READDIR, then
#     a LOOKUP per entry) and with --readdirplus (each entry's attributes
#     with the listing, as ovsnapd answers): the floor FUSE itself sets,
#   ovsnapd's live path (the snapshot mount over SRC, a copy of the tree
#     on the same image, unchanged since the take),
#   and, with OVSNAP_BASE=path/to/an/older/ovsnap, the live path of that
#     build's ovsnapd over a second copy of the tree on the same image: the
#     baseline of the same run,
# cold (drop_caches before each walk) and warm (the same walk again at
# once), and a walk of one folder of 1,000 files after a create in it
# (the kernel drops its listing: all of it is asked again, the objects
# known; not ls -l, whose GETXATTR per file would dominate), the second
# and the third time in a row (ovsnapd finds them by handle the first
# time, opens and caches them the second, only stats them from the
# third), the targets taking turns over ROUNDS (default 5) rounds, the
# order rotating each round; medians reported, with the CPU time the
# serving process spent (user + system, all its threads) per walk.
#
# PROFILE=1 adds, after the timed rounds, one cold walk per target traced
# for where the time goes: the FUSE requests it cost per file (the
# fuse:fuse_request_send tracepoint, kernel 6.16+), and the system calls
# of the serving process per file (strace -c -f, which slows it: counts
# only, not times).
#
# Run as root: `bash bench/run.sh live-walk`, or
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   FUSE_PASSTHROUGH=build/bench/fuse-passthrough bash bench/live-walk-bench.sh [N]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

N=${1:-${N:-100000}}
ROUNDS=${ROUNDS:-5}
BASE=${OVSNAP_BASE:-}
case $N in '' | *[!0-9]*) echo "live-walk-bench: N must be a number of files" >&2; exit 2 ;; esac
case $ROUNDS in '' | 0 | *[!0-9]*) echo "live-walk-bench: ROUNDS must be a positive number" >&2; exit 2 ;; esac
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$(dirname "$FILEOPS")/fuse-passthrough}
[ -x "$FUSE_PASSTHROUGH" ] || { echo "live-walk-bench: no fuse-passthrough at $FUSE_PASSTHROUGH" >&2; exit 1; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "live-walk-bench: OVSNAP_BASE $BASE is not executable" >&2; exit 1; }
# each build finds its own ovsnapd next to it
unset OVSNAPD

# The passthroughs end when bench_cleanup unmounts them.
bench_setup live-walk
pt_pids=()

bench_header "ovsnap live-path walk benchmark"
echo "tree: $N empty files in folders of 1000; rounds: $ROUNDS, targets in turn (order rotating), medians"
echo "cold: drop_caches before the walk; warm: the same walk again at once"
echo "libfuse: $(ldd "$FUSE_PASSTHROUGH" | awk '/libfuse3/ { print $3 }') (passthrough), $(ldd "$(dirname "$OVSNAP")/ovsnapd" | awk '/libfuse3/ { print $3 }') (ovsnapd)"
echo

mkimg xfs "$(( (N / 100000 + 1) * 3 ))G"
x=$work/xfs
# Native and the passthroughs walk a tree of their own: the relists
# create files, which must not reach a volume's SRC behind its mount.
mkdir -p "$x/src" "$x/plain" "$work/pt" "$work/ptplus"
mktree "$x/src/tree" "$N"
mktree "$x/plain/tree" "$N"
if [ -n "$BASE" ]; then
	mkdir -p "$x/srcb"
	mktree "$x/srcb/tree" "$N"
fi
sync
"$OVSNAP" take "$x/src" >/dev/null
[ -z "$BASE" ] || "$BASE" take "$x/srcb" >/dev/null
passthrough_mount "$x/plain" "$work/pt" --dir-fds
pt_pids+=("$PASSTHROUGH_PID")
passthrough_mount "$x/plain" "$work/ptplus" --dir-fds --readdirplus
pt_pids+=("$PASSTHROUGH_PID")

declare -A dir=([native]=$x/plain/tree [passthrough]=$work/pt/tree
	       [ptplus]=$work/ptplus/tree [live]=$x/src/tree)
declare -A pid=([native]= [passthrough]=${pt_pids[0]} [ptplus]=${pt_pids[1]})
declare -A label=([native]="native" [passthrough]="plain passthrough (READDIR + LOOKUPs)"
		  [ptplus]="plain passthrough --readdirplus" [live]="live path (ovsnapd)"
		  [base]="live path, OVSNAP_BASE's ovsnapd")
targets=(native passthrough ptplus live)
if [ -n "$BASE" ]; then
	dir[base]=$x/srcb/tree
	targets+=(base)
fi
for p in $(bench_our_daemons); do
	[ "$(cat "/proc/$p/comm")" = ovsnapd ] || continue
	case " $(tr '\0' ' ' <"/proc/$p/cmdline") " in
	*" $x/src "*) pid[live]=$p ;;
	*" $x/srcb "*) pid[base]=$p ;;
	esac
done
for t in live ${BASE:+base}; do
	[ -n "${pid[$t]:-}" ] || { echo "live-walk-bench: no ovsnapd found for $t" >&2; exit 1; }
done

walk() { # DIR
	time_ms find "$1" -printf '%s\n' 2>>"$work/walk.err"
}
relist() { # DIR ROUND: a create in DIR/d0 and a walk of it, twice, the second timed
	touch "$1/d0/relist.$2"
	find "$1/d0" -printf '%s\n' >/dev/null 2>>"$work/walk.err"
	touch "$1/d0/relist.$2.again"
	time_ms find "$1/d0" -printf '%s\n' 2>>"$work/walk.err"
}
relist3() { # DIR ROUND: the same in DIR/d1 three times, the third timed
	touch "$1/d1/relist.$2"
	find "$1/d1" -printf '%s\n' >/dev/null 2>>"$work/walk.err"
	touch "$1/d1/relist.$2.again"
	find "$1/d1" -printf '%s\n' >/dev/null 2>>"$work/walk.err"
	touch "$1/d1/relist.$2.third"
	time_ms find "$1/d1" -printf '%s\n' 2>>"$work/walk.err"
}

declare -A vals cpus
for ((r = 0; r < ROUNDS; r++)); do
	for ((k = 0; k < ${#targets[@]}; k++)); do
		t=${targets[(k + r) % ${#targets[@]}]}
		for kind in cold warm relist relist3; do
			[ "$kind" = cold ] && drop_caches
			if [ "$kind" = relist ] || [ "$kind" = relist3 ]; then
				round_measure "$kind,$t" "${pid[$t]:-}" "$kind" "${dir[$t]}" "$r"
			else
				round_measure "$kind,$t" "${pid[$t]:-}" walk "${dir[$t]}"
			fi
		done
	done
done
[ -s "$work/walk.err" ] && echo "walk errors: $(wc -l <"$work/walk.err"), e.g. $(head -1 "$work/walk.err")"

for kind in cold warm relist relist3; do
	case $kind in
	relist) echo "find -printf %s of a folder of 1000 files after a create in it (ms, median of $ROUNDS; CPU: the serving process's ms)" ;;
	relist3) echo "the same, the third time in a row (ms, median of $ROUNDS; CPU: the serving process's ms)" ;;
	*) echo "find -printf %s of $N files, $kind (ms, median of $ROUNDS; CPU: the serving process's ms)" ;;
	esac
	n=$(round_median "$kind,native") p=$(round_median "$kind,passthrough") pp=$(round_median "$kind,ptplus")
	row "" "median" "x native" "CPU ms" "rounds"
	for t in "${targets[@]}"; do
		m=$(round_median "$kind,$t")
		row "${label[$t]}" "$m" "$(ratio "$m" "$n")" "$(round_cpu "$kind,$t")" "${vals[$kind,$t]}"
	done
	l=$(round_median "$kind,live")
	echo "live path speed / plain passthrough: $(ratio "$p" "$l")x; / passthrough --readdirplus: $(ratio "$pp" "$l")x"
	[ -z "$BASE" ] || echo "live path speed / OVSNAP_BASE's: $(ratio "$(round_median "$kind,base")" "$l")x"
	echo
done

[ "${PROFILE:-0}" = 1 ] || exit 0

# ---- where the time goes: requests and system calls per file -------------
tr=/sys/kernel/tracing
[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null || true
inst=
if [ -d "$tr/events/fuse/fuse_request_send" ]; then
	inst=$tr/instances/ovsnap-live-walk.$$
	mkdir "$inst"
	echo 16384 >"$inst/buffer_size_kb"
	trap 'echo 0 >"$inst/events/fuse/fuse_request_send/enable" 2>/dev/null; rmdir "$inst" 2>/dev/null; bench_cleanup' EXIT
fi
requests() { # TARGET: FUSE requests of a cold walk per file, by opcode
	local dev

	[ -n "$inst" ] || { echo "(no fuse tracepoints)"; return; }
	dev=$(mountpoint -d "$(dirname "${dir[$1]}")" | awk -F: '{ print $1 * 1048576 + $2 }')
	drop_caches
	echo >"$inst/trace"
	echo "connection == $dev" >"$inst/events/fuse/fuse_request_send/filter"
	echo 1 >"$inst/events/fuse/fuse_request_send/enable"
	walk "${dir[$1]}" >/dev/null
	echo 0 >"$inst/events/fuse/fuse_request_send/enable"
	grep -o '(FUSE_[A-Z_0-9]*)' "$inst/trace" | tr -d '()' | sed 's/^FUSE_//' |
		sort | uniq -c | awk -v n="$N" '{ printf "%s=%.3f ", $2, $1 / n }'
	grep -q 'LOST' "$inst/trace" && printf '(events lost) '
	echo
}
syscalls() { # TARGET: system calls of the serving process in a cold walk, per file
	local s

	command -v strace >/dev/null || { echo "(no strace)"; return; }
	drop_caches
	strace -c -f -q -p "${pid[$1]}" -o "$work/strace.$1" &
	s=$!
	sleep 1
	walk "${dir[$1]}" >/dev/null
	kill -INT "$s"
	wait "$s" 2>/dev/null || true
	# % time, seconds, usecs/call, calls, [errors,] syscall
	awk -v n="$N" '$NF != "total" && $4 ~ /^[0-9]+$/ && NF >= 5 {
		printf "%s=%.3f ", $NF, $4 / n }' "$work/strace.$1"
	echo
}
echo "per file, one cold walk each (FUSE requests by opcode; the serving process's system calls)"
for t in "${targets[@]}"; do
	[ "$t" = native ] && continue
	echo "${label[$t]}:"
	echo "  requests: $(requests "$t")"
	echo "  syscalls: $(syscalls "$t")"
done
