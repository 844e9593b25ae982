#!/bin/bash
# Benchmark of ovsnap diff (issue 15): a tree of ${FILES:-1000000} files
# with 10 changes (4 modified, 3 added, 3 removed) between two snapshots.
# `ovsnap diff SRC A B` reads only the layers between them; the baselines
# walk the whole tree: `diff -rq` over two daemon views of A and B, and
# `rsync -n -a --delete` from view A to view B (where rsync is installed).
# Also `ovsnap diff SRC A` against the live tree, cold caches each time.
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/diff-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

FILES=${FILES:-1000000}
REPEAT=${REPEAT:-3}

bench_setup diff
bench_header "ovsnap diff benchmark"
echo "size: ${FILES} files in folders of 1000, 10 changes; medians of ${REPEAT} (diff -rq, rsync: one run)"
echo

mkimg xfs "${IMG_SIZE:-20G}"
src=$work/xfs/src
mktree "$src" "$FILES"
"$OVSNAP" take "$src" >/dev/null
for i in 0 1 2 3; do echo changed >>"$src/d$i/f7"; done
for i in 0 1 2; do echo new >"$src/d$i/new"; done
for i in 1 2 3; do rm "$src/d$i/f9"; done
"$OVSNAP" take "$src" >/dev/null

diff_ms() { # ARGS...: median of REPEAT cold runs of ovsnap diff
	local r

	for ((r = 0; r < REPEAT; r++)); do
		drop_caches
		echo "$(time_ms "$OVSNAP" diff "$@")"
	done | median
}

lines=$("$OVSNAP" diff "$src" 1 2 | wc -l)
t_diff=$(diff_ms "$src" 1 2)
t_live=$(diff_ms "$src" 1)

mkdir -p "$work/v1" "$work/v2"
"$OVSNAP" mount "$src" 1 "$work/v1"
"$OVSNAP" mount "$src" 2 "$work/v2"
drop_caches
t0=$(now)
diff -rq "$work/v1" "$work/v2" >/dev/null || true	# 1: they differ
t_rq=$(ms "$t0" "$(now)")
t_rsync=-
if command -v rsync >/dev/null; then
	drop_caches
	t0=$(now)
	rsync -n -a --delete "$work/v1/" "$work/v2/" >/dev/null
	t_rsync=$(ms "$t0" "$(now)")
fi
"$OVSNAP" umount "$work/v1"
"$OVSNAP" umount "$work/v2"

# speedup: baseline / ovsnap diff
row "what" "ms" "baseline ms" "speedup" "baseline"
row "ovsnap diff SRC 1 2 ($lines lines)" "$t_diff" "$t_rq" "$(ratio "$t_rq" "$t_diff")" \
	"diff -rq over two views"
row "ovsnap diff SRC 1 2" "$t_diff" "$t_rsync" "$(ratio "$t_rsync" "$t_diff")" \
	"rsync -n -a --delete view 1 -> view 2"
row "ovsnap diff SRC 1 (live)" "$t_live" "$t_rq" "$(ratio "$t_rq" "$t_live")" \
	"diff -rq over two views"
