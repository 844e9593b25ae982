#!/bin/bash
# Issue 11 item 9, DESIGN.md rule 20: a store that users control must not
# give them root's writes.  Each attack is set up by the unprivileged user
# ovsnap-test where a user could do it (their own directory, a directory
# they can write), then root runs the command that would follow it; every
# one must be refused with one line naming the directory and why, and
# nothing may be written outside.  Last, a root-owned store (below a
# sticky parent) keeps working: take, activate, views.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd setpriv useradd
ovs_require_fs xfs

# A fresh XFS image with SRC holding one file the user may write, the
# user, and an empty root-owned directory "outside" that no attack may
# write to (on the same filesystem: a layer must share it with its work
# directory).
setUp() {
	ovs_user || return
	ovs_mkfs xfs 512M || return
	SRC=$OVS_MNT/src
	OUTSIDE=$OVS_MNT/outside
	mkdir -p "$SRC" "$OUTSIDE"
	printf 'original\n' >"$SRC/file"
	chown "$OVS_UID:$OVS_GID" "$SRC/file"
	# SRC's folder name in a store (ovsnap-store(5)): '/' -> '-', and
	# bytes other than [A-Za-z0-9_.] as %XX
	ESC=$(printf '%s' "${SRC#/}" | sed -e 's/-/%2d/g' -e 's|/|-|g')
}

tearDown() {
	ovs_teardown
	rm -f "$OVS_TMP/registry.copy"
}

assert_outside_untouched() {
	assertEquals "nothing written to $OUTSIDE" "" "$(ls -A "$OUTSIDE")"
}

assert_not_protected() {
	assertFalse "no snapshot mount over $SRC" "findmnt -rn -M '$SRC' -t fuse.ovsnap"
}

# As the user: put a store of their own at $1 for SRC, with a registry
# copied from the real one (its format is documented) and the layer of
# snapshot 1 a symlink to $OUTSIDE.
plant_store() {
	local store=$1

	ovs_as_user sh -c "mkdir -p '$store/$ESC/layers/1/work' &&
		cp '$OVS_TMP/registry.copy' '$store/$ESC/registry' &&
		ln -s '$OUTSIDE' '$store/$ESC/layers/1/upper'"
	assertEquals "the user plants a store in $store: $(ovs_ran)" 0 "$OVS_RC"
}

# Snapshot 1 of SRC in the store $1 (empty: the default one), switched off,
# and a copy of its registry the user may read.
volume_deactivated() {
	if [ -n "$1" ]; then
		ovs_run "$OVSNAP" take --store "$1" "$SRC"
	else
		ovs_run "$OVSNAP" take "$SRC"
	fi
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	cp "${1:-$OVS_MNT/.ovsnap}/$ESC/registry" "$OVS_TMP/registry.copy"
	chmod 0644 "$OVS_TMP/registry.copy"
}

# After an attack: the user writes to SRC/file; the old content must not
# land anywhere outside the store.
user_writes() {
	ovs_as_user sh -c "printf 'changed\n' >'$SRC/file'"
	assertEquals "the user writes $SRC/file: $(ovs_ran)" 0 "$OVS_RC"
	assert_outside_untouched
}

test_store_owned_by_user_is_refused() {
	local store=$OVS_MNT/store

	mkdir "$store" "$OVS_MNT/home"
	chown "$OVS_UID:$OVS_GID" "$store" "$OVS_MNT/home"

	ovs_run "$OVSNAP" take --store "$store" "$SRC"
	assertEquals "take into a user's store: exit" 1 "$OVS_RC"
	assertEquals "take into a user's store: stdout" "" "$OVS_OUT"
	assertEquals "take into a user's store: stderr" \
		"ovsnap: take $SRC: store $store is unsafe: $store is owned by uid $OVS_UID, not root" \
		"$OVS_ERR"
	assertEquals "nothing made in the user's store" "" "$(ls -A "$store")"
	assertEquals "nothing indexed" "" "$(ls -A "$OVSNAP_STATE_DIR")"
	assert_not_protected

	# A store made by root inside the user's directory: the user can
	# swap it for their own at any time.
	ovs_run "$OVSNAP" take --store "$OVS_MNT/home/rootstore" "$SRC"
	assertEquals "take below a user's directory: exit" 1 "$OVS_RC"
	assertEquals "take below a user's directory: stdout" "" "$OVS_OUT"
	assertEquals "take below a user's directory: stderr" \
		"ovsnap: take $SRC: store $OVS_MNT/home/rootstore is unsafe: $OVS_MNT/home is owned by uid $OVS_UID, not root" \
		"$OVS_ERR"
	assertFalse "no store made below the user's directory" "[ -e '$OVS_MNT/home/rootstore' ]"
	assert_not_protected
}

