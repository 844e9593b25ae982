#!/bin/bash
# A merge of a layer whose one folder holds 100,000 entries (issue 13 item
# 3) reads that folder as it goes, not its names into memory first:
#   - the same merge as of 100,000 entries spread over 100 folders of
#     1,000, with the same names, adds less than 1 MiB to the peak RSS
#     (reading the folder's names in full first, as the merge did, added
#     about 9 MiB here);
#   - the result is the merge's: every entry of B the older layer lacked
#     moved to it, the 1,000 it had stay behind in B, A's win.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
[ -x /usr/bin/time ] || ovs_skip "needs /usr/bin/time (GNU time, for the peak RSS)"

MKLAYERS=$(ovs__tool ovs-mklayers)
[ -x "$MKLAYERS" ] || MKLAYERS=$OVSNAP_TOOLS/ovs-mklayers
[ -x "$MKLAYERS" ] || ovs_skip "ovs-mklayers not built (run make check)"

N=100000
# long names, so that a list of them would show
PAD=name-of-an-entry-in-a-folder-of-a-hundred-thousand-

# make_layers DIR FOLDERS: DIR/A and DIR/B; B holds N empty files named
# $PAD$i over FOLDERS folders (in turn), A the files of each 100th i
# (content "older"), which it hides
make_layers() {
	local d=$1 folders=$2 f i

	for ((f = 0; f < folders; f++)); do
		mkdir -p "$d/A/big$f" "$d/B/big$f" || return 1
	done
	(cd "$d/B" && seq -f "big%g" 0 $((folders - 1)) |
	 awk -v n=$N -v fo="$folders" -v pad=$PAD \
		'{ d[NR - 1] = $0 } END { for (i = 0; i < n; i++) print d[i % fo] "/" pad i }' |
	 xargs touch) || return 1
	for ((i = 0; i < N; i += 100)); do
		echo "$d/A/big$((i % folders))/$PAD$i"
	done | while read -r p; do echo older >"$p"; done
}

# merge_rss DIR: merge DIR/B into DIR/A; peak RSS in KiB in $RSS
merge_rss() {
	/usr/bin/time -o "$OVS_TMP/time" -f '%M' "$MKLAYERS" merge "$1/A" "$1/B" \
		>"$OVS_TMP/merge.out" 2>"$OVS_TMP/merge.err"
	MERGE_RC=$?
	RSS=$(tail -1 "$OVS_TMP/time")
}

test_merge_of_one_huge_folder() {
	local base rss

	ovs_mkfs xfs 2G || return
	make_layers "$OVS_MNT/spread" 100 || fail "make the spread layers"
	merge_rss "$OVS_MNT/spread"
	base=$RSS
	assertEquals "merge of 100 folders: $(cat "$OVS_TMP/merge.err")" 0 "$MERGE_RC"
	rm -rf "$OVS_MNT/spread"

	make_layers "$OVS_MNT/one" 1 || fail "make the one-folder layers"
	merge_rss "$OVS_MNT/one"
	rss=$RSS
	assertEquals "merge of one folder: $(cat "$OVS_TMP/merge.err")" 0 "$MERGE_RC"
	assertContains "merge stats" "$(cat "$OVS_TMP/merge.out")" "moved $((N - N / 100)) "
	assertEquals "entries in A" $N "$(ls -U "$OVS_MNT/one/A/big0" | wc -l)"
	assertEquals "entries left in B (hidden by A's)" $((N / 100)) \
		"$(ls -U "$OVS_MNT/one/B/big0" | wc -l)"
	assertEquals "A's files won (those with content)" $((N / 100)) \
		"$(find "$OVS_MNT/one/A/big0" -type f -size +0c | wc -l)"
	echo "peak RSS: $base KiB (100 folders), $rss KiB (one folder)"
	assertTrue "peak RSS $rss KiB merging one folder of $N, $base KiB merging 100 of $((N / 100)): more than 1 MiB for the folder" \
		"[ $((rss - base)) -lt 1024 ]"
}

. "$SHUNIT2"
