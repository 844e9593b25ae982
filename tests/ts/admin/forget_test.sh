#!/bin/bash
# ovsnap forget (issue 14 item 6): retiring a volume leaves no store, no
# index entry, no ovsnap.conf(5) file and no mount, keeps the live files, is refused while a view
# is mounted, and finishes when run again after being killed half way.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd findmnt

# Nothing of the volume at $1 is left: no mount over it, not listed, no
# index entry, no store folder (nor the default store root).
assert_forgotten() {
	local what=$1 src=$2

	assertEquals "$what: no mount over SRC" "" "$(findmnt -n -M "$src" 2>/dev/null)"
	ovs_run "$OVSNAP" list
	assertNotContains "$what: list: $(ovs_ran)" "$OVS_OUT" "$src"
	assertEquals "$what: no index entry" "" "$(ls -A "$OVSNAP_STATE_DIR/volumes" 2>/dev/null)"
	assertFalse "$what: no store left" "[ -e '$OVS_MNT/.ovsnap' ]"
	assertEquals "$what: no ovsnap.conf(5) file left" "" "$(ls -A "$OVSNAP_CONF_DIR" 2>/dev/null)"
}

# src=$OVS_MNT/src on a new XFS image: snapshot 1 (f "one") and the
# held snapshot "kept" (f "two"); f is "three" now.
held_volume() {
	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	echo one >"$src/f"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	echo two >"$src/f"
	ovs_run "$OVSNAP" take --name kept "$src"
	assertEquals "take 2: $(ovs_ran)" 0 "$OVS_RC"
	echo three >"$src/f"
	ovs_run "$OVSNAP" hold "$src" kept
	assertEquals "hold: $(ovs_ran)" 0 "$OVS_RC"
}

test_forget_leaves_no_store_registry_mount() {
	local src

	held_volume || return

	# Not on a terminal: --yes is needed, and nothing changes.
	ovs_run "$OVSNAP" forget "$src"
	assertEquals "forget without --yes: exit" 2 "$OVS_RC"
	assertContains "forget without --yes: says so" "$OVS_ERR" "--yes"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget of a held snapshot: exit" 1 "$OVS_RC"
	assertContains "forget of a held snapshot: names it: $OVS_ERR" "$OVS_ERR" "kept"
	ovs_run "$OVSNAP" status "$src"
	assertEquals "still protected after the refusals: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "still two snapshots" 2 "$(ls "$OVS_MNT/.ovsnap/"*/layers | wc -l)"

	assertNotEquals "the first take made the volume's ovsnap.conf(5)" "" \
		"$(ls -A "$OVSNAP_CONF_DIR" 2>/dev/null)"
	ovs_run "$OVSNAP" forget --yes --force "$src"
	assertEquals "forget: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "forget: says what it did" "$OVS_OUT" "forgot $src (2 snapshots)"
	assert_forgotten "forget" "$src"
	assertEquals "the live files stay" "three" "$(cat "$src/f")"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget again: exit" 1 "$OVS_RC"
	assertContains "forget again: not a volume" "$OVS_ERR" "not a volume"
	# The directory can become a volume again.
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take after forget: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" forget -y "$src"
	assertEquals "forget -y: $(ovs_ran)" 0 "$OVS_RC"
	assert_forgotten "second forget" "$src"
}

# Retiring the volume of a directory deleted since: what is left to do.
test_forget_a_deleted_source() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	rmdir "$src"
	ovs_run "$OVSNAP" list
	assertContains "still listed: $(ovs_ran)" "$OVS_OUT" "$src"
	ovs_run sh -c "cd '$OVS_MNT' && exec '$OVSNAP' forget --yes src/"
	assertEquals "forget of the deleted (relative) SRC: $(ovs_ran)" 0 "$OVS_RC"
	assert_forgotten "forget of a deleted SRC" "$src"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget again: exit" 1 "$OVS_RC"
	assertContains "forget again: not a volume: $OVS_ERR" "$OVS_ERR" "not a volume"
}

