#!/bin/bash
# Promises of ovsnapd(8) about its mount and its life: the mount options,
# the ready fd, exit statuses, a dead mount (SIGTERM, SIGKILL) and a new
# daemon over it, stop and stop lazy, mounts inside SRC.
# Each promise is tagged in the man page source (.\" promise: NAME) and
# its test is test_promise_NAME; tests/promises.sh lists them and fails on
# a promise without a test.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
. "$OVSNAP_SRCDIR/tests/ts/promises/promise_helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3 mkfifo setpriv btrfs

take_first() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the snapshot mount is up" "fuse.ovsnap" "$(mount_type "$SRC")"
}

daemon_pid() {
	ovs_ctl status | sed -n 's/.*pid=\([0-9]*\).*/\1/p'
}

# gone PID: a bounded wait until PID has exited (gone, or a zombie of a
# parent that does not reap); 1 if it is still running after 30 s.
gone() {
	local state
	for _ in $(seq 300); do
		state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 0
		[ "$state" = Z ] && return 0
		sleep 0.1
	done
	return 1
}

# start_daemon: ovsnapd by hand over the (deactivated) SRC, its ready
# line in $READY and its pid in $DPID.  The fifo's read returns when the
# daemon writes its line or closes the fd.
start_daemon() {
	local fifo=$OVS_TMP/ready.fifo
	rm -f "$fifo" && mkfifo "$fifo" || { fail "mkfifo"; return 1; }
	"$OVSNAPD" --foreground --ready-fd 3 "$@" 3>"$fifo" 2>>"$OVS_TMP/ovsnapd.log" &
	DPID=$!
	READY=
	read -r READY <"$fifo"
	rm -f "$fifo"
}

test_promise_ovsnapd_mount_options() {
	local opts
	take_first
	opts=$(findmnt -n -o OPTIONS --mountpoint "$SRC" | tail -1)
	assertContains "allow_other ($opts)" ",$opts," ",allow_other,"
	assertContains "default_permissions ($opts)" ",$opts," ",default_permissions,"
	assertEquals "source ovsnap:SRC" "ovsnap:$SRC" \
		"$(findmnt -n -o SOURCE --mountpoint "$SRC" | tail -1)"
	# allow_other: another user reaches SRC; default_permissions: the
	# kernel checks the mode bits (root's 0644 file is not theirs to write).
	ovs_user || return
	ovs_as_user cat "$SRC/file"
	assertEquals "another user reads through the mount: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "and sees the data" "original" "$OVS_OUT"
	ovs_as_user sh -c 'echo x >>"$1"' sh "$SRC/file"
	assertNotEquals "the mode bits are checked: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "permission denied" "$OVS_ERR" "Permission denied"
	assertEquals "the file is unchanged" "original" "$(cat "$SRC/file")"
}

test_promise_ovsnapd_inherits_nosuid_nodev_noexec() {
	local opts
	printf '#!/bin/sh\necho ran\n' >"$SRC/prog" && chmod 755 "$SRC/prog" || fail "prog"
	mount -o remount,nosuid,nodev,noexec "$OVS_MNT" || { fail "remount"; return; }
	take_first
	opts=$(findmnt -n -o OPTIONS --mountpoint "$SRC" | tail -1)
	assertContains "nosuid ($opts)" ",$opts," ",nosuid,"
	assertContains "nodev ($opts)" ",$opts," ",nodev,"
	assertContains "noexec ($opts)" ",$opts," ",noexec,"
	ovs_run "$SRC/prog"
	assertEquals "noexec is enforced on the snapshot mount: $(ovs_ran)" 126 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	# Without the flags, the snapshot mount has none of them.
	mount -o remount,suid,dev,exec "$OVS_MNT" || { fail "remount"; return; }
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	opts=$(findmnt -n -o OPTIONS --mountpoint "$SRC" | tail -1)
	assertNotContains "no nosuid ($opts)" ",$opts," ",nosuid,"
	assertNotContains "no noexec ($opts)" ",$opts," ",noexec,"
	ovs_run "$SRC/prog"
	assertEquals "and programs run: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "program output" "ran" "$OVS_OUT"
}

