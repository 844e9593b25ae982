#!/bin/bash
# Benchmark of ovsnap diff over one huge folder (issue 13 item 3): a
# folder of ${FILES:-1000000} fifos with 100-byte names in snapshot 1's
# layer and every third of them in snapshot 2's (put there while the
# volume is deactivated, as the state of snapshots taken before they were
# removed), then `ovsnap diff SRC 1`: a change a name, every name read
# from two layers.  Time and maximum RSS (/usr/bin/time), cold caches.
# With OVSNAP_BASE=/path/to/ovsnap (another build, e.g. main's, which held
# the folder's names in memory), its diff runs alternately with the new
# one on the same tree, and both outputs must be the same bytes.
# Run as root: OVSNAP=... FILEOPS=... bash bench/diff-folder-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

FILES=${FILES:-1000000}
REPEAT=${REPEAT:-3}
OVSNAP_BASE=${OVSNAP_BASE:-}

bench_setup diff-folder
bench_header "ovsnap diff of one huge folder"
echo "size: one folder of ${FILES} names of 100 bytes in layer 1, a third of them in layer 2;" \
	"medians of ${REPEAT} alternating rounds"
[ -n "$OVSNAP_BASE" ] && echo "base: $OVSNAP_BASE"
echo

mkimg xfs "${IMG_SIZE:-8G}"
src=$work/xfs/src
mkdir -p "$src/keep" && echo k >"$src/keep/k"
"$OVSNAP" take "$src" >/dev/null
"$OVSNAP" take "$src" >/dev/null
layers=$("$OVSNAP" list --json "$src" | grep -oE '"upper"[[:space:]]*:[[:space:]]*"[^"]*"' |
	 sed -E 's/.*"([^"]*)"$/\1/')
u1=$(sed -n 1p <<<"$layers") u2=$(sed -n 2p <<<"$layers")
"$OVSNAP" deactivate "$src" >/dev/null
long=$(printf 'n%.0s' {1..93})
mkdir "$u1/big" "$u2/big"
t0=$(now)
seq -f "%06g-$long" 0 $((FILES - 1)) >"$work/names"
(cd "$u1/big" && xargs mkfifo <"$work/names")
(cd "$u2/big" && awk 'NR % 3 == 0' "$work/names" | xargs mkfifo)
echo "made the layers in $(ms "$t0" "$(now)") ms"
"$OVSNAP" activate "$src" >/dev/null

# run BIN OUT: one cold run of BIN diff SRC 1 into OUT; prints "MS KB"
# (and its user and system CPU seconds on stderr)
run() {
	local t0

	drop_caches
	t0=$(now)
	if /usr/bin/time -f '%M %U %S' -o "$work/.rss" "$1" diff "$src" 1 >"$2"; then
		read -r kb user sys <"$work/.rss"
		echo "  cpu: user ${user} s, sys ${sys} s" >&2
		echo "$(ms "$t0" "$(now)") $kb"
	else
		echo "FAIL FAIL"
	fi
}

declare -A all rss
bins=(new)
[ -n "$OVSNAP_BASE" ] && bins+=(base)
for ((r = 0; r < REPEAT; r++)); do
	for b in "${bins[@]}"; do
		bin=$OVSNAP
		[ "$b" = base ] && bin=$OVSNAP_BASE
		line=$(run "$bin" "$work/$b.out")
		echo "round $r $b: ${line% *} ms, ${line#* } KiB"
		all[$b]="${all[$b]:-} ${line% *}"
		rss[$b]=${line#* }
	done
done
echo
row "what" "ms" "base ms" "base/new" "max RSS KiB new / base"
mnew=$(tr ' ' '\n' <<<"${all[new]}" | grep . | median)
mbase=-
[ -n "$OVSNAP_BASE" ] && mbase=$(tr ' ' '\n' <<<"${all[base]}" | grep . | median)
row "ovsnap diff SRC 1 ($(wc -l <"$work/new.out") lines)" "$mnew" "$mbase" \
	"$(ratio "$mbase" "$mnew")" "${rss[new]} / ${rss[base]:--}"
if [ -n "$OVSNAP_BASE" ]; then
	cmp -s "$work/new.out" "$work/base.out" && same=yes || same=NO
	echo "outputs of new and base the same bytes: $same"
fi
exit 0
