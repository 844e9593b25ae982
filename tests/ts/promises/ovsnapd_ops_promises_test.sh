#!/bin/bash
# Promises of ovsnapd(8) about the requests it serves: what is not
# supported (ioctls, fallocate modes, O_TMPFILE, 0/0 character devices),
# locks, the caller's identity, no preservation without a snapshot, a
# failing take, and the control socket (status, errors, test hooks).
# Each promise is tagged in the man page source (.\" promise: NAME) and
# its test is test_promise_NAME; tests/promises.sh lists them and fails on
# a promise without a test.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
. "$OVSNAP_SRCDIR/tests/ts/promises/promise_helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3 mkfifo setpriv chattr

FSOP=$OVSNAP_TOOLS/tools/ovs-fsop

take_first() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the snapshot mount is up" "fuse.ovsnap" "$(mount_type "$SRC")"
}

# pyop OP PATH [PATH2]: one system call; prints "ok" or the errno's name
# (EOPNOTSUPP for 95) and exits 0 or 1.
pyop() {
	python3 - "$@" <<'EOF'
import ctypes, errno, fcntl, os, struct, sys
op, path = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
try:
    if op == "ficlone":          # FICLONE: clone sys.argv[3] into path
        src = os.open(sys.argv[3], os.O_RDONLY)
        dst = os.open(path, os.O_WRONLY)
        fcntl.ioctl(dst, 0x40049409, src)
    elif op == "dedupe":         # FIDEDUPERANGE: 4 KiB of path and sys.argv[3]
        fd = os.open(path, os.O_RDONLY)
        dst = os.open(sys.argv[3], os.O_RDWR)
        buf = bytearray(struct.pack("=QQHHI", 0, 4096, 1, 0, 0) +
                        struct.pack("=qQQiI", dst, 0, 0, 0, 0))
        fcntl.ioctl(fd, 0xc0189436, buf)
        status = struct.unpack_from("=i", buf, 24 + 24)[0]
        if status < 0:
            raise OSError(-status, os.strerror(-status))
    elif op in ("collapse", "insert"):
        fd = os.open(path, os.O_RDWR)
        mode = 0x08 if op == "collapse" else 0x20   # FALLOC_FL_COLLAPSE/INSERT_RANGE
        if libc.fallocate(fd, mode, 0, 4096) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    elif op == "tmpfile":
        os.close(os.open(path, os.O_TMPFILE | os.O_RDWR, 0o600))
    else:
        sys.exit("pyop: unknown op " + op)
    print("ok")
except OSError as e:
    print("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode.get(e.errno, str(e.errno)))
    sys.exit(1)
EOF
}

# Two 8 KiB files of the same data in SRC and, for the control, in a
# directory beside it on the same XFS, which no daemon covers.
two_files() {
	head -c 8192 /dev/urandom >"$OVS_TMP/data" || fail "random data"
	mkdir -p "$OVS_MNT/plain"
	for d in "$SRC" "$OVS_MNT/plain"; do
		cp "$OVS_TMP/data" "$d/a" && cp "$OVS_TMP/data" "$d/b" || fail "copy to $d"
	done
}

test_promise_ovsnapd_ficlone_eopnotsupp() {
	two_files
	take_first
	ovs_run pyop ficlone "$OVS_MNT/plain/b" "$OVS_MNT/plain/a"
	assertEquals "XFS itself clones (the control): $(ovs_ran)" "ok" "$OVS_OUT"
	ovs_run pyop ficlone "$SRC/b" "$SRC/a"
	assertEquals "FICLONE through the snapshot mount fails: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "with EOPNOTSUPP" "EOPNOTSUPP" "$OVS_OUT"
	assertTrue "the target is unchanged" "cmp -s '$OVS_TMP/data' '$SRC/b'"
}

test_promise_ovsnapd_fideduperange_eopnotsupp() {
	two_files
	take_first
	ovs_run pyop dedupe "$OVS_MNT/plain/a" "$OVS_MNT/plain/b"
	assertEquals "XFS itself dedupes (the control): $(ovs_ran)" "ok" "$OVS_OUT"
	ovs_run pyop dedupe "$SRC/a" "$SRC/b"
	assertEquals "FIDEDUPERANGE through the snapshot mount fails: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "with EOPNOTSUPP" "EOPNOTSUPP" "$OVS_OUT"
}

test_promise_ovsnapd_collapse_insert_range_eopnotsupp() {
	local op
	two_files
	take_first
	for op in collapse insert; do
		cp "$OVS_TMP/data" "$OVS_MNT/plain/a" || fail "reset the control file"
		ovs_run pyop "$op" "$OVS_MNT/plain/a"
		assertEquals "XFS itself does $op range (the control): $(ovs_ran)" "ok" "$OVS_OUT"
		ovs_run pyop "$op" "$SRC/a"
		assertEquals "$op range through the snapshot mount fails: $(ovs_ran)" 1 "$OVS_RC"
		assertEquals "$op range: with EOPNOTSUPP" "EOPNOTSUPP" "$OVS_OUT"
		assertTrue "$op range: the file is unchanged" "cmp -s '$OVS_TMP/data' '$SRC/a'"
	done
}

test_promise_ovsnapd_o_tmpfile_eopnotsupp() {
	mkdir -p "$OVS_MNT/plain"
	take_first
	ovs_run pyop tmpfile "$OVS_MNT/plain"
	assertEquals "XFS itself has O_TMPFILE (the control): $(ovs_ran)" "ok" "$OVS_OUT"
	ovs_run pyop tmpfile "$SRC/dir"
	assertEquals "O_TMPFILE through the snapshot mount fails: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "with EOPNOTSUPP" "EOPNOTSUPP" "$OVS_OUT"
}

test_promise_ovsnapd_chardev_0_0_eperm() {
	take_first
	ovs_run "$FSOP" mknod-chr "$SRC/cdev" 0 0
	assertEquals "mknod c 0 0 fails with EPERM: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "EPERM" "$OVS_ERR" "(EPERM)"
	assertFalse "nothing created" "[ -e '$SRC/cdev' ]"
	ovs_run "$FSOP" mknod-chr "$SRC/null" 1 3
	assertEquals "another character device is created: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "it is one" "character special file 1:3" "$(stat -c '%F %Hr:%Lr' "$SRC/null")"
}

# lock_holder KIND FILE: a process that holds an exclusive lock (posix
# or flock) on FILE until killed; its pid in $USER_PID.
lock_holder() {
	start_user lock python3 -c '
import fcntl, os, signal, sys
fd = os.open(sys.argv[2], os.O_RDWR)
(fcntl.lockf if sys.argv[1] == "posix" else fcntl.flock)(fd, fcntl.LOCK_EX)
os.write(3, b"ready\n"); os.close(3)
signal.pause()' "$1" "$2"
}

# try_lock KIND FILE: "ok" or the errno name of a non-blocking lock.
try_lock() {
	python3 -c '
import errno, fcntl, os, sys
fd = os.open(sys.argv[2], os.O_RDWR)
try:
    (fcntl.lockf if sys.argv[1] == "posix" else fcntl.flock)(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])' "$1" "$2"
}