test_promise_ovsnapd_ready_fd_ok() {
	local reply
	take_first
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	start_daemon "$SRC"
	assertEquals "ready fd says ok ($(cat "$OVS_TMP/ovsnapd.log"))" "ok" "$READY"
	assertEquals "the mount is up when it says so" "fuse.ovsnap" "$(mount_type "$SRC")"
	assertEquals "and serves" "original" "$(cat "$SRC/file")"
	reply=$(ovs_ctl stop)
	assertEquals "stop" "ok" "$reply"
	wait "$DPID"
	assertEquals "exit status 0 after stop" 0 $?
}

test_promise_ovsnapd_ready_fd_err_exit_1() {
	# SRC is no volume: setup fails.
	start_daemon "$SRC"
	wait "$DPID"
	assertEquals "exit status 1 when setup fails" 1 $?
	case $READY in
	"err "?*) ;;
	*) fail "the ready fd says 'err MESSAGE' (got '$READY')" ;;
	esac
	assertNotEquals "nothing mounted over SRC" "fuse.ovsnap" "$(mount_type "$SRC")"
}

test_promise_ovsnapd_exit_status() {
	ovs_run "$OVSNAPD"
	assertEquals "no SRC is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	ovs_run "$OVSNAPD" --no-such-option "$SRC"
	assertEquals "an unknown option is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	ovs_run "$OVSNAPD" --ready-fd x "$SRC"
	assertEquals "a bad --ready-fd is a usage error, 2: $(ovs_ran)" 2 "$OVS_RC"
	ovs_run "$OVSNAPD" --foreground "$SRC"
	assertEquals "setup failure (no volume) is 1: $(ovs_ran)" 1 "$OVS_RC"
	take_first
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	start_daemon "$SRC"
	assertEquals "ready" "ok" "$READY"
	# The mount went away (not through stop): 0 as well.
	umount "$SRC"
	assertEquals "umount the snapshot mount" 0 $?
	wait "$DPID"
	assertEquals "exit status 0 when the mount went away" 0 $?
}

test_promise_ovsnapd_starts_over_dead_mount() {
	local pid
	take_first
	pid=$(daemon_pid)
	assertNotNull "daemon pid" "$pid"
	kill -KILL "$pid"
	gone "$pid"
	assertEquals "the daemon died" 0 $?
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate over the dead mount: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "two mounts stacked at SRC" 2 \
		"$(findmnt -n -o TARGET --mountpoint "$SRC" | wc -l)"
	assertEquals "the new daemon serves the real SRC" "original" "$(cat "$SRC/file")"
	printf 'changed\n' >"$SRC/file"
	assertEquals "a write through the new daemon" 0 $?
	assertEquals "is preserved first" "original" "$(cat "$(snap_upper 1)/file")"
}

test_promise_ovsnapd_sigterm_leaves_enotconn() {
	local pid
	take_first
	pid=$(daemon_pid)
	assertNotNull "daemon pid" "$pid"
	kill -TERM "$pid"
	gone "$pid"
	assertEquals "SIGTERM ends the daemon" 0 $?
	assertEquals "its mount stays" "fuse.ovsnap" "$(mount_type "$SRC")"
	ovs_run stat "$SRC/file"
	assertNotEquals "SRC is not reachable: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "with ENOTCONN" "$OVS_ERR" "Transport endpoint is not connected"
	ovs_run sh -c 'echo x >"$1"' sh "$SRC/new"
	assertNotEquals "a write does not reach the real directory: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "with ENOTCONN too" "$OVS_ERR" "Transport endpoint is not connected"
	umount -l "$SRC"
	assertFalse "nothing reached the real directory" "[ -e '$SRC/new' ]"
	assertEquals "whose file is untouched" "original" "$(cat "$SRC/file")"
}

test_promise_ovsnapd_stop_refuses_open_files() {
	local reply
	take_first
	exec 5<"$SRC/file"
	reply=$(ovs_ctl stop)
	assertContains "stop refused with EBUSY while a file is open" "$reply" "err 16 "
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate refused too: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "still mounted" "fuse.ovsnap" "$(mount_type "$SRC")"
	exec 5<&-
	# The kernel sends RELEASE after close returns: bounded retry.
	for _ in $(seq 50); do
		reply=$(ovs_ctl stop)
		[ "$reply" = ok ] && break
		sleep 0.1
	done
	assertEquals "stop once the file is closed" "ok" "$reply"
	ovs_wait_unmounted "$SRC" 10
	assertEquals "unmounted" 0 $?
}

