#!/bin/bash
# A write error in the upper layer (DESIGN.md rule 8): once an fsync of
# what a preserve wrote fails, the kernel reports it once, so nothing the
# layer holds can be trusted as durable.  The change that hit it and every
# later first change are refused with EIO (SRC unchanged) until a take
# switches to a new layer, and the snapshot shows the old data.  Write
# errors come from ovs-errdisk (device-mapper and the block layer's fault
# injection are not in every kernel): ext4 on a loop device over its file,
# where writes of data holding a marker fail while ARM exists.  ext4
# copies (no reflink), so the preserve writes the marked data itself.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd mkfs.ext4 python3 md5sum

ERRDISK=${OVSNAP_TOOLS}/tools/ovs-errdisk
ARM=$OVS_TMP/arm
ED=$OVS_TMP/ed

setUp() {
	local out

	rm -f "$ARM"
	ED_PID= ED_DEV=
	truncate -s 512M "$OVS_TMP/ed.img" || { fail "truncate"; return 1; }
	mkdir -p "$ED" "$OVS_TMP/fs1"
	"$ERRDISK" "$OVS_TMP/ed.img" "$ARM" "$ED" >"$OVS_TMP/ed.out" 2>&1 &
	ED_PID=$!
	ovs_wait_until 20 "grep -qx ok '$OVS_TMP/ed.out'" ||
		{ fail "ovs-errdisk did not start: $(cat "$OVS_TMP/ed.out")"; return 1; }
	ED_DEV=$(losetup -f --show "$ED/disk") || { fail "losetup $ED/disk"; return 1; }
	out=$(mkfs.ext4 -q -F "$ED_DEV" 2>&1) || { fail "mkfs.ext4: $out"; return 1; }
	mount -t ext4 "$ED_DEV" "$OVS_TMP/fs1" || { fail "mount $ED_DEV"; return 1; }
	OVS_MNT=$OVS_TMP/fs1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
}

tearDown() {
	rm -f "$ARM"
	ovs__umount_views
	umount "$SRC" 2>/dev/null
	ovs__kill_daemons
	umount "$OVS_TMP/fs1" 2>/dev/null || umount -l "$OVS_TMP/fs1" 2>/dev/null
	# (The EXIT trap may call this again.)
	[ -n "${ED_DEV:-}" ] && losetup -d "$ED_DEV"
	if [ -n "${ED_PID:-}" ]; then
		umount "$ED" 2>/dev/null || umount -l "$ED"
		wait "$ED_PID"
	fi
	ED_DEV= ED_PID=
	rm -f "$OVS_TMP/ed.img"
	ovs_teardown
}

# big: 40 MiB, its first 8 MiB marked (a copy's write-behind waits for
# them while it copies the rest, which writes fine).
make_big() {
	python3 - "$1" <<'PY'
import sys
with open(sys.argv[1], 'wb') as f:
    f.write(b'OVSNAP-EIO-MARK!' * 256 * 256 * 8)
    f.write(b'plain data, no mark at all......' * 128 * 256 * 32)
PY
}

test_failed_writeback_refuses_changes_until_a_take() {
	local sum log id upper ids=() uppers=()

	make_big "$SRC/big" || fail "make big"
	printf 'other\n' >"$SRC/other"
	sum=$(md5sum <"$SRC/big")
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	# A folder new since the take, which the daemon knows needs no
	# preserve for a create in it.
	mkdir "$SRC/new" && printf 'a\n' >"$SRC/new/a" || fail "a new folder"
	sync
	touch "$ARM"
	ovs_run sh -c "printf x >>'$SRC/big'"
	assertNotEquals "the first change whose preserve cannot be written is refused" 0 "$OVS_RC"
	assertContains "with EIO: $(ovs_ran)" "$OVS_ERR" "I/O error"
	assertEquals "SRC's big is unchanged" "$sum" "$(md5sum <"$SRC/big")"
	rm -f "$ARM"
	ovs_run sh -c "printf more >>'$SRC/other'"
	assertNotEquals "a later first change of another file is refused too" 0 "$OVS_RC"
	assertContains "with EIO: $(ovs_ran)" "$OVS_ERR" "I/O error"
	assertEquals "other is unchanged" "other" "$(cat "$SRC/other")"
	ovs_run sh -c "printf b >'$SRC/new/b'"
	assertNotEquals "so is a create in a folder new since the take" 0 "$OVS_RC"
	assertContains "with EIO: $(ovs_ran)" "$OVS_ERR" "Input/output error"
	assertFalse "and SRC has no new/b" "[ -e '$OVS_MNT/src/new/b' ]"
	log=$(cat "$OVSNAP_RUN_DIR"/*.log)
	assertEquals "the log says once that the layer is refused: $log" 1 \
		"$(grep -c 'refused with EIO until the next take' <<<"$log")"
	# The take's syncfs of SRC's filesystem reports the write error
	# once more (rule 12: a take that cannot sync fails); the next one
	# succeeds.
	ovs_run "$OVSNAP" take "$SRC"
	[ "$OVS_RC" -ne 0 ] && ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run sh -c "printf more >>'$SRC/other' && printf x >>'$SRC/big'"
	assertEquals "changes work again in the new layer: $(ovs_ran)" 0 "$OVS_RC"
	# The first snapshot, read from the disk: big as it was.
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	while read -r id upper; do
		ids+=("$id")
		uppers+=("$upper")
	done < <(ovs_snapshot_layers "$SRC")
	assertEquals "two snapshots" 2 "${#ids[@]}"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	ovs_overlay_mount "$OVS_TMP/view" "${uppers[0]}:${uppers[1]}:$SRC" ||
		{ fail "overlay mount of snapshot ${ids[0]}"; return; }
	assertEquals "snapshot ${ids[0]} shows big as it was" "$sum" \
		"$(md5sum <"$OVS_TMP/view/big")"
	assertEquals "and other" "other" "$(cat "$OVS_TMP/view/other")"
	umount "$OVS_TMP/view"
}

. "$SHUNIT2"
