#!/bin/bash
# An unlink of the only name of a file that existed at the take moves the
# file itself into the snapshot's layer on XFS (issue 12 item 1): the
# snapshot shows it as it was, and nothing reaches it through the live
# path afterwards.  A file that is open, or reached otherwise, is copied
# as before.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd setfattr getfattr setpriv

tearDown() {
	ovs_teardown
}

# volume [ENV...]: XFS with SRC holding d/f (metadata of every kind), p,
# o, x (a user's trusted.overlay.foo), i (immutable), u/ (the test
# user's) and t/ (sticky: the user's mine, root's roots), snapshot 1
# taken with ENV in the daemon's environment; $UPPER is snapshot 1's
# upper.
volume() {
	ovs_mkfs xfs || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/d" "$SRC/u" "$SRC/t"
	chmod 1777 "$SRC/t"
	printf 'only name\n' >"$SRC/d/f"
	chown 12:34 "$SRC/d/f"
	chmod 4750 "$SRC/d/f"
	setfattr -n user.a -v one "$SRC/d/f"
	touch -d '2001-02-03 04:05:06.123456789' "$SRC/d/f"
	printf 'held by O_PATH\n' >"$SRC/p"
	printf 'open\n' >"$SRC/o"
	printf 'mine\n' >"$SRC/u/mine"
	printf 'mine too\n' >"$SRC/t/mine"
	printf 'roots\n' >"$SRC/t/roots"
	printf 'overlay xattr\n' >"$SRC/x"
	setfattr -n trusted.overlay.foo -v bar "$SRC/x"
	printf 'immutable\n' >"$SRC/i"
	chattr +i "$SRC/i" || { fail "chattr +i"; return 1; }
	ovs_user || return
	chown -R "$OVS_UID:$OVS_GID" "$SRC/u" "$SRC/t/mine"
	INO_F=$(stat -c %i "$SRC/d/f")
	CTIME_F=$(stat -c %Z "$SRC/d/f")
	INO_O=$(stat -c %i "$SRC/o")
	INO_MINE=$(stat -c %i "$SRC/u/mine")
	INO_P=$(stat -c %i "$SRC/p")
	INO_T=$(stat -c %i "$SRC/t/mine")
	INO_ROOTS=$(stat -c %i "$SRC/t/roots")
	ovs_run env "$@" "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	UPPER=$(ovs_snapshot_layers "$SRC" | awk '$1 == 1 { print $2 }')
	assertNotNull "snapshot 1's upper" "$UPPER"
}

# view_of PATH: what snapshot 1 shows at PATH: content, mode, owner, mtime,
# inode number, ctime and user.a.
view_of() {
	local v=$OVS_TMP/view
	mkdir -p "$v"
	"$OVSNAP" mount "$SRC" 1 "$v" || { echo "mount failed"; return; }
	printf '%s|%s|%s\n' "$(cat "$v/$1" 2>&1)" \
		"$(stat -c '%a %u:%g %Y %i %Z' "$v/$1" 2>&1)" \
		"$(getfattr --only-values -n user.a "$v/$1" 2>/dev/null)"
	"$OVSNAP" umount "$v" >/dev/null
}

test_promise_ovsnapd_unlink_moves_file() {
	volume || return
	ovs_run rm "$SRC/d/f"
	assertEquals "rm: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "gone from the live tree" "[ -e '$SRC/d/f' ]"
	assertEquals "the layer holds the file itself" "$INO_F" "$(stat -c %i "$UPPER/d/f")"
	assertEquals "snapshot 1 shows it as it was (its own inode number and ctime)" \
		"only name|4750 12:34 981173106 $INO_F $CTIME_F|one" "$(view_of d/f)"
	# x's trusted.overlay.foo in SRC is an fsck error of its own
	rm "$SRC/x"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n: $(ovs_ran)" 0 "$OVS_RC"
}

# A file still open when it is unlinked is written on afterwards: its
# snapshot is a copy, which the writes do not reach.
test_promise_ovsnapd_unlink_open_file_copies() {
	volume || return
	cat >"$OVS_TMP/open.py" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.unlink(sys.argv[1])
os.write(fd, b"OVERWRITTEN")
os.fchmod(fd, 0o600)
os.close(fd)
PY
	ovs_run "$ovs__python3" "$OVS_TMP/open.py" "$SRC/o"
	assertEquals "write and chmod after the unlink: $(ovs_ran)" 0 "$OVS_RC"
	assertNotEquals "the layer holds a copy" "$INO_O" "$(stat -c %i "$UPPER/o")"
	assertEquals "snapshot 1 shows the file as it was" "open" "$(cat "$UPPER/o")"
	assertEquals "and its mode" 644 "$(stat -c %a "$UPPER/o")"
}

