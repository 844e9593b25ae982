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

# The same with a path longer than PATH_MAX (rule 18): 28 names of 200
# bytes, and the directory made afterwards 21 levels down, so the one
# opened again lies more than PATH_MAX bytes below the nearest directory
# the walk kept open.
test_deep_path_longer_than_path_max() {
	local depth=28 snaps=40 rel="" mid="" c i want

	for ((i = 1; i <= depth; i++)); do
		c=$(printf 'd%02d%0197d' "$i" 0)
		rel=$rel${rel:+/}$c
		((i == 21)) && mid=$rel
	done
	assertTrue "longer than PATH_MAX" "[ ${#mid} -gt 4096 ]"
	# in steps: no single system call takes such a path
	(cd "$SRC" && for c in ${rel//\// }; do mkdir "$c" && cd "$c" || exit 1; done &&
		echo 0 >f) || fail "mkdir"
	for ((i = 1; i <= snaps; i++)); do
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "take $i: $(ovs_ran)" "$i" "$OVS_OUT"
		(cd "$SRC" && for c in ${rel//\// }; do cd "$c" || exit 1; done && echo "$i" >>f) ||
			fail "append $i"
	done
	(cd "$SRC" && for c in ${mid//\// }; do cd "$c" || exit 1; done && mkdir zz &&
		echo g >zz/g) || fail "zz"
	want=$(printf 'M\t%s/f\n+\t%s/zz\n+\t%s/zz/g' "$rel" "$mid" "$mid")
	limited diff "$SRC" 1
	assertEquals "diff 1: $(ovs_ran | head -c 300)" 0 "$OVS_RC"
	assertTrue "diff 1: changes" '[ "$want" = "$OVS_OUT" ]'
}

# A tree made 700 directories deep after the take (as a user may), which
# a restore and a rollback remove: they held two fds per level and
# failed with EMFILE under 1,024 open files, every time, so a rollback
# left pending could never finish.
test_removing_a_tree_700_deep_under_1024_fds() {
	local i

	mkdir "$SRC/home" "$SRC/keep"
	echo k >"$SRC/keep/k"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	(cd "$SRC/home" && for ((i = 0; i < 700; i++)); do mkdir a && cd a || exit 1; done &&
		echo deep >f) || fail "mkdir"
	limited restore "$SRC" 1 home
	assertEquals "restore: $(ovs_ran | head -c 300)" 0 "$OVS_RC"
	assertFalse "the deep tree is gone" "[ -e '$SRC/home/a' ]"
	(cd "$SRC/home" && for ((i = 0; i < 700; i++)); do mkdir a && cd a || exit 1; done) ||
		fail "mkdir again"
	limited rollback "$SRC" 1
	assertEquals "rollback: $(ovs_ran | head -c 300)" 0 "$OVS_RC"
	assertFalse "gone again" "[ -e '$SRC/home/a' ]"
	assertEquals "the rest as it was" k "$(cat "$SRC/keep/k")"
}

. "$SHUNIT2"
