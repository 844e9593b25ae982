#!/bin/bash
# Issue 11 items 13, 14, 15, 18 and 19: what setting a volume up (the first
# take) and activating it refuse, and that a failed setup leaves nothing.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd python3 unshare

setUp() {
	ovs_mkfs "${FSTYPE:-xfs}"
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/dir"
	echo original >"$SRC/f"
}

# Store folders in the image's default store, and index entries.
store_folders() {
	ls -A "$OVS_MNT/.ovsnap" 2>/dev/null | grep -cv '^\.'
}

index_entries() {
	ls -A "${1:-$OVSNAP_STATE_DIR}/volumes" 2>/dev/null | grep -cv '^\.'
}

assert_nothing_left() {
	local what=$1

	assertEquals "$what: no store folder left" 0 "$(store_folders)"
	assertEquals "$what: no index entry left" 0 "$(index_entries)"
	assertEquals "$what: no mount left over SRC" "" "$(findmnt -rn -M "$SRC" -o FSTYPE)"
	assertEquals "$what: no daemon left" "" "$(ovs__our_daemons)"
}

# Item 13 (rule 15): a btrfs subvolume inside SRC is refused like a mount
# point, at the first take and at activation.
test_btrfs_subvolume_is_refused() {
	ovs_teardown
	ovs_mkfs btrfs
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/dir"
	btrfs -q subvolume create "$SRC/dir/sv" >/dev/null
	assertEquals "btrfs subvolume create" 0 $?
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with a subvolume inside: exit" 1 "$OVS_RC"
	assertEquals "take with a subvolume inside: stdout" "" "$OVS_OUT"
	assertContains "take names the subvolume" "$OVS_ERR" "$SRC/dir/sv"
	assertContains "take says why" "$OVS_ERR" "subvolume"
	assert_nothing_left "refused take"

	btrfs -q subvolume delete "$SRC/dir/sv" >/dev/null
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take without the subvolume: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	btrfs -q subvolume create "$SRC/dir/sv2" >/dev/null
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a subvolume inside: exit" 1 "$OVS_RC"
	assertContains "activate names the subvolume" "$OVS_ERR" "$SRC/dir/sv2"
	assertEquals "no snapshot mount after the refusal" "" "$(findmnt -rn -M "$SRC" -o FSTYPE)"
}

# Mount points inside SRC: refused at the first take already; now at
# activation too (the snapshot mount would hide them).
test_mount_point_is_refused_at_activation() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	mount -t tmpfs tmpfs "$SRC/dir"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a mount inside: exit" 1 "$OVS_RC"
	assertContains "activate names the mount point" "$OVS_ERR" "mount point $SRC/dir"
	umount "$SRC/dir"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate once it is gone: $(ovs_ran)" 0 "$OVS_RC"
}

# Item 14: missing parents of the state directory are created.
test_state_dir_parents_are_created() {
	local state=$OVS_TMP/state/a/b/c

	ovs_run env OVSNAP_STATE_DIR="$state" "$OVSNAP" take "$SRC"
	assertEquals "take with a state dir whose parents are missing: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the volume is in the index" 1 "$(index_entries "$state")"
	ovs_run env OVSNAP_STATE_DIR="$state" "$OVSNAP" list
	assertEquals "list: exit" 0 "$OVS_RC"
	assertContains "list shows the volume" "$OVS_OUT" "$SRC"
}

# Item 14: without $OVSNAP_STATE_DIR/$OVSNAP_RUN_DIR the state is in
# /var/lib/ovsnap and the sockets in /run/ovsnap, whatever the prefix.
# In a mount namespace of its own, over empty tmpfs copies of both.
test_default_state_and_run_dirs() {
	ovs_run unshare -m --propagation private sh -c '
		mount -t tmpfs ovs-test /var/lib && mount -t tmpfs ovs-test /run || exit 99
		env -u OVSNAP_STATE_DIR -u OVSNAP_RUN_DIR "$1" take "$2" || exit 1
		ls /var/lib/ovsnap/volumes || exit 2
		ls /run/ovsnap || exit 3
		env -u OVSNAP_STATE_DIR -u OVSNAP_RUN_DIR "$1" deactivate "$2" || exit 4' \
		sh "$OVSNAP" "$SRC"
	assertEquals "take and deactivate with the default dirs: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the index is in /var/lib/ovsnap" "$OVS_OUT" "src"
	assertContains "the socket was in /run/ovsnap" "$OVS_OUT" ".log"
}

