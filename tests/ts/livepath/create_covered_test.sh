#!/bin/bash
# A create in a folder whose every name the newest snapshot already covers
# (a folder new since the take, or one inside it) preserves nothing, so
# ovsnapd neither walks the layer nor stats the new name for it (issue 12
# item 1).  The daemon remembers that per folder and per take; these tests
# check that no snapshot changes when that memory would be wrong: the
# next take, folders renamed or exchanged into old places, old folders
# beside new ones, names made behind the mount.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs ext4 overlay fuse

FSOP=${OVSNAP_TOOLS}/tools/ovs-fsop

tearDown() {
	ovs_teardown
}

# Calls of a create in the daemon's trace that stat a name (newfstatat or
# statx of a non-empty path): the existence check of the new name and the
# walk of the layer, both skipped in a covered folder.  The stat of the
# created file through its own fd (an empty path) stays.
name_stats() {
	grep -cE '(newfstatat|statx)\([0-9A-Z_]+, "[^"]' "$1"
}

daemon_pid() {
	pgrep -f "ovsnapd .*$SRC\$" | head -1
}

creates_traced() { # DIR N TRACE: N new files DIR/TRACE's name.I
	local i pid

	pid=$(daemon_pid)
	assertNotNull "the daemon of $SRC" "$pid" || return 1
	ovs_strace_attach "$pid" "$3" -e trace=newfstatat,statx,openat,mkdirat
	assertTrue "strace attached to every thread of the daemon" $? || return 1
	for ((i = 0; i < $2; i++)); do
		printf '%s\n' "$i" >"$1/${3##*/}.$i" || fail "create $1/${3##*/}.$i"
	done
	ovs_strace_detach
}

# folder_learned_from DIR CMD FILE TRACE: with the daemon's nodes of DIR
# and of what is in it forgotten, CMD (a first change of a file in DIR)
# walks the layer; an append to and a chmod of FILE after it do not.
folder_learned_from() {
	sync
	echo 2 >/proc/sys/vm/drop_caches
	ovs_strace_attach "$(daemon_pid)" "$4.first" -e trace=openat
	assertTrue "strace attached to every thread of the daemon" $? || return 1
	eval "$2" || fail "$2"
	ovs_strace_detach
	assertTrue "$2 walked the layer: the nodes were forgotten (trace: $(cat "$4.first"))" \
		"[ $(grep -c 'O_DIRECTORY' "$4.first") -ge 3 ]"
	ovs_strace_attach "$(daemon_pid)" "$4" -e trace=openat,chmod,fchmod,fchmodat
	assertTrue "strace attached to every thread of the daemon" $? || return 1
	printf 'more\n' >>"$3" || fail "append to $3"
	chmod 600 "$3" || fail "chmod $3"
	ovs_strace_detach
	assertEquals "the trace holds the chmod (trace: $(cat "$4"))" 1 \
		"$(grep -cE '^[0-9]+ +(f?chmod|fchmodat)\(' "$4")"
	assertEquals "after $2 no folder of the layer is opened (trace: $(cat "$4"))" \
		0 "$(grep -c 'O_DIRECTORY' "$4")"
}

