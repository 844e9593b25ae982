#!/bin/bash
# ovsnap diff walks the layers one directory at a time and prints as it
# goes (issue 13 item 3: bounded memory); these check that the order is
# still that of a sort of the full paths component by component, across
# layers and below a recreated directory, and that a large directory and
# a deep path come out whole and in order.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3

setUp() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
}

tearDown() {
	ovs_teardown
}

take() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" "$1" "$OVS_OUT"
}

diff_is() {	# diff_is WHAT EXPECTED ARGS...
	local what=$1 want=$2
	shift 2
	ovs_run "$OVSNAP" diff "$SRC" "$@"
	assertEquals "$what: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "$what: stderr" "" "$OVS_ERR"
	assertEquals "$what: changes" "$want" "$OVS_OUT"
}

# Names that sort around '/': a directory's entries come right after it,
# before any sibling whose name continues with a byte below '/' (tab,
# space, '!', '-', '.') or above it ('0', UTF-8), wherever each change
# lies: in snapshot 2's layer, in the live layer, or below a directory
# removed and made again (B's view below a whiteout).
test_order_of_names_around_slash_across_layers() {
	mkdir "$SRC/a" "$SRC/a.b"
	echo f >"$SRC/a/b"
	echo old >"$SRC/a.b/old"
	echo x >"$SRC/a-b"
	take 1
	rm "$SRC/a/b" && mkdir "$SRC/a/b" && echo c >"$SRC/a/b/c"
	echo s >"$SRC/a b"
	take 2
	rm -r "$SRC/a.b" && mkdir "$SRC/a.b" && echo n >"$SRC/a.b/new"
	echo y >>"$SRC/a-b"
	touch "$SRC/"$'a\tb' "$SRC/a!" "$SRC/a0" "$SRC/aé"
	diff_is "1 against live" 'T	a/b
+	a/b/c
+	a\011b
+	a b
+	a!
M	a-b
+	a.b/new
-	a.b/old
+	a0
+	aé' 1
	diff_is "1 2" 'T	a/b
+	a/b/c
+	a b' 1 2
	diff_is "2 against live" '+	a\011b
+	a!
M	a-b
+	a.b/new
-	a.b/old
+	a0
+	aé' 2
	ovs_run "$OVSNAP" diff --json "$SRC" 1
	assertEquals "--json: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "--json: the same paths in the same order" \
		'a/b a/b/c a\tb a b a! a-b a.b/new a.b/old a0 aé' \
		"$(printf '%s' "$OVS_OUT" | python3 -c 'import json, sys
print(" ".join(c["path"].replace("\t", "\\t") for c in json.load(sys.stdin)["changes"]))')"
}

# A directory of 6,000 files each touched (6,000 entries in one layer
# directory), one of 6,000 new files (B's view below a whiteout) and a
# path 300 directories deep: every change once, in the order of the
# paths sorted component by component.
test_large_directory_and_deep_path() {
	local n=6000 depth=300 p i

	mkdir "$SRC/old"
	(cd "$SRC/old" && seq -f 'f%g' "$n" | xargs touch) || fail "old"
	take 1
	(cd "$SRC/old" && seq -f 'f%g' "$n" | xargs touch -m -d '2001-02-03 04:05:06') ||
		fail "touch old"
	mkdir "$SRC/new"
	(cd "$SRC/new" && seq -f 'g%g' "$n" | xargs touch) || fail "new"
	p=$SRC/deep
	for ((i = 0; i < depth; i++)); do
		mkdir "$p" || fail "mkdir at depth $i"
		p=$p/d
	done
	touch "$p" || fail "leaf"
	{
		p=deep
		for ((i = 0; i <= depth; i++)); do
			printf '+\t%s\n' "$p"
			p=$p/d
		done
		echo $'+\tnew'
		seq -f 'g%g' "$n" | LC_ALL=C sort | sed 's|^|+\tnew/|'
		seq -f 'f%g' "$n" | LC_ALL=C sort | sed 's|^|M\told/|'
	} >"$OVS_TMP/want"
	ovs_run bash -c '"$1" diff "$2" 1 >"$3"' _ "$OVSNAP" "$SRC" "$OVS_TMP/got"
	assertEquals "diff 1: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "diff 1: lines" "$((depth + 1 + 1 + 2 * n))" "$(wc -l <"$OVS_TMP/got")"
	assertTrue "diff 1: every change in path order: $(diff "$OVS_TMP/want" "$OVS_TMP/got" |
		head -5)" "cmp -s '$OVS_TMP/want' '$OVS_TMP/got'"
	take 2
	ovs_run bash -c '"$1" diff "$2" 1 2 >"$3"' _ "$OVSNAP" "$SRC" "$OVS_TMP/got2"
	assertEquals "diff 1 2: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "diff 1 2: the same changes" "cmp -s '$OVS_TMP/want' '$OVS_TMP/got2'"
}

. "$SHUNIT2"
