#!/bin/bash
# Benchmark of ovsnap diff (issues 15 and 13): a tree of ${FILES:-1000000}
# files in folders of 1000 on XFS, snapshot 1 taken.
#  - small: 10 changes (4 modified, 3 added, 3 removed), snapshot 2.
#    `ovsnap diff SRC 1 2` reads only the layers between them; the
#    baselines walk the whole tree: `diff -rq` over two daemon views of
#    1 and 2, and `rsync -n -a --delete` from view 1 to view 2 (where
#    rsync is installed).  Also `ovsnap diff SRC 1` against the live tree.
#  - big (issue 13 item 3): every file of the first ${BIG} files' folders
#    touched (each one preserved into the layer), snapshot 3; then
#    `ovsnap diff SRC 2 3` and `ovsnap diff SRC 2` (live), each a change
#    per touched file: time and maximum RSS (/usr/bin/time), which must
#    not grow with the number of changes.
# Cold caches each time.  With OVSNAP_BASE=/path/to/ovsnap (another build,
# e.g. main's), its diff runs on the same tree in the same run as the
# baseline of each row, and both outputs must be the same bytes.
# BASELINES=0 leaves out the diff -rq and rsync walks (slow at 10^6 files).
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/diff-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

FILES=${FILES:-1000000}
BIG=${BIG:-$((FILES / 10))}
REPEAT=${REPEAT:-3}
BASELINES=${BASELINES:-1}
OVSNAP_BASE=${OVSNAP_BASE:-}

bench_setup diff
bench_header "ovsnap diff benchmark"
echo "size: ${FILES} files in folders of 1000; small: 10 changes; big: ${BIG} files touched;" \
	"medians of ${REPEAT} (diff -rq, rsync: one run)"
[ -n "$OVSNAP_BASE" ] && echo "base: $OVSNAP_BASE"
echo

mkimg xfs "${IMG_SIZE:-20G}"
src=$work/xfs/src
mktree "$src" "$FILES"
"$OVSNAP" take "$src" >/dev/null
for i in 0 1 2 3; do echo changed >>"$src/d$i/f7"; done
for i in 0 1 2; do echo new >"$src/d$i/new"; done
for i in 1 2 3; do rm "$src/d$i/f9"; done
"$OVSNAP" take "$src" >/dev/null
# the big change: every file of the first BIG/1000 folders, through the
# snapshot mount (each preserved into snapshot 2's layer)
for ((d = 0; d * 1000 < BIG; d++)); do
	find "$src/d$d" -type f -print0 | xargs -0 touch -m -d '2001-02-03 04:05:06'
done
"$OVSNAP" take "$src" >/dev/null

# run BIN OUT ARGS...: one cold run of BIN diff ARGS, its output in OUT;
# prints "MS KB" (elapsed and maximum RSS), or "FAIL FAIL"
run() {
	local bin=$1 out=$2 t0 t1

	shift 2
	drop_caches
	t0=$(now)
	if /usr/bin/time -f %M -o "$work/.rss" "$bin" diff "$@" >"$out"; then
		t1=$(now)
		echo "$(ms "$t0" "$t1") $(cat "$work/.rss")"
	else
		echo "FAIL FAIL"
	fi
}

# measure BIN TAG ARGS...: REPEAT runs; sets MS (median) and KB (maximum),
# the output in $work/TAG.out
measure() {
	local bin=$1 tag=$2 r line ms kb all=() maxkb=0

	shift 2
	for ((r = 0; r < REPEAT; r++)); do
		line=$(run "$bin" "$work/$tag.out" "$@")
		ms=${line% *}
		kb=${line#* }
		all+=("$ms")
		if [ "$kb" = FAIL ]; then maxkb=FAIL; elif [ "$maxkb" != FAIL ] && ((kb > maxkb)); then
			maxkb=$kb
		fi
	done
	MS=$(printf '%s\n' "${all[@]}" | median)
	KB=$maxkb
}

declare -A t rss
lines=()
same=yes
cases=("small 1 2:1 2" "small 1 live:1" "big 2 3:2 3" "big 2 live:2")
for c in "${cases[@]}"; do
	name=${c%%:*}
	read -ra args <<<"${c#*:}"
	measure "$OVSNAP" new "$src" "${args[@]}"
	t[$name]=$MS rss[$name]=$KB
	lines[${#lines[@]}]=$(wc -l <"$work/new.out")
	if [ -n "$OVSNAP_BASE" ]; then
		measure "$OVSNAP_BASE" base "$src" "${args[@]}"
		t[base $name]=$MS rss[base $name]=$KB
		cmp -s "$work/new.out" "$work/base.out" || { same=no; echo "output differs: $name"; }
	fi
done

t_rq=- t_rsync=-
if [ "$BASELINES" != 0 ]; then
	mkdir -p "$work/v1" "$work/v2"
	"$OVSNAP" mount "$src" 1 "$work/v1"
	"$OVSNAP" mount "$src" 2 "$work/v2"
	drop_caches
	t0=$(now)
	diff -rq "$work/v1" "$work/v2" >/dev/null || true	# 1: they differ
	t_rq=$(ms "$t0" "$(now)")
	if command -v rsync >/dev/null; then
		drop_caches
		t0=$(now)
		rsync -n -a --delete "$work/v1/" "$work/v2/" >/dev/null
		t_rsync=$(ms "$t0" "$(now)")
	fi
	"$OVSNAP" umount "$work/v1"
	"$OVSNAP" umount "$work/v2"
fi

# speedup: baseline / ovsnap diff
row "what" "ms" "baseline ms" "speedup" "baseline"
row "ovsnap diff SRC 1 2 (${lines[0]} lines)" "${t[small 1 2]}" "$t_rq" \
	"$(ratio "$t_rq" "${t[small 1 2]}")" "diff -rq over two views"
row "ovsnap diff SRC 1 2" "${t[small 1 2]}" "$t_rsync" "$(ratio "$t_rsync" "${t[small 1 2]}")" \
	"rsync -n -a --delete view 1 -> view 2"
row "ovsnap diff SRC 1 (live)" "${t[small 1 live]}" "$t_rq" \
	"$(ratio "$t_rq" "${t[small 1 live]}")" "diff -rq over two views"
echo
echo "time (ms) and maximum RSS (KiB) of each diff; base: $OVSNAP_BASE"
row "what" "ms" "base ms" "base/new" "max RSS KiB new / base"
i=0
for c in "${cases[@]}"; do
	name=${c%%:*}
	row "ovsnap diff $name (${lines[$i]} lines)" "${t[$name]}" "${t[base $name]:--}" \
		"$(ratio "${t[base $name]:--}" "${t[$name]}")" "${rss[$name]} / ${rss[base $name]:--}"
	i=$((i + 1))
done
[ -n "$OVSNAP_BASE" ] && echo "outputs of new and base the same bytes: $same"
exit 0
