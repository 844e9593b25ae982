#!/bin/bash
# The preservation rules through the live snapshot mount, one test per rule
# and corner case (DESIGN.md section 2): take a snapshot, change SRC
# through the mount, switch protection off, and compare a stock read-only
# overlay of the snapshot's layers with the manifest recorded at the take.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

FSOP=${OVSNAP_TOOLS}/tools/ovs-fsop
MANIFEST=${OVSNAP_TOOLS}/tools/ovs-manifest

# A fresh XFS image with a small tree, protected, snapshot 1 taken and its
# manifest recorded.
setUp() {
	ovs_mkfs "${FSTYPE:-xfs}" 4G || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$SRC/dir/sub" "$SRC/empty" "$MF"
	printf 'original\n' >"$SRC/file"
	printf 'linked\n' >"$SRC/dir/hl1"
	ln "$SRC/dir/hl1" "$SRC/dir/hl2"
	printf 'deep\n' >"$SRC/dir/sub/deep"
	ln -s ../file "$SRC/dir/link"
	mkfifo "$SRC/fifo"
	setfattr -n user.color -v blue "$SRC/file"
	chown 1000:1000 "$SRC/dir/sub/deep"
	touch -d '2020-01-02 03:04:05.123456789' "$SRC/file" "$SRC/dir/sub"
	# The reference: the same tree on the plain filesystem, changed by the
	# same commands as SRC (live), must end up like the live tree.
	REF=$OVS_MNT/ref
	cp -a "$SRC" "$REF" || { fail "cp -a $SRC $REF"; return 1; }
	take_snapshot
}

tearDown() {
	ovs_teardown
}

ovs_wait_for_file() {
	local i
	for i in $(seq 1000); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	fail "timed out waiting for $1"
}

# The upper directory of snapshot ID.
ovs_snapshot_upper() {
	ovs_snapshot_layers "$1" | awk -v id="$2" '$1 == id { sub(/^[0-9]+ /, ""); print }'
}

# Take a snapshot and record the manifest of SRC as it is at the take.
take_snapshot() {
	local id
	"$MANIFEST" "$SRC" >"$MF/pending" || fail "manifest of $SRC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take exit status (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	mv "$MF/pending" "$MF/$id.manifest"
}

# live 'COMMANDS': run the shell COMMANDS with $S the live tree (SRC,
# through the snapshot mount), then with $S the reference tree (REF, the
# plain filesystem).  Both must succeed: a change the daemon refuses fails
# the test here, and check_live then compares the two trees.
live() {
	live_status 0 "$1"
}

# live_status WANT 'COMMANDS': like live, for COMMANDS that must exit WANT
# on both trees (a refusal the real filesystem makes too).
live_status() {
	local S rc

	S=$SRC
	(eval "$2") >"$OVS_TMP/.live.out" 2>&1
	rc=$?
	assertEquals "through the live mount: $2: $(cat "$OVS_TMP/.live.out")" "$1" "$rc"
	S=$REF
	(eval "$2") >"$OVS_TMP/.live.out" 2>&1
	rc=$?
	assertEquals "on the reference tree: $2: $(cat "$OVS_TMP/.live.out")" "$1" "$rc"
}

# The live tree equals the reference tree, every file's content, type,
# mode, owner, xattrs, ACLs and hard links (mtimes aside: the two were
# changed at different times; mtimes set on purpose are asserted where
# they are set).
check_live() {
	local diffs

	"$MANIFEST" "$SRC" | sed -E 's/ mtime=[0-9.]+//' >"$OVS_TMP/live.manifest"
	"$MANIFEST" "$REF" | sed -E 's/ mtime=[0-9.]+//' >"$OVS_TMP/ref.manifest"
	diffs=$(diff -u "$OVS_TMP/ref.manifest" "$OVS_TMP/live.manifest" | head -40 | cut -c1-300)
	assertEquals "the live tree after the changes equals the same changes on a plain filesystem:
$diffs" "" "$diffs"
}

# live_mtime PATH DATE: PATH in the live tree has the mtime DATE.
live_mtime() {
	assertEquals "mtime of $1 in the live tree" "$(date -d "$2" +%s)" "$(stat -c %Y "$SRC/$1")"
}

# Every snapshot equals its manifest (through stock overlayfs), after the
# live tree was checked against the reference.
check_snapshots() {
	check_live
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate (stderr: $OVS_ERR)" 0 "$OVS_RC"
	ovs_oracle_check "$SRC" "$MF"
}

test_modify_file() {
	live 'printf "changed\n" >>"$S/file"'
	check_snapshots
}

test_truncate() {
	live 'truncate -s 2 "$S/file"'
	check_snapshots
}

test_open_with_o_trunc() {
	live 'printf "new" >"$S/file"'
	check_snapshots
}

