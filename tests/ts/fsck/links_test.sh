#!/bin/bash
# fsck's check of hard links from outside SRC at scale (issue 13 item 3):
# SRC holds 20,000 files in 20 folders, each with a second name in another
# folder, and a few files with names outside SRC, spread over the folders.
# fsck counts the links per inode without keeping every linked name's path
# (those it cannot account for are found by a second walk), so:
#   - its findings are the ones it always gave: one per inode short of
#     names, the first name met, "K of its N hard links", in inode order;
#   - 40,000 linked names add less than 2 MiB to its peak RSS over the same
#     fsck of the tree before the second names were made (the list of
#     every linked name with its path that fsck kept before added 5.3 MiB
#     here, the table of counts 0.9 MiB).
# With the table's budget forced small (OVSNAP_TEST_FSCK_LINK_TABLE_BYTES),
# the counts spill to a file in sorted runs and are merged back:
#   - the findings are byte for byte those of the run that did not spill,
#     also when the inodes short of names are recounted in several rounds;
#   - 40,000 linked names add less than 384 KiB to the peak RSS (a table
#     grown to hold them, as without the budget, adds 0.9 MiB);
#   - hundreds of runs are merged a fan-in's worth at a time, in less
#     than 1 MiB more, and merged 2 at a time give the same findings.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd cp
[ -x /usr/bin/time ] || ovs_skip "needs /usr/bin/time (GNU time, for the peak RSS)"

MKVOL=$OVSNAP_TOOLS/ovs-mkvol
[ -x "$MKVOL" ] || ovs_skip "ovs-mkvol not built (run make check)"

FSCK_OK=0 FSCK_UNCORRECTED=4
FOLDERS=20 PER=1000

setUp() {
	local d

	ovs_mkfs xfs 1G || return
	SRC=$OVS_MNT/src
	for ((d = 0; d < FOLDERS; d++)); do
		mkdir -p "$SRC/tree/d$d"
		(cd "$SRC/tree/d$d" && touch $(seq -f 'f%g' 1 $PER)) || fail "make d$d"
	done
	"$MKVOL" "$SRC" --snapshots 1 || fail "ovs-mkvol"
}

# fsck_rss: fsck -n of SRC: its max RSS in KiB in $RSS, its stdout in
# $OVS_TMP/fsck.out, its exit status in $FSCK_RC
fsck_rss() {
	/usr/bin/time -o "$OVS_TMP/time" -f '%M' "$OVSNAP" fsck -n "$SRC" \
		>"$OVS_TMP/fsck.out" 2>"$OVS_TMP/fsck.err"
	FSCK_RC=$?
	RSS=$(tail -1 "$OVS_TMP/time")
}

# fsck_rss_budget BYTES: fsck_rss with the link table's budget at BYTES
fsck_rss_budget() {
	OVSNAP_TEST_FSCK_LINK_TABLE_BYTES=$1 fsck_rss
}

# second_names: a second name of every file of tree/dK in links/d(K+1)
second_names() {
	local d

	cp -al "$SRC/tree" "$SRC/links.tmp" || fail "cp -al"
	mkdir "$SRC/links"
	for ((d = 0; d < FOLDERS; d++)); do
		mv "$SRC/links.tmp/d$d" "$SRC/links/d$(((d + 1) % FOLDERS))"
	done
	rmdir "$SRC/links.tmp"
}

test_links_outside_src_among_many() {
	local base rss want= ino path f

	fsck_rss
	base=$RSS
	assertEquals "fsck of the plain tree: $(cat "$OVS_TMP/fsck.out" "$OVS_TMP/fsck.err")" \
		$FSCK_OK "$FSCK_RC"
	second_names
	# names outside SRC: one, two, and one of a file linked inside too
	# (only its name in links/ is in SRC after the rm)
	mkdir "$OVS_MNT/out"
	ln "$SRC/tree/d3/f17" "$OVS_MNT/out/a"
	rm "$SRC/links/d4/f17"
	ln "$SRC/tree/d11/f500" "$OVS_MNT/out/b"
	ln "$SRC/tree/d11/f500" "$OVS_MNT/out/c"
	rm "$SRC/links/d12/f500"
	ln "$SRC/links/d0/f1000" "$OVS_MNT/out/d"
	rm "$SRC/tree/d19/f1000"
	fsck_rss
	rss=$RSS
	for f in tree/d3/f17 tree/d11/f500 links/d0/f1000; do
		echo "$(stat -c %i "$SRC/$f") $f $(stat -c %h "$SRC/$f")"
	done | sort -n >"$OVS_TMP/expected"
	while read -r ino path n; do
		want+="$SRC/$path: $((n - 1)) of its $n hard links are outside SRC: changes made through them bypass the snapshot mount
"
	done <"$OVS_TMP/expected"
	want+="$SRC: 3 errors, 0 repaired, 3 left"
	assertEquals "fsck -n exit: $(cat "$OVS_TMP/fsck.err")" $FSCK_UNCORRECTED "$FSCK_RC"
	assertEquals "fsck -n findings" "$want" "$(cat "$OVS_TMP/fsck.out")"
	assertTrue "peak RSS $rss KiB with 40,000 linked names, $base KiB without: more than 2 MiB for the links" \
		"[ $((rss - base)) -lt 2048 ]"

	# every name back in SRC: clean again
	rm -r "$OVS_MNT/out"
	ln "$SRC/tree/d3/f17" "$SRC/links/d4/f17"
	ln "$SRC/tree/d11/f500" "$SRC/links/d12/f500"
	ln "$SRC/links/d0/f1000" "$SRC/tree/d19/f1000"
	fsck_rss
	assertEquals "fsck -n exit when clean: $(cat "$OVS_TMP/fsck.out")" $FSCK_OK "$FSCK_RC"
	assertEquals "fsck -n when clean" "$SRC: clean" "$(cat "$OVS_TMP/fsck.out")"
}

