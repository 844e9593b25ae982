#!/bin/bash
# Crashes (DESIGN.md section 6, issue 3): snapshots taken during a seeded
# workload, then the workload goes on and the daemon is killed with SIGKILL,
# or the filesystem is shut down hard without flushing its log (a power
# cut, as far as the disk is concerned).  After remount and `ovsnap
# activate`, every snapshot must still equal the manifest recorded at its
# take, and fsck must be clean once it has removed what copy-ups left
# half done.
#
# Reproduce by hand from the build directory, e.g.
#   bash tests/ts/crash/crash_test.sh -- test_shutdown_xfs
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

# writes_of PID: the write calls PID made so far (0 once it is gone).
writes_of() {
	awk '$1 == "syscw:" { n = $2 } END { print n + 0 }' "/proc/$1/io" 2>/dev/null || echo 0
}
ovs_require_fs xfs ext4 btrfs overlay fuse
ovs_require_cmd xfs_io

SEED=${OVS_CRASH_SEED:-7}

# Snapshots during a first workload, then a second one without takes,
# stopped by CRASH ("kill" or "shutdown") after a moment.
crash_run() {
	local fs=$1 crash=$2 workload_pid daemon out

	ovs_mkfs "$fs" 1G || return
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$SRC/a/b" "$MF"
	printf 'seed\n' >"$SRC/a/b/f"
	ovs_take_with_manifest "$SRC" "$MF" "first take" || return

	ovs_run "$OVSNAP_TOOLS/tools/ovs-workload" --seed "$SEED" --ops 1500 --takes 5 \
		--take-cmd "$OVSNAP take $SRC" --manifest-dir "$MF" "$SRC"
	assertEquals "workload with takes: $(ovs_ran)" 0 "$OVS_RC" || return

	# The second workload runs until the crash stops it; its errors
	# after the crash are expected.
	"$OVSNAP_TOOLS/tools/ovs-workload" --seed $((SEED + 1)) --ops 1000000 --takes 0 \
		"$SRC" >/dev/null 2>&1 &
	workload_pid=$!
	# The crash comes in the middle of the workload: once it has made 300
	# write calls (its own count in /proc), not after a guessed time.
	ovs_wait_until 120 '[ "$(writes_of "$workload_pid")" -ge 300 ]'
	assertTrue "the workload is running and writing" "kill -0 $workload_pid"
	daemon=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	assertNotNull "the daemon of $SRC runs" "$daemon" || { kill "$workload_pid"; return; }
	case $crash in
	kill)
		kill -9 "$daemon"
		wait "$workload_pid" 2>/dev/null
		out=$(stat "$SRC" 2>&1)
		assertContains "a dead daemon leaves SRC failing, never unprotected" \
			"$out" "Transport endpoint is not connected"
		;;
	shutdown)
		# No log flush: what the filesystem had not committed is lost,
		# as in a power cut.  Then remount, replaying the log.
		# Every call fails with EIO from here on, and the workload
		# would go on for its million operations (over the test's
		# 300 s on a loaded machine, as CI found on ext4): stop it.
		xfs_io -x -c shutdown "$OVS_MNT"
		kill -KILL "$workload_pid" 2>/dev/null
		wait "$workload_pid" 2>/dev/null
		kill -9 "$daemon"
		umount -l "$SRC"
		umount "$OVS_MNT" || umount -l "$OVS_MNT"
		mount "$OVS_DEV" "$OVS_MNT"
		assertEquals "remount after the shutdown" 0 $?
		;;
	esac

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate after the crash: $(ovs_ran)" 0 "$OVS_RC"
	OVS_ORACLE_WHAT="$fs, $crash, seed $SEED" ovs_oracle_check "$SRC" "$MF"

	# Half-done copy-ups may have left temporaries; once fsck -p has
	# removed them the volume is clean.
	ovs_run "$OVSNAP" fsck -p "$SRC"
	assertTrue "fsck -p after the crash exits 0 or 1: $(ovs_ran)" "[ $OVS_RC -le 1 ]"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n clean after repair: $(ovs_ran)" 0 "$OVS_RC"
}

# take_with_manifest: SRC's state on disk, its manifest in $MF, a take.
take_with_manifest() {
	MF=$OVS_TMP/manifests
	mkdir -p "$MF"
	sync
	ovs_take_with_manifest "$SRC" "$MF"
}

# shutdown_now_and_check WHAT: XFS shut down at once without flushing its
# log (a power cut), remounted; then every snapshot must equal its
# manifest, and fsck be clean once it has repaired.
shutdown_now_and_check() {
	local daemon

	daemon=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	xfs_io -x -c shutdown "$OVS_MNT"
	[ -n "$daemon" ] && kill -9 "$daemon"
	umount -l "$SRC"
	umount "$OVS_MNT" || umount -l "$OVS_MNT"
	mount "$OVS_DEV" "$OVS_MNT"
	assertEquals "remount after the shutdown" 0 $?
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate after the shutdown: $(ovs_ran)" 0 "$OVS_RC"
	OVS_ORACLE_WHAT="$1" ovs_oracle_check "$SRC" "$MF"
	ovs_run "$OVSNAP" fsck -p "$SRC"
	assertTrue "fsck -p after the shutdown exits 0 or 1: $(ovs_ran)" "[ $OVS_RC -le 1 ]"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck -n clean after repair: $(ovs_ran)" 0 "$OVS_RC"
}