test_promise_ovsnapd_stop_refuses_cwd_inside_src() {
	local reply
	take_first
	start_user cwd sh -c 'cd "$1" && echo ready >&3 && exec 3>&- && exec sleep 600' sh "$SRC/dir"
	reply=$(ovs_ctl stop)
	assertContains "stop refused with EBUSY while a process works in SRC" "$reply" "err 16 "
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "says a process works in it" "$OVS_ERR" "busy"
	assertEquals "still mounted" "fuse.ovsnap" "$(mount_type "$SRC")"
	stop_user "$USER_PID"
	reply=$(ovs_ctl stop)
	assertEquals "stop once it is gone" "ok" "$reply"
	ovs_wait_unmounted "$SRC" 10
	assertEquals "unmounted" 0 $?
}

test_promise_ovsnapd_stop_lazy() {
	local reply pid line
	take_first
	pid=$(daemon_pid)
	exec 5<"$SRC/file"
	reply=$(ovs_ctl "stop lazy")
	assertEquals "stop lazy with a file open" "ok" "$reply"
	assertNotEquals "the mount is detached" "fuse.ovsnap" "$(mount_type "$SRC")"
	assertTrue "the daemon still runs" "kill -0 $pid"
	read -r line <&5
	assertEquals "and serves the remaining user" "original" "$line"
	exec 5<&-
	gone "$pid"
	assertEquals "it exits once the last user is gone" 0 $?
}

test_promise_ovsnapd_mounts_inside_src_not_crossed() {
	local reply
	printf 'below\n' >"$SRC/dir/under" || fail "file under the mount point"
	take_first
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	mount -t tmpfs tmpfs "$SRC/dir" && printf 'top\n' >"$SRC/dir/top" ||
		{ fail "tmpfs inside SRC"; return; }
	# The CLI refuses to protect a SRC holding a mount (ovsnap-take(8)).
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a mount inside SRC: exit" 1 "$OVS_RC"
	assertContains "activate names the mount point" "$OVS_ERR" "$SRC/dir"
	# The daemon started by hand does not cross it.
	start_daemon "$SRC"
	assertEquals "ready fd says ok ($(cat "$OVS_TMP/ovsnapd.log"))" "ok" "$READY"
	assertEquals "the daemon shows the directory underneath the mount" "under" \
		"$(find "$SRC/dir" -mindepth 1 -printf "%f\n")"
	assertEquals "with its content" "below" "$(cat "$SRC/dir/under")"
	reply=$(ovs_ctl stop)
	assertEquals "stop" "ok" "$reply"
	wait "$DPID"
	umount "$SRC/dir"
}

test_promise_ovsnapd_log_next_to_socket() {
	local sock log
	take_first
	sock=$(ls "$OVSNAP_RUN_DIR"/*.sock)
	assertNotNull "a control socket in \$OVSNAP_RUN_DIR" "$sock"
	log=${sock%.sock}.log
	assertTrue "its log is next to it" "[ -f '$log' ]"
	assertContains "and holds the daemon's standard error" "$(cat "$log" 2>&1)" \
		"ovsnapd[$(ovs_ctl status | sed -n 's/.*pid=\([0-9]*\).*/\1/p')]: serving $SRC"
}

test_promise_ovsnapd_btrfs_subvolume_exdev() {
	ovs_mkfs btrfs || return
	SRC=$OVS_MNT/src
	mkdir "$SRC" && printf 'original\n' >"$SRC/file" || fail "SRC on btrfs"
	take_first
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	btrfs -q subvolume create "$SRC/subvol" >/dev/null && printf 'in\n' >"$SRC/subvol/f" ||
		{ fail "btrfs subvolume create"; return; }
	# Refused by the CLI and by the daemon itself: the live path would
	# answer EXDEV there, and views would show, then lose, its contents.
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate with a subvolume inside SRC: exit" 1 "$OVS_RC"
	assertContains "activate names the subvolume" "$OVS_ERR" "subvol"
	start_daemon "$SRC"
	wait "$DPID"
	assertEquals "ovsnapd refuses it too: exit status" 1 $?
	case $READY in
	"err "*subvol*) ;;
	*) fail "the ready fd says 'err MESSAGE' naming the subvolume (got '$READY')" ;;
	esac
	assertNotEquals "nothing mounted over SRC" "fuse.ovsnap" "$(mount_type "$SRC")"
	assertEquals "SRC is the plain directory" "original" "$(cat "$SRC/file")"
}

. "$SHUNIT2"
