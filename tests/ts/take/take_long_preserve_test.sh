#!/bin/bash
# Rule 13: a long preserve (a big subtree clone, a large copy on ext4) must
# not hold up a take.  The daemon's test hook OVSNAPD_TEST_PRESERVE_GATE
# holds every request that went through the preserve phase, after its
# preserve and before its change, for as long as the gate file exists: a
# preserve exactly as long as the test wants.  Each test checks that the
# take (or the merge) ends while the preserve is still held, that the held
# change then lands after it, and that every snapshot still equals the
# manifest recorded at its take.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

MANIFEST=${OVSNAP_TOOLS}/tools/ovs-manifest
FSOP=${OVSNAP_TOOLS}/tools/ovs-fsop
GATE=$OVS_TMP/gate
export OVSNAPD_TEST_HOOKS=1 OVSNAPD_TEST_PRESERVE_GATE=$GATE

setUp() {
	rm -f "$GATE"
	ovs_mkfs "${FSTYPE:-xfs}" 4G || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	rm -rf "$MF"
	mkdir -p "$SRC/dir/sub" "$MF"
	printf 'original\n' >"$SRC/file"
	printf 'deep\n' >"$SRC/dir/sub/deep"
	for i in $(seq 50); do printf '%s\n' "$i" >"$SRC/dir/f$i"; done
	take_snapshot
	forget_manifest
}

tearDown() {
	rm -f "$GATE"
	[ -n "${BG:-}" ] && kill -9 "$BG" 2>/dev/null && wait "$BG" 2>/dev/null
	BG=
	ovs_teardown
}

# The manifest of SRC as the next take must show it.  Recorded before a
# held change starts: the kernel keeps the pages of a write it is waiting
# on locked, and the directories of a rename, so reading them would wait
# for the gate.
record_manifest() {
	"$MANIFEST" "$SRC" >"$MF/pending" || fail "manifest of $SRC"
}

# Take a snapshot showing the manifest recorded last (recorded now when
# none is pending).
take_snapshot() {
	local id
	[ -f "$MF/pending" ] || record_manifest
	ovs_run timeout 120 "$OVSNAP" take "$SRC"
	assertEquals "take exit status (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	cp "$MF/pending" "$MF/$id.manifest"
}

# Nothing pending: the next take records its own manifest.
forget_manifest() {
	rm -f "$MF/pending"
}

# Start "$@" in the background with its preserve held at the gate.
start_held() {
	ovs_start_held "$GATE" "$@"
}

# The held command is still waiting: what ran meanwhile did not wait for it.
assert_still_held() {
	kill -0 "$BG" 2>/dev/null
	assertTrue "$1: the held change is still waiting at the gate" $?
}

# in_fuse PID: PID waits for an answer of the FUSE daemon (its kernel
# stack is in a FUSE request).
in_fuse() {
	grep -qE 'request_wait_answer|fuse_simple_request' "/proc/$1/stack" 2>/dev/null
}

# waits_for_daemon PID: PID is asleep in poll(2) for the daemon's answer
# (ovs_ctl_call), or has ended.  What a blocked drop is seen doing; no
# sleep of a guessed length decides it.
waits_for_daemon() {
	! kill -0 "$1" 2>/dev/null || grep -q do_sys_poll "/proc/$1/stack" 2>/dev/null
}

# wait_bounded PID: its exit status, or 124 after killing it when it has
# not ended within a minute (a wedged daemon must fail the test, not hang
# it).
wait_bounded() {
	local i
	for i in $(seq 600); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1" 2>/dev/null
		wait "$1" 2>/dev/null
		return 124
	fi
	wait "$1"
}

release() {
	local rc
	rm -f "$GATE"
	wait_bounded "$BG"
	rc=$?
	BG=
	assertEquals "the held change succeeds once released" 0 "$rc"
}

append_changed() {
	printf 'changed\n' >>"$SRC/file"
}

take_during_file_preserve() {
	record_manifest
	start_held append_changed || return
	take_snapshot
	assert_still_held "take"
	assertContains "the daemon preserves into the new layer" "$(ovs_ctl status)" "layer=2"
	release
	assertEquals "the live file has the change" "original
changed" "$(cat "$SRC/file")"
	# Snapshot 2 was taken before the change reached SRC: the held
	# request preserved again, into layer 2, before it changed SRC.
	ovs_oracle_check "$SRC" "$MF"
}

test_take_does_not_wait_for_a_file_preserve() {
	take_during_file_preserve
}

test_take_does_not_wait_for_a_file_preserve_ext4() {
	ovs_teardown
	FSTYPE=ext4 setUp
	take_during_file_preserve
}

test_take_does_not_wait_for_a_subtree_clone() {
	record_manifest
	start_held mv "$SRC/dir" "$SRC/moved" || return
	take_snapshot
	assert_still_held "take"
	release
	[ -d "$SRC/moved/sub" ] && [ ! -e "$SRC/dir" ]
	assertTrue "the live tree shows the rename" $?
	ovs_oracle_check "$SRC" "$MF"
}