test_promise_ovsnapd_new_folder_creates_walk_nothing() {
	local deep upper f pid i trace=$OVS_TMP/create.strace n=8

	ovs_require_cmd strace || return
	ovs_mkfs xfs 512M || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/old/a/b"
	printf 'old\n' >"$SRC/old/a/b/f"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	# A folder new since the take, deep in old ones that are preserved
	# as folders (the whiteout of "new" in old/a/b copies them up), so
	# that a walk of the layer would open each.
	deep=$SRC/old/a/b/new/c/d/e
	mkdir -p "$deep" || fail "mkdir -p $deep"
	creates_traced "$deep" "$n" "$trace" || return
	assertEquals "no name stat'ed for $n creates in a new folder (trace: $(cat "$trace"))" \
		0 "$(name_stats "$trace")"
	assertEquals "each create made its file" "$n" \
		"$(grep -cE 'openat\(.*"create\.strace\.[0-9]+", .*O_CREAT' "$trace")"
	# Renames in it walk no folder of the layer either.
	pid=$(daemon_pid)
	ovs_strace_attach "$pid" "$trace.r" -e trace=openat,renameat,renameat2
	assertTrue "strace attached to every thread of the daemon" $? || return
	for ((i = 0; i < n; i++)); do
		mv "$deep/create.strace.$i" "$deep/r$i" || fail "rename $i"
	done
	mkdir "$deep/sub"
	mv "$deep/r0" "$deep/sub/r0" || fail "rename into a folder in it"
	ovs_strace_detach
	assertEquals "the trace holds the $((n + 1)) renames (trace: $(cat "$trace.r"))" \
		"$((n + 1))" "$(grep -cE 'renameat2?\(.*"r[0-9]+"' "$trace.r")"
	assertEquals "no folder of the layer opened for them (trace: $(cat "$trace.r"))" \
		0 "$(grep -c 'O_DIRECTORY' "$trace.r")"

	# A new daemon knows nothing: the first create walks the layer and
	# learns that the folder's names are covered, the others do not.
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC" || return
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC" || return
	printf 'first\n' >"$deep/first" || fail "the first create after activate"
	creates_traced "$deep" "$n" "$trace.2" || return
	assertEquals "a new daemon learns it from the first create (trace: $(cat "$trace.2"))" \
		0 "$(name_stats "$trace.2")"
	# So does one whose kernel forgot the folder (and the daemon its
	# node), from the first rename in it.
	sync
	echo 2 >/proc/sys/vm/drop_caches
	pid=$(daemon_pid)
	ovs_strace_attach "$pid" "$trace.f" -e trace=newfstatat,statx
	assertTrue "strace attached to every thread of the daemon" $? || return
	mv "$deep/first" "$deep/second" || fail "the first rename after a forget"
	ovs_strace_detach
	assertTrue "that rename walked the layer: the node was forgotten (trace: $(cat "$trace.f"))" \
		"[ $(name_stats "$trace.f") -ge 3 ]"
	creates_traced "$deep" "$n" "$trace.4" || return
	assertEquals "and from the first rename (trace: $(cat "$trace.4"))" \
		0 "$(name_stats "$trace.4")"

	# The first change of a file there whose node the daemon forgot
	# (the kernel did; the folder, held open, stays known) walks no
	# folder of the layer either: its name is covered, so it is.
	exec 9<"$deep"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	ovs_strace_attach "$(daemon_pid)" "$trace.o" -e trace=openat,unlinkat
	assertTrue "strace attached to every thread of the daemon" $? || { exec 9<&-; return; }
	printf 'more\n' >>"$deep/create.strace.4.0" || fail "append after a forget"
	chmod 600 "$deep/create.strace.4.1" || fail "chmod after a forget"
	rm "$deep/create.strace.4.2" || fail "unlink after a forget"
	ovs_strace_detach
	exec 9<&-
	assertEquals "the trace holds the unlink (trace: $(cat "$trace.o"))" 1 \
		"$(grep -cE 'unlinkat\(.*"create\.strace\.4\.2"' "$trace.o")"
	assertEquals "no folder of the layer opened for them (trace: $(cat "$trace.o"))" \
		0 "$(grep -c 'O_DIRECTORY' "$trace.o")"
	# With the folder forgotten too, the first change of a file there
	# (a write, then an unlink) walks the layer and teaches the daemon
	# the folder; the changes after it do not walk.
	folder_learned_from "$deep" "printf more >>$deep/create.strace.4.3" \
		"$deep/create.strace.4.4" "$trace.w" || return
	folder_learned_from "$deep" "rm $deep/create.strace.4.5" \
		"$deep/create.strace.4.6" "$trace.u" || return

	# An old folder is never taken for a covered one: each create there
	# stats its name (and preserves a whiteout).
	creates_traced "$SRC/old/a" 2 "$trace.3" || return
	assertTrue "creates in an old folder stat their names (trace: $(cat "$trace.3"))" \
		"[ $(name_stats "$trace.3") -ge 2 ]"
	ovs_run "$OVSNAP" deactivate "$SRC"
	read -r _ upper < <(ovs_snapshot_layers "$SRC")
	for f in create.strace.3.0 create.strace.3.1; do
		assertEquals "a whiteout for old/a/$f" "character special file 0,0" \
			"$(stat -c '%F %t,%T' "$upper/old/a/$f" 2>&1)"
	done
}