check_locks() {
	local kind=$1
	take_first
	lock_holder "$kind" "$SRC/file"
	# The kernel keeps the lock itself (the daemon serves no lock request).
	assertTrue "$kind: the lock is in the kernel's table" \
		"grep -qE '(POSIX|FLOCK) +ADVISORY +WRITE +$USER_PID ' /proc/locks"
	assertEquals "$kind: a second lock on the file is refused" "EAGAIN" \
		"$(try_lock "$kind" "$SRC/file")"
	assertEquals "$kind: another file is free" "ok" "$(try_lock "$kind" "$SRC/file2")"
	stop_user "$USER_PID"
	assertEquals "$kind: free once the holder is gone" "ok" "$(try_lock "$kind" "$SRC/file")"
}

test_promise_ovsnapd_posix_locks() {
	touch "$SRC/file2"
	check_locks posix
}

test_promise_ovsnapd_flock_locks() {
	touch "$SRC/file2"
	check_locks flock
}

test_promise_ovsnapd_identity_new_files_belong_to_caller() {
	take_first
	ovs_user || return
	mkdir "$SRC/pub" && chmod 1777 "$SRC/pub"
	assertEquals "a world-writable sticky dir through the mount" 0 $?
	mkdir "$SRC/pub/sg" && chgrp 123 "$SRC/pub/sg" && chmod 2777 "$SRC/pub/sg"
	assertEquals "a setgid dir of group 123 through the mount" 0 $?
	ovs_as_user touch "$SRC/pub/mine"
	assertEquals "the user creates a file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "it belongs to the user" "$OVS_UID:$OVS_GID" "$(stat -c %u:%g "$SRC/pub/mine")"
	ovs_as_user mkdir "$SRC/pub/sg/d"
	assertEquals "the user makes a dir in the setgid dir: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "it inherits the group" "$OVS_UID:123" "$(stat -c %u:%g "$SRC/pub/sg/d")"
	assertTrue "and the setgid bit" "[ -g '$SRC/pub/sg/d' ]"
	touch "$SRC/pub/roots"
	assertEquals "root's file in the sticky dir" 0 $?
	ovs_as_user rm -f "$SRC/pub/roots"
	assertNotEquals "the sticky dir protects root's file: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "root's file is still there" "[ -e '$SRC/pub/roots' ]"
}