# The filesystem that holds SRC and its store not mounted (a disk not
# plugged in): forget is refused, since the snapshots (one held) are
# still there; with --force only the index entry goes, and says so.  A
# forget killed after removing the store folder is still finished without
# --force: its marker in the state directory tells the two apart.
test_forget_of_a_store_that_cannot_be_found() {
	local src

	held_volume || return
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run umount "$OVS_MNT"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"

	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget, store not mounted: exit" 1 "$OVS_RC"
	assertContains "forget, store not mounted: says why: $OVS_ERR" "$OVS_ERR" \
		"cannot be found, and no forget of it was under way"
	assertContains "forget, store not mounted: says what to do: $OVS_ERR" "$OVS_ERR" "--force"
	assertNotContains "forget, store not mounted: no claim of an interrupted forget" \
		"$OVS_ERR" "interrupted"
	assertEquals "forget, store not mounted: one line" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	ovs_run "$OVSNAP" list
	assertContains "still listed: $(ovs_ran)" "$OVS_OUT" "$src"

	mount "$OVS_DEV" "$OVS_MNT" || { fail "remount"; return; }
	ovs_run "$OVSNAP" list
	assertContains "listed again, 2 snapshots: $(ovs_ran)" "$OVS_OUT" "off"
	ovs_run "$OVSNAP" activate "$src"
	assertEquals "activate after the refusal: $(ovs_ran)" 0 "$OVS_RC"
	mkdir -p "$OVS_TMP/view"
	ovs_run "$OVSNAP" mount "$src" kept "$OVS_TMP/view"
	assertEquals "mount of the held snapshot: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the held snapshot is whole" "two" "$(cat "$OVS_TMP/view/f")"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount of the view: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate again: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run umount "$OVS_MNT"
	assertEquals "umount again: $(ovs_ran)" 0 "$OVS_RC"

	ovs_run "$OVSNAP" forget --yes --force "$src"
	assertEquals "forget --force, store not mounted: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "forget --force: says nothing was deleted: $OVS_OUT" "$OVS_OUT" \
		"not found: nothing deleted"
	ovs_run "$OVSNAP" list
	assertNotContains "not listed after forget --force: $(ovs_ran)" "$OVS_OUT" "$src"
	assertEquals "no marker left" "" "$(ls -A "$OVSNAP_STATE_DIR/forgetting" 2>/dev/null)"
	mount "$OVS_DEV" "$OVS_MNT" || { fail "remount 2"; return; }
	assertTrue "the store and its snapshots stay on the disk" \
		"[ -d '$OVS_MNT/.ovsnap' ] && [ \$(ls '$OVS_MNT'/.ovsnap/*/layers | wc -l) = 2 ]"
	# Found through the default store, it can be forgotten now.
	ovs_run "$OVSNAP" forget --yes --force "$src"
	assertEquals "forget of the store found again: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "forget of the store found again: 2 snapshots" "$OVS_OUT" "(2 snapshots)"
	assert_forgotten "forget of the store found again" "$src"

	# A forget killed after removing the folder (step 4 for one snapshot:
	# the intent, the layer, the other files, the folder), the filesystem
	# mounted: finished without --force.
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take 3: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run env OVSNAP_TEST_FORGET_KILL_AFTER=4 "$OVSNAP" forget --yes "$src"
	assertEquals "forget killed after the folder: $(ovs_ran)" 137 "$OVS_RC"
	assertNotEquals "its marker is there" "" "$(ls -A "$OVSNAP_STATE_DIR/forgetting" 2>/dev/null)"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget finishes without --force: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "says it finishes: $OVS_ERR" "$OVS_ERR" "interrupted forget"
	assert_forgotten "after the killed forget" "$src"
	assertEquals "no marker left after it" "" "$(ls -A "$OVSNAP_STATE_DIR/forgetting" 2>/dev/null)"
}

test_forget_refused_with_a_view_mounted() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src" "$OVS_TMP/view"
	echo one >"$src/f"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" mount "$src" 1 "$OVS_TMP/view"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget with a view: exit" 1 "$OVS_RC"
	assertContains "forget with a view: names it: $OVS_ERR" "$OVS_ERR" "$OVS_TMP/view"
	assertContains "forget with a view: says what to do: $OVS_ERR" "$OVS_ERR" "ovsnap umount"
	ovs_run "$OVSNAP" status "$src"
	assertEquals "still protected: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the view still reads" "one" "$(cat "$OVS_TMP/view/f")"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget after umount: $(ovs_ran)" 0 "$OVS_RC"
	assert_forgotten "forget after umount" "$src"
}

# Killed (SIGKILL) after each durable step in turn: 1 the intent, 2-4 the
# three layers, 5 the other files, 6 the store folder (the index entry
# left).  Other commands refuse the half-removed volume; forget run again
# finishes.
test_forget_killed_midway_then_rerun() {
	local src step

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	for step in 1 2 3 4 5 6; do
		echo "$step" >"$src/f"
		for i in 1 2 3; do
			ovs_run "$OVSNAP" take "$src"
			assertEquals "step $step: take $i: $(ovs_ran)" 0 "$OVS_RC"
		done
		ovs_run env OVSNAP_TEST_FORGET_KILL_AFTER=$step "$OVSNAP" forget --yes "$src"
		assertEquals "step $step: forget killed: $(ovs_ran)" 137 "$OVS_RC"
		assertEquals "step $step: deactivated before the removal" "" \
			"$(findmnt -n -M "$src" 2>/dev/null)"
		if [ "$step" -lt 6 ]; then
			ovs_run "$OVSNAP" activate "$src"
			assertEquals "step $step: activate refused: $(ovs_ran)" 1 "$OVS_RC"
			assertContains "step $step: activate says why: $OVS_ERR" "$OVS_ERR" \
				"interrupted 'ovsnap forget'"
		fi
		ovs_run "$OVSNAP" forget --yes "$src"
		assertEquals "step $step: forget again: $(ovs_ran)" 0 "$OVS_RC"
		assertContains "step $step: says it finishes: $OVS_ERR" "$OVS_ERR" "interrupted forget"
		assert_forgotten "step $step" "$src"
		assertEquals "step $step: the live file stays" "$step" "$(cat "$src/f")"
	done
}

. "$SHUNIT2"
