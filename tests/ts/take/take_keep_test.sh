#!/bin/bash
# take --hold and take --keep: the snapshot is taken, then the policy prunes,
# and a held snapshot survives it.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

test_take_keep_and_hold() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src; mkdir "$SRC"
	ovs_run "$OVSNAP" take --hold --class timeline --name precious "$SRC"
	assertEquals "held take: $(ovs_ran)" 0 "$OVS_RC"
	for i in 2 3 4; do
		echo $i >"$SRC/f"
		ovs_run "$OVSNAP" take --class timeline "$SRC"
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	ovs_run "$OVSNAP" take --keep last=2 "$SRC"
	assertEquals "take --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take --keep prints the new id" 5 "$OVS_OUT"
	assertEquals "the held one and the last two remain" "1 4 5" \
		"$(ovs_snapshot_layers "$SRC" | cut -d' ' -f1 | xargs)"
	ovs_run "$OVSNAP" list --json "$SRC"
	assertContains "held in the JSON" "$OVS_OUT" '"name": "precious", "created"'
	assertContains "held flag" "$OVS_OUT" '"hold": true'
	ovs_run "$OVSNAP" take --keep bogus=1 "$SRC"
	assertEquals "bad spec is a usage error before the take: $(ovs_ran)" 2 "$OVS_RC"
	assertEquals "no snapshot was taken" "1 4 5" \
		"$(ovs_snapshot_layers "$SRC" | cut -d' ' -f1 | xargs)"
}
. "$SHUNIT2"