# Rule 8 with the fsyncs ovsnapd saves (issue 12): on XFS, with the store
# on SRC's filesystem, a preserve of clones and metadata makes no fsync
# at all (the log orders it before the change it guards).  First changes
# of old files (renames, appends, chmods, deletes: each delete moves its
# file itself into the layer, one rename in the same log), the changes
# fsynced through the mount (forcing the log up to them), then at once a
# shutdown that loses everything not yet forced to the log: after remount the
# snapshot still shows every file as it was at the take.  On XFS this
# holds with or without the fsyncs, which is the claim tested; daemon_test's
# test_first_changes_on_xfs_make_no_fsync checks that none is made, and
# test_shutdown_after_overwrites_of_copies_xfs below where one is needed.
test_shutdown_right_after_first_changes_xfs() {
	local i
	ovs_mkfs xfs 1G || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/old"
	for i in $(seq 40); do
		printf 'content %s\n' "$i" >"$SRC/old/f$i"
		head -c $((i * 1000)) /dev/urandom >"$SRC/old/g$i"
	done
	take_with_manifest || return
	for i in $(seq 40); do
		case $((i % 4)) in
		0) mv "$SRC/old/f$i" "$SRC/old/r$i" ;;
		1) printf 'more\n' >>"$SRC/old/g$i" ;;
		2) chmod 600 "$SRC/old/f$i" ;;
		3) rm "$SRC/old/g$i" ;;
		esac || fail "change $i"
	done
	# The changes in SRC made durable (fsync through the mount), so a
	# preserve not yet on disk would show; then a shutdown without log
	# flush: what XFS had not forced to its log is lost.
	sync "$SRC/old" "$SRC"/old/g* || fail "fsync of the changes"
	shutdown_now_and_check "xfs, shutdown after first changes"
}

# Where the log does not order the preserve (issue 12): a copy's bytes.
# XFS without reflink copies old files; each is then overwritten in
# place and fdatasynced through the mount, which writes the data where
# it was and forces no log (only the times changed).  Without the fsync
# of the upper directory the copy was moved into, the shutdown loses
# that entry while SRC keeps the new bytes, and the snapshot shows them.
test_shutdown_after_overwrites_of_copies_xfs() {
	local i
	ovs_mkfs xfs 1G -m reflink=0 || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/old"
	for i in $(seq 20); do
		head -c 65536 /dev/urandom >"$SRC/old/f$i"
	done
	take_with_manifest || return
	for i in $(seq 20); do
		dd if=/dev/zero of="$SRC/old/f$i" bs=4096 count=4 conv=notrunc,fdatasync \
			status=none || fail "overwrite f$i"
	done
	shutdown_now_and_check "xfs without reflink, shutdown after overwrites"
}

# Where a change behind the mount removed a folder whose plain copy the
# layer holds, the copy is made opaque before a populated folder is
# renamed onto its name (lib/preserve.c, plain_copy_alone), and on XFS
# the mark goes through the log with no fsync, ordered before the rename
# it guards (rule 8).  After the rename is forced to the disk and the
# filesystem shut down losing everything else, the snapshot shows what it
# showed before the rename: the kept D/a alone, none of X's entries.
# What the removal itself took from the snapshot (D/b) is outside rule
# 10, so the snapshot's manifest is its view's right after the removal.
shutdown_after_plain_copy_made_opaque() {
	local id upper view=$OVS_TMP/before

	ovs_mkfs "$1" 1G || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/D" "$SRC/X"
	printf 'a\n' >"$SRC/D/a"
	printf 'b\n' >"$SRC/D/b"
	printf 'x\n' >"$SRC/X/x"
	take_with_manifest || return
	chmod 600 "$SRC/D/a" || fail "chmod D/a"
	ovs_mount_behind "$OVS_TMP/under" || return
	rm -r "$OVS_TMP/under/src/D" || fail "rm -r D behind the mount"
	umount "$OVS_TMP/under" || fail "umount $OVS_TMP/under"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC" || return
	read -r id upper < <(ovs_snapshot_layers "$SRC")
	ovs_overlay_mount "$view" "$upper:$SRC" || { fail "overlay mount of snapshot $id"; return; }
	"$OVS_MANIFEST" "$view" >"$MF/$id.manifest" || fail "ovs-manifest $view"
	umount "$view" || fail "umount $view"
	assertNotContains "the snapshot lost D/b to the removal" "$(cat "$MF/$id.manifest")" "D/b"
	assertContains "and kept D/a" "$(cat "$MF/$id.manifest")" "D/a"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC" || return
	mv -T "$SRC/X" "$SRC/D" || fail "rename of a populated folder onto D"
	sync "$SRC" "$SRC/D" || fail "fsync of the rename through the mount"
	assertEquals "the upper's D made opaque" y \
		"$(getfattr --absolute-names --only-values -n trusted.overlay.opaque "$upper/D" 2>&1)"
	shutdown_now_and_check "$1, shutdown after a plain copy was made opaque"
}

test_shutdown_after_plain_copy_made_opaque_xfs() { shutdown_after_plain_copy_made_opaque xfs; }
test_shutdown_after_plain_copy_made_opaque_ext4() { shutdown_after_plain_copy_made_opaque ext4; }

test_sigkill_daemon_xfs() { crash_run xfs kill; }
test_sigkill_daemon_ext4() { crash_run ext4 kill; }
test_sigkill_daemon_btrfs() { crash_run btrfs kill; }
test_shutdown_xfs() { crash_run xfs shutdown; }
test_shutdown_ext4() { crash_run ext4 shutdown; }

. "$SHUNIT2"