test_writable_parent_and_sticky_store_are_refused() {
	mkdir -p "$OVS_MNT/shared" "$OVS_MNT/tmp"
	chmod 0777 "$OVS_MNT/shared"
	chmod 1777 "$OVS_MNT/tmp"

	ovs_run "$OVSNAP" take --store "$OVS_MNT/shared/store" "$SRC"
	assertEquals "store below a world-writable directory: exit" 1 "$OVS_RC"
	assertEquals "store below a world-writable directory: stdout" "" "$OVS_OUT"
	assertEquals "store below a world-writable directory: stderr" \
		"ovsnap: take $SRC: store $OVS_MNT/shared/store is unsafe: $OVS_MNT/shared is writable by others (mode 0777, not sticky)" \
		"$OVS_ERR"
	assertFalse "no store made" "[ -e '$OVS_MNT/shared/store' ]"

	# Sticky protects root's entries in a parent, not a store itself:
	# anyone could add a volume folder to it.
	ovs_run "$OVSNAP" take --store "$OVS_MNT/tmp" "$SRC"
	assertEquals "a sticky world-writable store: exit" 1 "$OVS_RC"
	assertEquals "a sticky world-writable store: stdout" "" "$OVS_OUT"
	assertEquals "a sticky world-writable store: stderr" \
		"ovsnap: take $SRC: store $OVS_MNT/tmp is unsafe: $OVS_MNT/tmp is writable by others (mode 1777; sticky is not enough here)" \
		"$OVS_ERR"
	assertEquals "nothing made in it" "" "$(ls -A "$OVS_MNT/tmp")"
	assertEquals "nothing indexed" "" "$(ls -A "$OVSNAP_STATE_DIR")"
	assert_not_protected
}

# A volume set up safely whose store's parent later becomes writable: the
# user swaps the store for one whose layer leads outside.
test_store_swapped_below_writable_parent_is_refused() {
	local store=$OVS_MNT/p/store

	mkdir -p "$OVS_MNT/p"
	volume_deactivated "$store"
	chmod 0777 "$OVS_MNT/p"
	ovs_as_user mv "$store" "$OVS_MNT/p/old"
	assertEquals "the user moves root's store away: $(ovs_ran)" 0 "$OVS_RC"
	plant_store "$store"

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: exit" 1 "$OVS_RC"
	assertEquals "activate: stdout" "" "$OVS_OUT"
	assertEquals "activate: stderr" \
		"ovsnap: activate $SRC: store $store is unsafe: $OVS_MNT/p is writable by others (mode 0777, not sticky)" \
		"$OVS_ERR"
	assert_not_protected
	user_writes
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck of an unsafe store: exit" 4 "$OVS_RC"
	assertContains "fsck of an unsafe store: stdout" "$OVS_OUT" \
		"store $store is unsafe: $OVS_MNT/p is writable by others (mode 0777, not sticky)"
	assertEquals "fsck of an unsafe store: stderr" "" "$OVS_ERR"

	# The parent closed again, the store is still the user's.
	chmod 0755 "$OVS_MNT/p"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate of a user's store: exit" 1 "$OVS_RC"
	assertEquals "activate of a user's store: stdout" "" "$OVS_OUT"
	assertEquals "activate of a user's store: stderr" \
		"ovsnap: activate $SRC: store $store is unsafe: $store is owned by uid $OVS_UID, not root" \
		"$OVS_ERR"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck of a user's store: exit" 4 "$OVS_RC"
	assertContains "fsck of a user's store: stdout" "$OVS_OUT" \
		"store $store is unsafe: $store is owned by uid $OVS_UID, not root"
	assertEquals "fsck of a user's store: stderr" "" "$OVS_ERR"
	assert_not_protected
	assert_outside_untouched
}

