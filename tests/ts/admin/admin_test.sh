#!/bin/bash
# What a careless admin runs into (issue 11 items 16, 20, 21): holds
# against merge, relative paths and -N references, list as a user who may
# not read the store.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd setpriv

# Item 16: a hold stops merge as it stops drop; --dry-run changes nothing.
test_merge_refuses_held_snapshot() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --hold -N kept "$src"
	assertEquals "take 2 --hold: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take 3: $(ovs_ran)" 0 "$OVS_RC"

	ovs_run "$OVSNAP" merge --dry-run "$src" 1 3
	assertEquals "merge --dry-run over a hold: exit" 1 "$OVS_RC"
	assertEquals "merge --dry-run over a hold: stdout" "" "$OVS_OUT"
	assertEquals "merge --dry-run over a hold: stderr" \
		"ovsnap: merge $src: snapshot 2 (kept) is held and would be merged away: use --force to merge it" \
		"$OVS_ERR"
	ovs_run "$OVSNAP" merge "$src" 1 2
	assertEquals "merge of a held snapshot: exit" 1 "$OVS_RC"
	assertEquals "merge of a held snapshot: stdout" "" "$OVS_OUT"
	assertEquals "merge of a held snapshot: stderr" \
		"ovsnap: merge $src: snapshot 2 (kept) is held and would be merged away: use --force to merge it" \
		"$OVS_ERR"
	ovs_run "$OVSNAP" list --json "$src"
	assertEquals "list: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "all three snapshots are still there" "1 2 3" \
		"$(printf '%s\n' "$OVS_OUT" | grep -oE '"id": [0-9]+' | sed 's/"id": //' | xargs)"

	# merging into the held one keeps it: allowed
	ovs_run "$OVSNAP" merge --dry-run "$src" 2 3
	assertEquals "dry run into the held one: exit" 0 "$OVS_RC"
	assertEquals "dry run into the held one: stdout" "would merge 3 into 2" "$OVS_OUT"
	assertEquals "dry run into the held one: stderr" "" "$OVS_ERR"
	ovs_run "$OVSNAP" merge --dry-run --force "$src" 1 3
	assertEquals "dry run with --force: exit" 0 "$OVS_RC"
	assertEquals "dry run with --force: stdout" "would merge 2 kept into 1
would merge 3 into 1" "$OVS_OUT"
	assertEquals "dry run with --force: stderr" "" "$OVS_ERR"
	ovs_run "$OVSNAP" list --json "$src"
	assertEquals "the dry runs changed nothing" "1 2 3" \
		"$(printf '%s\n' "$OVS_OUT" | grep -oE '"id": [0-9]+' | sed 's/"id": //' | xargs)"

	ovs_run "$OVSNAP" merge --force "$src" 1 2
	assertEquals "merge --force: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "merge --force: stdout" "" "$OVS_OUT"
	ovs_run "$OVSNAP" list --json "$src"
	assertEquals "the held one is merged away with --force" "1 3" \
		"$(printf '%s\n' "$OVS_OUT" | grep -oE '"id": [0-9]+' | sed 's/"id": //' | xargs)"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# Item 20: relative SRC, recorded absolute; -N references are arguments.
test_relative_paths_and_negative_references() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/data
	mkdir "$src"
	ovs_run sh -c "cd '$OVS_MNT' && exec '$OVSNAP' take data"
	assertEquals "take with a relative SRC: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take relative: stderr" "" "$OVS_ERR"
	ovs_run sh -c "cd '$OVS_MNT/..' && exec '$OVSNAP' take -N two '$(basename "$OVS_MNT")/data/'"
	assertEquals "take relative with a trailing slash: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list --json
	assertEquals "list: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the source is recorded absolute: $OVS_OUT" "$OVS_OUT" "\"source\": \"$src\""
	ovs_run sh -c "cd '$src' && exec '$OVSNAP' list ."
	assertEquals "list . inside SRC: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "list . shows snapshot two" "$OVS_OUT" "two"

	ovs_run "$OVSNAP" drop --dry-run "$src" -1
	assertEquals "drop -n SRC -1: exit" 0 "$OVS_RC"
	assertEquals "drop -n SRC -1: stdout (-1 is @-1)" "would drop 1" "$OVS_OUT"
	assertEquals "drop -n SRC -1: stderr" "" "$OVS_ERR"
	ovs_run "$OVSNAP" drop --dry-run "$src" -- -0
	assertEquals "drop -n SRC -- -0: exit" 0 "$OVS_RC"
	assertEquals "drop -n SRC -- -0: stdout" "would drop 2" "$OVS_OUT"
	ovs_run "$OVSNAP" drop --dry-run "$src" -1x
	assertEquals "drop -1x: usage error" 2 "$OVS_RC"
	assertEquals "drop -1x: stdout" "" "$OVS_OUT"
	assertContains "drop -1x: the error says to use --: $OVS_ERR" "$OVS_ERR" \
		"an argument that starts with '-' goes after '--'"
	ovs_run sh -c "cd '$OVS_MNT' && exec '$OVSNAP' deactivate data"
	assertEquals "deactivate relative: $(ovs_ran)" 0 "$OVS_RC"
}

