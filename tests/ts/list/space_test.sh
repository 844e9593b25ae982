#!/bin/bash
# SPACE of ovsnap list: what a snapshot holds on its own.  On ext4 a
# copy-up is a full copy; on XFS a clone shares its extents with the live
# file until the live file is rewritten.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
# One snapshot object a line: split at '{"id": ', not at every '{' (the
# "userdata": {} object comes before "space").
space_of() { # SRC ID -> bytes
	"$OVSNAP" list --json "$1" | sed 's/{"id": /\n/g' | grep "^$2," | sed -n 's/.*"space": \([0-9]*\).*/\1/p'
}
space_case() {
	ovs_mkfs "$1" 1G || return 1
	SRC=$OVS_MNT/src; mkdir "$SRC"
	dd if=/dev/urandom of="$SRC/big" bs=1M count=8 status=none
	ovs_run "$OVSNAP" take "$SRC"; assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "an empty layer holds (almost) nothing: $(space_of "$SRC" 1)" "[ $(space_of "$SRC" 1) -lt 65536 ]"
	dd if=/dev/zero of="$SRC/big" bs=4k count=1 conv=notrunc status=none
	sync
	local s=$(space_of "$SRC" 1)
	if [ "$1" = ext4 ]; then
		assertTrue "ext4 copies: the layer holds the 8 MiB: $s" "[ $s -ge 8388608 ]"
	else
		assertTrue "a clone holds only the rewritten block: $s" "[ $s -lt 1048576 ]"
		dd if=/dev/urandom of="$SRC/big" bs=1M count=8 conv=notrunc status=none
		sync
		s=$(space_of "$SRC" 1)
		assertTrue "once the live file is rewritten, the copy is the layer's own: $s" "[ $s -ge 8388608 ]"
	fi
	ovs_run "$OVSNAP" list "$SRC"
	assertContains "table has a SPACE column" "$OVS_OUT" "SPACE"
}
test_space_ext4() { space_case ext4; }
test_space_xfs() { space_case xfs; }
. "$SHUNIT2"