test_promise_ovsnapd_kernel_clears_suid_sgid_after_write() {
	take_first
	ovs_user || return
	touch "$SRC/prog" && chmod 6777 "$SRC/prog"
	assertEquals "a setuid+setgid file of root's, writable by all" 0 $?
	assertEquals "with both bits" "6777" "$(stat -c %a "$SRC/prog")"
	ovs_as_user sh -c 'echo x >>"$1"' sh "$SRC/prog"
	assertEquals "another user writes it: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the write landed" "x" "$(cat "$SRC/prog")"
	assertEquals "the setuid and setgid bits are gone" "777" "$(stat -c %a "$SRC/prog")"
}

test_promise_ovsnapd_caller_loses_fs_capabilities() {
	take_first
	ovs_user || return
	mkdir -p "$SRC/closed" "$OVS_MNT/plain" && chmod 755 "$SRC/closed" "$OVS_MNT/plain"
	assertEquals "root's 0755 dirs, in SRC and beside it" 0 $?
	ovs_run setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups \
		--inh-caps=+dac_override --ambient-caps=+dac_override -- touch "$OVS_MNT/plain/f"
	assertEquals "CAP_DAC_OVERRIDE lets the user create outside SRC (the control): $(ovs_ran)" \
		0 "$OVS_RC"
	ovs_run setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups \
		--inh-caps=+dac_override --ambient-caps=+dac_override -- touch "$SRC/closed/f"
	assertNotEquals "not through the snapshot mount: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "permission denied" "$OVS_ERR" "Permission denied"
	assertFalse "nothing created" "[ -e '$SRC/closed/f' ]"
}

test_promise_ovsnapd_no_snapshot_preserves_nothing() {
	local st
	take_first
	ovs_run "$OVSNAP" drop "$SRC" 1
	assertEquals "drop the only snapshot: $(ovs_ran)" 0 "$OVS_RC"
	st=$(ovs_ctl status)
	assertContains "the daemon preserves into no layer ($st)" "$st" " layer=0 "
	printf 'changed\n' >"$SRC/file" && rm -r "$SRC/dir" && touch "$SRC/new"
	assertEquals "changes through the mount" 0 $?
	assertEquals "nothing was preserved: no layer in the store" "" \
		"$(ls "$OVS_MNT"/.ovsnap/*/layers)"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "the next take: $(ovs_ran)" 0 "$OVS_RC"
	printf 'again\n' >"$SRC/file"
	assertEquals "a change after it" 0 $?
	assertEquals "is preserved again" "changed" "$(cat "$(snap_upper "$OVS_OUT")/file")"
}

