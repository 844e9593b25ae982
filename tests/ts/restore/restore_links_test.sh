#!/bin/bash
# ovsnap restore of many hard-linked files holds a budget's worth of
# their names, not all, and finds them in O(log n) each (issue 13 item
# 3): the names of linked files (those the restore made, those of the
# layers) go to an unlinked file in /tmp as sorted runs past a budget (4
# MiB, lowered here with OVSNAP_TEST_RESTORE_LINKS_BYTES).
#   - a restore of 10,000 linked files with two long names each peaks
#     within 1 MiB of one of 100 (the lists in memory, searched one by one,
#     added about 6 MiB here);
#   - the links are the same whatever the budget (a run every 4 names,
#     all in memory): every name made is linked to the name made first,
#     or to a name the restore leaves alone, as before.
# The files are put into snapshot 1's layer while the volume is
# deactivated, as the state of a snapshot taken before they were removed.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
[ -x /usr/bin/time ] || ovs_skip "needs /usr/bin/time (GNU time, for the peak RSS)"

N=10000
# the restore makes 20,000 names through the snapshot mount
OVS_TEST_TIMEOUT=$((OVS_TEST_TIMEOUT > 900 ? OVS_TEST_TIMEOUT : 900))
# 100 bytes a name: what a name costs in memory shows
LONG=$(printf 'n%.0s' {1..93})
BUDGET=$((64 << 10))

setUp() {
	ovs_volume_with_snapshot_1
}

tearDown() {
	ovs_teardown
}

# in_snapshot_1 DIR N...: each DIR of snapshot 1 gets N files with two
# names, DIR/a/NAME and DIR/b/NAME, made in its layer while the volume
# is deactivated
in_snapshot_1() {
	local upper dir

	upper=$(ovs_snapshot_layers "$SRC" | awk '$1 == 1 { print $2 }')
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	while [ $# -ge 2 ]; do
		dir=$upper/$1
		mkdir -p "$dir/a" &&
			(cd "$dir/a" && seq -f "%06g-$LONG" "$2" | xargs touch) &&
			cp -al "$dir/a" "$dir/b" || fail "linked files in $dir"
		shift 2
	done
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
}

# restore_rss BYTES DIR: ovsnap restore SRC 1 DIR with a budget of BYTES
# for the names of linked files (and of $BUDGET for the diff's names of
# a folder, which hold 1 MiB of a folder of 10,000); its peak RSS in KiB
# in $RSS
restore_rss() {
	ovs_peak_rss env OVSNAP_TEST_RESTORE_LINKS_BYTES="$1" OVSNAP_TEST_DIFF_NAMES_BYTES=$BUDGET \
		"$OVSNAP" restore -q "$SRC" 1 "$2"
	echo "peak RSS of ovsnap restore $2 with a budget of $1: $RSS KiB"
}

# links DIR: each file below DIR, and the first (in name order) of the
# names of its inode, with its link count
links() {
	(cd "$1" && find . -type f -printf '%i %n %P\n' | sort -k3) |
		awk '!($1 in first) { first[$1] = $3 } { print $3, first[$1], $2 }'
}

test_restore_of_many_hard_links_holds_a_budget_of_them() {
	local base

	in_snapshot_1 small 100
	restore_rss $BUDGET small
	assertEquals "restore small: $(ovs_ran)" 0 "$OVS_RC"
	base=$RSS
	assertEquals "small: each name linked to its a/ name" \
		"$(seq -f "%06g-$LONG" 100 | awk '{ print "a/" $0, "a/" $0, 2; print "b/" $0, "a/" $0, 2 }' | sort)" \
		"$(links "$SRC/small" | sort)"

	in_snapshot_1 spill $N mem $N tiny 300
	restore_rss $BUDGET spill
	assertEquals "restore spill: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "peak RSS $RSS KiB for $N linked files, $base KiB for 100: more than 1 MiB for the names" \
		"[ $((RSS - base)) -lt 1024 ]"
	restore_rss $((1 << 30)) mem
	assertEquals "restore mem: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "spilled or in memory: the same links" "$(links "$SRC/mem")" "$(links "$SRC/spill")"
	assertEquals "each of the $N files has two names" "$N" \
		"$(links "$SRC/spill" | awk '$3 == 2 && $1 ~ /^b\// && $2 == "a/" substr($1, 3)' | wc -l)"
	# 4 names in memory at most: a run every 4, merged as they come
	restore_rss 1 tiny
	assertEquals "restore tiny: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the smallest budget: the same links" \
		"$(links "$SRC/mem" | awk 'substr($1, 3, 6) + 0 <= 300')" "$(links "$SRC/tiny")"
	assertEquals "the restore is done" "" "$("$OVSNAP" diff "$SRC" 1 | head -5)"
}

# Names the restore leaves alone are linked to, with the smallest budget
# as in memory: a/NAME stays what it is (its inode), b/NAME comes back
# linked to it.
test_names_left_alone_are_linked_to_with_any_budget() {
	local d

	for d in u1 u2; do
		mkdir -p "$SRC/$d/a" "$SRC/$d/b" &&
			(cd "$SRC/$d/a" && seq -f "%04g" 200 | xargs touch) &&
			cp -al "$SRC/$d/a/." "$SRC/$d/b" || fail "linked files in $d"
	done
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 2: $(ovs_ran)" 2 "$OVS_OUT"
	links "$SRC/u1" >"$OVS_TMP/before"
	ls -i "$SRC/u1/a" | sort >"$OVS_TMP/inodes"
	rm -r "$SRC/u1/b" "$SRC/u2/b" || fail "rm b"
	ovs_run env OVSNAP_TEST_RESTORE_LINKS_BYTES=1 "$OVSNAP" restore -q "$SRC" 2 u1
	assertEquals "restore u1 with 4 names in memory: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run env OVSNAP_TEST_RESTORE_LINKS_BYTES=$((1 << 30)) "$OVSNAP" restore -q "$SRC" 2 u2
	assertEquals "restore u2 in memory: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "u1: linked as before" "$(cat "$OVS_TMP/before")" "$(links "$SRC/u1")"
	assertEquals "u1: the names left alone kept their inodes" "$(cat "$OVS_TMP/inodes")" \
		"$(ls -i "$SRC/u1/a" | sort)"
	assertEquals "u1 as u2" "$(links "$SRC/u2")" "$(links "$SRC/u1")"
}

. "$SHUNIT2"
