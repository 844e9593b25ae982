#!/bin/bash
# One file with many names (DESIGN.md rule 6; issue 13): the kind of tree
# hardlink(1) or a deduplicating backup leaves, where one small common file
# (an empty __init__.py, a licence) has tens of thousands of links.  A file
# with ${LINKS:-20000} names in one folder of an XFS image: the first take
# (the daemon builds its map of linked files), then every name but one
# removed through the snapshot mount (`find -delete`: each unlink updates
# the map and re-points the daemon's node to another name).  Compared with
# `rm` natively on the same image; the time, and the daemon's CPU time
# (utime + stime from /proc/PID/stat).
# With OVSNAPD_BASE=/path/to/ovsnapd (another build, e.g. main's), its
# daemon serves an identical fresh volume in the same rounds, in turns;
# ${ROUNDS:-1} round(s), medians.
# Run as root: OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   bash bench/many-links-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

LINKS=${LINKS:-20000}
ROUNDS=${ROUNDS:-1}
OVSNAPD_BASE=${OVSNAPD_BASE:-}

bench_setup many-links
bench_header "ovsnap: one file with many names"
echo "size: one file with $LINKS names in one folder; medians of $ROUNDS round(s)"
[ -n "$OVSNAPD_BASE" ] && echo "base: $OVSNAPD_BASE"
mkimg xfs "${IMG_SIZE:-2G}"
nvol=0

# make_links DIR: DIR/f and LINKS more names of it, DIR/l000000...
make_links() {
	mkdir -p "$1"
	echo x >"$1/f"
	(cd "$1" && perl -e 'for (1 .. $ARGV[0]) { link("f", sprintf("l%06d", $_)) or die "link: $!\n" }' "$LINKS")
}

# one_run DAEMON|native: prints "TAKE_MS DELETE_MS DAEMON_CPU_MS"
one_run() {
	local d=$1 src t0 t1 t2 pid cpu=0

	nvol=$((nvol + 1))
	src=$work/xfs/v$nvol
	make_links "$src/d"
	drop_caches
	t0=$(now)
	if [ "$d" != native ]; then
		OVSNAPD=$d "$OVSNAP" take "$src" >/dev/null
		pid=$(bench_daemon_of "$src")
		[ -n "$pid" ] || { echo "bench: no daemon for $src" >&2; exit 1; }
	fi
	t1=$(now)
	find "$src/d" -name 'l*' -delete
	t2=$(now)
	[ -n "${pid:-}" ] && cpu=$(cpu_ms "$pid")
	[ "$(find "$src/d" -mindepth 1 | wc -l)" = 1 ] || { echo "bench: names left in $src/d" >&2; exit 1; }
	echo "$(ms "$t0" "$t1") $(ms "$t1" "$t2") $cpu"
	if [ "$d" != native ]; then
		"$OVSNAP" deactivate "$src" >/dev/null
	fi
}

OVSNAPD_NEW=${OVSNAPD:-$(dirname "$OVSNAP")/ovsnapd}
for ((r = 0; r < ROUNDS; r++)); do
	one_run native >>"$work/native"
	one_run "$OVSNAPD_NEW" >>"$work/new"
	[ -n "$OVSNAPD_BASE" ] && one_run "$OVSNAPD_BASE" >>"$work/base"
done
col() { cut -d' ' -f"$2" "$work/$1" | median; }
echo
row "ms" "first take" "remove" "daemon CPU" ""
row "native (rm on the image)" "" "$(col native 2)" "" ""
row "ovsnapd (this build)" "$(col new 1)" "$(col new 2)" "$(col new 3)" \
	"remove: $(ratio "$(col new 2)" "$(col native 2)")x native's time"
[ -n "$OVSNAPD_BASE" ] &&
	row "ovsnapd (base)" "$(col base 1)" "$(col base 2)" "$(col base 3)" \
		"remove: $(ratio "$(col base 2)" "$(col native 2)")x native's time"
exit 0
