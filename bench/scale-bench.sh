#!/bin/bash
# Scale benchmark (issue 13): a tree of N files (default 100,000; the
# issue's figure is 10^6) made natively on a loop XFS, then
#   the first take's time (it scans the tree for hard links) and a second
#   take's (nothing changed: the target is flat, under 50 ms),
#   `find -printf '%s'` (a stat of every entry), cold caches, natively
#   (before the take), through the live path (the snapshot mount) and
#   through a view of the snapshot, each as a ratio to native,
#   and the resident memory of ovsnapd and ovsnap-viewd after the walks,
#   with what that makes per file the kernel keeps cached.
# Run as root: `bash bench/run.sh scale`, or
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops bash bench/scale-bench.sh [N]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

N=${1:-${N:-100000}}
case $N in '' | *[!0-9]*) echo "scale-bench: N must be a number of files" >&2; exit 2 ;; esac

bench_setup scale
bench_header "ovsnap scale benchmark"
echo "tree: $N empty files in folders of 1000; walks with cold caches (drop_caches before each)"
echo "ratio = time / native time (1.00 = as fast as native)"
echo

# XFS inodes are 512 bytes: 10^6 files need about 1 GiB of metadata
mkimg xfs "$(( (N / 100000 + 1) * 2 ))G"
src=$work/xfs/src
view=$work/view
mkdir -p "$src" "$view"

pid_of() { # COMM: our daemon of that name
	local p

	for p in $(bench_our_daemons); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] && { echo "$p"; return; }
	done
	return 0
}
rss_kb() { # PID
	[ -n "$1" ] && awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo "-"
}
fds_of() { # PID
	[ -n "$1" ] && ls "/proc/$1/fd" 2>/dev/null | wc -l || echo "-"
}
walk() { # DIR: cold find -printf '%s' of every entry; errors counted in $work/walk.err
	drop_caches
	time_ms find "$1" -printf '%s\n' 2>"$work/walk.err"
}
walk_errors() { # LABEL: one line on the errors of the last walk, if any
	local n

	n=$(wc -l <"$work/walk.err")
	[ "$n" -eq 0 ] || echo "$1: $n errors, e.g. $(head -1 "$work/walk.err")"
}

t0=$(now)
mktree "$src/tree" "$N"
sync
t1=$(now)
echo "setup: made $N files natively: $(ms "$t0" "$t1") ms"
nat=$(walk "$src/tree")
walk_errors "native walk" >"$work/errors"

t0=$(now)
"$OVSNAP" take "$src" >/dev/null
t1=$(now)
take1=$(ms "$t0" "$t1")
t0=$(now)
"$OVSNAP" take "$src" >/dev/null
t1=$(now)
take2=$(ms "$t0" "$t1")
d=$(pid_of ovsnapd)
d_rss0=$(rss_kb "$d")

live=$(walk "$src/tree")
walk_errors "live-path walk" >>"$work/errors"
d_rss=$(rss_kb "$d")
d_fds=$(fds_of "$d")

"$OVSNAP" mount "$src" 1 "$view" >/dev/null
v=$(pid_of ovsnap-viewd)
v_rss0=$(rss_kb "$v")
vw=$(walk "$view/tree")
walk_errors "view walk" >>"$work/errors"
v_rss=$(rss_kb "$v")
v_fds=$(fds_of "$v")
nodes=$(awk '/^fuse_inode / { print $2 }' /proc/slabinfo 2>/dev/null || echo "-")

row "what" "ms" "native ms" "ratio"
row "first take (hard-link scan of $N files)" "$take1" "" ""
row "second take (nothing changed)" "$take2" "" ""
row "find -printf %s, native" "$nat" "$nat" "1.00"
row "find -printf %s, live path (ovsnapd)" "$live" "$nat" "$(ratio "$live" "$nat")"
row "find -printf %s, view (ovsnap-viewd)" "$vw" "$nat" "$(ratio "$vw" "$nat")"
cat "$work/errors"
echo
echo "after the walks (fuse_inode objects in the kernel, all FUSE mounts: $nodes):"
per() { # KB_AFTER KB_BEFORE -> bytes per file
	awk -v a="$1" -v b="$2" -v n="$N" 'BEGIN {
		if (a !~ /^[0-9]+$/ || b !~ /^[0-9]+$/) print "-"
		else printf "%.0f", (a - b) * 1024 / n }'
}
printf '%-14s RSS %8s KiB (before the walk %8s KiB, %5s bytes per file); %s fds held\n' \
	ovsnapd "$d_rss" "$d_rss0" "$(per "$d_rss" "$d_rss0")" "$d_fds"
printf '%-14s RSS %8s KiB (before the walk %8s KiB, %5s bytes per file); %s fds held\n' \
	ovsnap-viewd "$v_rss" "$v_rss0" "$(per "$v_rss" "$v_rss0")" "$v_fds"
"$OVSNAP" umount "$view" >/dev/null || true
