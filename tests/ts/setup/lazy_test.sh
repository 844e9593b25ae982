#!/bin/bash
# Issue 11 item 2, DESIGN.md rule 17: a process that keeps using the
# snapshot mount which `deactivate --lazy` detached writes through the old
# daemon, into the old layer.  Activation must see it (by the detached
# mount's device, not by path) and refuse without --force, and no take
# may switch layers while that daemon still serves anyone.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd sleep

setUp() {
	ovs_mkfs xfs
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/dir"
	echo original >"$SRC/f"
	USER_PID=
}

tearDown() {
	if [ -n "$USER_PID" ]; then
		kill "$USER_PID" 2>/dev/null
		wait "$USER_PID" 2>/dev/null
	fi
	ovs_teardown
}

# A process whose cwd is in SRC, through the snapshot mount.
start_user() {
	(cd "$SRC/dir" && exec sleep 600) &
	USER_PID=$!
	# its cwd is set once exec has happened: wait for the comm
	for _ in $(seq 100); do
		[ "$(cat /proc/$USER_PID/comm 2>/dev/null)" = sleep ] && return 0
		sleep 0.05
	done
	fail "the user process did not start"
}

stop_user() {
	kill "$USER_PID"
	wait "$USER_PID" 2>/dev/null
	USER_PID=
}

test_activate_refuses_users_of_a_detached_mount() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	start_user
	ovs_run "$OVSNAP" deactivate --lazy "$SRC"
	assertEquals "deactivate --lazy: $(ovs_ran)" 0 "$OVS_RC"
	# The old user writes through the detached mount.
	echo detached >"/proc/$USER_PID/cwd/g"
	assertEquals "write through the detached mount" 0 $?

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a user of the detached mount: exit" 1 "$OVS_RC"
	assertEquals "activate refused: stdout" "" "$OVS_OUT"
	assertContains "activate names the user" "$OVS_ERR" "$USER_PID"
	assertContains "activate says why" "$OVS_ERR" "deactivate --lazy"
	assertEquals "no snapshot mount after the refusal" "" \
		"$(findmnt -rn -M "$SRC" -o FSTYPE)"

	ovs_run "$OVSNAP" activate --force "$SRC"
	assertEquals "activate --force: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take while the detached mount serves a user: exit" 1 "$OVS_RC"
	assertEquals "take refused: stdout" "" "$OVS_OUT"
	assertContains "take names the user" "$OVS_ERR" "$USER_PID"

	stop_user
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take once the user is gone: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the new snapshot is 2" 2 "$OVS_OUT"
}

# What the refusal protects: snapshot 2 shows f as it was when its take
# returned, whatever the old user writes through the detached mount.  (On
# the old code take 2 went ahead while the old user was there, and its
# later write showed in snapshot 2.)
test_snapshot_after_detached_user_is_stable() {
	local view at_take2=

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	start_user
	ovs_run "$OVSNAP" deactivate --lazy "$SRC"
	assertEquals "deactivate --lazy: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate --force "$SRC"
	assertEquals "activate --force: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	[ "$OVS_RC" -eq 0 ] && at_take2=$(cat "$SRC/f")
	echo written-by-the-old-user >"/proc/$USER_PID/cwd/../f"
	assertEquals "old user writes through the detached mount" 0 $?
	stop_user
	if [ -z "$at_take2" ]; then
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "take 2 once the old user is gone: $(ovs_ran)" 0 "$OVS_RC"
		at_take2=$(cat "$SRC/f")
	fi
	echo after-take-2 >"$SRC/f"
	assertEquals "write through the live path" 0 $?
	view=$OVS_TMP/view2
	mkdir -p "$view"
	ovs_run "$OVSNAP" mount "$SRC" 2 "$view"
	assertEquals "mount snapshot 2: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "snapshot 2 shows f as at take 2" "$at_take2" "$(cat "$view/f")"
	ovs_run "$OVSNAP" umount "$view"
	assertEquals "umount the view: $(ovs_ran)" 0 "$OVS_RC"
}

# The same after a plain `umount -l` of SRC, behind the daemon's back: it
# went on answering on the volume's socket, so activate said the volume
# was active and did nothing (SRC unprotected: what a user wrote there
# went to the real directory) and a take switched layers in the detached
# daemon.  It now answers as a detached daemon once it notices.
# A folder above SRC renamed and renamed back (by a user who owns it): the
# mount moves with it, still attached.  The daemon, asked for its status
# meanwhile, found no SRC at the path and took its mount for detached for
# good: status said broken and every take failed until an activate.
test_a_renamed_folder_above_is_no_detach() {
	local up=$OVS_MNT/home/u

	mkdir -p "$up/x"
	mv "$SRC" "$up/x/src"
	SRC=$up/x/src
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	mv "$up/x" "$up/x2"
	ovs_run "$OVSNAP" list
	ovs_run "$OVSNAP" status "$SRC"
	echo moved >"$up/x2/src/f"
	mv "$up/x2" "$up/x"
	ovs_run "$OVSNAP" status "$SRC"
	assertEquals "status once the name is back: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take once the name is back: $(ovs_ran)" 0 "$OVS_RC"
	# the write while renamed went through the snapshot mount: preserved
	ovs_run "$OVSNAP" diff "$SRC" 1 2
	assertEquals "diff 1 2: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "f changed between the snapshots" "$OVS_OUT" "f"
}

test_umount_lazy_behind_the_daemon_is_a_detached_mount() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	start_user
	umount -l "$SRC" || fail "umount -l $SRC"
	echo detached >"/proc/$USER_PID/cwd/g"
	assertEquals "write through the detached mount" 0 $?

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a user of the detached mount: exit ($(ovs_ran))" 1 "$OVS_RC"
	assertContains "activate names the user" "$OVS_ERR" "$USER_PID"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take while the detached mount serves a user: exit ($(ovs_ran))" 1 "$OVS_RC"
	assertEquals "no snapshot 2" "1" "$("$OVSNAP" list -H -p "$SRC" 2>/dev/null | wc -l)"

	ovs_run "$OVSNAP" activate --force "$SRC"
	assertEquals "activate --force: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "a snapshot mount over SRC again" "fuse.ovsnap" \
		"$(findmnt -rn -M "$SRC" -o FSTYPE | tail -1)"
	stop_user
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take once the user is gone: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