test_promise_ovsnapd_failed_take_keeps_old_layer() {
	local layers st
	take_first
	layers=$(ls -d "$OVS_MNT"/.ovsnap/*/layers)
	# The new layer's directories cannot be made.
	chattr +i "$layers" || { fail "chattr +i $layers"; return; }
	ovs_run "$OVSNAP" take "$SRC"
	chattr -i "$layers"
	assertEquals "the take fails: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertEquals "a one-line error" 1 "$(printf '%s\n' "$OVS_ERR" | grep -c .)"
	assertEquals "no snapshot registered" "1" "$(snap_ids)"
	st=$(ovs_ctl status)
	assertContains "the daemon keeps the old layer ($st)" "$st" " layer=1 "
	assertContains "its barrier is down ($st)" "$st" " barrier=0 "
	assertContains "nothing is held ($st)" "$st" " deferred=0 "
	printf 'changed\n' >"$SRC/file"
	assertEquals "changes pass" 0 $?
	assertEquals "and are preserved into the old layer" "original" "$(cat "$(snap_upper 1)/file")"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "the next take works: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "as snapshot 2" "1 2" "$(snap_ids)"
}

test_promise_ovsnapd_status_reply() {
	local st pid
	take_first
	exec 5<"$SRC/file"
	st=$(ovs_ctl status)
	exec 5<&-
	assertTrue "status is 'ok pid= layer= epoch= open= deferred= barrier= preserving= nodes= nodebytes= nodefds= fdbound= relocks= nswait= yields= fusedev= src=' ($st)" \
		"echo '$st' | grep -qxE 'ok pid=[0-9]+ layer=1 epoch=2 open=1 deferred=0 barrier=0 preserving=0 nodes=[0-9]+ nodebytes=[0-9]+ nodefds=[0-9]+ fdbound=(-1|[0-9]+) relocks=0 nswait=0/0 yields=0 fusedev=[0-9]+:[0-9]+ src=$SRC'"
	assertEquals "fusedev is the snapshot mount's device" \
		"$(mountpoint -d "$SRC")" "$(echo "$st" | sed -n 's/.* fusedev=\([0-9:]*\) .*/\1/p')"
	pid=$(echo "$st" | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
	assertEquals "pid is the daemon's" "ovsnapd" "$(cat "/proc/$pid/comm" 2>&1)"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	st=$(ovs_ctl status)
	assertContains "layer and epoch follow the takes ($st)" "$st" " layer=2 epoch=3 "
}

test_promise_ovsnapd_control_error_format() {
	local reply
	take_first
	reply=$(ovs_ctl "no-such-request")
	assertTrue "an unknown request: 'err ERRNO MESSAGE' ($reply)" \
		"echo '$reply' | grep -qxE 'err 22 .+'"
	reply=$(ovs_ctl "drop-active 99")
	assertTrue "a failing request: 'err ERRNO MESSAGE' ($reply)" \
		"echo '$reply' | grep -qxE 'err [0-9]+ .+'"
	assertEquals "the snapshot survives" "1" "$(snap_ids)"
}

test_promise_ovsnapd_quiesce() {
	local gate=$OVS_TMP/gate writer q st
	# A preserve into layer 1 that lasts until the test removes the gate.
	touch "$gate"
	OVSNAPD_TEST_HOOKS=1 OVSNAPD_TEST_PRESERVE_GATE=$gate take_first
	printf 'changed\n' >>"$SRC/file" &
	writer=$!
	for _ in $(seq 300); do
		st=$(ovs_ctl status)
		case $st in *" preserving=1"*) break ;; esac
		sleep 0.1
	done
	assertContains "the write preserves and waits at the gate ($st)" "$st" " preserving=1"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a take does not wait for it: $(ovs_ran)" 0 "$OVS_RC"
	ovs_ctl quiesce >"$OVS_TMP/quiesce" &
	q=$!
	assertContains "the preserve into the retired layer goes on" "$(ovs_ctl status)" " preserving=1"
	assertEquals "quiesce has not answered while it does" "" "$(cat "$OVS_TMP/quiesce")"
	rm -f "$gate"
	wait "$q"
	assertEquals "quiesce answers ok once it is done" "ok" "$(cat "$OVS_TMP/quiesce")"
	wait "$writer"
	assertEquals "the write went through" 0 $?
	assertContains "nothing preserves now" "$(ovs_ctl status)" " preserving=0"
}

test_promise_ovsnapd_test_hooks_need_env() {
	local reply
	(unset OVSNAPD_TEST_HOOKS; "$OVSNAP" take "$SRC" >/dev/null)
	assertEquals "take without the hooks" 0 $?
	reply=$(ovs_ctl "barrier-hold 10")
	assertContains "barrier-hold refused without OVSNAPD_TEST_HOOKS=1 ($reply)" "$reply" "err 22 "
	reply=$(ovs_ctl "take-crash-after 1")
	assertContains "take-crash-after refused too ($reply)" "$reply" "err 22 "
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "so a take does not crash: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	OVSNAPD_TEST_HOOKS=1 "$OVSNAP" activate "$SRC"
	assertEquals "activate with the hooks" 0 $?
	reply=$(ovs_ctl "barrier-hold 10")
	assertEquals "barrier-hold with OVSNAPD_TEST_HOOKS=1" "ok" "$reply"
}

. "$SHUNIT2"