test_link_counts_spilled_and_merged() {
	local base rss f

	fsck_rss_budget 65536
	base=$RSS
	assertEquals "fsck of the plain tree: $(cat "$OVS_TMP/fsck.out" "$OVS_TMP/fsck.err")" \
		$FSCK_OK "$FSCK_RC"
	second_names
	# 100 inodes with a third name outside SRC, over two folders; one
	# has its name in links/ gone (only one name left in SRC)
	mkdir "$OVS_MNT/out"
	for f in $(seq -f 'f%g' 951 1000); do
		ln "$SRC/tree/d2/$f" "$OVS_MNT/out/d2$f"
		ln "$SRC/tree/d17/$f" "$OVS_MNT/out/d17$f"
	done
	rm "$SRC/links/d3/f960"
	fsck_rss
	assertEquals "fsck -n exit, table in memory: $(cat "$OVS_TMP/fsck.err")" \
		$FSCK_UNCORRECTED "$FSCK_RC"
	assertEquals "findings, table in memory" 101 "$(wc -l <"$OVS_TMP/fsck.out")"
	mv "$OVS_TMP/fsck.out" "$OVS_TMP/unspilled.out"

	fsck_rss_budget 65536
	rss=$RSS
	assertEquals "fsck -n exit, spilled: $(cat "$OVS_TMP/fsck.err")" \
		$FSCK_UNCORRECTED "$FSCK_RC"
	assertEquals "fsck -n findings, spilled, as in memory" \
		"$(cat "$OVS_TMP/unspilled.out")" "$(cat "$OVS_TMP/fsck.out")"
	echo "peak RSS with a 64 KiB table: $base KiB plain tree, $rss KiB with the links"
	assertTrue "peak RSS $rss KiB with 40,000 linked names, $base KiB without, 64 KiB table: more than 384 KiB for the links" \
		"[ $((rss - base)) -lt 384 ]"

	# a table of 64 inodes: hundreds of runs, the 100 short of names
	# recounted 48 at a time; the runs are merged 64 at a time first,
	# so the merge reads through at most 64 buffers (a reader for each
	# of the runs added about 3 MiB)
	fsck_rss_budget 1024
	rss=$RSS
	assertEquals "fsck -n exit, tiny table: $(cat "$OVS_TMP/fsck.err")" \
		$FSCK_UNCORRECTED "$FSCK_RC"
	assertEquals "fsck -n findings, tiny table, as in memory" \
		"$(cat "$OVS_TMP/unspilled.out")" "$(cat "$OVS_TMP/fsck.out")"
	echo "peak RSS with a 1 KiB table: $rss KiB"
	assertTrue "peak RSS $rss KiB with a 1 KiB table, $base KiB for the plain tree: more than 1 MiB for the runs" \
		"[ $((rss - base)) -lt 1024 ]"
	# merged 2 at a time: a run then holds an inode more than once
	OVSNAP_TEST_RUNS_FAN_IN=2 fsck_rss_budget 1024
	assertEquals "fsck -n exit, tiny table, fan-in 2: $(cat "$OVS_TMP/fsck.err")" \
		$FSCK_UNCORRECTED "$FSCK_RC"
	assertEquals "fsck -n findings, tiny table, fan-in 2, as in memory" \
		"$(cat "$OVS_TMP/unspilled.out")" "$(cat "$OVS_TMP/fsck.out")"
}

. "$SHUNIT2"
