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

# A hard-linked inode counts once however many of its names the layer
# holds (DESIGN.md rule 6 keeps them linked there), also past the first
# few hundred linked inodes (the set of counted inodes grows).  ext4, so a
# copy-up is a full copy and the sizes add up exactly.
test_space_counts_each_hard_linked_copy_once() {
	local i s want

	ovs_mkfs ext4 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/d" "$SRC/small"
	dd if=/dev/urandom of="$SRC/big" bs=1M count=4 status=none
	ln "$SRC/big" "$SRC/big.l1"
	ln "$SRC/big" "$SRC/d/big.l2"
	for ((i = 0; i < 300; i++)); do
		head -c 8192 /dev/urandom >"$SRC/small/s$i"
		ln "$SRC/small/s$i" "$SRC/small/s$i.l"
	done
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	# the first change of each inode preserves it, with its names
	echo x >>"$SRC/big" || fail "append to big"
	for ((i = 0; i < 300; i++)); do
		echo x >>"$SRC/small/s$i" || fail "append to s$i"
	done
	sync
	assertEquals "the layer keeps big's three names as one inode" 3 \
		"$(stat -c %h "$(echo "$OVS_MNT"/.ovsnap/*/layers/1/upper)/big" 2>&1)"
	s=$(space_of "$SRC" 1)
	want=$((4 * 1048576 + 300 * 8192))
	assertTrue "the layer holds each copy once: $s bytes for $want of data" \
		"[ $s -ge $want ] && [ $s -lt $((want + 1048576)) ]"
}
. "$SHUNIT2"
