#!/bin/bash
# A full filesystem during a copy-up (issue 6): the change the copy-up
# guards must fail with ENOSPC (the preservation's own errno, not EIO),
# the file in SRC and the snapshot stay as they were, the layer shows no
# partial copy, fsck -p leaves the volume clean, and once space is free
# the same change succeeds and preserves properly.  On ext4 a copy-up is
# a full copy; on XFS a reflink clone needs next to no space, so there
# the change succeeds on an almost full filesystem.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs ext4 overlay fuse
ovs_require_cmd fallocate dd cmp
[ -e /dev/fuse ] || ovs_skip "needs /dev/fuse"

# make_full FS SIZE BIGMB: SRC with a file "big" of BIGMB MiB and a small
# one, snapshot 1 taken (manifest in $MF), then the filesystem filled up
# (outside SRC) until 4 MiB are left: too little for a copy of big.
make_full() {
	local avail

	ovs_mkfs "$1" "$2" || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$SRC" "$MF"
	head -c "$3M" /dev/urandom >"$SRC/big"
	echo small >"$SRC/small"
	cp "$SRC/big" "$OVS_TMP/big.orig"
	"$OVS_MANIFEST" "$SRC" >"$MF/1.manifest"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" "0 1" "$OVS_RC $OVS_OUT" || return 1
	UPPER=$(echo "$OVS_MNT"/.ovsnap/*/layers/1/upper)
	WORK=$(echo "$OVS_MNT"/.ovsnap/*/layers/1/work)
	avail=$(df -B1 --output=avail "$OVS_MNT" | tail -1)
	fallocate -l $((avail - 4 * 1024 * 1024)) "$OVS_MNT/filler" ||
		{ fail "fill the filesystem"; return 1; }
}

# write_at_start FILE: overwrite the first 4 KiB in place (a write).
write_at_start() {
	dd if=/dev/zero of="$1" bs=4k count=1 conv=notrunc status=none
}

test_enospc_copy_up_ext4() {
	make_full ext4 64M 20 || return
	ovs_run write_at_start "$SRC/big"
	assertNotEquals "the write fails" 0 "$OVS_RC"
	assertContains "with ENOSPC, the preservation's errno" "$OVS_ERR" "No space left on device"
	ovs_run truncate -s 0 "$SRC/big"
	assertContains "truncate fails with ENOSPC too" "$OVS_ERR" "No space left on device"
	ovs_run sh -c ": >'$SRC/big'"
	assertContains "open with O_TRUNC fails with ENOSPC too" "$OVS_ERR" "No space left on device"
	cmp -s "$SRC/big" "$OVS_TMP/big.orig"
	assertTrue "big in SRC is unchanged" $?
	assertFalse "no partial copy in the layer" "[ -e '$UPPER/big' ]"
	# A small change still finds room for its copy-up.
	echo more >>"$SRC/small"
	assertTrue "a small change still works" $?
	grep -q "cannot preserve big before write: .*No space left on device" \
		"$OVSNAP_RUN_DIR"/*.log
	assertTrue "the daemon logged why" $?

	# Whatever the copy left in the work dir, fsck -p removes it.
	ovs_run "$OVSNAP" fsck -p "$SRC"
	assertTrue "fsck -p exit 0 or 1: $(ovs_ran)" "[ $OVS_RC -le 1 ]"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n clean: $(ovs_ran)" "0 $SRC: clean" "$OVS_RC $OVS_OUT"
	assertEquals "nothing left in the work dir" "" "$(ls -A "$WORK")"

	# With room again the same write succeeds, after preserving big.
	rm "$OVS_MNT/filler"
	ovs_run write_at_start "$SRC/big"
	assertEquals "the write after freeing space: $(ovs_ran)" 0 "$OVS_RC"
	cmp -s "$UPPER/big" "$OVS_TMP/big.orig"
	assertTrue "the layer holds big as it was" $?
	OVS_ORACLE_WHAT="after ENOSPC on ext4" ovs_oracle_check "$SRC" "$MF"
}

test_clone_copy_up_on_an_almost_full_xfs() {
	make_full xfs 320M 100 || return
	ovs_run write_at_start "$SRC/big"
	assertEquals "the write succeeds (a clone needs no room for the data): $(ovs_ran)" \
		0 "$OVS_RC"
	cmp -s "$UPPER/big" "$OVS_TMP/big.orig"
	assertTrue "the layer holds big as it was" $?
	OVS_ORACLE_WHAT="clone on an almost full XFS" ovs_oracle_check "$SRC" "$MF"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n clean: $(ovs_ran)" "0 $SRC: clean" "$OVS_RC $OVS_OUT"
}

. "$SHUNIT2"