# An O_PATH descriptor opens no handle the daemon sees: the file moves,
# and then nothing done through the descriptor may reach the layer.
test_promise_ovsnapd_moved_file_unreachable() {
	volume || return
	cat >"$OVS_TMP/opath.py" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_PATH)
os.unlink(sys.argv[1])
magic = "/proc/self/fd/%d" % fd
for what, call in (("chmod", lambda: os.chmod(magic, 0o777)),
                   ("utime", lambda: os.utime(magic, (1, 1))),
                   ("open", lambda: os.close(os.open(magic, os.O_WRONLY))),
                   ("setxattr", lambda: os.setxattr(magic, "user.x", b"1"))):
    try:
        call()
        print(what, "done")
    except OSError as e:
        print(what, "refused")
PY
	ovs_run "$ovs__python3" "$OVS_TMP/opath.py" "$SRC/p"
	assertEquals "through the descriptor: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "every change refused" "chmod refused
utime refused
open refused
setxattr refused" "$OVS_OUT"
	assertEquals "the layer holds the file itself, unchanged" \
		"$INO_P 644 held by O_PATH" "$(stat -c '%i %a' "$UPPER/p") $(cat "$UPPER/p")"
	assertNotEquals "its mtime" 1 "$(stat -c %Y "$UPPER/p")"
	assertEquals "no user.x" "" "$(getfattr --only-values -n user.x "$UPPER/p" 2>/dev/null)"
}

# A user's unlink is theirs (rule 19): in their own folder the file
# moves once the daemon has checked, as the user, that they may remove
# names there; in root's folder the kernel refuses them first
# (default_permissions) and nothing moves.  In a sticky folder, whose
# rule also asks who owns the file, the daemon leaves the check to the
# unlink as the user: their file is copied; root's own unlink moves.
test_user_unlink() {
	volume || return
	ovs_as_user rm "$SRC/u/mine"
	assertEquals "the user's rm of their file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the layer holds the file itself" "$INO_MINE" "$(stat -c %i "$UPPER/u/mine")"
	ovs_as_user rm -f "$SRC/d/f"
	assertEquals "the user's rm in root's folder fails" 1 "$OVS_RC"
	assertContains "with EACCES" "$OVS_ERR" "Permission denied"
	assertTrue "the file stays" "[ -f '$SRC/d/f' ]"
	assertFalse "nothing in the layer" "[ -e '$UPPER/d/f' ]"
	ovs_as_user rm "$SRC/t/mine"
	assertEquals "the user's rm of their file in a sticky folder: $(ovs_ran)" 0 "$OVS_RC"
	assertNotEquals "the layer holds a copy" "$INO_T" "$(stat -c %i "$UPPER/t/mine")"
	assertEquals "of the file as it was" "mine too" "$(cat "$UPPER/t/mine")"
	ovs_run rm "$SRC/t/roots"
	assertEquals "root's rm in the sticky folder: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the layer holds root's file itself" "$INO_ROOTS" \
		"$(stat -c %i "$UPPER/t/roots")"
}

# Where the move is refused at the unlink itself (a user's
# trusted.overlay.* xattr, rule 14; an immutable file, which XFS will not
# rename), the unlink goes back to its preserve phase and copies: the
# copy is escaped, and the immutable file stays with its unlink refused
# as natively.
test_unlink_refused_move_copies() {
	volume || return
	ovs_run rm "$SRC/x"
	assertEquals "rm of the file with trusted.overlay.foo: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "its copy in the layer, escaped" "bar" \
		"$(getfattr --only-values -n trusted.overlay.overlay.foo "$UPPER/x" 2>/dev/null)"
	assertEquals "and unescaped nowhere" "" \
		"$(getfattr --only-values -n trusted.overlay.foo "$UPPER/x" 2>/dev/null)"
	ovs_run rm -f "$SRC/i"
	assertEquals "rm of the immutable file fails" 1 "$OVS_RC"
	assertContains "with EPERM" "$OVS_ERR" "Operation not permitted"
	assertEquals "it stays, readable" immutable "$(cat "$SRC/i")"
}

# The test hook that keeps to copies (a baseline for
# bench/metadata-bench.sh): the snapshot is the same, the layer holds a
# copy.
test_no_move_hook_copies() {
	volume OVSNAPD_TEST_HOOKS=1 OVSNAPD_TEST_NO_MOVE=1 || return
	ovs_run rm "$SRC/d/f"
	assertEquals "rm: $(ovs_ran)" 0 "$OVS_RC"
	assertNotEquals "the layer holds a copy" "$INO_F" "$(stat -c %i "$UPPER/d/f")"
	assertEquals "snapshot 1 shows it as it was" \
		"only name|4750 12:34 981173106 $INO_F $CTIME_F|one" "$(view_of d/f)"
}

. "$SHUNIT2"
