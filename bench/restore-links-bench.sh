#!/bin/bash
# Benchmark of ovsnap restore of many hard-linked files (issue 13 item
# 3): snapshot 1's layer gets ${LINKS:-20000} files with two 100-byte
# names each, a/NAME and b/NAME (put there while the volume is
# deactivated, as the state of a snapshot taken before they were
# removed), then `ovsnap restore SRC 1 links` makes them again through
# the snapshot mount, the second name of each linked to the first.
# Time and peak RSS (/usr/bin/time).  With OVSNAP_BASE=/path/to/ovsnap
# (another build, e.g. main's, which kept the names of linked files in
# lists and searched them one by one), its restore runs on an identical
# fresh volume, alternating, ${ROUNDS:-1} round(s); medians.
# Run as root: OVSNAP=... FILEOPS=... bash bench/restore-links-bench.sh
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

LINKS=${LINKS:-20000}
ROUNDS=${ROUNDS:-1}
OVSNAP_BASE=${OVSNAP_BASE:-}

bench_setup restore-links
bench_header "ovsnap restore of hard-linked files"
echo "size: $LINKS files with two names of 100 bytes each; medians of $ROUNDS round(s)"
[ -n "$OVSNAP_BASE" ] && echo "base: $OVSNAP_BASE"
echo
mkimg xfs "${IMG_SIZE:-8G}"
long=$(printf 'n%.0s' {1..93})
nvol=0

# one_run BIN: a fresh volume, its restore by BIN: prints "MS KB"
one_run() {
	local bin=$1 src upper t0 t1

	nvol=$((nvol + 1))
	src=$work/xfs/v$nvol
	mkdir -p "$src/keep" && echo k >"$src/keep/k"
	"$OVSNAP" take "$src" >/dev/null
	upper=$("$OVSNAP" list --json "$src" | grep -oE '"upper"[[:space:]]*:[[:space:]]*"[^"]*"' |
		sed -E 's/.*"([^"]*)"$/\1/' | head -1)
	"$OVSNAP" deactivate "$src" >/dev/null
	mkdir -p "$upper/links/a"
	(cd "$upper/links/a" && seq -f "%06g-$long" "$LINKS" | xargs touch)
	cp -al "$upper/links/a" "$upper/links/b"
	"$OVSNAP" activate "$src" >/dev/null
	drop_caches
	t0=$(now)
	/usr/bin/time -o "$work/time" -f '%M' "$bin" restore -q "$src" 1 links
	t1=$(now)
	echo "$(ms "$t0" "$t1") $(tail -1 "$work/time")"
	"$OVSNAP" deactivate "$src" >/dev/null
}

row "what" "ms" "peak RSS KiB" "" ""
for ((r = 0; r < ROUNDS; r++)); do
	one_run "$OVSNAP" >>"$work/new"
	[ -n "$OVSNAP_BASE" ] && one_run "$OVSNAP_BASE" >>"$work/base"
done
row "restore of $LINKS linked files" "$(cut -d' ' -f1 "$work/new" | median)" \
	"$(cut -d' ' -f2 "$work/new" | median)" "" "this build"
[ -n "$OVSNAP_BASE" ] &&
	row "restore of $LINKS linked files" "$(cut -d' ' -f1 "$work/base" | median)" \
		"$(cut -d' ' -f2 "$work/base" | median)" "" "base"
exit 0
