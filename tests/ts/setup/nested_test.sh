#!/bin/bash
# Issue 11 item 1, DESIGN.md rule 17: one volume per subtree.  A take (the
# first one sets a volume up) or an activation is refused when SRC lies
# inside, or holds, another registered volume's SRC or store, active or
# not, also when the path reaches it through a bind mount; the error
# names the other volume.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

setUp() {
	ovs_mkfs xfs
	D=$OVS_MNT/d
	mkdir -p "$D/inner" "$OVS_MNT/e"
	echo original >"$D/inner/f"
}

# The store folders of the image's default store.
store_folders() {
	ls -A "$OVS_MNT/.ovsnap" 2>/dev/null | grep -v '^\.' | sort | tr '\n' ' '
}

test_take_inside_a_volume_is_refused() {
	ovs_run "$OVSNAP" take "$D"
	assertEquals "take of the outer volume: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$D/inner"
	assertEquals "take of a directory inside a volume: exit" 1 "$OVS_RC"
	assertEquals "take of a directory inside a volume: stdout" "" "$OVS_OUT"
	assertContains "take inside a volume names the volume" "$OVS_ERR" "inside the volume $D"
	assertEquals "no store folder for the refused volume" 1 "$(store_folders | wc -w)"
	assertEquals "no snapshot mount over the inner directory" "" \
		"$(findmnt -rn -M "$D/inner" -o FSTYPE)"
	# The outer volume's snapshot still shows what it had.
	ovs_run "$OVSNAP" list "$D/inner"
	assertNotEquals "the inner directory is no volume" 0 "$OVS_RC"
}

# First takes of a directory and of one inside it at once: both would
# pass the nesting check before either is registered, unless first takes
# run one at a time.  The test holds the lock they share, starts both,
# lets them go: exactly one volume comes of it.  (They must not inherit
# the descriptor of the held lock, or they would wait for themselves.)
test_concurrent_nested_first_takes() {
	local p1 p2 rc1 rc2 ino

	mkdir -p "$OVSNAP_RUN_DIR"
	exec 8>>"$OVSNAP_RUN_DIR/setup.lock"
	flock -x 8
	"$OVSNAP" take "$D" >"$OVS_TMP/out1" 2>&1 8>&- &
	p1=$!
	"$OVSNAP" take "$D/inner" >"$OVS_TMP/out2" 2>&1 8>&- &
	p2=$!
	# Both wait for the lock: two blocked waiters on its inode.
	ino=$(stat -c %i "$OVSNAP_RUN_DIR/setup.lock")
	ovs_wait_until 60 "[ \$(awk -v ino=$ino '\$2 == \"->\" && \$7 ~ (\":\" ino \"\$\")' /proc/locks | wc -l) -ge 2 ]"
	assertEquals "both first takes wait for the setup lock" 0 $?
	assertEquals "no volume set up while the lock is held" "" "$(store_folders)"
	exec 8>&-
	wait "$p1"
	rc1=$?
	wait "$p2"
	rc2=$?
	assertEquals "exactly one of the two nested first takes succeeds ($rc1: $(cat "$OVS_TMP/out1"); $rc2: $(cat "$OVS_TMP/out2"))" \
		1 "$(( (rc1 == 0) + (rc2 == 0) ))"
	assertEquals "one store folder" 1 "$(store_folders | wc -w)"
	assertContains "the refused one names the other volume" \
		"$(cat "$OVS_TMP/out1" "$OVS_TMP/out2")" "volume $D"
}

test_take_around_a_volume_is_refused() {
	ovs_run "$OVSNAP" take "$D/inner"
	assertEquals "take of the inner volume: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$D/inner"
	assertEquals "deactivate the inner volume: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$D"
	assertEquals "take around an inactive volume: exit" 1 "$OVS_RC"
	assertEquals "take around a volume: stdout" "" "$OVS_OUT"
	assertContains "take around a volume names it" "$OVS_ERR" "holds the volume $D/inner (inactive)"
	assertEquals "no snapshot mount over the outer directory" "" \
		"$(findmnt -rn -M "$D" -o FSTYPE)"
}

test_take_through_a_bind_mount_is_refused() {
	ovs_run "$OVSNAP" take "$D"
	assertEquals "take of the outer volume: $(ovs_ran)" 0 "$OVS_RC"
	# A bind of the filesystem's directory d, taken below the mount of
	# the snapshot: another path to the same directory.
	ovs_mount_behind "$OVS_TMP/bind"
	ovs_run "$OVSNAP" take "$OVS_TMP/bind/d/inner"
	assertEquals "take through a bind mount: exit" 1 "$OVS_RC"
	assertContains "take through a bind mount names the volume" "$OVS_ERR" "inside the volume $D"
	ln -s "$D" "$OVS_TMP/link"
	ovs_run "$OVSNAP" take "$OVS_TMP/link/inner"
	assertEquals "take through a symlink: exit" 1 "$OVS_RC"
	assertContains "take through a symlink names the volume" "$OVS_ERR" "inside the volume $D"
}

test_store_inside_a_volume_is_refused() {
	ovs_run "$OVSNAP" take "$D"
	assertEquals "take of d: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --store "$D/inner/store" "$OVS_MNT/e"
	assertEquals "store inside another volume: exit" 1 "$OVS_RC"
	assertContains "store inside a volume names it" "$OVS_ERR" "would be inside the volume $D"
	assertFalse "no store made inside d" "[ -e '$D/inner/store' ]"
}

test_take_around_a_store_is_refused() {
	mkdir -p "$OVS_MNT/e/keep"
	ovs_run "$OVSNAP" take --store "$OVS_MNT/e/keep/store" "$D"
	assertEquals "take of d with its store in e: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$OVS_MNT/e"
	assertEquals "take of a directory holding a store: exit" 1 "$OVS_RC"
	assertContains "take around a store names the volume: $OVS_ERR" "$OVS_ERR" "of the volume $D"
}

test_activate_inside_a_volume_is_refused() {
	local idx esc

	# A registry that holds both (made before this check existed): the
	# inner volume first, its index entry hidden while d is set up.
	ovs_run "$OVSNAP" take "$D/inner"
	assertEquals "take of the inner volume: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$D/inner"
	assertEquals "deactivate the inner volume: $(ovs_ran)" 0 "$OVS_RC"
	idx=$OVSNAP_STATE_DIR/volumes
	esc=$(ls "$idx")
	mv "$idx/$esc" "$OVS_TMP/hidden"
	ovs_run "$OVSNAP" take "$D"
	assertEquals "take of d while the inner one is hidden: $(ovs_ran)" 0 "$OVS_RC"
	mv "$OVS_TMP/hidden" "$idx/$esc"
	ovs_run "$OVSNAP" activate "$D/inner"
	assertEquals "activate inside an active volume: exit" 1 "$OVS_RC"
	assertEquals "activate inside a volume: stdout" "" "$OVS_OUT"
	assertContains "activate inside a volume names it" "$OVS_ERR" "inside the volume $D (active)"
	assertEquals "no snapshot mount over the inner directory" "" \
		"$(findmnt -rn -M "$D/inner" -o FSTYPE)"
	ovs_run "$OVSNAP" deactivate "$D"
	assertEquals "deactivate d: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$D"
	assertEquals "activate around an inactive volume: exit" 1 "$OVS_RC"
	assertContains "activate around a volume names it" "$OVS_ERR" "holds the volume $D/inner (inactive)"
}

. "$SHUNIT2"
