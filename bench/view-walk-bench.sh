#!/bin/bash
# View walk benchmark (issue 12 item 4): `find -printf '%s'` (readdir and a
# stat of every entry) of an N-file tree (default 100,000), cold caches,
#   natively on the real directory,
#   through the plain libfuse passthrough (bench/fuse-passthrough) over
#     that same real directory, as it is (READDIR, then a LOOKUP per entry)
#     and with --readdirplus (each entry's attributes with the listing, as
#     the view answers): the floor FUSE itself sets,
#   through a view (ovsnap-viewd) of a snapshot of it, the tree still in
#     SRC (unchanged since the take: every answer validated against U_n),
# and, where python3 is there, an lstat of each of the N files by its name
# with no listing before (one LOOKUP per file, what readdirplus cannot
# answer: tools given a list of names, a shell expanding a path),
# the targets taking turns over $ROUNDS rounds (the order rotates each
# round), medians reported.  Target: the view walks at >= 0.9x the
# passthrough's speed (passthrough time / view time), quoted against both.
# Run as root: `bash bench/run.sh view-walk`, or
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   FUSE_PASSTHROUGH=build/bench/fuse-passthrough bash bench/view-walk-bench.sh [N]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

N=${1:-${N:-100000}}
ROUNDS=${ROUNDS:-3}
case $N in '' | *[!0-9]*) echo "view-walk-bench: N must be a number of files" >&2; exit 2 ;; esac
case $ROUNDS in '' | 0 | *[!0-9]*) echo "view-walk-bench: ROUNDS must be a positive number" >&2; exit 2 ;; esac
PT=${FUSE_PASSTHROUGH:-$(dirname "$FILEOPS")/fuse-passthrough}
[ -x "$PT" ] || { echo "view-walk-bench: no fuse-passthrough at $PT (make bench/fuse-passthrough)" >&2; exit 1; }

bench_setup view-walk
pt_pids=()
pt_cleanup() {
	local p

	# the passthroughs' mounts go with bench_unmount_all, then their processes
	bench_cleanup
	for p in "${pt_pids[@]}"; do kill "$p" 2>/dev/null; done
	return 0
}
trap pt_cleanup EXIT

bench_header "ovsnap view walk benchmark"
echo "tree: $N empty files in folders of 1000; cold caches (drop_caches before each walk)"
echo "rounds: $ROUNDS, targets in turn (order rotating), medians"
echo

mkimg xfs "$(( (N / 100000 + 1) * 2 ))G"
src=$work/xfs/src
mkdir -p "$src" "$work/real" "$work/pt" "$work/ptplus" "$work/view"
mktree "$src/tree" "$N"
sync
"$OVSNAP" take "$src" >/dev/null
# The real directory below the snapshot mount: a bind of the XFS mount
# without its submounts (not --rbind), so the snapshot mount is not in it.
mount --bind "$work/xfs" "$work/real"
real=$work/real/src/tree

pt_mount() { # MOUNTPOINT [OPTION]: a passthrough of the real SRC there
	local mnt=$1

	shift
	# --dir-fds: 100,000 O_PATH fds would exceed a hard limit of 20,000
	"$PT" --dir-fds "$@" "$work/real/src" "$mnt" 2>"$mnt.err" &
	pt_pids+=($!)
	for _ in $(seq 100); do
		findmnt -rn "$mnt" >/dev/null && return 0
		sleep 0.05
	done
	echo "view-walk-bench: the passthrough did not mount at $mnt: $(cat "$mnt.err")" >&2
	exit 1
}
pt_mount "$work/pt"
pt_mount "$work/ptplus" --readdirplus
"$OVSNAP" mount "$src" 1 "$work/view" >/dev/null

walk() { # DIR: cold find -printf '%s' of every entry; errors counted
	drop_caches
	time_ms find "$1" -printf '%s\n' 2>>"$work/walk.err"
}
# DIR: cold lstat of every file of mktree's layout by name, no readdir
bynames() {
	drop_caches
	time_ms python3 -c '
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.lstat("%s/d%d/f%d" % (root, i // 1000, i % 1000 + 1))' "$1" "$N" 2>>"$work/walk.err"
}
kinds=(walk)
command -v python3 >/dev/null && kinds+=(bynames)

declare -A dir=([native]=$real [passthrough]=$work/pt/tree [ptplus]=$work/ptplus/tree
	       [view]=$work/view/tree)
# Where the time goes: the CPU time the serving process spent per walk
# (user + system, all its threads), against the walk's wall time.
declare -A pid=([native]= [passthrough]=${pt_pids[0]} [ptplus]=${pt_pids[1]})
for p in $(bench_our_daemons); do
	[ "$(cat "/proc/$p/comm")" = ovsnap-viewd ] && pid[view]=$p
done
declare -A vals cpus
targets=(native passthrough ptplus view)
for ((r = 0; r < ROUNDS; r++)); do
	for ((k = 0; k < ${#targets[@]}; k++)); do
		t=${targets[(k + r) % ${#targets[@]}]}
		for kind in "${kinds[@]}"; do
			round_measure "$kind,$t" "${pid[$t]}" "$kind" "${dir[$t]}"
		done
	done
done
[ -s "$work/walk.err" ] && echo "walk errors: $(wc -l <"$work/walk.err"), e.g. $(head -1 "$work/walk.err")"

for kind in "${kinds[@]}"; do
	case $kind in
	walk) echo "find -printf %s of $N files (ms, median of $ROUNDS)" ;;
	bynames) echo "lstat of $N files by name, no listing (ms, median of $ROUNDS)" ;;
	esac
	n=$(round_median "$kind,native") p=$(round_median "$kind,passthrough") pp=$(round_median "$kind,ptplus")
	v=$(round_median "$kind,view")
	row "" "median" "x native" "speed" "rounds"
	row "native" "$n" "1.00" "1.00" "${vals[$kind,native]}"
	row "plain passthrough" "$p" "$(ratio "$p" "$n")" "$(ratio "$n" "$p")" "${vals[$kind,passthrough]}"
	row "plain passthrough --readdirplus" "$pp" "$(ratio "$pp" "$n")" "$(ratio "$n" "$pp")" "${vals[$kind,ptplus]}"
	row "view (ovsnap-viewd), tree in SRC" "$v" "$(ratio "$v" "$n")" "$(ratio "$n" "$v")" "${vals[$kind,view]}"
	echo "CPU time of the serving process (ms, median): plain passthrough $(round_cpu "$kind,passthrough"),"
	echo "  --readdirplus $(round_cpu "$kind,ptplus"), ovsnap-viewd $(round_cpu "$kind,view")"
	echo "view speed / plain passthrough speed: $(ratio "$p" "$v")x (target >= 0.9)"
	echo "view speed / passthrough --readdirplus speed: $(ratio "$pp" "$v")x"
	echo
done