# take --store DIR relative to the working directory: made absolute (and
# resolved) before the index records it.
test_relative_store() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/data
	mkdir "$src" "$OVS_MNT/elsewhere" "$OVS_MNT/stores"
	ovs_run sh -c "cd '$OVS_MNT/elsewhere' && exec '$OVSNAP' take --store ../stores/./st data"
	assertEquals "take of a relative SRC from the wrong directory: exit" 1 "$OVS_RC"
	ovs_run sh -c "cd '$OVS_MNT/elsewhere' && exec '$OVSNAP' take --store ../stores/./st ../data"
	assertEquals "take --store with a relative DIR: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take --store relative: stderr" "" "$OVS_ERR"
	assertEquals "the index records the store folder absolute" "$OVS_MNT/stores/st/" \
		"$(readlink "$OVSNAP_STATE_DIR"/volumes/* | sed 's|[^/]*$||')"
	assertTrue "the registry is there" "[ -f '$OVS_MNT/stores/st/$(ls "$OVS_MNT/stores/st")/registry' ]"
	assertFalse "no store made relative to anything else" "[ -e '$OVS_MNT/elsewhere/stores' ]"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# A store on a filesystem of its own (take --store) that is not mounted,
# SRC still there: every command says the store is missing and asks
# whether its filesystem is mounted, not that SRC is no volume (take did
# not even say that: it pointed at SRC as a broken volume to take
# instead); fsck does not tell the admin the snapshots are lost.  Mounted
# again, the volume is whole.
test_store_not_mounted_is_not_no_volume() {
	local src store_mnt store_dev cmd

	ovs_mkfs xfs || return
	src=$OVS_MNT/data
	mkdir "$src"
	echo one >"$src/f"
	ovs_mkfs xfs || return
	store_mnt=$OVS_MNT
	store_dev=$OVS_DEV
	ovs_run "$OVSNAP" take --store "$store_mnt/st" "$src"
	assertEquals "take --store: $(ovs_ran)" 0 "$OVS_RC"
	echo two >"$src/f"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run umount "$store_mnt"
	assertEquals "umount the store's filesystem: $(ovs_ran)" 0 "$OVS_RC"

	for cmd in take activate deactivate list diff hold drop; do
		case $cmd in
		diff | hold | drop) ovs_run "$OVSNAP" "$cmd" "$src" 1 ;;
		*) ovs_run "$OVSNAP" "$cmd" "$src" ;;
		esac
		assertEquals "$cmd: exit" 1 "$OVS_RC"
		assertEquals "$cmd: says the store is missing: $OVS_ERR" \
			"ovsnap: $cmd $src: store $store_mnt/st/$(ls "$OVSNAP_STATE_DIR/volumes") is missing (is the filesystem that holds it mounted?)" \
			"$OVS_ERR"
	done
	ovs_run "$OVSNAP" status "$src"
	assertContains "status: shows the problem: $(ovs_ran)" "$OVS_OUT" "store missing"
	ovs_run "$OVSNAP" fsck -n "$src"
	assertEquals "fsck -n: exit" 4 "$OVS_RC"
	assertContains "fsck -n: what to do: $OVS_OUT" "$OVS_OUT" "if the filesystem that holds it is not mounted, mount it"
	assertNotContains "fsck -n: not 'every snapshot is lost'" "$OVS_OUT" "every snapshot is lost"

	ovs_run mount "$store_dev" "$store_mnt"
	assertEquals "mount the store's filesystem again: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$src"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" fsck -n "$src"
	assertEquals "fsck -n, store back: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate at the end: $(ovs_ran)" 0 "$OVS_RC"

	# A store folder without its registry is a broken volume, not none.
	mv "$store_mnt/st/"*/registry "$OVS_TMP/registry"
	ovs_run "$OVSNAP" activate "$src"
	assertEquals "activate, no registry: exit" 1 "$OVS_RC"
	assertContains "activate, no registry: says so: $OVS_ERR" "$OVS_ERR" \
		"/registry is missing (see 'ovsnap fsck $src')"
	ovs_run "$OVSNAP" fsck -n "$src"
	assertNotContains "fsck -n, no registry: not 'not an ovsnap volume': $(ovs_ran)" \
		"$OVS_ERR" "not an ovsnap volume"
	assertEquals "fsck -n, no registry: errors found" 4 "$OVS_RC"
	mv "$OVS_TMP/registry" "$store_mnt/st/"*/
}

# Item 21: a user who cannot read the store is told so, not that the store
# is missing or that SRC is no volume.
test_list_as_user_says_permission_denied() {
	local src

	ovs_user || return
	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	chmod 0755 "$OVS_MNT"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_as_user "$OVSNAP" list
	assertEquals "list as user: exit" 1 "$OVS_RC"
	assertNotContains "list as user: not 'store missing': $OVS_ERR" "$OVS_ERR" "store missing"
	assertContains "list as user: permission denied: $OVS_ERR" "$OVS_ERR" \
		"ovsnap: list: $src: permission denied"
	ovs_as_user "$OVSNAP" list "$src"
	assertEquals "list SRC as user: exit" 1 "$OVS_RC"
	assertEquals "list SRC as user: stdout" "" "$OVS_OUT"
	assertNotContains "list SRC as user: not 'not an ovsnap volume': $OVS_ERR" "$OVS_ERR" \
		"not an ovsnap volume"
	assertContains "list SRC as user: permission denied: $OVS_ERR" "$OVS_ERR" \
		"Permission denied"
	# The index lost: the default store is found but cannot be read.
	rm -f "$OVSNAP_STATE_DIR"/volumes/*
	ovs_as_user "$OVSNAP" list "$src"
	assertEquals "list SRC as user, no index: exit" 1 "$OVS_RC"
	assertNotContains "no index: not 'not an ovsnap volume': $OVS_ERR" "$OVS_ERR" \
		"not an ovsnap volume"
	assertContains "no index: permission denied: $OVS_ERR" "$OVS_ERR" "Permission denied"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
