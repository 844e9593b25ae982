#!/bin/bash
# ovsnap rollback and restore in bounded memory (issue 13 item 3): the
# changes a rollback finds wait in a spool (an unlinked file), not in
# memory, so a rollback of 50,000 changed paths peaks at about the RSS of
# one of 100 (the list in memory added about 7 MiB here), and so does a
# restore of one path while 50,000 others differ.  The changes are still
# applied: the live tree is snapshot 1 again, and the snapshot taken
# before the rollback shows the state before it.  Where /tmp is
# read-only or fills up, the changes wait in memory instead (a memfd),
# as ovsnap diff's output does.
#
# The changes are made cheaply: snapshot 1's layer gets the files while
# the volume is deactivated (the state of a snapshot taken before they
# were removed, without removing 50,000 files through the snapshot
# mount); the rollback makes them again, in folders of 1000 (the diff
# holds one folder's names at a time).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd mkfifo unshare
[ -x /usr/bin/time ] || ovs_skip "needs /usr/bin/time (GNU time, for the peak RSS)"

FOLDERS=50 PER=1000
# the rollback makes 50,000 fifos through the snapshot mount: about 2
# minutes here, more on a loaded machine
OVS_TEST_TIMEOUT=$((OVS_TEST_TIMEOUT > 900 ? OVS_TEST_TIMEOUT : 900))
# 100 bytes a name: what a path costs in memory shows
LONG=$(printf 'n%.0s' {1..93})

setUp() {
	ovs_volume_with_snapshot_1
}

tearDown() {
	ovs_teardown
}

# in_snapshot_1 DIR FOLDERS PER: DIR of snapshot 1 has FOLDERS folders of
# PER fifos with long names (no data to clone: the rollback's work is
# in its names), made in its layer while the volume is deactivated
in_snapshot_1() {
	local upper d

	upper=$(ovs_snapshot_layers "$SRC" | awk '$1 == 1 { print $2 }')
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	for ((d = 0; d < $2; d++)); do
		mkdir -p "$upper/$1/d$d" &&
			(cd "$upper/$1/d$d" && seq -f "%06g-$LONG" "$3" | xargs mkfifo) ||
			fail "fifos in $upper/$1/d$d"
	done
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
}

# rss CMD ARGS...: ovsnap CMD ARGS; its peak RSS in KiB in $RSS
rss() {
	ovs_peak_rss "$OVSNAP" "$1" -q "${@:2}"
	echo "peak RSS of ovsnap $1: $RSS KiB"
}

test_rollback_of_many_paths_holds_none_of_them() {
	local base_rb base_rs n=$((FOLDERS * PER + FOLDERS + 1))


	# baselines: 102 changes
	in_snapshot_1 small 1 100
	rss restore "$SRC" 1 keep
	assertEquals "restore keep with 102 changes: $(ovs_ran)" 0 "$OVS_RC"
	base_rs=$RSS
	rss rollback "$SRC" 1
	assertEquals "rollback of 102 changes: $(ovs_ran)" 0 "$OVS_RC"
	base_rb=$RSS
	assertEquals "small is back" 100 "$(ls "$SRC/small/d0" | wc -l)"

	in_snapshot_1 big "$FOLDERS" "$PER"
	rss restore "$SRC" 1 keep
	assertEquals "restore keep with $n changes: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "big is left alone by a restore of keep" "[ -e '$SRC/big' ]"
	assertTrue "restore: peak RSS $RSS KiB with $n changes, $base_rs KiB with 102: more than 2 MiB for the changes" \
		"[ $((RSS - base_rs)) -lt 2048 ]"
	rss rollback "$SRC" 1
	assertEquals "rollback of $n changes: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the pre-rollback snapshot" 3 "$OVS_OUT"
	assertTrue "rollback: peak RSS $RSS KiB with $n changes, $base_rb KiB with 102: more than 2 MiB for the changes" \
		"[ $((RSS - base_rb)) -lt 2048 ]"
	assertEquals "big is back" $((FOLDERS * PER)) "$(find "$SRC/big" -type p | wc -l)"
	assertEquals "the rollback is done" "" "$("$OVSNAP" diff "$SRC" 1 | head -5)"
	# the pre-rollback snapshot has no big
	mkdir -p "$OVS_TMP/view"
	ovs_run "$OVSNAP" mount "$SRC" 3 "$OVS_TMP/view"
	assertEquals "mount 3: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "snapshot 3" "keep small" "$(ls "$OVS_TMP/view" | xargs)"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
}

test_spool_in_memory_where_tmp_cannot_hold_it() {
	# about 200 KiB of changes
	in_snapshot_1 full 2 1000
	ovs_in_tmpfs size=32k "$OVSNAP" rollback "$SRC" 1
	assertEquals "rollback with /tmp filling up: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the pre-rollback snapshot" 2 "$OVS_OUT"
	assertEquals "rollback with /tmp filling up: done" "" "$("$OVSNAP" diff "$SRC" 1 | head -5)"
	in_snapshot_1 ro 2 1000
	ovs_in_tmpfs ro "$OVSNAP" restore "$SRC" 1 ro
	assertEquals "restore with a read-only /tmp: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "restore with a read-only /tmp: done" "" "$("$OVSNAP" diff "$SRC" 1 | head -5)"
}

. "$SHUNIT2"