test_chmod_chown_utimes_file() {
	live 'chmod 600 "$S/file"'
	live 'chown 1:1 "$S/dir/sub/deep"'
	live 'touch -d "2001-01-01" "$S/dir/hl1"'
	live_mtime dir/hl1 2001-01-01
	check_snapshots
}

test_chmod_chown_utimes_directory() {
	live 'chmod 700 "$S/dir/sub"'
	live 'chown 2:2 "$S/empty"'
	live 'touch -d "2002-02-02" "$S/dir"'
	live_mtime dir 2002-02-02
	check_snapshots
}

test_xattrs_and_acls() {
	live 'setfattr -n user.color -v red "$S/file"'
	live 'setfattr -n user.new -v 1 "$S/dir/sub/deep"'
	live 'setfattr -x user.color "$S/file"'
	live 'setfacl -m u:1234:rwx "$S/dir"'
	check_snapshots
}

test_create_puts_whiteout() {
	live 'printf "born later\n" >"$S/newfile"'
	live 'mkdir "$S/newdir"'
	live 'printf "x\n" >"$S/newdir/inner"'
	check_snapshots
}

test_unlink_then_recreate() {
	live 'rm "$S/file"'
	live 'printf "impostor\n" >"$S/file"'
	check_snapshots
}

test_rmdir_then_recreate_is_opaque() {
	live 'rm -r "$S/dir/sub"'
	live 'mkdir "$S/dir/sub"'
	live 'printf "other\n" >"$S/dir/sub/other"'
	check_snapshots
}

test_rename_directory_then_change_under_new_name() {
	local ino
	ino=$(stat -c %i "$SRC/dir")
	live 'mv "$S/dir" "$S/moved"'
	assertEquals "the renamed directory is the same inode" "$ino" "$(stat -c %i "$SRC/moved")"
	live 'printf "later\n" >>"$S/moved/sub/deep"'
	live 'rm "$S/moved/hl1"'
	check_snapshots
}

test_write_under_directory_renamed_after_take() {
	local rc
	exec 7>>"$SRC/dir/sub/deep"
	assertEquals "open for append through the live mount" 0 $?
	live 'mv "$S/dir" "$S/elsewhere"'
	printf 'through old fd\n' >&7
	rc=$?
	assertEquals "write through the fd opened before the rename" 0 "$rc"
	exec 7>&-
	printf 'through old fd\n' >>"$REF/elsewhere/sub/deep"
	check_snapshots
}

test_rename_file_keeps_old_name() {
	local ino
	ino=$(stat -c %i "$SRC/file")
	live 'mv "$S/file" "$S/dir/renamed"'
	# A rename, not mv's copy and unlink after a refused one (EXDEV).
	assertEquals "the renamed file is the same inode" "$ino" "$(stat -c %i "$SRC/dir/renamed")"
	check_snapshots
}

test_rename_over_existing_target() {
	live 'printf "replacement\n" >"$S/repl"'
	take_snapshot
	live 'mv "$S/repl" "$S/file"'
	check_snapshots
}

test_rename_noreplace() {
	ovs_run "$FSOP" noreplace "$SRC/dir/hl1" "$SRC/file"
	assertNotEquals "RENAME_NOREPLACE over an existing name fails" 0 "$OVS_RC"
	assertContains "RENAME_NOREPLACE over an existing name: EEXIST" "$OVS_ERR" "exists"
	live '"$FSOP" noreplace "$S/dir/hl1" "$S/fresh"'
	check_snapshots
}

test_rename_exchange_files() {
	live '"$FSOP" exchange "$S/file" "$S/dir/sub/deep"'
	check_snapshots
}

test_rename_exchange_directory_with_file() {
	live '"$FSOP" exchange "$S/dir/sub" "$S/file"'
	check_snapshots
}

test_hard_link_modified_through_one_name() {
	live 'printf "via hl2\n" >>"$S/dir/hl2"'
	check_snapshots
}

# Rule 6 with names that moved: one name renamed in an earlier epoch and
# in this one, then the inode changed through the other name and its
# directory renamed.  Every snapshot shows both names, linked.
test_hard_link_renamed_then_modified_through_the_other_name() {
	live 'mv "$S/dir/hl2" "$S/hl2moved"'
	take_snapshot
	live 'mv "$S/hl2moved" "$S/dir/sub/hl2again"'
	take_snapshot
	live 'printf "via hl1\n" >>"$S/dir/hl1"'
	live 'mv "$S/dir" "$S/dir2"'
	live 'printf "again\n" >>"$S/dir2/sub/hl2again"'
	live 'rm "$S/dir2/hl1"'
	check_snapshots
}

test_hard_link_created_after_take() {
	live 'ln "$S/file" "$S/dir/newlink"'
	live 'printf "both\n" >>"$S/dir/newlink"'
	check_snapshots
}