# Item 15: a setup that fails at any step leaves nothing behind.
test_failed_setup_is_rolled_back() {
	# A state dir that cannot be written (read-only even for root):
	# the index entry, the last step of the setup, fails.
	mkdir -p "$OVS_TMP/rostate"
	mount -t tmpfs -o ro ovs-test "$OVS_TMP/rostate"
	assertEquals "read-only tmpfs for the state dir" 0 $?
	ovs_run env OVSNAP_STATE_DIR="$OVS_TMP/rostate/state" "$OVSNAP" take "$SRC"
	assertEquals "take with a read-only state dir: exit" 1 "$OVS_RC"
	assertEquals "take with a read-only state dir: stdout" "" "$OVS_OUT"
	assertContains "take says what failed" "$OVS_ERR" "rostate"
	assert_nothing_left "read-only state dir"
	umount "$OVS_TMP/rostate"

	touch "$OVS_TMP/not-a-dir"

	ovs_run env OVSNAPD=/bin/false "$OVSNAP" take "$SRC"
	assertEquals "take whose daemon cannot start: exit" 1 "$OVS_RC"
	assertEquals "take whose daemon cannot start: stdout" "" "$OVS_OUT"
	assert_nothing_left "daemon that cannot start"

	ovs_run env OVSNAP_RUN_DIR="$OVS_TMP/not-a-dir/run" "$OVSNAP" take "$SRC"
	assertEquals "take with an unusable run dir: exit" 1 "$OVS_RC"
	assert_nothing_left "unusable run dir"

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take after the failures: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the first snapshot is 1" 1 "$OVS_OUT"
	ovs_run "$OVSNAP" list
	assertEquals "list: exit" 0 "$OVS_RC"
	assertContains "list shows the volume" "$OVS_OUT" "$SRC"
}

# Item 15: fsck finds what a setup that crashed half way left (a store
# folder that the index does not name) and -p puts it back in the index.
test_fsck_finds_unindexed_volume() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	# The crash: the folder was in place, the index entry not yet.
	rm -f "$OVSNAP_STATE_DIR"/volumes/*
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n of an unindexed volume: exit (uncorrected)" 4 "$OVS_RC"
	assertContains "fsck says it is not in the index" "$OVS_OUT" "not in the index"
	ovs_run "$OVSNAP" fsck -p "$SRC"
	assertEquals "fsck -p: exit (corrected): $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "the index has the volume again" 1 "$(index_entries)"
	ovs_run "$OVSNAP" list
	assertContains "list shows the volume again" "$OVS_OUT" "$SRC"
}

# Item 18: a --kernel view forbids activation (ovsnap-mount(8)).
test_kernel_view_blocks_activation() {
	local view=$OVS_TMP/view-k

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	mkdir -p "$view"
	ovs_run "$OVSNAP" mount --kernel "$SRC" 1 "$view"
	assertEquals "mount --kernel: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate under a --kernel view: exit" 1 "$OVS_RC"
	assertEquals "activate under a --kernel view: stdout" "" "$OVS_OUT"
	assertContains "activate names the view" "$OVS_ERR" "$view"
	assertEquals "no snapshot mount after the refusal" "" "$(findmnt -rn -M "$SRC" -o FSTYPE)"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take under a --kernel view: exit" 1 "$OVS_RC"
	ovs_run "$OVSNAP" umount "$view"
	assertEquals "umount the view: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate without the view: $(ovs_ran)" 0 "$OVS_RC"
}

# The lock first takes hold while they set a volume up (one for all).
setup_lock_path() {
	echo "$OVSNAP_RUN_DIR/setup.lock"
}

# Item 19: a second first take waits for the first, or says the volume is
# being set up.
test_concurrent_first_takes() {
	local lock out1 out2 rc1 rc2 p1 p2

	lock=$(setup_lock_path)
	# While another take sets SRC up (here: the test holds its lock).
	exec 8>>"$lock"
	flock -x 8
	ovs_run "$OVSNAP" take --no-wait "$SRC"
	assertEquals "take --no-wait during a setup: exit" 1 "$OVS_RC"
	assertEquals "take --no-wait during a setup: stdout" "" "$OVS_OUT"
	assertContains "take --no-wait says why" "$OVS_ERR" "being set up"
	exec 8>&-
	assert_nothing_left "take --no-wait"

	# Two first takes at once: both succeed, as snapshots 1 and 2.
	"$OVSNAP" take "$SRC" >"$OVS_TMP/out1" 2>"$OVS_TMP/err1" &
	p1=$!
	"$OVSNAP" take "$SRC" >"$OVS_TMP/out2" 2>"$OVS_TMP/err2" &
	p2=$!
	wait "$p1"
	rc1=$?
	wait "$p2"
	rc2=$?
	out1=$(cat "$OVS_TMP/out1")
	out2=$(cat "$OVS_TMP/out2")
	assertEquals "first of two concurrent takes: $out1" 0 "$rc1"
	assertEquals "second of two concurrent takes: $out2" 0 "$rc2"
	assertEquals "they took snapshots 1 and 2" "1 2" "$(printf '%s\n%s\n' "$out1" "$out2" | sort -n | tr '\n' ' ' | sed 's/ $//')"
	# The one that waited for the other's setup says so (issue 14
	# item 9), and nothing else.
	assertEquals "stderr: at most the line saying it waits" "" \
		"$(cat "$OVS_TMP/err1" "$OVS_TMP/err2" | grep -v ': waiting for another take\( (pid [0-9]*)\)\{0,1\} that sets a volume up$')"
}

. "$SHUNIT2"
