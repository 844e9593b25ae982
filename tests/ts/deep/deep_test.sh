#!/bin/bash
# DESIGN.md rule 18, any depth and any name, through the live path as a
# user: a tree deeper than a recursive walk survives (take, rename of its
# top, activate, merge, drop, fsck), and every operation on a name of
# NAME_MAX bytes and on a path of PATH_MAX - 1 bytes relative to the cwd
# gives what the native filesystem gives, before and after a take; and
# objects whose path from SRC is longer than PATH_MAX are preserved.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd python3
ovs_require_cmd setpriv

LONGNAMES=$OVSNAP_SRCDIR/tests/ts/deep/longnames.py
BEYOND=$OVSNAP_SRCDIR/tests/ts/deep/beyond.py
# Levels of "t": deeper than the old recursive walks survived, while the
# absolute paths (under $OVS_TMP) stay below PATH_MAX for the oracle.
DEPTH=1990

setUp() {
	ovs_user || return
	ovs_mkfs "${FSTYPE:-xfs}" || return
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$SRC" "$MF"
	chown "$OVS_UID:$OVS_GID" "$SRC"
}

tearDown() {
	ovs_teardown
}

# Take a snapshot and record the manifest of SRC as it is at the take.
take_snapshot() {
	"$OVS_MANIFEST" "$SRC" >"$MF/pending" || fail "manifest of $SRC"
	ovs_run "$OVSNAP" take "$SRC"
	ok "take"
	mv "$MF/pending" "$MF/$OVS_OUT.manifest"
}

# ok WHAT: the last ovs_run exited 0 and printed nothing on stderr.
ok() {
	assertEquals "$1: exit status ($(ovs_ran))" 0 "$OVS_RC"
	assertEquals "$1: stderr" "" "$OVS_ERR"
}

# low_fds CMD...: ovs_run CMD with an open file limit of 256.
low_fds() {
	ovs_run sh -c 'ulimit -n 256 && exec "$@"' sh "$@"
}

# as_user_in DIR CMD...: run CMD as the test user with DIR as its cwd.
as_user_in() {
	local dir=$1
	shift
	ovs_as_user sh -c 'cd "$1" && shift && exec "$@"' sh "$dir" "$@"
}