test_symlink_and_fifo() {
	live 'rm "$S/dir/link" "$S/fifo"'
	live 'ln -s elsewhere "$S/dir/link"'
	live 'mkfifo "$S/newfifo"'
	check_snapshots
}

test_whiteout_device_is_refused() {
	ovs_run "$FSOP" mknod-chr "$SRC/wh" 0 0
	assertEquals "mknod 0/0 is refused with EPERM" 1 "$OVS_RC"
	assertFalse "no 0/0 device in SRC" "[ -e '$SRC/wh' ]"
	check_snapshots
}

test_file_open_for_write_across_take() {
	"$FSOP" write-hold "$SRC/file" before- after-- "$OVS_TMP/ready" "$OVS_TMP/go" &
	local pid=$!
	ovs_wait_for_file "$OVS_TMP/ready"
	take_snapshot
	touch "$OVS_TMP/go"
	wait $pid
	assertEquals "writer exit" 0 $?
	live_status 0 '[ "$S" = "$SRC" ] || { touch "$OVS_TMP/go2"; "$FSOP" write-hold "$S/file" before- after-- "$OVS_TMP/ready2" "$OVS_TMP/go2"; }'
	check_snapshots
}

test_mmap_write_after_take() {
	live '"$FSOP" mmap-write "$S/file" 2 MMAP'
	check_snapshots
}

test_mmap_dirty_before_take_belongs_to_snapshot() {
	"$FSOP" mmap-dirty "$SRC/file" 0 DIRTY "$OVS_TMP/ready" "$OVS_TMP/go" &
	local pid=$!
	ovs_wait_for_file "$OVS_TMP/ready"
	# The page is dirty in the kernel, not yet written to the daemon: the
	# take must force it out and record it in the snapshot.  The manifest
	# is recorded right after the take (nothing changes in between): the
	# file's mtime is the time the daemon got the write, at the take,
	# since the kernel sends no mtime of its own for a dirty page.  Were
	# the page written back after the switch, the snapshot would show the
	# old content and differ from it.
	local id
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take exit status (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	"$MANIFEST" "$SRC" >"$MF/$id.manifest" || fail "manifest of $SRC"
	touch "$OVS_TMP/go"
	wait $pid
	assertEquals "mmap-dirty exit" 0 $?
	live_status 0 '[ "$S" = "$SRC" ] || { touch "$OVS_TMP/go2"; "$FSOP" mmap-dirty "$S/file" 0 DIRTY "$OVS_TMP/ready2" "$OVS_TMP/go2"; }'
	live 'printf "after\n" >"$S/file"'
	check_snapshots
}

# Rule 16: the daemon's own look into a directory (is it empty?) before an
# rmdir must not touch its atime before the copy-up records it.  relatime
# updates an atime older than the mtime on the first read.  No manifest:
# it would read the directory itself.
test_rmdir_keeps_atime_of_the_directory() {
	local id upper
	live 'mkdir "$S/adir" "$S/bdir" "$S/target"'
	live 'touch -a -d "2001-02-03 04:05:06" "$S/adir" "$S/bdir"'
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	live 'rmdir "$S/adir"'
	live 'mv -T "$S/target" "$S/bdir"'
	assertFalse "adir is gone from the live tree" "[ -e '$SRC/adir' ]"
	upper=$(ovs_snapshot_upper "$SRC" "$id")
	assertEquals "atime of the directory preserved before rmdir" \
		"$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %X "$upper/adir")"
	assertEquals "atime of the directory preserved before a rename over it" \
		"$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %X "$upper/bdir")"
}

test_big_file_modified_after_take_is_cloned() {
	local rc
	dd if=/dev/urandom of="$REF/big" bs=1M count=1024 status=none
	cp "$REF/big" "$SRC/big"
	rc=$?
	assertEquals "write 1 GiB through the live mount" 0 "$rc"
	take_snapshot
	dd if=/dev/zero of="$SRC/big" bs=4k count=1 conv=notrunc status=none
	rc=$?
	assertEquals "overwrite 4 KiB through the live mount" 0 "$rc"
	dd if=/dev/zero of="$REF/big" bs=4k count=1 conv=notrunc status=none
	# A clone shares all extents with the live file: the layer's copy
	# must not have taken another GiB.
	local upper used
	upper=$(ovs_snapshot_upper "$SRC" 2)
	used=$(du -sk --apparent-size "$upper/big" | cut -f1)
	assertEquals "the copy is the whole file" 1048576 "$used"
	local shared
	shared=$(filefrag -v "$upper/big" | grep -c shared || true)
	assertTrue "extents of the copy are shared (a clone): $shared" "[ $shared -gt 0 ]"
	check_snapshots
}

. "$SHUNIT2"
