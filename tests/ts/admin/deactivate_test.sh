#!/bin/bash
# ovsnap deactivate, what an admin expects of it (issue 11 items 7, 22):
# it returns once the daemon has let go of the filesystem, so the
# filesystem can be unmounted at once (also after an XFS shutdown), and a
# change made right after it returns is one fsck sees.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd xfs_io pgrep python3
# The stop-linger hook of ovsnapd.
export OVSNAPD_TEST_HOOKS=1

# The ovsnapd processes serving $1 (by command line).
daemons_of() {
	local p

	for p in $(pgrep -x ovsnapd); do
		tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -qF " $1 " && echo "$p"
	done
}

# Item 7: deactivate returns once the daemon has exited, so the
# filesystem can be unmounted at once; a few rounds, each with files
# written through the snapshot mount first.  The daemon's stop-linger
# hook keeps it (and its fds on the filesystem) around for a while after
# it has answered the stop, so a deactivate that returns on the answer
# alone fails here every time, not once in a while.
test_deactivate_then_umount_at_once() {
	local src round

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	for round in 1 2 3; do
		if [ "$round" = 1 ]; then
			ovs_run "$OVSNAP" take "$src"
		else
			ovs_run "$OVSNAP" activate "$src"
		fi
		assertEquals "round $round: take/activate: $(ovs_ran)" 0 "$OVS_RC"
		for i in 1 2 3 4 5 6 7 8; do
			printf 'round %s file %s\n' "$round" "$i" >"$src/f$i" ||
				fail "round $round: write f$i through the snapshot mount"
		done
		ovs_run ovs_ctl "stop-linger 1000"
		assertEquals "round $round: stop-linger hook: $(ovs_ran)" "ok" "$OVS_OUT"
		ovs_run "$OVSNAP" deactivate "$src"
		assertEquals "round $round: deactivate exit" 0 "$OVS_RC"
		assertEquals "round $round: deactivate stdout" "" "$OVS_OUT"
		assertEquals "round $round: deactivate stderr" "" "$OVS_ERR"
		ovs_run umount "$OVS_MNT"
		assertEquals "round $round: umount right after deactivate: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "round $round: no daemon left" "" "$(daemons_of "$src")"
		[ "$OVS_RC" = 0 ] || return
		ovs_run mount "$OVS_DEV" "$OVS_MNT"
		assertEquals "round $round: mount again: $(ovs_ran)" 0 "$OVS_RC"
	done
}

# Item 7: after `xfs_io -x -c shutdown` the store cannot be read, so the
# deactivation cannot be recorded; the daemon must still let go of the
# filesystem, and deactivate must say what happened.
test_deactivate_after_xfs_shutdown() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	printf 'changed\n' >"$src/f" || fail "write through the snapshot mount"
	ovs_run xfs_io -x -c shutdown "$OVS_MNT"
	assertEquals "xfs shutdown: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate exit (not recorded)" 1 "$OVS_RC"
	assertEquals "deactivate stdout" "" "$OVS_OUT"
	assertContains "deactivate says the mount is stopped: $OVS_ERR" "$OVS_ERR" \
		"the snapshot mount is stopped, but the deactivation could not be recorded"
	ovs_run umount "$OVS_MNT"
	assertEquals "umount of the shut-down filesystem: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "no daemon left" "" "$(daemons_of "$src")"
}

