#!/bin/bash
# ovsnap diff (and restore and rollback, which diff first) walk the layers
# together a directory at a time; the fds they hold stay bounded whatever
# the depth of the tree times the length of the chain (rule 18: any depth
# works): a file 30 directories deep, changed in each of 40 snapshots,
# diffs and restores under a limit of 1024 open files; a directory made
# next to the deep path afterwards is found too (the walk opens again
# the directories whose fds it closed on the way down).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs

setUp() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
}

tearDown() {
	ovs_teardown
}

# limited ARGS...: ovsnap ARGS with at most 1024 open files, the hard
# limit too (diff raises its soft limit to the hard one)
limited() {
	ovs_run bash -c 'ulimit -n 1024 && exec "$@"' _ "$OVSNAP" "$@"
}

test_deep_path_in_a_long_chain_under_1024_fds() {
	local depth=30 snaps=40 rel=d00 i want

	for ((i = 1; i < depth; i++)); do
		rel=$rel/$(printf 'd%02d' "$i")
	done
	mkdir -p "$SRC/$rel" || fail "mkdir"
	echo 0 >"$SRC/$rel/f"
	for ((i = 1; i <= snaps; i++)); do
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "take $i: $(ovs_ran)" "$i" "$OVS_OUT"
		echo "$i" >>"$SRC/$rel/f"
	done
	mkdir "$SRC/d00/d01/zz" && echo g >"$SRC/d00/d01/zz/g" || fail "zz"
	want=$(printf 'M\t%s/f\n+\td00/d01/zz\n+\td00/d01/zz/g' "$rel")
	limited diff "$SRC" 1
	assertEquals "diff 1: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "diff 1: changes" "$want" "$OVS_OUT"
	ovs_run "$OVSNAP" take "$SRC"
	limited diff "$SRC" 1 "$((snaps + 1))"
	assertEquals "diff 1 $((snaps + 1)): $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "diff 1 $((snaps + 1)): changes" "$want" "$OVS_OUT"
	limited restore "$SRC" 1 "$rel/f"
	assertEquals "restore: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "restore: the file as in snapshot 1" 0 "$(cat "$SRC/$rel/f")"
}

. "$SHUNIT2"
