#!/bin/bash
# Benchmarks of snapshot views (issue 4), each quoted as a ratio against
# native XFS measured in the same run on the same image, caches dropped
# before every measurement:
#   cold sequential read of a 1 GiB file, and a cold walk (readdir + lstat
#   of every entry) of a 100,000-file tree,
#   through a daemon-served view (ovsnap mount SRC SNAP TARGET), for a file
#   or tree still in SRC (unchanged since the snapshot) and for one that
#   lives in the snapshot's layer (changed after it),
#   and through `ovsnap mount --kernel` (volume deactivated), the stock
#   overlayfs, as the second baseline.
# Target (issue 4): a view reads at least 0.5x native.
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/view-bench.sh
# Needs about 8 GiB of free space under ${BENCH_DIR:-/var/tmp}.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

BIG_MB=${BIG_MB:-1024}
TREE=${TREE:-100000}
REPEAT=${REPEAT:-3}

bench_setup view
bench_header "ovsnap view benchmarks"
echo "sizes: big file ${BIG_MB} MiB, tree ${TREE} files in folders of 1000; cold caches; medians of ${REPEAT}"
echo "ratio = speed as a fraction of native (native time / time); target >= 0.5"
echo

mkimg xfs 8G
src=$work/xfs/src
nat=$work/xfs/native
mkdir -p "$src" "$nat"

# The same shapes natively and in SRC, written before the snapshot mount
# covers SRC so that setting up is quick.
for f in "$nat/big" "$src/big-kept" "$src/big-changed"; do
	dd if=/dev/urandom of="$f" bs=1M count="$BIG_MB" status=none
done
mktree "$nat/tree" "$TREE"
mktree "$src/tree-kept" "$TREE"
mktree "$src/tree-changed" "$TREE"
sync

snap=$("$OVSNAP" take "$src")
# After the take: one 4 KiB write moves big-changed into the layer (a clone
# on XFS), and renaming tree-changed copies its whole subtree into the layer
# (the snapshot still shows it under its old name).  A rename rather than a
# chmod of every file: that would be 100,000 copy-ups through the live path.
dd if=/dev/zero of="$src/big-changed" bs=4k count=1 conv=notrunc,fsync status=none
t0=$(now)
mv "$src/tree-changed" "$src/tree-renamed"
sync
t1=$(now)
"$OVSNAP" take "$src" >/dev/null
echo "setup: rename of the ${TREE}-file tree through the snapshot mount (copies it into the layer): $(ms "$t0" "$t1") ms"
echo

declare -A res
measure() { # KEY CMD... : median of $REPEAT runs into res[KEY]
	local key=$1 v vals=() fail=no

	shift
	for _ in $(seq "$REPEAT"); do
		v=$("$@")
		[ "$v" = FAIL ] && fail=yes
		vals+=("$v")
	done
	if [ "$fail" = yes ]; then
		res[$key]=FAIL
	else
		res[$key]=$(printf '%s\n' "${vals[@]}" | median)
	fi
}

measure native,read read_ms "$nat/big"
measure native,walk walk_ms "$nat/tree"

view=$work/view
mkdir -p "$view"
"$OVSNAP" mount "$src" "$snap" "$view"
measure view,read-kept read_ms "$view/big-kept"
measure view,read-changed read_ms "$view/big-changed"
measure view,walk-kept walk_ms "$view/tree-kept"
measure view,walk-changed walk_ms "$view/tree-changed"
"$OVSNAP" umount "$view"

# The stock overlayfs on the same layers: only while the volume is inactive.
"$OVSNAP" deactivate "$src"
"$OVSNAP" mount --kernel "$src" "$snap" "$view"
measure kernel,read-kept read_ms "$view/big-kept"
measure kernel,read-changed read_ms "$view/big-changed"
measure kernel,walk-kept walk_ms "$view/tree-kept"
measure kernel,walk-changed walk_ms "$view/tree-changed"
"$OVSNAP" umount "$view"
# Native once more at the end: the drift of the machine during the run.
measure native,read2 read_ms "$nat/big"
measure native,walk2 walk_ms "$nat/tree"

row "view of snapshot $snap (ms)" "native xfs" "ovsnap view" "--kernel" "view x native | kernel x native | view x kernel"
for w in read-kept read-changed walk-kept walk-changed; do
	case $w in
	read-kept) label="read ${BIG_MB} MiB, file still in SRC"; n=${res[native,read]} ;;
	read-changed) label="read ${BIG_MB} MiB, file in the layer"; n=${res[native,read]} ;;
	walk-kept) label="walk ${TREE} files, tree still in SRC"; n=${res[native,walk]} ;;
	walk-changed) label="walk ${TREE} files, all in the layer"; n=${res[native,walk]} ;;
	esac
	v=${res[view,$w]} k=${res[kernel,$w]}
	row "$label" "$n" "$v" "$k" "$(ratio "$n" "$v")x | $(ratio "$n" "$k")x | $(ratio "$k" "$v")x"
done
row "native again at the end: read, walk" "${res[native,read2]}" "${res[native,walk2]}" "" "(drift check)"