# A layer directory that is a symlink (planted while the store was the
# user's, or by hand): never followed, by the daemon, views or fsck.
test_planted_layer_symlink_is_refused() {
	local layer

	volume_deactivated ""
	layer=$OVS_MNT/.ovsnap/$ESC/layers/1
	rm -rf "$layer/upper"
	ln -s "$OUTSIDE" "$layer/upper"

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: exit" 1 "$OVS_RC"
	assertEquals "activate: stdout" "" "$OVS_OUT"
	assertContains "activate: stderr" "$OVS_ERR" \
		"$OVS_MNT/.ovsnap/$ESC/layers/1/upper: goes through a symbolic link or a mount point; refused"
	assert_not_protected
	user_writes

	mkdir "$OVS_TMP/view"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertNotEquals "a view of the planted layer: exit" 0 "$OVS_RC"
	assertContains "a view of the planted layer: stderr" "$OVS_ERR" \
		"layers/1/upper: goes through a symbolic link"
	assertFalse "no view mounted" "findmnt -rn -M '$OVS_TMP/view'"

	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertNotEquals "fsck: exit" 0 "$OVS_RC"
	assertContains "fsck: output" "$OVS_OUT" \
		"layers/1/upper: a symbolic link or a mount point, not a directory of the store"
	assert_outside_untouched
}

# The index in the state directory names each volume's store folder: an
# entry naming a folder elsewhere, or a state directory users can write
# (where they could plant one), is refused.
test_index_naming_outside_path_is_refused() {
	local idx=$OVSNAP_STATE_DIR/volumes/$ESC evil=$OVS_MNT/home/evil

	volume_deactivated ""
	mkdir -p "$OVS_MNT/home"
	chown "$OVS_UID:$OVS_GID" "$OVS_MNT/home"
	plant_store "$evil"

	ln -sfn "$evil/$ESC" "$idx"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "index into a user's store: exit" 1 "$OVS_RC"
	assertEquals "index into a user's store: stdout" "" "$OVS_OUT"
	assertEquals "index into a user's store: stderr" \
		"ovsnap: activate $SRC: store $evil is unsafe: $OVS_MNT/home is owned by uid $OVS_UID, not root" \
		"$OVS_ERR"
	assert_not_protected

	# a root-owned folder that is not <store>/<escaped SRC>
	cp -a "$OVS_MNT/.ovsnap/$ESC" "$OVS_MNT/.ovsnap/other"
	ln -sfn "$OVS_MNT/.ovsnap/other" "$idx"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "index naming another folder: exit" 1 "$OVS_RC"
	assertEquals "index naming another folder: stderr" \
		"ovsnap: activate $SRC: the index names $OVS_MNT/.ovsnap/other as the store folder of $ESC; refused: it must be <store>/$ESC" \
		"$OVS_ERR"
	ln -sfn "$OVS_MNT/.ovsnap/../.ovsnap/$ESC" "$idx"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "index naming a path with ..: exit" 1 "$OVS_RC"
	assertContains "index naming a path with ..: stderr" "$OVS_ERR" "refused: it must be <store>/$ESC"
	assert_not_protected

	# The state directory open to all: the user could plant any entry.
	ln -sfn "$OVS_MNT/.ovsnap/$ESC" "$idx"
	chmod 0777 "$OVSNAP_STATE_DIR/volumes"
	ovs_as_user ln -sfn "$evil/$ESC" "$idx.new"
	assertEquals "the user plants an index entry: $(ovs_ran)" 0 "$OVS_RC"
	ovs_as_user mv -f "$idx.new" "$idx"
	assertEquals "the user replaces the index entry: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "a writable index: exit" 1 "$OVS_RC"
	assertEquals "a writable index: stdout" "" "$OVS_OUT"
	assertEquals "a writable index: stderr" \
		"ovsnap: activate $SRC: state directory $OVSNAP_STATE_DIR/volumes is unsafe: it is writable by others (mode 0777)" \
		"$OVS_ERR"
	ovs_run "$OVSNAP" list
	assertEquals "list with a writable index: exit" 1 "$OVS_RC"
	assertContains "list with a writable index: stderr" "$OVS_ERR" \
		"state directory $OVSNAP_STATE_DIR/volumes is unsafe: it is writable by others (mode 0777)"
	assert_not_protected
	user_writes
}