test_deep_tree() {
	local deep top

	deep=$(printf 't/%.0s' $(seq "$DEPTH"))
	deep=${deep%/}
	take_snapshot
	as_user_in "$SRC" mkdir -p "$deep"
	ok "mkdir -p of $DEPTH levels"
	as_user_in "$SRC" sh -c 'echo bottom >"$1/f" && ln "$1/f" t/hl' sh "$deep"
	ok "file at the bottom"
	take_snapshot
	# The clone of the whole subtree into the layer before the rename.
	as_user_in "$SRC" mv t u
	ok "rename of the top"
	assertEquals "rename of the top: stdout" "" "$OVS_OUT"
	as_user_in "$SRC" ls
	ok "the daemon is alive after the rename"
	assertEquals "SRC after the rename: stdout" "u" "$OVS_OUT"
	top=${deep#t}
	as_user_in "$SRC" cat "u$top/f"
	ok "the bottom after the rename"
	assertEquals "the bottom after the rename: stdout" "bottom" "$OVS_OUT"
	ovs_oracle_check "$SRC" "$MF"

	# The hard-link scan of activate walks the whole tree.
	ovs_run "$OVSNAP" activate "$SRC"
	ok "activate"
	as_user_in "$SRC" cat "u$top/f"
	ok "the bottom after activate"
	assertEquals "the bottom after activate: stdout" "bottom" "$OVS_OUT"
	ovs_run "$OVSNAP" deactivate "$SRC"
	ok "deactivate"

	# A walk holds a bounded number of fds at any depth: fewer than
	# the tree has levels.
	low_fds "$OVSNAP" fsck "$SRC"
	ok "fsck"
	low_fds "$OVSNAP" merge "$SRC" 1 2
	ok "merge"
	low_fds "$OVSNAP" fsck "$SRC"
	ok "fsck after merge"
	low_fds "$OVSNAP" drop "$SRC" 1
	ok "drop"
	ovs_run "$OVSNAP" list "$SRC"
	ok "list"
	low_fds "$OVSNAP" fsck "$SRC"
	ok "fsck after drop"
	ovs_run "$OVSNAP" activate "$SRC"
	ok "activate after drop"
	as_user_in "$SRC" rm -r u
	ok "removal of the tree"
}

# Restore finds the other names of a snapshot's hard-linked file in the
# layers by a walk of any depth: hl, restored after a rename, is linked
# again to the unchanged name at the bottom of $DEPTH levels that the
# rename preserved with it (rule 6), with fewer fds than the layer has
# levels.  (A recursive walk holding a directory open per level gave up
# at the fd limit and copied the data: another inode; and the diff of
# the restore kept 256 fds open down the path, all a limit of 256 has.)
test_restore_links_to_a_name_deep_in_the_layers() {
	local deep

	deep=$(printf 't/%.0s' $(seq "$DEPTH"))
	deep=${deep%/}
	as_user_in "$SRC" mkdir -p "$deep"
	ok "mkdir -p of $DEPTH levels"
	as_user_in "$SRC" sh -c 'echo bottom >"$1/f" && ln "$1/f" hl' sh "$deep"
	ok "file at the bottom, another name at the top"
	ovs_run "$OVSNAP" take "$SRC"
	ok "take"
	# the rename preserves both names of the file in the layer
	as_user_in "$SRC" mv hl hl2
	ok "rename of hl"
	low_fds "$OVSNAP" restore "$SRC" 1 hl
	assertEquals "restore of hl: exit status ($(ovs_ran))" 0 "$OVS_RC"
	assertEquals "restore of hl: linked, neither cloned nor copied" \
		"restored 1 paths from snapshot 1 (0 files cloned, 0 copied)" "$OVS_ERR"
	assertEquals "hl linked to the bottom's f again, as in the snapshot" \
		"$(stat -c %i "$SRC/$deep/f")" "$(stat -c %i "$SRC/hl")"
	assertEquals "hl's data" "bottom" "$(cat "$SRC/hl")"
	as_user_in "$SRC" rm -r t
	ok "removal of the tree"
}

# compare_runs WHAT MODE: longnames.py MODE as the user at depth 1 below
# SRC and in a native directory; the live path answers as the native one.
compare_runs() {
	local what=$1 mode=$2 native live

	as_user_in "$OVS_MNT/native/c" python3 "$LONGNAMES" . "$mode"
	ok "native run $what"
	native=$OVS_OUT
	# The test means something only if native succeeds where it should.
	assertEquals "native run $what: failures other than ENAMETOOLONG" "" \
		"$(printf '%s\n' "$native" | grep -v ': OK$' | grep -v 'too long: E')"
	as_user_in "$SRC/c" python3 "$LONGNAMES" . "$mode"
	ok "live run $what"
	live=$OVS_OUT
	assertEquals "live run $what answers as native" "" \
		"$(diff <(printf '%s\n' "$native") <(printf '%s\n' "$live"))"
}

test_long_names_and_paths() {
	mkdir -p "$OVS_MNT/native/c" "$SRC/c"
	chown "$OVS_UID:$OVS_GID" "$OVS_MNT/native" "$OVS_MNT/native/c" "$SRC/c"
	# New names (whiteouts in the layer), then changes of objects that
	# existed at a take (preserved first).
	take_snapshot
	compare_runs "after the first take" make
	take_snapshot
	compare_runs "after a second take" change
	as_user_in "$SRC" ls c
	ok "the daemon is alive"
	assertEquals "the daemon is alive: stdout" "$(ls "$OVS_MNT/native/c")" "$OVS_OUT"
	ovs_oracle_check "$SRC" "$MF"
}

# The engine reaches every object one name at a time, from SRC's fd and
# from the upper's, never by a path built from SRC (rule 18): preserve
# objects whose path from SRC is about twice PATH_MAX (32 directories of
# NAME_MAX bytes), changed by a process whose cwd is at the bottom, with
# names hard-linked across the whole depth, a new name, an rmdir and a
# directory rename.  The snapshot, mounted with kernel overlayfs and
# walked down in pieces, shows the tree as it was at the take.
test_preserve_beyond_path_max() {
	local levels=32 before upper view

	as_user_in "$SRC" python3 "$BEYOND" . "$levels" build
	ok "build"
	assertEquals "build: every step" "" "$(printf '%s\n' "$OVS_OUT" | grep -v ': OK$')"
	ovs_run "$OVSNAP" take "$SRC"
	ok "take"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" show
	ok "show before the change"
	before=$OVS_OUT
	assertContains "show before the change" "$before" "f: old"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" change
	ok "change from the bottom"
	assertEquals "change from the bottom: every step" "" \
		"$(printf '%s\n' "$OVS_OUT" | grep -v ': OK$')"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" show
	ok "show after the change"
	assertContains "the live tree changed" "$OVS_OUT" "f: new"
	assertContains "the live tree changed: hl" "$OVS_OUT" "hl: new"

	ovs_run "$OVSNAP" deactivate "$SRC"
	ok "deactivate"
	upper=$(ovs_snapshot_layers "$SRC" | awk '$1 == 1 { $1 = ""; sub(/^ /, ""); print }')
	assertNotEquals "the upper of snapshot 1" "" "$upper"
	view=$OVS_TMP/view.beyond
	ovs_overlay_mount "$view" "$upper:$SRC" || fail "overlay mount of snapshot 1"
	ovs_run python3 "$BEYOND" "$view" "$levels" show
	umount "$view" || umount -l "$view"
	ok "show in snapshot 1"
	assertEquals "snapshot 1 shows the tree as it was at the take" "$before" "$OVS_OUT"

	# the same through the views daemon, which names what it opens by
	# paths from the layer roots: those beyond PATH_MAX are opened in
	# pieces (issue 13)
	view=$OVS_TMP/view.daemon
	mkdir -p "$view"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$view"
	ok "mount a view of snapshot 1"
	ovs_run python3 "$BEYOND" "$view" "$levels" show
	ok "show in the view of snapshot 1"
	assertEquals "the view shows the tree as it was at the take" "$before" "$OVS_OUT"
	ovs_run "$OVSNAP" umount "$view"
	ok "umount the view"
}

# Restore and rollback reach a snapshot's folders beyond PATH_MAX in
# pieces too: the path of a change from SRC is longer than PATH_MAX, and
# one openat2() of its parent in a layer failed with ENAMETOOLONG after
# part of the tree was restored.
test_restore_and_rollback_beyond_path_max() {
	local levels=32 before

	as_user_in "$SRC" python3 "$BEYOND" . "$levels" build
	ok "build"
	ovs_run "$OVSNAP" take "$SRC"
	ok "take"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" show
	before=$OVS_OUT
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" change
	ok "change from the bottom"
	ovs_run "$OVSNAP" take "$SRC"
	ok "take after the change"

	ovs_run "$OVSNAP" restore "$SRC" 1 "$(printf 't%.0s' $(seq 255))"
	assertEquals "restore of the tree's top: exit status ($(ovs_ran | cut -c1-300))" 0 "$OVS_RC"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" show
	# (ROOT/hl, another name of the bottom's f, lies outside the path)
	assertEquals "the restored tree is the snapshot's" "$(printf '%s\n' "$before" | grep -v '^hl:')" \
		"$(printf '%s\n' "$OVS_OUT" | grep -v '^hl:')"

	as_user_in "$SRC" python3 "$BEYOND" . "$levels" change
	ovs_run "$OVSNAP" rollback "$SRC" 1
	assertEquals "rollback: exit status ($(ovs_ran | cut -c1-300))" 0 "$OVS_RC"
	as_user_in "$SRC" python3 "$BEYOND" . "$levels" show
	assertEquals "the rolled back tree is the snapshot's" "$before" "$OVS_OUT"
}

. "$SHUNIT2"