# Every way the memory of a covered folder could outlive its truth, on
# FSTYPE, checked against the manifests recorded at the takes.
covered_folders_keep_snapshots() {
	local under=$OVS_TMP/under

	ovs_mkfs "$1" 512M || return
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$MF" "$SRC/old/empty" "$SRC/olddir/sub" "$SRC/plain" "$SRC/chmodded/sub"
	printf 'keep\n' >"$SRC/old/keep"
	printf 'keep2\n' >"$SRC/old/keep2"
	printf 'ex\n' >"$SRC/old/ex"
	printf 'x\n' >"$SRC/olddir/x"
	printf 'y\n' >"$SRC/olddir/sub/y"
	ovs_take_with_manifest "$SRC" "$MF" || return

	# An old folder whose own change was preserved is not one whose
	# names are covered, and neither is a folder in it looked up
	# afresh (held open, the folder stays known to the daemon; the
	# kernel forgets the one in it).
	chmod 700 "$SRC/chmodded" || fail "chmod of an old folder"
	exec 9<"$SRC/chmodded"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	printf 's\n' >"$SRC/chmodded/sub/s"
	exec 9<&-

	# Snapshot 1's epoch: new folders, creates in them (remembered as
	# covered), and two creates in an old folder (never remembered).
	mkdir -p "$SRC/new/deep/er" "$SRC/swap"
	printf 'a\n' >"$SRC/new/a"
	printf 'b\n' >"$SRC/new/deep/er/b"
	printf 'c\n' >"$SRC/old/c"
	printf 'd\n' >"$SRC/old/d"
	printf '1\n' >"$SRC/swap/1"
	# Renames and links between remembered folders and old ones.
	printf 'r\n' >"$SRC/new/r1"
	mv "$SRC/new/r1" "$SRC/new/deep/r2" || fail "rename between remembered folders"
	mv "$SRC/old/keep" "$SRC/new/kept" || fail "rename of an old file into a remembered folder"
	printf 'over\n' >"$SRC/new/over"
	mv "$SRC/new/over" "$SRC/olddir/x" || fail "rename over an old file"
	"$FSOP" exchange "$SRC/new/a" "$SRC/old/ex" || fail "exchange with an old file"
	ln "$SRC/old/keep2" "$SRC/new/l" || fail "link of an old file into a remembered folder"
	printf 'changed\n' >>"$SRC/new/l"
	printf 'n\n' >"$SRC/new/n"
	ln "$SRC/new/n" "$SRC/old/n" || fail "link of a new file into an old folder"
	# A remembered folder renamed over an old empty one and into an old
	# folder; one exchanged with an old folder that has entries.
	mv -T "$SRC/new/deep" "$SRC/old/empty" || fail "rename over an old empty folder"
	printf 'e\n' >"$SRC/old/empty/e"
	printf 'f\n' >"$SRC/old/empty/er/f"
	mv "$SRC/new" "$SRC/plain/" || fail "rename into an old folder"
	printf 'g\n' >"$SRC/plain/new/g"
	mkdir "$SRC/plain/new/xd"
	printf 'q\n' >"$SRC/plain/new/xd/q"
	"$FSOP" exchange "$SRC/plain/new/xd" "$SRC/olddir/sub" ||
		fail "exchange of a folder in a remembered folder with one in an old folder"
	printf 'q2\n' >"$SRC/olddir/sub/q2"
	printf 'y2\n' >"$SRC/plain/new/xd/y2"
	"$FSOP" exchange "$SRC/swap" "$SRC/olddir" || fail "exchange with an old folder"
	printf '2\n' >"$SRC/olddir/2"
	printf 'z\n' >"$SRC/swap/z"
	mkdir "$SRC/olddir/m"
	printf 'm\n' >"$SRC/olddir/m/m"
	ovs_take_with_manifest "$SRC" "$MF" || return

	# Snapshot 2's epoch: what was new in snapshot 1's is old now.
	# First changes of files made in folders remembered then are
	# preserved, with their nodes known and forgotten alike.
	printf 'more\n' >>"$SRC/plain/new/g" || fail "append to plain/new/g"
	rm "$SRC/old/empty/e" || fail "rm old/empty/e"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	chmod 600 "$SRC/plain/new/xd/y2" || fail "chmod plain/new/xd/y2"
	printf 'more\n' >>"$SRC/old/empty/er/f" || fail "append to old/empty/er/f"
	rm "$SRC/swap/sub/q" || fail "rm swap/sub/q"
	printf 'h\n' >"$SRC/plain/new/h"
	printf 'i\n' >"$SRC/old/empty/er/i"
	printf 'j\n' >"$SRC/olddir/m/j"
	mkdir "$SRC/plain/new/k"
	printf 'k\n' >"$SRC/plain/new/k/k"
	# A name made behind the mount in a remembered folder: a create
	# without O_EXCL opens it, one with O_EXCL fails.
	# The kernel caches that nothing is there, so the creates reach the
	# daemon.
	for f in behind excl; do
		assertFalse "no $f yet" "[ -e '$SRC/plain/new/k/$f' ]"
	done
	ovs_mount_behind "$under"
	printf 'behind\n' >"$under/src/plain/new/k/behind"
	printf 'behind\n' >"$under/src/plain/new/k/excl"
	ovs_strace_attach "$(daemon_pid)" "$OVS_TMP/behind.strace" -e trace=openat
	assertTrue "strace attached to every thread of the daemon" $?
	printf 'over\n' >"$SRC/plain/new/k/behind" || fail "create over a name made behind the mount"
	ovs_run python3 -c 'import os, sys
os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)' "$SRC/plain/new/k/excl"
	ovs_strace_detach
	assertEquals "it opened the file made behind the mount" "over" \
		"$(cat "$under/src/plain/new/k/behind")"
	assertContains "O_EXCL over it fails: $(ovs_ran)" "$OVS_ERR" "FileExistsError"
	assertEquals "the daemon tried O_EXCL first (trace: $(cat "$OVS_TMP/behind.strace"))" 1 \
		"$(grep -cE 'openat\(.*"behind", [^)]*O_CREAT\|O_EXCL.*EEXIST' "$OVS_TMP/behind.strace")"
	assertEquals "and opened it again without (trace: $(cat "$OVS_TMP/behind.strace"))" 1 \
		"$(grep -E 'openat\(.*"behind", [^)]*O_CREAT' "$OVS_TMP/behind.strace" | grep -vc O_EXCL)"
	umount "$under"
	ovs_take_with_manifest "$SRC" "$MF" || return

	printf 'l\n' >"$SRC/plain/new/k/l"
	ovs_oracle_check "$SRC" "$MF"
}

test_covered_folders_keep_snapshots_xfs() { covered_folders_keep_snapshots xfs; }
test_covered_folders_keep_snapshots_ext4() { covered_folders_keep_snapshots ext4; }

. "$SHUNIT2"
