#!/bin/bash
# Benchmarks of merge and drop (issue 5), each against a baseline of the
# same run on the same image:
#   merging a layer of 100,000 entries (100,000 files created after a take
#   leave 100,000 whiteouts) into the one before it, against renaming
#   100,000 files natively (a merge moves entries by rename);
#   dropping the oldest of 100 snapshots when its layer holds 1 entry and
#   when it holds 100,000 (target: O(1) apart from deleting its files),
#   against `rm -rf` of a copy of that same layer;
#   on btrfs, `ovsnap take` and dropping the oldest snapshot against
#   `btrfs subvolume snapshot` / `btrfs subvolume delete` of a subvolume
#   holding the same tree (the peer baseline).
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/merge-bench.sh
# Needs about 16 GiB of free space under ${BENCH_DIR:-/var/tmp}.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

ENTRIES=${ENTRIES:-100000}
SNAPS=${SNAPS:-100}
REPEAT=${REPEAT:-5}

bench_setup merge
bench_header "ovsnap merge/drop benchmarks"
echo "sizes: layer of ${ENTRIES} entries, ${SNAPS} snapshots; medians of ${REPEAT} where repeated"
echo

# upper_of SRC ID: the layer directory of snapshot ID
upper_of() {
	"$OVSNAP" list --json "$1" | tr ',{}' '\n\n\n' |
		awk -v id="$2" '/"id":/ { gsub(/[^0-9]/, ""); cur = $0 }
			cur == id && /"upper":/ { sub(/.*"upper": *"/, ""); sub(/".*/, ""); print; exit }'
}

# create_through DIR N: create N empty files through the snapshot mount,
# 10,000 to each of the folders DIR/b0, b1... that mkfolders made before the
# take (a name created in a folder that is new since the take needs no
# whiteout of its own: the folder's one covers it).  Between folders the kernel is made to forget the
# dentries: ovsnapd keeps an fd per remembered inode and may not have more
# than the open file limit it inherited (see the report in bench/results).
create_through() {
	local dir=$1 n=$2 b=0 left=$2 k

	while [ "$left" -gt 0 ]; do
		k=$((left < 10000 ? left : 10000))
		"$FILEOPS" create "$dir/b$b" "$k" 0 >/dev/null
		sync
		echo 2 >/proc/sys/vm/drop_caches
		left=$((left - k))
		b=$((b + 1))
	done
}

mkfolders() { # DIR N: the folders create_through DIR N fills
	local b

	for ((b = 0; b * 10000 < $2; b++)); do mkdir -p "$1/b$b"; done
}

# perl_rename FROM TO: rename every file of FROM/* into TO/, natively
perl_rename() {
	perl -e 'my ($from, $to) = @ARGV; my $n = 0;
		for my $d (glob("$from/*")) { mkdir("$to/" . ($d =~ s{.*/}{}r));
			opendir(my $h, $d) or die; for (readdir $h) { next if /^\.\.?$/;
			rename("$d/$_", "$to/" . ($d =~ s{.*/}{}r) . "/$_") or die "$_: $!"; $n++ } }
		print STDERR "$n renamed\n"' "$1" "$2"
}

mkimg xfs 12G
declare -A res

# --- merging a layer of $ENTRIES whiteouts -----------------------------------
m=$work/xfs/m
mkdir -p "$m"
# The folders exist before the first take: what the merge moves must be
# visible in the older snapshot, not hidden under a whiteout of its own.
mkfolders "$m/new" "$ENTRIES"
s1=$("$OVSNAP" take "$m")
# One name in each folder after s1: the older layer holds every folder too,
# so the merge moves entry by entry (a folder the older layer lacks moves
# in one rename; that is the easy case).
touch "$m/one"
for b in "$m"/new/b*; do touch "$b/first"; done
s2=$("$OVSNAP" take "$m")
t0=$(now)
create_through "$m/new" "$ENTRIES"
t1=$(now)
s3=$("$OVSNAP" take "$m")
u2=$(upper_of "$m" "$s2")
echo "setup: ${ENTRIES} creates through the snapshot mount: $(ms "$t0" "$t1") ms;" \
	"layer $s2 holds $(find "$u2" | wc -l) entries"
drop_caches
res[merge]=$(time_ms "$OVSNAP" merge -q "$m" "$s1" "$s2")
u1=$(upper_of "$m" "$s1")
echo "after merge: layer $s1 holds $(find "$u1" | wc -l) entries, snapshots: $("$OVSNAP" list --json "$m" | grep -o '"id":' | wc -l)"

# Baseline: the same number of renames natively, cold.
mkdir -p "$work/xfs/ren-from" "$work/xfs/ren-to"
for ((b = 0; b * 10000 < ENTRIES; b++)); do
	mkdir "$work/xfs/ren-from/b$b"
	"$FILEOPS" create "$work/xfs/ren-from/b$b" $((ENTRIES - b * 10000 < 10000 ? ENTRIES - b * 10000 : 10000)) 0 >/dev/null
