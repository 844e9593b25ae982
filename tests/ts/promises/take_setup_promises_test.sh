#!/bin/bash
# Promises of ovsnap-take(8) about setting a volume up: the first take,
# what it refuses, --force, --store, the output and exit status.
# Each promise is tagged in the man page source (.\" promise: NAME) and
# its test is test_promise_NAME; tests/promises.sh lists them and fails on
# a promise without a test.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
. "$OVSNAP_SRCDIR/tests/ts/promises/promise_helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3 setfattr getfattr mkfifo

test_promise_take_prints_id() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "first take exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "first take prints id 1" "1" "$OVS_OUT"
	assertEquals "first take prints nothing on stderr" "" "$OVS_ERR"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "second take exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "second take prints id 2" "2" "$OVS_OUT"
	assertEquals "second take prints nothing on stderr" "" "$OVS_ERR"
	assertEquals "the registry has both" "1 2" "$(snap_ids)"
}

test_promise_take_first_sets_up_volume() {
	local upper
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take exit: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "the store is .ovsnap at the root of SRC's filesystem" \
		"[ -d '$OVS_MNT/.ovsnap' ]"
	assertEquals "one registry in the store" 1 \
		"$(find "$OVS_MNT/.ovsnap" -mindepth 2 -maxdepth 2 -name registry | wc -l)"
	assertEquals "the snapshot mount covers SRC itself" "fuse.ovsnap" "$(mount_type "$SRC")"
	upper=$(snap_upper 1)
	case $upper in
	"$OVS_MNT/.ovsnap/"*) ;;
	*) fail "the layer of snapshot 1 is in the store (got '$upper')" ;;
	esac
	# Every change now passes through the daemon, which first preserves.
	printf 'changed\n' >"$SRC/file"
	assertEquals "write through SRC" 0 $?
	assertEquals "the live tree changed" "changed" "$(cat "$SRC/file")"
	assertEquals "the old content was preserved into the layer first" "original" \
		"$(cat "$upper/file")"
}

# A process with its cwd under SRC and one with a file open there.
busy_src() {
	start_user cwd sh -c 'cd "$1" && echo ready >&3 && exec 3>&- && exec sleep 600' sh "$SRC/dir"
	CWD_PID=$USER_PID
	start_user open sh -c 'exec 4<"$1" && echo ready >&3 && exec 3>&- && exec sleep 600' sh "$SRC/file"
	OPEN_PID=$USER_PID
}

test_promise_take_refuses_busy_src() {
	busy_src
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take refused while SRC is in use: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertContains "one line naming the process with a cwd in SRC" "$OVS_ERR" "$CWD_PID"
	assertContains "and the one with a file open in SRC" "$OVS_ERR" "$OPEN_PID"
	assertContains "says what to do" "$OVS_ERR" "--force"
	assertEquals "a one-line error" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertNotEquals "no snapshot mount over SRC" "fuse.ovsnap" "$(mount_type "$SRC")"
	ovs_run "$OVSNAP" list "$SRC"
	assertEquals "no volume was set up: $(ovs_ran)" 1 "$OVS_RC"
	stop_user "$CWD_PID"
	stop_user "$OPEN_PID"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take once nobody uses SRC: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "snapshot 1" "1" "$OVS_OUT"
}

test_promise_take_force_busy_src() {
	busy_src
	ovs_run "$OVSNAP" take --force "$SRC"
	assertEquals "take --force while SRC is in use: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints the id" "1" "$OVS_OUT"
	assertEquals "the snapshot mount is up" "fuse.ovsnap" "$(mount_type "$SRC")"
	stop_user "$CWD_PID"
	stop_user "$OPEN_PID"
}

test_promise_take_refuses_unsupported_fs() {
	local t=$OVS_TMP/fs-tmpfs
	mkdir -p "$t" && mount -t tmpfs tmpfs "$t" && mkdir "$t/src" ||
		{ fail "tmpfs at $t"; return; }
	ovs_run "$OVSNAP" take "$t/src"
	assertEquals "take on tmpfs refused: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertContains "names the filesystem" "$OVS_ERR" "tmpfs"
	assertNotEquals "no snapshot mount" "fuse.ovsnap" "$(mount_type "$t/src")"
	assertFalse "no store on tmpfs" "[ -e '$t/.ovsnap' ]"
	umount "$t"
}

test_promise_take_refuses_mount_inside_src() {
	mkdir "$SRC/sub" && mount -t tmpfs tmpfs "$SRC/sub" || { fail "tmpfs in SRC"; return; }
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with a mount point inside refused: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertContains "names the mount point" "$OVS_ERR" "$SRC/sub"
	assertNotEquals "no snapshot mount" "fuse.ovsnap" "$(mount_type "$SRC")"
	umount "$SRC/sub"
}

test_promise_take_refuses_fs_root_without_store() {
	local other
	ovs_run "$OVSNAP" take "$OVS_MNT"
	assertEquals "the root of a filesystem is refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "says why" "$OVS_ERR" "root of its filesystem"
	assertContains "and what to do" "$OVS_ERR" "--store"
	assertFalse "no store made" "[ -e '$OVS_MNT/.ovsnap' ]"
	other=$OVS_MNT
	ovs_mkfs xfs || return
	ovs_run "$OVSNAP" take --store "$OVS_MNT/store" "$other"
	assertEquals "with --store on another filesystem: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "snapshot 1" "1" "$OVS_OUT"
	assertEquals "mounted over the root" "fuse.ovsnap" "$(mount_type "$other")"
	ovs_run "$OVSNAP" deactivate "$other"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

test_promise_take_store() {
	local fs1=$OVS_MNT
	ovs_mkfs xfs || return
	ovs_run "$OVSNAP" take --store "$OVS_MNT/st" "$SRC"
	assertEquals "take --store: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "the store is in DIR" "[ -d '$OVS_MNT/st' ]"
	assertFalse "no .ovsnap on SRC's filesystem" "[ -e '$fs1/.ovsnap' ]"
	case $(snap_upper 1) in
	"$OVS_MNT/st/"*) ;;
	*) fail "the layer is in DIR (got '$(snap_upper 1)')" ;;
	esac
	# First take only: later it is ignored, with a word.
	ovs_run "$OVSNAP" take --store "$OVS_MNT/other" "$SRC"
	assertEquals "take --store on a volume: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints the id" "2" "$OVS_OUT"
	assertContains "says --store is ignored" "$OVS_ERR" "ignoring"
	assertFalse "no second store" "[ -e '$OVS_MNT/other' ]"
}

test_promise_take_exit_status() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "success is 0: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC/file"
	assertEquals "a non-directory is a failure, 1: $(ovs_ran)" 1 "$OVS_RC"
	ovs_run "$OVSNAP" take "$OVS_MNT/missing"
	assertEquals "a missing SRC is a failure, 1: $(ovs_ran)" 1 "$OVS_RC"
	ovs_run "$OVSNAP" take --no-such-option "$SRC"
	assertEquals "an unknown option is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	ovs_run "$OVSNAP" take
	assertEquals "no SRC is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC" "$SRC/dir"
	assertEquals "two SRCs is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	assertEquals "none of them took a snapshot" "1" "$(snap_ids)"
}

. "$SHUNIT2"