test_several_takes_while_held() {
	record_manifest
	start_held append_changed || return
	take_snapshot
	take_snapshot
	take_snapshot
	assert_still_held "three takes"
	release
	ovs_oracle_check "$SRC" "$MF"
}

# A namespace change (an unlink: it moves names, so it waits for every
# first change under way) waits for the held one; it must not be counted
# by the take while it waits, or the take, the held preserve and the
# waiting change would wait for one another.
test_take_while_another_change_waits_behind_the_held_one() {
	local rm_pid rc
	record_manifest
	start_held append_changed || return
	rm "$SRC/dir/f1" &
	rm_pid=$!
	ovs_wait_until 60 "in_fuse $rm_pid"
	assertTrue "the unlink waits in a FUSE request behind the held change" "in_fuse $rm_pid"
	take_snapshot
	assert_still_held "take"
	assertTrue "the unlink still waits after the take" "in_fuse $rm_pid"
	release
	wait_bounded "$rm_pid"
	rc=$?
	assertEquals "the waiting unlink succeeds" 0 "$rc"
	[ ! -e "$SRC/dir/f1" ]
	assertTrue "the removed file is gone" $?
	ovs_oracle_check "$SRC" "$MF"
}

# Rule 10 next to a held write(2): a page of the same file dirtied through
# a shared mapping before the take is written back by the take (the
# kernel keeps only the pages of the held write locked), so the new
# snapshot shows it, and not the held write.  No manifest: reading the
# file would wait for the held write's page.
test_take_writes_back_dirty_pages_next_to_a_held_write() {
	local mapper id upper view rc
	head -c 4194304 /dev/zero | tr '\0' a >"$SRC/big"
	take_snapshot
	forget_manifest
	"$FSOP" mmap-dirty "$SRC/big" 0 DIRTY "$OVS_TMP/ready" "$OVS_TMP/go" &
	mapper=$!
	ovs_wait_until 60 '[ -e "$OVS_TMP/ready" ]'
	assertTrue "the mapper dirtied its page" "[ -e '$OVS_TMP/ready' ]"
	start_held dd if=/dev/zero of="$SRC/big" bs=4096 count=1 seek=256 conv=notrunc status=none ||
		return
	ovs_run timeout 120 "$OVSNAP" take "$SRC"
	assertEquals "take next to a held write (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	assert_still_held "take"
	release
	touch "$OVS_TMP/go"
	wait_bounded "$mapper"
	rc=$?
	assertEquals "mmap writer" 0 "$rc"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate (stderr: $OVS_ERR)" 0 "$OVS_RC"
	upper=$(ovs_snapshot_layers "$SRC" | awk -v id="$id" '$1 == id { sub(/^[0-9]+ /, ""); print }')
	view=$OVS_TMP/view
	mkdir -p "$view"
	ovs_overlay_mount "$view" "$upper:$SRC" || { fail "overlay of snapshot $id"; return; }
	assertEquals "snapshot $id shows the page dirtied before it" "DIRTY" \
		"$(head -c 5 "$view/big")"
	assertEquals "snapshot $id does not show the held write" "aaaa" \
		"$(dd if="$view/big" bs=4096 skip=256 count=1 status=none | head -c 4)"
	assertEquals "the live file has the held write" "0" \
		"$(dd if="$SRC/big" bs=4096 skip=256 count=1 status=none | od -An -tu1 | awk '{print $1; exit}')"
}

# `ovsnap drop` of the layer the take retired waits until the held request
# is done writing into it.
test_drop_of_retired_layer_waits_for_its_preserve() {
	local drop rc
	record_manifest
	start_held append_changed || return
	take_snapshot
	"$OVSNAP" drop "$SRC" 1 &
	drop=$!
	ovs_wait_until 30 "waits_for_daemon $drop"
	kill -0 "$drop" 2>/dev/null
	assertTrue "drop waits while a preserve may still write into layer 1" $?
	release
	wait_bounded "$drop"
	rc=$?
	assertEquals "drop after the preserve" 0 "$rc"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck finds nothing (output: $OVS_OUT $OVS_ERR)" 0 "$OVS_RC"
	ovs_oracle_check "$SRC" "$MF"
}

# A drop of the active snapshot (merged away by the daemon under its
# barrier) waits for a preserve into it, which then preserves again into
# the survivor.
test_drop_of_active_layer_waits_for_its_preserve() {
	local drop rc
	printf 'between\n' >"$SRC/dir/f1"
	take_snapshot
	forget_manifest
	start_held append_changed || return
	"$OVSNAP" drop "$SRC" 2 &
	drop=$!
	ovs_wait_until 30 "waits_for_daemon $drop"
	kill -0 "$drop" 2>/dev/null
	assertTrue "the merge of the active layer waits for the held preserve" $?
	release
	wait_bounded "$drop"
	rc=$?
	assertEquals "drop of the active snapshot" 0 "$rc"
	assertContains "layer 1 is active again" "$(ovs_ctl status)" "layer=1"
	printf 'after\n' >>"$SRC/dir/f2"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck finds nothing (output: $OVS_OUT $OVS_ERR)" 0 "$OVS_RC"
	ovs_oracle_check "$SRC" "$MF"
}

. "$SHUNIT2"
