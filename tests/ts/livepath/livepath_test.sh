#!/bin/bash
# The live path behaves as the real filesystem underneath, compared with a
# directory of the same filesystem outside SRC (or an identical image):
# writes to files opened with O_APPEND (issue 11 item 4), the caller's
# rights and no more (item 10, DESIGN.md rule 19) and the xattr names a
# caller may list (item 11), the last two as the unprivileged test user.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd setfattr getfattr setpriv dd setcap getcap

LIVEOP=${OVSNAP_TOOLS}/tools/ovs-liveop

tearDown() {
	ovs_teardown
}

# An image ($FSTYPE, XFS by default) with SRC under a snapshot mount and
# NATIVE beside it.
live_and_native() {
	ovs_mkfs "${FSTYPE:-xfs}" || return 1
	SRC=$OVS_MNT/src
	NATIVE=$OVS_MNT/native
	mkdir -p "$SRC" "$NATIVE"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
}

# The real file under the snapshot mount, seen through a non-recursive bind
# mount of the filesystem: what the kernel caches must be what is on disk.
real_path() {
	if ! mountpoint -q "$OVS_TMP/under"; then
		ovs_mount_behind "$OVS_TMP/under"
	fi
	echo "$OVS_TMP/under/${1#"$OVS_MNT"/}"
}

# Item 4: writes that carry their own offset land there on a file opened
# with O_APPEND: the page writeback of a shared mapping, and
# pwritev2(RWF_NOAPPEND).
test_append_offset_writes_land_at_offset() {
	local d
	live_and_native || return
	for d in "$SRC" "$NATIVE"; do
		printf 0123456789abcdef >"$d/f"
		ovs_run "$LIVEOP" mmap "$d/f" 0 XXXX
		assertEquals "mmap write in $d: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "mmap write in $d: stderr" "" "$OVS_ERR"
		printf 0123456789abcdef >"$d/g"
		ovs_run "$LIVEOP" noappend "$d/g" 4 YY
		assertEquals "pwritev2 in $d: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "pwritev2 in $d: stderr" "" "$OVS_ERR"
	done
	assertEquals "mmap: native result" XXXX456789abcdef "$(cat "$NATIVE/f")"
	assertEquals "mmap: the live file as the native one" XXXX456789abcdef "$(cat "$SRC/f")"
	assertEquals "mmap: the real file under the mount" XXXX456789abcdef \
		"$(cat "$(real_path "$SRC/f")")"
	assertEquals "pwritev2: native result" 0123YY6789abcdef "$(cat "$NATIVE/g")"
	assertEquals "pwritev2: the live file as the native one" 0123YY6789abcdef "$(cat "$SRC/g")"
}

# Item 4: plain appends still append, from two handles in turn and from two
# processes at once (none overwrites another, whatever the interleaving).
test_append_two_handles_still_append() {
	local d n=1000
	live_and_native || return
	for d in "$SRC" "$NATIVE"; do
		printf 'head\n' >"$d/turns"
		ovs_run "$LIVEOP" alternate "$d/turns" 3
		assertEquals "two handles in turn in $d: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "two handles in turn in $d: stderr" "" "$OVS_ERR"
		ovs_run "$LIVEOP" race "$d/race" "$n"
		assertEquals "two appending processes in $d: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "two appending processes in $d: stderr" "" "$OVS_ERR"
	done
	assertEquals "in turn: the live file as the native one" \
		"$(cat "$NATIVE/turns")" "$(cat "$SRC/turns")"
	assertEquals "in turn: every record in order" \
		"head a0000001 b0000001 a0000002 b0000002 a0000003 b0000003" \
		"$(tr '\n' ' ' <"$SRC/turns" | sed 's/ $//')"
	assertEquals "at once: the size" $((2 * n * 9)) "$(stat -c %s "$SRC/race")"
	assertEquals "at once: every record once" \
		"$(sort "$NATIVE/race")" "$(sort "$SRC/race")"
	assertEquals "at once: each writer's records in order" \
		"$(grep ^a "$NATIVE/race")" "$(grep ^a "$SRC/race")"
}

# Item 10: a user stops at ENOSPC where the filesystem keeps blocks for
# root, as natively, while preserving (root's work) can still use them.
test_user_cannot_spend_reserved_blocks() {
	local img live native size_live size_native diff tolerance=$((256 * 1024))
	ovs_user || return
	# Two identical 32 MB ext4 images (5% reserved for root), each with
	# a snapshot volume; the first one's mount is switched off again so
	# that its SRC is the real directory.
	for img in native live; do
		ovs_mkfs ext4 32M || return
		mkdir -p "$OVS_MNT/src/u"
		head -c 65536 /dev/zero | tr '\0' o >"$OVS_MNT/src/u/old"
		chown -R "$OVS_UID:$OVS_GID" "$OVS_MNT/src/u"
		ovs_run "$OVSNAP" take "$OVS_MNT/src"
		assertEquals "take on the $img image: $(ovs_ran)" 0 "$OVS_RC"
		eval "$img=\$OVS_MNT/src"
	done
	ovs_run "$OVSNAP" deactivate "$native"
	assertEquals "deactivate the native image's volume: $(ovs_ran)" 0 "$OVS_RC"

	# count: never more than the image, whatever went wrong before.
	ovs_as_user dd if=/dev/zero of="$native/u/fill" bs=64k count=512
	assertEquals "native fill ends in an error" 1 "$OVS_RC"
	assertContains "native fill: ENOSPC" "$OVS_ERR" "No space left on device"
	ovs_as_user dd if=/dev/zero of="$live/u/fill" bs=64k count=512
	assertEquals "live fill ends in an error" 1 "$OVS_RC"
	assertContains "live fill: ENOSPC" "$OVS_ERR" "No space left on device"
	size_native=$(stat -c %s "$native/u/fill")
	size_live=$(stat -c %s "$live/u/fill")
	diff=$((size_live - size_native))
	assertTrue "the user wrote $size_live bytes through the live path, $size_native natively" \
		"[ ${diff#-} -le $tolerance ]"

	# A change of an object of the snapshot needs a preserve first, into
	# the store on this full filesystem: root's reserve pays for it.
	ovs_as_user dd if=/dev/zero of="$native/u/old" bs=4 count=1 conv=notrunc
	assertEquals "native overwrite in place on a full filesystem: $(ovs_ran)" 0 "$OVS_RC"
	ovs_as_user dd if=/dev/zero of="$live/u/old" bs=4 count=1 conv=notrunc
	assertEquals "live overwrite in place on a full filesystem: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the overwrite is in the live file" 4 \
		"$(tr -d 'o' <"$live/u/old" | wc -c)"
	assertEquals "snapshot 1 kept the old contents" 65536 \
		"$(find "$OVS_MNT/.ovsnap" -path '*/layers/1/upper/u/old' -exec cat {} + | tr -d '\0' | wc -c)"
}