# Item 22: a change made right after deactivate returns is unprotected;
# fsck must see it at once, whatever the filesystem's clock tick.  New
# files each round (their ctime was never asked for, so the filesystem
# stamps it from its coarse clock); no sleep anywhere.
test_fsck_sees_change_right_after_deactivate() {
	local src round

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	for round in 1 2 3 4 5 6; do
		"$OVSNAP" deactivate "$src" && printf 'x\n' >"$src/new$round"
		assertEquals "round $round: deactivate, then write" 0 "$?"
		ovs_run "$OVSNAP" fsck -n "$src"
		assertEquals "round $round: fsck -n finds the unprotected change: $(ovs_ran)" 4 "$OVS_RC"
		assertContains "round $round: fsck names the file" "$OVS_OUT" \
			"$src/new$round: changed at"
		ovs_run "$OVSNAP" activate "$src"
		assertEquals "round $round: activate: $(ovs_ran)" 0 "$OVS_RC"
		ovs_run "$OVSNAP" take "$src"
		assertEquals "round $round: take: $(ovs_ran)" 0 "$OVS_RC"
	done
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# Issue 14 item 9: messages that say what to do next.  deactivate and
# umount that are busy name the processes (and --lazy); take of a
# filesystem root asks for --store instead of listing every process of
# the machine; take --wait says whom it waits for.
test_busy_and_waiting_messages_say_what_to_do() {
	local src holder

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src" "$OVS_TMP/view"
	ovs_run "$OVSNAP" take "$OVS_MNT"
	assertEquals "take of the filesystem root: exit" 1 "$OVS_RC"
	assertContains "take of the root asks for --store: $OVS_ERR" "$OVS_ERR" "use --store DIR"
	assertNotContains "take of the root lists no processes: $OVS_ERR" "$OVS_ERR" "in use by"
	echo x >"$src/f"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"

	sleep 30 4>>"$src/f" &
	holder=$!
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "busy deactivate: exit" 1 "$OVS_RC"
	assertContains "busy deactivate names the process: $OVS_ERR" "$OVS_ERR" "$holder (sleep)"
	assertContains "busy deactivate names --lazy: $OVS_ERR" "$OVS_ERR" "--lazy"
	kill "$holder"
	wait "$holder" 2>/dev/null

	ovs_run "$OVSNAP" mount "$src" 1 "$OVS_TMP/view"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	sleep 30 <"$OVS_TMP/view/f" &
	holder=$!
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "busy umount: exit" 1 "$OVS_RC"
	assertContains "busy umount names the process: $OVS_ERR" "$OVS_ERR" "$holder (sleep)"
	kill "$holder"
	wait "$holder" 2>/dev/null
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"

	# Hold the volume lock as another command would, then take --wait.
	python3 -c '
import fcntl, glob, os, sys, time
f = open(glob.glob(sys.argv[1] + "/.ovsnap/*/lock")[0], "r+")
fcntl.flock(f, fcntl.LOCK_EX)
f.truncate(0); f.write("%d drop\n" % os.getpid()); f.flush()
time.sleep(2)' "$OVS_MNT" &
	holder=$!
	ovs_wait_until 5 "grep -q drop '$OVS_MNT'/.ovsnap/*/lock"
	ovs_run "$OVSNAP" take --wait "$src"
	assertEquals "take --wait: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "take --wait says so: $OVS_ERR" "$OVS_ERR" \
		"waiting for drop (pid $holder) to finish"
	wait "$holder"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# What a shutdown does to an active volume: its daemon gets SIGTERM and
# ends, the volume stays registered as active, the system's unmounting
# takes the dead mount away.
shut_down() {
	local pid

	for pid in $(daemons_of "$1"); do
		kill -TERM "$pid"
		ovs_wait_until 20 "! kill -0 $pid 2>/dev/null" || fail "$1: daemon $pid did not end"
	done
	umount -l "$1" || fail "$1: no dead mount to unmount"
}

mount_type() {
	findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null | tail -1
}

# The boot path, ovsnap activate --all (ovsnap-activate.service): it
# starts every volume that was active when the machine went down, not one
# deactivated on purpose, and it names a volume whose store cannot be
# read (its filesystem not mounted yet) and fails, rather than skip it as
# if it were off: the unit must not report success with SRC unprotected.
test_activate_all_at_boot() {
	local a b c v fs1 dev2 mnt2

	ovs_mkfs xfs || return
	fs1=$OVS_MNT
	a=$fs1/a
	b=$fs1/b
	mkdir "$a" "$b"
	echo one >"$a/f"
	ovs_mkfs xfs || return
	dev2=$OVS_DEV
	mnt2=$OVS_MNT
	c=$mnt2/c
	mkdir "$c"
	for v in "$a" "$b" "$c"; do
		ovs_run "$OVSNAP" take "$v"
		assertEquals "take $v: $(ovs_ran)" 0 "$OVS_RC"
	done
	ovs_run "$OVSNAP" deactivate "$b"
	assertEquals "deactivate b: $(ovs_ran)" 0 "$OVS_RC"
	shut_down "$a"
	shut_down "$c"
	ovs_run umount "$mnt2"
	assertEquals "umount c's filesystem: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "a: no mount before activate --all" "" "$(mount_type "$a")"

	ovs_run "$OVSNAP" activate --all
	assertEquals "activate --all, c's store not mounted: exit: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "names c and why: $OVS_ERR" "$OVS_ERR" "$c: store missing: not activated"
	assertContains "says what to check: $OVS_ERR" "$OVS_ERR" "is the filesystem"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | grep -c .)"
	assertEquals "a is active again" "fuse.ovsnap" "$(mount_type "$a")"
	assertEquals "b, deactivated, stays off" "" "$(mount_type "$b")"
	echo changed >"$a/f" || fail "write through a's new mount"
	assertEquals "a's change is preserved first" "one" \
		"$(cat "$(ovs_snapshot_layers "$a" | awk '$1 == 1 { print $2 }')/f")"

	ovs_run mount "$dev2" "$mnt2"
	assertEquals "mount c's filesystem again: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate --all
	assertEquals "activate --all, all stores there: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "nothing said" "" "$OVS_ERR"
	assertEquals "c is active" "fuse.ovsnap" "$(mount_type "$c")"
	assertEquals "a still has one mount" 1 "$(findmnt -n --mountpoint "$a" | wc -l)"
	assertEquals "b still off" "" "$(mount_type "$b")"
	for v in "$a" "$c"; do
		ovs_run "$OVSNAP" deactivate "$v"
		assertEquals "deactivate $v: $(ovs_ran)" 0 "$OVS_RC"
	done
}

. "$SHUNIT2"