done
drop_caches
res[rename]=$(time_ms perl_rename "$work/xfs/ren-from" "$work/xfs/ren-to")
rm -rf "$work/xfs/ren-from" "$work/xfs/ren-to"

# --- dropping the oldest of $SNAPS snapshots ----------------------------------
# m: its oldest snapshot's layer now holds the merged $ENTRIES entries.
# f: a volume whose oldest layer holds one entry.
f=$work/xfs/f
mkdir -p "$f"
"$OVSNAP" take "$f" >/dev/null
touch "$f/one"
for vol in m f; do
	src=$work/xfs/$vol
	n=$("$OVSNAP" list --json "$src" | grep -o '"id":' | wc -l)
	for ((i = n; i < SNAPS; i++)); do
		"$OVSNAP" take "$src" >/dev/null
	done
done
echo "snapshots: m $("$OVSNAP" list --json "$m" | grep -o '"id":' | wc -l)," \
	"f $("$OVSNAP" list --json "$f" | grep -o '"id":' | wc -l)"
# The baseline: rm -rf of a copy of the same layer (cp -a keeps its hard
# links: the whiteouts are links of one inode).
cp -a "$u1" "$work/xfs/layer-copy"
drop_caches
res[drop-many]=$(time_ms "$OVSNAP" drop -q "$m" @oldest)
drop_caches
res[rm-many]=$(time_ms rm -rf "$work/xfs/layer-copy")
drop_caches
res[drop-few]=$(time_ms "$OVSNAP" drop -q "$f" @oldest)
"$OVSNAP" deactivate "$m"
"$OVSNAP" deactivate "$f"

# --- btrfs: ovsnap against btrfs's own snapshots -------------------------------
mkimg btrfs 6G
bsrc=$work/btrfs/src
btrfs -q subvolume create "$work/btrfs/sv"
mktree "$work/btrfs/sv/tree" "$ENTRIES"
mkdir -p "$bsrc"
mktree "$bsrc/tree" "$ENTRIES"
sync
res[btrfs-first-take]=$(time_ms "$OVSNAP" take "$bsrc")
takes=() snaps=()
for i in $(seq "$REPEAT"); do
	takes+=("$(time_ms "$OVSNAP" take "$bsrc")")
	snaps+=("$(time_ms btrfs -q subvolume snapshot "$work/btrfs/sv" "$work/btrfs/snap$i")")
done
res[btrfs-take]=$(printf '%s\n' "${takes[@]}" | median)
res[btrfs-snap]=$(printf '%s\n' "${snaps[@]}" | median)
drops=() dels=()
for i in $(seq "$REPEAT"); do
	echo "x$i" >"$bsrc/tree/d0/f$i"	# the oldest layers are not empty
	drops+=("$(time_ms "$OVSNAP" drop -q "$bsrc" @oldest)")
	# --commit-after: durable like the drop, whose registry write is synced
	dels+=("$(time_ms btrfs -q subvolume delete --commit-after "$work/btrfs/snap$i")")
done
res[btrfs-drop]=$(printf '%s\n' "${drops[@]}" | median)
res[btrfs-del]=$(printf '%s\n' "${dels[@]}" | median)
"$OVSNAP" deactivate "$bsrc"

echo
row "merge/drop (ms)" "ovsnap" "baseline" "ratio" "baseline; ratio = ovsnap time / baseline time"
row "merge a layer of ${ENTRIES} whiteouts" "${res[merge]}" "${res[rename]}" \
	"$(ratio "${res[merge]}" "${res[rename]}")" "perl: ${ENTRIES} renames, native"
row "drop oldest of ${SNAPS}, layer of 1 entry" "${res[drop-few]}" "" "" "(the O(1) part)"
row "drop oldest of ${SNAPS}, layer of ${ENTRIES}" "${res[drop-many]}" "${res[rm-many]}" \
	"$(ratio "${res[drop-many]}" "${res[rm-many]}")" "rm -rf of a copy of that layer"
row "  many vs few entries" "${res[drop-many]}" "${res[drop-few]}" \
	"$(ratio "${res[drop-many]}" "${res[drop-few]}")" ""
echo
row "btrfs, tree of ${ENTRIES} files (ms)" "ovsnap" "btrfs subvol" "ratio" ""
row "first take (sets the volume up)" "${res[btrfs-first-take]}" "" "" ""
row "take / subvolume snapshot" "${res[btrfs-take]}" "${res[btrfs-snap]}" \
	"$(ratio "${res[btrfs-take]}" "${res[btrfs-snap]}")" ""
row "drop oldest / subvolume delete --commit-after" "${res[btrfs-drop]}" "${res[btrfs-del]}" \
	"$(ratio "${res[btrfs-drop]}" "${res[btrfs-del]}")" ""