# Item 10 / rule 19: no CAP_FSETID, CAP_FOWNER for a user.  Their write(2)
# to a setgid file clears the bit, a write through a shared mapping does
# not, as natively, and what the kernel shows is what is on disk; their
# write to a file with file capabilities removes those (the kernel does it
# on its own authority).
test_user_write_clears_privileges_as_natively() {
	local d
	live_and_native || return
	ovs_user || return
	for d in "$SRC" "$NATIVE"; do
		printf 'data\n' >"$d/sg"
		chgrp "$OVS_GID" "$d/sg"
		chmod 2775 "$d/sg"
		ovs_as_user sh -c "printf more >>'$d/sg'"
		assertEquals "a user's write to $d/sg: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "setgid cleared by the write in $d" 775 "$(stat -c %a "$d/sg")"
		[ "$d" = "$SRC" ] && assertEquals "on disk after the write" 775 \
			"$(stat -c %a "$(real_path "$SRC/sg")")"
		chmod 2775 "$d/sg"
		ovs_as_user "$LIVEOP" mmap "$d/sg" 0 DATA
		assertEquals "a user's mmap write to $d/sg: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "setgid kept after the mmap write in $d" 2775 "$(stat -c %a "$d/sg")"
		printf 'data\n' >"$d/caps"
		chmod 666 "$d/caps"
		setcap cap_net_raw+ep "$d/caps"
		assertEquals "setcap in $d" 0 $?
		ovs_as_user sh -c "printf more >>'$d/caps'"
		assertEquals "a user's write to a file with capabilities in $d: $(ovs_ran)" 0 "$OVS_RC"
		ovs_run getcap "$d/caps"
		assertEquals "the file capabilities are gone in $d: $(ovs_ran)" "" "$OVS_OUT"
		printf 'x\n' >"$d/roots"
		chmod 666 "$d/roots"
		ovs_as_user chmod 777 "$d/roots"
		assertEquals "a user's chmod of root's file in $d" 1 "$OVS_RC"
		assertContains "a user's chmod of root's file in $d: EPERM" "$OVS_ERR" \
			"Operation not permitted"
	done
	assertEquals "on disk after the mmap write" 2775 "$(stat -c %a "$(real_path "$SRC/sg")")"
	assertEquals "the data" "DATA more" "$(tr '\n' ' ' <"$SRC/sg")"
}

# Item 11: a user lists the xattr names the real filesystem lists to them
# (XFS hides trusted.* from callers without CAP_SYS_ADMIN).  listxattr(2)
# itself: getfattr -d would hide the names it then cannot read.
test_user_lists_xattrs_as_natively() {
	local d out_native
	live_and_native || return
	ovs_user || return
	for d in "$SRC" "$NATIVE"; do
		printf 'x\n' >"$d/x"
		setfattr -n trusted.secret -v 1 "$d/x" &&
			setfattr -n user.color -v blue "$d/x" &&
			setfattr -n security.label -v l "$d/x"
		assertEquals "set the xattrs in $d" 0 $?
	done
	ovs_as_user "$LIVEOP" listxattr "$NATIVE/x"
	assertEquals "native listxattr as the user: $(ovs_ran)" 0 "$OVS_RC"
	out_native=$OVS_OUT
	assertEquals "the native listing: no trusted.* name" "security.label user.color" \
		"$(echo "$out_native" | paste -sd" ")"
	ovs_as_user "$LIVEOP" listxattr "$SRC/x"
	assertEquals "live listxattr as the user: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "live listxattr as the user: stderr" "" "$OVS_ERR"
	assertEquals "the user lists the names a native listing shows" "$out_native" "$OVS_OUT"
	ovs_as_user getfattr -d -m - "$SRC/x"
	assertEquals "getfattr -d as the user: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "getfattr -d as the user: user.color" "$OVS_OUT" 'user.color="blue"'
	assertNotContains "getfattr -d as the user: no trusted.*" "$OVS_OUT" trusted.
	ovs_run "$LIVEOP" listxattr "$SRC/x"
	assertEquals "root's listxattr: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "root still lists trusted.*" "security.label trusted.secret user.color" \
		"$(echo "$OVS_OUT" | paste -sd" ")"
}

. "$SHUNIT2"
