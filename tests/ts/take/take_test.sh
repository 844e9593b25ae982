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

# Every snapshot equals its manifest (through stock overlayfs).
check_snapshots() {
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate (stderr: $OVS_ERR)" 0 "$OVS_RC"
	ovs_oracle_check "$SRC" "$MF"
}

test_modify_file() {
	printf 'changed\n' >>"$SRC/file"
	check_snapshots
}

test_truncate() {
	truncate -s 2 "$SRC/file"
	check_snapshots
}

test_open_with_o_trunc() {
	printf 'new' >"$SRC/file"
	check_snapshots
}

test_chmod_chown_utimes_file() {
	chmod 600 "$SRC/file"
	chown 1:1 "$SRC/dir/sub/deep"
	touch -d '2001-01-01' "$SRC/dir/hl1"
	check_snapshots
}

test_chmod_chown_utimes_directory() {
	chmod 700 "$SRC/dir/sub"
	chown 2:2 "$SRC/empty"
	touch -d '2002-02-02' "$SRC/dir"
	check_snapshots
}

test_xattrs_and_acls() {
	setfattr -n user.color -v red "$SRC/file"
	setfattr -n user.new -v 1 "$SRC/dir/sub/deep"
	setfattr -x user.color "$SRC/file"
	setfacl -m u:1234:rwx "$SRC/dir"
	check_snapshots
}

test_create_puts_whiteout() {
	printf 'born later\n' >"$SRC/newfile"
	mkdir "$SRC/newdir"
	printf 'x\n' >"$SRC/newdir/inner"
	check_snapshots
}

test_unlink_then_recreate() {
	rm "$SRC/file"
	printf 'impostor\n' >"$SRC/file"
	check_snapshots
}

test_rmdir_then_recreate_is_opaque() {
	rm -r "$SRC/dir/sub"
	mkdir "$SRC/dir/sub"
	printf 'other\n' >"$SRC/dir/sub/other"
	check_snapshots
}

test_rename_directory_then_change_under_new_name() {
	mv "$SRC/dir" "$SRC/moved"
	printf 'later\n' >>"$SRC/moved/sub/deep"
	rm "$SRC/moved/hl1"
	check_snapshots
}

test_write_under_directory_renamed_after_take() {
	exec 7>>"$SRC/dir/sub/deep"
	mv "$SRC/dir" "$SRC/elsewhere"
	printf 'through old fd\n' >&7
	exec 7>&-
	check_snapshots
}

test_rename_file_keeps_old_name() {
	mv "$SRC/file" "$SRC/dir/renamed"
	check_snapshots
}

test_rename_over_existing_target() {
	printf 'replacement\n' >"$SRC/repl"
	take_snapshot
	mv "$SRC/repl" "$SRC/file"
	check_snapshots
}

test_rename_noreplace() {
	ovs_run "$FSOP" noreplace "$SRC/dir/hl1" "$SRC/file"
	assertNotEquals "RENAME_NOREPLACE over an existing name fails" 0 "$OVS_RC"
	ovs_run "$FSOP" noreplace "$SRC/dir/hl1" "$SRC/fresh"
	assertEquals "RENAME_NOREPLACE to a free name: $OVS_ERR" 0 "$OVS_RC"
	check_snapshots
}

test_rename_exchange_files() {
	ovs_run "$FSOP" exchange "$SRC/file" "$SRC/dir/sub/deep"
	assertEquals "RENAME_EXCHANGE: $OVS_ERR" 0 "$OVS_RC"
	check_snapshots
}

test_rename_exchange_directory_with_file() {
	ovs_run "$FSOP" exchange "$SRC/dir/sub" "$SRC/file"
	assertEquals "RENAME_EXCHANGE: $OVS_ERR" 0 "$OVS_RC"
	check_snapshots
}

test_hard_link_modified_through_one_name() {
	printf 'via hl2\n' >>"$SRC/dir/hl2"
	check_snapshots
}

# Rule 6 with names that moved: one name renamed in an earlier epoch and
# in this one, then the inode changed through the other name and its
# directory renamed.  Every snapshot shows both names, linked.
test_hard_link_renamed_then_modified_through_the_other_name() {
	mv "$SRC/dir/hl2" "$SRC/hl2moved"
	take_snapshot
	mv "$SRC/hl2moved" "$SRC/dir/sub/hl2again"
	take_snapshot
	printf 'via hl1\n' >>"$SRC/dir/hl1"
	mv "$SRC/dir" "$SRC/dir2"
	printf 'again\n' >>"$SRC/dir2/sub/hl2again"
	rm "$SRC/dir2/hl1"
	check_snapshots
}

test_hard_link_created_after_take() {
	ln "$SRC/file" "$SRC/dir/newlink"
	printf 'both\n' >>"$SRC/dir/newlink"
	check_snapshots
}

test_symlink_and_fifo() {
	rm "$SRC/dir/link" "$SRC/fifo"
	ln -s elsewhere "$SRC/dir/link"
	mkfifo "$SRC/newfifo"
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
	check_snapshots
}

test_mmap_write_after_take() {
	"$FSOP" mmap-write "$SRC/file" 2 MMAP
	assertEquals "mmap write" 0 $?
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
	printf 'after\n' >"$SRC/file"
	check_snapshots
}

# Rule 16: the daemon's own look into a directory (is it empty?) before an
# rmdir must not touch its atime before the copy-up records it.  relatime
# updates an atime older than the mtime on the first read.  No manifest:
# it would read the directory itself.
test_rmdir_keeps_atime_of_the_directory() {
	local id upper
	mkdir "$SRC/adir" "$SRC/bdir" "$SRC/target"
	touch -a -d '2001-02-03 04:05:06' "$SRC/adir" "$SRC/bdir"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take (stderr: $OVS_ERR)" 0 "$OVS_RC"
	id=$OVS_OUT
	rmdir "$SRC/adir"
	mv -T "$SRC/target" "$SRC/bdir"
	upper=$(ovs_snapshot_upper "$SRC" "$id")
	assertEquals "atime of the directory preserved before rmdir" \
		"$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %X "$upper/adir")"
	assertEquals "atime of the directory preserved before a rename over it" \
		"$(date -d '2001-02-03 04:05:06' +%s)" "$(stat -c %X "$upper/bdir")"
}

test_big_file_modified_after_take_is_cloned() {
	dd if=/dev/urandom of="$SRC/big" bs=1M count=1024 status=none
	take_snapshot
	dd if=/dev/zero of="$SRC/big" bs=4k count=1 conv=notrunc status=none
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
