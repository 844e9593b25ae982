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

# The number of lines of $1 with something on them.
lines() {
	printf '%s\n' "$1" | grep -c .
}

# The entries of the forget markers.
markers() {
	ls -A "$OVSNAP_STATE_DIR/forgetting" 2>/dev/null
}

# The filesystem that holds SRC and its store not mounted (a disk not
# plugged in): forget is refused, since the snapshots (one held) are
# still there, and leaves no marker; with --force only the index entry
# goes, and says so.  Mounted again, the store is found again and
# forgotten whole.
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
	assertEquals "forget, store not mounted: one line" 1 "$(lines "$OVS_ERR")"
	assertEquals "the refusal leaves no marker" "" "$(markers)"
	ovs_run "$OVSNAP" list
	assertContains "still listed: $(ovs_ran)" "$OVS_OUT" "$src"

	mount "$OVS_DEV" "$OVS_MNT" || { fail "remount"; return; }
	ovs_run "$OVSNAP" list
	assertEquals "listed again with its 2 snapshots: $(ovs_ran)" 2 \
		"$(printf '%s\n' "$OVS_OUT" | awk -v s="$src" '$1 == s { print $NF }')"
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
	assertEquals "forget --force leaves no marker" "" "$(markers)"
	mount "$OVS_DEV" "$OVS_MNT" || { fail "remount 2"; return; }
	assertEquals "the store and its snapshots stay on the disk" 2 \
		"$(ls "$OVS_MNT"/.ovsnap/*/layers 2>/dev/null | wc -l)"
	# A marker a forget of an older ovsnap, or a kill, could have left:
	# writing the index entry again (fsck -p) removes it.
	mkdir -p "$OVSNAP_STATE_DIR/forgetting"
	ln -s "removed:$(echo "$OVS_MNT"/.ovsnap/*)" \
		"$OVSNAP_STATE_DIR/forgetting/$(basename "$(echo "$OVS_MNT"/.ovsnap/*)")"
	ovs_run "$OVSNAP" fsck -p "$src"
	assertContains "fsck -p indexes the store found again: $(ovs_ran)" "$OVS_OUT" \
		"added to the index"
	assertEquals "and removes the stale marker" "" "$(markers)"
	ovs_run "$OVSNAP" forget --yes --force "$src"
	assertEquals "forget of the store found again: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "forget of the store found again: 2 snapshots" "$OVS_OUT" "(2 snapshots)"
	assert_forgotten "forget of the store found again" "$src"
}

# A volume of one snapshot, src=$OVS_MNT/src on a new XFS image, and a
# forget of it killed after step $1 (1 the intent, 2 the layer, 3 the
# other files, 4 the store folder).
forget_killed_after() {
	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run env OVSNAP_TEST_FORGET_KILL_AFTER="$1" "$OVSNAP" forget --yes "$src"
	assertEquals "forget killed after step $1: $(ovs_ran)" 137 "$OVS_RC"
}

# A forget killed after the store folder went (step 4 for one snapshot:
# the intent, the layer, the other files, the folder) is finished
# without --force, and activate --all does not fail on it; one killed
# after the intent (step 1), whose store then cannot be found, is refused
# without --force: its layer is still there.
test_forget_killed_then_store_out_of_reach() {
	local src

	forget_killed_after 4 || return
	assertFalse "the store folder is gone" "[ -e '$OVS_MNT/.ovsnap' ]"
	assertEquals "its marker says it is" "removed:" "$(readlink \
		"$OVSNAP_STATE_DIR/forgetting/$(markers)" | cut -c1-8)"
	# The boot path names it, but it is no failure: the forget had
	# switched it off.
	ovs_run "$OVSNAP" activate --all
	assertEquals "activate --all: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "activate --all: says to finish the forget: $OVS_ERR" "$OVS_ERR" \
		"left by an interrupted forget: not activated (run 'ovsnap forget $src'"
	# Other commands and fsck say the same, not to mount a filesystem.
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: exit" 1 "$OVS_RC"
	assertContains "take: says to finish the forget: $OVS_ERR" "$OVS_ERR" \
		"an interrupted 'ovsnap forget' removed the store: run 'ovsnap forget $src' again"
	ovs_run "$OVSNAP" fsck -n "$src"
	assertEquals "fsck -n: exit: $(ovs_ran)" 4 "$OVS_RC"
	assertContains "fsck -n: says to finish the forget: $OVS_OUT" "$OVS_OUT" \
		"an interrupted 'ovsnap forget' removed the store"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget finishes without --force: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "says it finishes: $OVS_ERR" "$OVS_ERR" "interrupted forget"
	assert_forgotten "after the killed forget" "$src"
	assertEquals "no marker left after it" "" "$(markers)"

	ovs_run "$OVSNAP" take "$src"
	assertEquals "take 2: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run env OVSNAP_TEST_FORGET_KILL_AFTER=1 "$OVSNAP" forget --yes "$src"
	assertEquals "forget killed after the intent: $(ovs_ran)" 137 "$OVS_RC"
	assertNotEquals "a marker of a forget begun" "" "$(markers)"
	ovs_run umount "$OVS_MNT"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget begun, store out of reach: exit" 1 "$OVS_RC"
	assertContains "says the forget had not removed it: $OVS_ERR" "$OVS_ERR" \
		"the forget begun earlier had not removed it"
	assertEquals "one line" 1 "$(lines "$OVS_ERR")"
	ovs_run "$OVSNAP" activate --all
	assertEquals "activate --all, forget begun, store out of reach: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "activate --all: mount first, then forget: $OVS_ERR" "$OVS_ERR" \
		"mount the filesystem that holds its store, then run 'ovsnap forget $src'"
	mount "$OVS_DEV" "$OVS_MNT" || { fail "remount"; return; }
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget, store back: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "finishes what it began: $OVS_ERR" "$OVS_ERR" "interrupted forget"
	assert_forgotten "after the forget finished" "$src"
	assertEquals "no marker left at the end" "" "$(markers)"
}

# A crash inside the removal of the emptied store folder (after its
# registry and intent went, before the folder: a window no kill step
# reaches, so made by hand after a kill at step 3, the other files): the
# marker says the snapshots are gone, so forget finishes, and no command
# calls it "not a volume".
test_forget_crashed_while_removing_the_folder() {
	local src store

	forget_killed_after 3 || return
	store=$(echo "$OVS_MNT"/.ovsnap/*)
	assertEquals "only registry, intent and lock are left" "intent lock registry" \
		"$(ls "$store" | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "the marker says so" "removed:$store" \
		"$(readlink "$OVSNAP_STATE_DIR/forgetting/$(markers)")"
	rm "$store/registry" "$store/intent"
	ovs_run "$OVSNAP" status "$src"
	assertEquals "status: broken: $(ovs_ran)" 4 "$OVS_RC"
	assertContains "status: its registry: $(ovs_ran)" "$OVS_OUT" "registry"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: exit" 1 "$OVS_RC"
	assertContains "take: says to finish the forget: $(ovs_ran)" "$OVS_ERR" \
		"an interrupted 'ovsnap forget' left the volume half removed: run 'ovsnap forget $src' again"
	ovs_run "$OVSNAP" fsck -y "$src"
	assertEquals "fsck -y: exit: $(ovs_ran)" 4 "$OVS_RC"
	assertContains "fsck -y: names the forget to finish: $OVS_OUT" "$OVS_OUT" \
		"an interrupted 'ovsnap forget' removed the store's snapshots and registry: run 'ovsnap forget $src' again"
	assertEquals "fsck -y repairs nothing there" "lock" "$(ls "$store" | tr '\n' ' ' | sed 's/ $//')"
	ovs_run "$OVSNAP" forget --yes "$src"
	assertEquals "forget finishes: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "says it finishes: $OVS_ERR" "$OVS_ERR" "interrupted forget"
	assert_forgotten "after the crash" "$src"
	assertEquals "no marker left" "" "$(markers)"
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
