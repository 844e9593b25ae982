#!/bin/bash
# Snapshot views answer a LOOKUP from the layer directories of its parent
# kept open since an earlier lookup in it (issue 12 item 4, view-ops.c
# "lookups by directory").  Those directories go stale for the newest
# layer and SRC: the first lookup of a name after the live tree changed
# it, removed it, added a name, moved the directory away, or after a take,
# must still show the snapshot (DESIGN.md section 3).  Each name below is
# looked up through the view for the first time after its change, with
# its directory already cached by a lookup of a sibling.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs

VIEW=$OVS_TMP/view

live() {
	ovs_run "$@"
	assertEquals "live: $*: $(ovs_ran)" 0 "$OVS_RC"
}

take() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
}

# view_reads NAME EXPECTED: the content of NAME through the view
view_reads() {
	ovs_run cat "$VIEW/$1"
	assertEquals "view: $1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "view: $1 as at snapshot 1" "$2" "$OVS_OUT"
}

# view_lacks NAME: no such name through the view
view_lacks() {
	ovs_run stat -c %n "$VIEW/$1"
	assertNotEquals "view: $1 did not exist at snapshot 1: $(ovs_ran)" 0 "$OVS_RC"
}

test_first_lookups_after_live_changes_show_the_snapshot() {
	local n

	ovs_mkfs xfs || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/d" "$SRC/m" "$VIEW"
	for n in a b c e f; do echo "${n}1" >"$SRC/d/$n"; done
	for n in p q r; do echo "${n}1" >"$SRC/m/$n"; done
	take
	ovs_run "$OVSNAP" mount "$SRC" 1 "$VIEW"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	view_reads d/a a1	# d and m cached, from SRC alone
	view_reads m/p p1

	# preserved into U_1 after d was cached: a rewrite, a removal, a
	# new name, the directory moved away (and its new place changed)
	live sh -c "echo b2 >'$SRC/d/b'"
	live rm "$SRC/d/c"
	live sh -c "echo new >'$SRC/d/new'"
	live mv "$SRC/m" "$SRC/m2"
	live sh -c "echo q2 >'$SRC/m2/q'"
	live mkdir "$SRC/m"
	live sh -c "echo r2 >'$SRC/m/r'"
	view_reads d/b b1
	view_reads d/c c1
	view_lacks d/new
	view_reads m/q q1
	view_reads m/r r1

	# a take: the stack changes, U_1 freezes, U_2 takes the changes
	take
	live sh -c "echo e2 >'$SRC/d/e'"
	live rm "$SRC/d/f"
	view_reads d/e e1
	view_reads d/f f1
	ovs_run ls "$VIEW/d"
	assertEquals "view: d listed as at snapshot 1" "a
b
c
e
f" "$OVS_OUT"
}

# ovsnap-viewd's workers ask for the short scheduler slice ovsnapd's
# workers ask for (ovsnapd(8), Costs): the thread that starts libfuse's
# pool asks, and the workers inherit it.  Seen in /proc/PID/task/TID/sched
# (CONFIG_SCHED_DEBUG, Linux 6.12+).
test_view_workers_ask_for_a_short_slice() {
	local p pid= t n=0 all=0

	ovs_mkfs xfs || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC" "$VIEW"
	echo a1 >"$SRC/a"
	take
	ovs_run "$OVSNAP" mount "$SRC" 1 "$VIEW"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	view_reads a a1
	# its pid as mount recorded it (the daemon mounts /proc/self/fd/4,
	# the directory mount opened, so its command line names no path)
	for p in "$OVSNAP_RUN_DIR"/view-*.pid; do
		[ -f "$p" ] && pid=$(cut -d' ' -f1 "$p")
	done
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ovsnap-viewd ] || pid=
	assertNotNull "the view's ovsnap-viewd" "$pid"
	if [ -z "$(awk '$1 == "se.slice" { print $3 }' "/proc/$pid/sched" 2>/dev/null)" ] ||
	   ! python3 -c 'import os, sys
major, minor = (int(x) for x in os.uname().release.split(".")[:2])
sys.exit(0 if (major, minor) >= (6, 12) else 1)'; then
		ovs_skip_test "no se.slice in /proc/PID/sched, or a kernel before 6.12"
		return
	fi
	for t in /proc/"$pid"/task/*; do
		all=$((all + 1))
		[ "$(awk '$1 == "se.slice" { print $3 }' "$t/sched")" = 100000 ] && n=$((n + 1))
	done
	assertTrue "threads with a 0.1 ms slice: $n of $all (the pool and the thread that started it)" "[ $n -ge 2 ]"
	ovs_run "$OVSNAP" umount "$VIEW"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
