#!/bin/bash
# How near a first change in an old folder can come to the plain FUSE
# passthrough (issue 12, item 1), in one run on one XFS image: N files of
# 4 KiB made in a folder before the take, then each chmodded to 0600 (the
# first change of each: a preserve) by
#   native      chmod on XFS, nothing preserved
#   engine      the library's preserve as ovsnapd calls it (ovs_preserve_object:
#               a clone ordered by XFS's log) and the chmod, no FUSE
#   meta        the least a metadata-only preserve (overlayfs' metacopy)
#               would do: create, two xattrs, times, rename; no data
#   pt-daemon   the plain passthrough (a session of its own, as a daemon):
#               FUSE's cost, nothing preserved
#   ovsnapd     the live path of a volume taken after the files were made
# Every preserve adds its own time to the change's, whatever serves it:
# the ceiling of ovsnapd's speed against the passthrough is
# pt / (pt + engine - native), and a metacopy design's pt / (pt + meta -
# native).  Targets take turns, round after round; medians per file.
#
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   OVS_PRESERVE=build/bench/ovs-preserve \
#   FUSE_PASSTHROUGH=build/bench/fuse-passthrough bash bench/preserve-floor-bench.sh
#
# N (default 5000) files, ROUNDS (default 5).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$PWD/bench/fuse-passthrough}
OVS_PRESERVE=${OVS_PRESERVE:-$PWD/bench/ovs-preserve}
N=${N:-5000}
ROUNDS=${ROUNDS:-5}
TARGETS="native engine meta fpd live"

bench_setup preserve-floor
for t in "$FUSE_PASSTHROUGH" "$OVS_PRESERVE"; do
	[ -x "$t" ] || { echo "bench: no $t (make ${t##*/build/})" >&2; exit 1; }
done
bench_header "ovsnap first-change floor benchmark (issue 12 item 1)"
echo "N=$N files per round and target, medians of $ROUNDS rounds"
mkimg xfs 6G
x=$work/xfs
mkdir -p "$x/native" "$x/engine" "$x/meta" "$x/fpd-real" "$x/fpd" "$x/live"
"$OVSNAP" take "$x/live" >/dev/null
start_passthrough "$x/fpd-real" "$x/fpd" own-session

declare -A runs
us() { awk -v ms="$1" -v n="$N" 'BEGIN { if (ms == "FAIL") print "FAIL"; else printf "%.1f", ms * 1000 / n }'; }
preserve_ms() { # ROUND MODE
	ns_ms "$OVS_PRESERVE" "$x/$2" "$x/$2.up.$1" "$x/$2.work.$1" "old.$1" "$N" "$2"
}

for ((r = 1; r <= ROUNDS; r++)); do
	for w in $TARGETS; do
		real=$x/$w
		[ "$w" = fpd ] && real=$x/fpd-real
		mkdir "$real/old.$r"
		"$FILEOPS" create "$real/old.$r" "$N" 4096 >/dev/null
	done
	"$OVSNAP" take "$x/live" >/dev/null
	# a different order each round
	# shellcheck disable=SC2086 # the list of targets
	order=$(printf '%s\n' $TARGETS | awk -v r="$r" '{ a[NR] = $0 } END { for (i = 0; i < NR; i++) print a[(i + r) % NR + 1] }')
	for w in $order; do
		sync
		case $w in
		engine | meta) t=$(preserve_ms "$r" "$w") ;;
		*) t=$(fileops_ms chmod "$x/$w/old.$r" "$N") ;;
		esac
		sync
		runs[$w]+="$(us "$t") "
	done
	# The passthrough holds a descriptor per inode the kernel remembers:
	# let the kernel forget the round's files.
	drop_caches
done

med() { if [[ " ${runs[$1]:-FAIL}" == *" FAIL "* ]]; then echo FAIL; else tr ' ' '\n' <<<"${runs[$1]}" | grep . | median; fi; }
echo
printf '%-34s %10s   %s\n' "first chmod of an old file" "us/file" "rounds"
for w in $TARGETS; do
	printf '%-34s %10s   %s\n' "$w" "$(med "$w")" "${runs[$w]}"
done
n=$(med native); e=$(med engine); m=$(med meta); p=$(med fpd); l=$(med live)
echo
if [[ " $n $e $m $p $l " == *" FAIL "* ]]; then
	echo "(a target failed: no ratios)"
	exit 1
fi
awk -v n="$n" -v e="$e" -v m="$m" -v p="$p" -v l="$l" 'BEGIN {
	printf "%-46s %7.1f us\n", "the preserve alone (engine - native)", e - n
	printf "%-46s %7.1f us\n", "a metadata-only preserve alone (meta - native)", m - n
	printf "%-46s %7.1f us\n", "ovsnapd over the passthrough (live - pt)", l - p
	printf "%-46s %7.2fx\n", "ovsnapd / passthrough speed, measured", p / l
	printf "%-46s %7.2fx\n", "ceiling with this preserve, pt/(pt+e-n)", p / (p + e - n)
	printf "%-46s %7.2fx\n", "ceiling with a metacopy, pt/(pt+m-n)", p / (p + m - n)
}'
echo "(engine: the library's preserve as ovsnapd calls it, with no FUSE; meta: create"
echo " in work, two xattrs, times and the rename into the upper, no data, no checks)"