# A root-owned store below a sticky world-writable directory (as /tmp) is
# fine: nobody else can rename or replace it.  Take, views, activate.
# The run directory is held to the store's rule: a user who could write it
# could plant a control socket that answers for the daemon.  A run
# directory below a user's directory is not even made; one that became
# writable by others later is refused by everything that would trust it.
test_unsafe_run_directory_is_refused() {
	local run=$OVSNAP_RUN_DIR cmd

	mkdir "$OVS_MNT/home"
	chown "$OVS_UID:$OVS_GID" "$OVS_MNT/home"
	OVSNAP_RUN_DIR=$OVS_MNT/home/run ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with a run directory below a user's: exit" 1 "$OVS_RC"
	assertEquals "... stdout" "" "$OVS_OUT"
	assertEquals "... stderr" \
		"ovsnap: take: run directory $OVS_MNT/home/run is unsafe: $OVS_MNT/home is owned by uid $OVS_UID, not root" \
		"$OVS_ERR"
	assertFalse "no run directory made in the user's" "[ -e '$OVS_MNT/home/run' ]"
	assertEquals "nothing indexed" "" "$(ls -A "$OVSNAP_STATE_DIR")"
	assert_not_protected

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with the safe run directory: $(ovs_ran)" 0 "$OVS_RC"
	chmod 0777 "$run"
	for cmd in take deactivate fsck; do
		ovs_run "$OVSNAP" $cmd "$SRC"
		assertEquals "$cmd with a run directory writable by others: exit" 1 "$OVS_RC"
		assertEquals "$cmd ...: stdout" "" "$OVS_OUT"
		assertEquals "$cmd ...: stderr" \
			"ovsnap: $cmd: run directory $run is unsafe: $run is writable by others (mode 0777)" \
			"$OVS_ERR"
	done
	assertEquals "still protected" fuse.ovsnap "$(findmnt -rn -M "$SRC" -o FSTYPE)"
	chmod 0700 "$run"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take once it is safe again: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list "$SRC"
	assertContains "list: two snapshots" "$OVS_OUT" "2"
}

test_root_owned_store_works() {
	local store=$OVS_MNT/sticky/store

	mkdir -p "$OVS_MNT/sticky"
	chmod 1777 "$OVS_MNT/sticky"
	ovs_run "$OVSNAP" take --store "$store" "$SRC"
	assertEquals "take 1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "store owner and mode" "0 700" "$(stat -c '%u %a' "$store")"
	ovs_as_user sh -c "printf 'second\n' >'$SRC/file'"
	assertEquals "the user writes $SRC/file: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 2: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take 2: stdout" "2" "$OVS_OUT"

	mkdir "$OVS_TMP/view" "$OVS_TMP/kview"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertEquals "mount a view of 1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the view shows snapshot 1" "original" "$(cat "$OVS_TMP/view/file")"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount the view: $(ovs_ran)" 0 "$OVS_RC"

	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" mount --kernel "$SRC" 1 "$OVS_TMP/kview"
	assertEquals "mount a kernel view of 1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the kernel view shows snapshot 1" "original" "$(cat "$OVS_TMP/kview/file")"
	ovs_run "$OVSNAP" umount "$OVS_TMP/kview"
	assertEquals "umount the kernel view: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_as_user sh -c "printf 'third\n' >'$SRC/file'"
	assertEquals "the user writes again: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list "$SRC"
	assertEquals "list: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck is clean: $(ovs_ran)" 0 "$OVS_RC"
	assert_outside_untouched
}

. "$SHUNIT2"
