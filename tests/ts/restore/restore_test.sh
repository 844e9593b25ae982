#!/bin/bash
# ovsnap restore and ovsnap rollback (issue 15 items 2 and 3): paths, or
# the whole live tree, become what they were in a snapshot; the change goes
# through the snapshot mount, so the newest snapshot still shows the state
# before it; file data is a clone on XFS; rollback takes a snapshot first,
# refuses while files are open for writing, and a run killed halfway is
# finished by running it again; bad input gets one line and changes
# nothing.  On XFS, ext4 and btrfs.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs ext4 btrfs
ovs_require_cmd setfattr python3 filefrag

MANIFEST=$OVSNAP_TOOLS/tools/ovs-manifest

tearDown() {
	ovs_teardown
}

# A fresh filesystem with a small tree of every kind, snapshot 1 taken and
# its manifest in $M/1.manifest.
make_volume() {	# make_volume FSTYPE
	ovs_mkfs "$1" 1G || return 1
	SRC=$OVS_MNT/src
	M=$OVS_TMP/manifests
	mkdir -p "$M" "$SRC/d/sub" "$SRC/keep"
	echo one >"$SRC/f"
	echo deep >"$SRC/d/sub/deep"
	echo dfile >"$SRC/d/file"
	echo hl >"$SRC/h1"
	ln "$SRC/h1" "$SRC/h2"
	echo g >"$SRC/g1"
	ln "$SRC/g1" "$SRC/g2"
	ln -s f "$SRC/sym"
	mkfifo "$SRC/fifo"
	echo x >"$SRC/xa"
	setfattr -n user.k -v v1 "$SRC/xa"
	# a user's trusted.overlay.* xattr: escaped in the layers (rule 14),
	# and left out of manifests (trusted.*): checked by hand
	setfattr -n trusted.overlay.user -v mine "$SRC/xa"
	chmod 0640 "$SRC/xa"
	echo k >"$SRC/keep/k"
	for i in $(seq 1 30); do echo "n$i" >"$SRC/d/n$i"; done
	touch -d '2020-01-02 03:04:05.123456789' "$SRC/d/sub" "$SRC/d" "$SRC/f"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 1 "$OVS_OUT"
	manifest >"$M/1.manifest"
}

manifest() {
	"$MANIFEST" "$@" "$SRC"
}

# paused_restore PAUSE MADE OUT ARGS...: ovsnap restore ARGS in the
# background (its pid in PAUSED_PID, stdout in OUT.out, stderr in
# OUT.err), held by the test hook once it has made MADE ("" for: once it
# knows its changes), until PAUSE exists; waits until it is held there.
paused_restore() {
	local pause=$1 made=$2 out=$3

	shift 3
	rm -f "$pause" "$pause.paused"
	if [ -n "$made" ]; then
		env OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_RESTORE_PAUSE="$pause" \
			OVSNAP_TEST_RESTORE_PAUSE_MADE="$made" \
			"$OVSNAP" restore "$@" >"$out.out" 2>"$out.err" </dev/null &
	else
		env OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_RESTORE_PAUSE="$pause" \
			"$OVSNAP" restore "$@" >"$out.out" 2>"$out.err" </dev/null &
	fi
	PAUSED_PID=$!
	ovs_wait_until 60 "[ -e '$pause.paused' ]"
	assertTrue "the restore is held by the hook${made:+ after making $made}" \
		"[ -e '$pause.paused' ] && kill -0 $PAUSED_PID"
}

# Every kind of change after snapshot 1, through the snapshot mount.
change_all() {
	echo changed >"$SRC/f"
	rm -r "$SRC/d/sub"
	echo other >"$SRC/d/file"
	rm "$SRC/d/n7"
	echo new >"$SRC/d/added"
	echo more >>"$SRC/h1"
	rm "$SRC/g2"	# g1 stays as it was: g2 comes back linked to it
	ln -sfn d "$SRC/sym"
	rm "$SRC/fifo" && mkdir "$SRC/fifo"
	setfattr -n user.k -v v2 "$SRC/xa"
	setfattr -n user.extra -v e "$SRC/xa"
	setfattr -n trusted.overlay.user -v changed "$SRC/xa"
	chmod 0600 "$SRC/xa"
	chown 1234:1234 "$SRC/xa"
	mkdir "$SRC/newdir" && echo z >"$SRC/newdir/z"
}

# Only the lines of a manifest at PATH or below it (the manifest's first
# field is the path, "." the root).
lines_of() {	# lines_of FILE PATH...
	local f=$1
	shift
	for p in "$@"; do
		grep -E "^(\./)?$p(/| |	)" "$f"
	done | sort
}

restore_paths_body() {
	make_volume "$1" || return
	change_all
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 2: $(ovs_ran)" 2 "$OVS_OUT"
	manifest >"$M/2.manifest"
	# a path whose parents are gone: they are made as they were
	ovs_run "$OVSNAP" restore "$SRC" 1 d/sub/deep
	assertEquals "restore d/sub/deep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "d/sub/deep is back" deep "$(cat "$SRC/d/sub/deep")"
	manifest >"$OVS_TMP/now"
	assertEquals "d/sub has its times back" "$(lines_of "$M/1.manifest" d/sub | head -1)" \
		"$(lines_of "$OVS_TMP/now" d/sub | head -1)"
	ovs_run "$OVSNAP" restore "$SRC" 1 f d h1 h2 g2 sym fifo "$SRC/xa" newdir
	assertEquals "restore: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "restore prints nothing on stdout" "" "$OVS_OUT"
	# every restored path equals snapshot 1, directory times included;
	# keep/ is untouched, only the root's mtime differs
	manifest >"$OVS_TMP/full"
	ovs_run diff <(grep -v '^\. ' "$M/1.manifest") <(grep -v '^\. ' "$OVS_TMP/full")
	assertEquals "live tree but its root equals snapshot 1 after restore:
$OVS_OUT" 0 "$OVS_RC"
	assertEquals "the user's trusted.overlay.user is back" mine \
		"$(getfattr --only-values -n trusted.overlay.user "$SRC/xa" 2>/dev/null)"
	# the restore went through the live path: snapshot 2 still shows the
	# state before it, snapshot 1 is unchanged
	ovs_oracle_check "$SRC" "$M"
}

test_restore_files_dirs_symlinks_hardlinks_absent_xfs() {
	restore_paths_body xfs
}

test_restore_files_dirs_symlinks_hardlinks_absent_ext4() {
	restore_paths_body ext4
}

test_restore_files_dirs_symlinks_hardlinks_absent_btrfs() {
	restore_paths_body btrfs
}

test_restore_to_dest_and_clone_on_xfs() {
	local before after

	make_volume xfs || return
	dd if=/dev/urandom of="$SRC/big" bs=1M count=256 status=none
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 2: $(ovs_ran)" 2 "$OVS_OUT"
	manifest >"$M/2.manifest"
	change_all
	dd if=/dev/urandom of="$SRC/big" bs=1M count=256 conv=notrunc status=none
	sync
	before=$(df -B1M --output=used "$OVS_MNT" | tail -1)
	ovs_run "$OVSNAP" restore "$SRC" 2 big
	assertEquals "restore big: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "restore says it cloned" "$OVS_ERR" "1 files cloned"
	sync
	after=$(df -B1M --output=used "$OVS_MNT" | tail -1)
	assertTrue "restoring a 256 MiB file took $((after - before)) MiB" \
		"[ $((after - before)) -lt 32 ]"
	# --to: a copy of the snapshot's version elsewhere, the live tree untouched
	manifest >"$OVS_TMP/live.before"
	mkdir "$OVS_MNT/out"
	ovs_run "$OVSNAP" restore --to "$OVS_MNT/out" "$SRC" 1 d
	assertEquals "restore --to: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" restore --to "$OVS_MNT/out/f1" "$SRC" 1 f
	assertEquals "restore --to a new name: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "f in snapshot 1" "one" "$(cat "$OVS_MNT/out/f1")"
	manifest >"$OVS_TMP/live.after"
	assertTrue "--to leaves the live tree alone" "cmp -s '$OVS_TMP/live.before' '$OVS_TMP/live.after'"
	mkdir "$OVS_TMP/view"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertEquals "mount view: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "--to copy equals the snapshot's d" \
		"$("$MANIFEST" "$OVS_TMP/view/d")" "$("$MANIFEST" "$OVS_MNT/out/d")"
	# DEST inside a view
	ovs_run "$OVSNAP" restore --to "$OVS_TMP/view/x" "$SRC" 1 f
	assertNotEquals "--to inside a view fails" 0 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "says why" "$OVS_ERR" "view"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	# FIEMAP does not pass FUSE: look at the real file
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "the live file shares its extents: $(filefrag -v "$SRC/big" | head -5)" \
		"filefrag -v '$SRC/big' | grep -q shared"
}

rollback_body() {
	make_volume "$1" || return
	change_all
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 2: $(ovs_ran)" 2 "$OVS_OUT"
	manifest >"$M/2.manifest"
	echo later >"$SRC/keep/later"
	rm "$SRC/keep/k"
	chmod 0700 "$SRC/keep"
	manifest >"$M/3.manifest"
	ovs_run "$OVSNAP" rollback "$SRC" 1
	assertEquals "rollback: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "rollback prints the pre-rollback snapshot" 3 "$OVS_OUT"
	manifest >"$OVS_TMP/now"
	ovs_run diff "$M/1.manifest" "$OVS_TMP/now"
	assertEquals "live tree equals snapshot 1 after rollback:
$OVS_OUT" 0 "$OVS_RC"
	ovs_run "$OVSNAP" diff "$SRC" 1
	assertEquals "diff 1 against live after rollback" "" "$OVS_OUT"
	# snapshot 3 (the state before), 2 and 1 as they were
	ovs_oracle_check "$SRC" "$M"
}

test_rollback_xfs() {
	rollback_body xfs
}

test_rollback_ext4() {
	rollback_body ext4
}

test_rollback_btrfs() {
	rollback_body btrfs
}

test_rollback_refuses_writers_unless_force() {
	make_volume xfs || return
	echo changed >"$SRC/f"
	exec 7>>"$SRC/keep/k"
	ovs_run "$OVSNAP" rollback "$SRC" 1
	assertNotEquals "rollback with a writer: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "says why" "$OVS_ERR" "open for writing"
	assertEquals "one line" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertEquals "no snapshot taken" "1" "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	assertEquals "nothing changed" "changed" "$(cat "$SRC/f")"
	ovs_run "$OVSNAP" rollback --force "$SRC" 1
	assertEquals "rollback --force: $(ovs_ran)" 0 "$OVS_RC"
	exec 7>&-
	assertEquals "f rolled back" "one" "$(cat "$SRC/f")"
}

test_bad_input_changes_nothing() {
	local out

	make_volume xfs || return
	change_all
	manifest >"$OVS_TMP/before"
	one_line_failure() {	# one_line_failure WHAT CMD...
		local what=$1
		shift
		ovs_run "$@"
		assertNotEquals "$what: exit: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "$what: one line on stderr: $OVS_ERR" 1 \
			"$(printf '%s\n' "$OVS_ERR" | grep -c .)"
		assertEquals "$what: nothing on stdout" "" "$OVS_OUT"
	}
	one_line_failure "restore of an unknown snapshot" "$OVSNAP" restore "$SRC" 9 f
	one_line_failure "rollback to an unknown snapshot" "$OVSNAP" rollback "$SRC" nosuch
	one_line_failure "PATH outside SRC" "$OVSNAP" restore "$SRC" 1 /etc/passwd
	one_line_failure "PATH with .." "$OVSNAP" restore "$SRC" 1 ../x
	one_line_failure "--to with two PATHs" "$OVSNAP" restore --to "$OVS_MNT/o" "$SRC" 1 f d
	one_line_failure "--to an existing file" "$OVSNAP" restore --to "$SRC/f" "$SRC" 1 d
	one_line_failure "restore --to of a path absent in the snapshot" \
		"$OVSNAP" restore --to "$OVS_MNT/o" "$SRC" 1 newdir
	manifest >"$OVS_TMP/after"
	assertTrue "nothing changed" "cmp -s '$OVS_TMP/before' '$OVS_TMP/after'"
	assertEquals "no snapshot taken" "1" "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	out=$("$MANIFEST" "$SRC")
	one_line_failure "rollback of an inactive volume" "$OVSNAP" rollback "$SRC" 1
	one_line_failure "restore on an inactive volume" "$OVSNAP" restore "$SRC" 1 f
	assertEquals "inactive: nothing changed" "$out" "$("$MANIFEST" "$SRC")"
}

# An error names a path of any length whole (DESIGN.md rule 18): none of
# the buffers it passes through may cut it (the library's message was
# cut at 1 KiB).  A directory 2.4 KiB deep whose file was removed cannot
# get its owner and times back: it is immutable.
test_error_names_a_deep_path_whole_xfs() {
	local name deep="" i

	ovs_mkfs xfs 1G || return
	SRC=$OVS_MNT/src
	name=$(printf 'd%.0s' {1..200})
	for i in $(seq 10 21); do deep+=${deep:+/}$name$i; done
	mkdir -p "$SRC/$deep" && echo x >"$SRC/$deep/f" || fail "$deep/f"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 1 "$OVS_OUT"
	rm "$SRC/$deep/f" || fail "rm $deep/f"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	chattr +i "$SRC/$deep" || fail "chattr +i"
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" restore "$SRC" 1 "${deep%%/*}"
	assertNotEquals "restore into an immutable directory: $(ovs_ran | cut -c1-200)" 0 "$OVS_RC"
	assertEquals "one line, the whole path: $OVS_ERR" \
		"ovsnap: restore $SRC: chown $deep: Operation not permitted" "$OVS_ERR"
	ovs_run "$OVSNAP" deactivate "$SRC"
	chattr -i "$OVS_MNT/src/$deep"
}

# DESIGN.md rule 15: a user who swaps a directory of SRC for a symlink to
# a directory outside SRC while the restore (root) runs must not lead it
# there.  A test hook pauses the restore once it knows its changes; d is
# swapped; the restore goes on: every sentinel outside SRC keeps its data,
# mode, owner and name, and the restore either fails with one line or
# works inside SRC only.
symlink_swap_body() {	# symlink_swap_body FSTYPE
	local out=$OVS_TMP/outside-$1 pause=$OVS_TMP/pause-$1 pid i rc

	make_volume "$1" || return
	# d itself stays unchanged: only what is in it
	echo other >"$SRC/d/file"
	chmod 0600 "$SRC/d/n1"
	chown 1234:1234 "$SRC/d/n2"
	setfattr -n user.k -v v "$SRC/d/n3"
	rm -rf "$out" "$pause" "$pause.paused"
	mkdir -p "$out"
	for n in file n1 n2 n3 n4; do echo "sentinel $n" >"$out/$n"; done
	chmod 0644 "$out"/*
	"$MANIFEST" "$out" >"$OVS_TMP/out.before"
	paused_restore "$pause" "" "$OVS_TMP/swap" "$SRC" 1 d
	pid=$PAUSED_PID
	mv "$SRC/d" "$SRC/d.moved"
	ln -s "$out" "$SRC/d"
	touch "$pause"
	wait "$pid"
	rc=$?
	echo "swapped-in symlink on $1: rc=$rc: $(cat "$OVS_TMP/swap.err")"
	"$MANIFEST" "$out" >"$OVS_TMP/out.after"
	ovs_run diff "$OVS_TMP/out.before" "$OVS_TMP/out.after"
	assertEquals "nothing outside SRC changed: $OVS_OUT" 0 "$OVS_RC"
	for n in file n1 n2 n3 n4; do
		assertEquals "$n outside SRC keeps its data" "sentinel $n" "$(cat "$out/$n")"
	done
	assertEquals "nothing outside SRC was added or removed" "file n1 n2 n3 n4" \
		"$(ls "$out" | tr '\n' ' ' | sed 's/ $//')"
	if [ "$rc" -ne 0 ]; then
		assertEquals "a failed restore says why in one line: $(cat "$OVS_TMP/swap.err")" 1 \
			"$(grep -c . "$OVS_TMP/swap.err")"
		assertContains "it names the path" "$(cat "$OVS_TMP/swap.err")" " d/"
	else
		assertTrue "a restore that went on made d a directory inside SRC" \
			"[ -d '$SRC/d' ] && [ ! -L '$SRC/d' ]"
	fi
}

test_restore_does_not_follow_a_swapped_in_symlink_xfs() {
	symlink_swap_body xfs
}

# etc/L2 and proj/L1 were one file (root's) at the take; etc/L2 is gone
# since.  The restore of etc/L2 links it to the unchanged proj/L1; while
# it is held after listing its changes, user 1001 renames a file of
# theirs over proj/L1 (proj is theirs to write).  The restore linked
# whatever was at the name: the user's file, with their data, in root's
# etc, exit 0.  It now links the partner by its fd, once it is the
# snapshot's owner's and size, and else stops in one line.
test_restore_links_only_the_snapshots_partner() {
	local pause=$OVS_TMP/pause-link rc

	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/etc" "$SRC/proj"
	chmod 0777 "$SRC/proj"
	echo good >"$SRC/etc/L2"
	ln "$SRC/etc/L2" "$SRC/proj/L1"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	rm "$SRC/etc/L2"
	paused_restore "$pause" "" "$OVS_TMP/link" "$SRC" 1 etc/L2
	echo attacker >"$SRC/proj/m"
	chown 1001:1001 "$SRC/proj/m"
	mv -f "$SRC/proj/m" "$SRC/proj/L1"
	touch "$pause"
	wait "$PAUSED_PID"
	rc=$?
	assertEquals "the restore stops: $(cat "$OVS_TMP/link.err")" 1 "$rc"
	assertContains "saying the partner changed" "$(cat "$OVS_TMP/link.err")" \
		"changed during the restore"
	assertNotEquals "the user's file is not linked into etc" 1001 \
		"$(stat -c %u "$SRC/etc/L2" 2>/dev/null)"
}

# In a shared folder (0777, not sticky) user 1001's adir held afile at
# the take; user 1001 then emptied it and renamed user 1002's private
# vdir (0700, its files 0644) to adir.  The restore of adir took that
# directory for adir changed in place: it gave it to 1001 with mode 0755
# first, and only then removed 1002's files, which 1001 could read
# meanwhile.  The directory is now shut (root's, 0700) while the changes
# in it are made, and gets the snapshot's owner and mode at the end.
test_restore_shuts_a_directory_of_another_owner_first() {
	local pause=$OVS_TMP/pause-shut pid rc

	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p -m 0777 "$SRC/proj"
	chmod 0777 "$SRC/proj"
	mkdir -m 0755 "$SRC/proj/adir"
	echo a >"$SRC/proj/adir/afile"
	chown -R 1001:1001 "$SRC/proj/adir"
	mkdir -m 0700 "$SRC/proj/vdir"
	for i in 1 2 3; do echo "private $i" >"$SRC/proj/vdir/diary$i"; done
	chmod 0644 "$SRC/proj/vdir"/diary*
	chown -R 1002:1002 "$SRC/proj/vdir"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	rm "$SRC/proj/adir/afile"
	rmdir "$SRC/proj/adir"
	mv -T "$SRC/proj/vdir" "$SRC/proj/adir"
	paused_restore "$pause" proj/adir/afile "$OVS_TMP/shut" "$SRC" 1 proj/adir
	pid=$PAUSED_PID
	assertEquals "while 1002's files are still in it, the directory is root's, 0700" \
		"0:0 700" "$(stat -c '%u:%g %a' "$SRC/proj/adir")"
	assertTrue "1002's files are still there at the pause" "[ -e '$SRC/proj/adir/diary1' ]"
	touch "$pause"
	wait "$pid"
	rc=$?
	assertEquals "the restore: $(cat "$OVS_TMP/shut.err")" 0 "$rc"
	assertEquals "then the snapshot's owner and mode" "1001:1001 755" \
		"$(stat -c '%u:%g %a' "$SRC/proj/adir")"
	assertEquals "and only the snapshot's file in it" "afile" "$(ls "$SRC/proj/adir")"
}

# The same swap one level down, where the restore has only a name to
# remove: g/sub/new1, made after the take in a folder whose times are put
# back, so that g/sub itself is no change.  After g/a is made again, g/sub
# becomes a symlink to its own contents moved to g/sub.real.  The removal
# of g/sub/new1 took the symlink above it for "not in the live tree any
# more": exit 0, "restored", with g/sub a symlink and new1 still there.
# It now fails, in one line that names the path.
test_restore_fails_when_a_folder_above_becomes_a_symlink() {
	local pause=$OVS_TMP/pause-g pid rc

	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/g/sub"
	touch "$SRC/g/a" "$SRC/g/sub/s"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	rm "$SRC/g/a"
	touch -r "$SRC/g/sub" "$OVS_TMP/t"
	echo n >"$SRC/g/sub/new1"
	touch -r "$OVS_TMP/t" "$SRC/g/sub"
	paused_restore "$pause" g/a "$OVS_TMP/g" "$SRC" 1 g
	pid=$PAUSED_PID
	mv "$SRC/g/sub" "$SRC/g/sub.real"
	ln -s sub.real "$SRC/g/sub"
	touch "$pause"
	wait "$pid"
	rc=$?
	assertEquals "the restore fails: $(cat "$OVS_TMP/g.err")" 1 "$rc"
	assertEquals "in one line" 1 "$(grep -c . "$OVS_TMP/g.err")"
	assertContains "naming the path" "$(cat "$OVS_TMP/g.err")" "g/sub/new1"
	assertContains "and why" "$(cat "$OVS_TMP/g.err")" "is a symlink now"
	assertTrue "what was below the folder is still there" "[ -e '$SRC/g/sub.real/new1' ]"
}

test_restore_does_not_follow_a_swapped_in_symlink_ext4() {
	symlink_swap_body ext4
}

# user_home_volume FSTYPE SIGDIR: the test user, SIGDIR for its signals,
# and a volume whose SRC/home is the user's and holds root's files secret
# (0600) and prog (setuid), snapshot 1 taken.
user_home_volume() {
	ovs_user || return
	mkdir -m 0777 "$2"
	ovs_mkfs "$1" 1G || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/home"
	chown "$OVS_UID:$OVS_GID" "$SRC/home"
	echo SECRET >"$SRC/home/secret"
	chmod 0600 "$SRC/home/secret"
	printf '#!/bin/sh\necho root program\n' >"$SRC/home/prog"
	chmod 4755 "$SRC/home/prog"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
}

# A user who owns a directory replaces root's files in it with files of
# their own, holding descriptors of them open, and root restores them:
# the restore must not write the snapshot's data (a secret) into the
# user's inode, nor make the user's inode root's and setuid.  It makes
# new files where the live one is not the snapshot owner's.
test_restore_does_not_hand_root_files_to_a_users_inode_xfs() {
	local pid sig=$OVS_TMP/signals.inode

	user_home_volume xfs "$sig" || return
	# as the user: own files at both names, held open (read and write)
	# until $OVS_TMP/go exists, then read secret and write prog again
	setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups --inh-caps=-all \
		--bounding-set=-all -- /usr/bin/python3 - "$SRC/home" "$sig" \
		>"$OVS_TMP/user.out" 2>&1 <<'PY' &
import os, sys, time
home, tmp = sys.argv[1], sys.argv[2]
for n in ("secret", "prog"):
    os.unlink(os.path.join(home, n))
s = os.open(os.path.join(home, "secret"), os.O_RDWR | os.O_CREAT, 0o644)
p = os.open(os.path.join(home, "prog"), os.O_RDWR | os.O_CREAT, 0o755)
os.write(s, b"mine\n")
os.write(p, b"mine\n")
open(os.path.join(tmp, "ready"), "w").close()
while not os.path.exists(os.path.join(tmp, "go")):
    time.sleep(0.05)
print("read:", os.pread(s, 100, 0).decode().strip())
os.pwrite(p, b"#!/bin/sh\necho user program\n", 0)
PY
	pid=$!
	ovs_wait_until 20 "[ -e '$sig/ready' ]" || fail "the user's files are not ready"
	ovs_run "$OVSNAP" restore "$SRC" 1 home/secret home/prog
	assertEquals "restore: $(ovs_ran)" 0 "$OVS_RC"
	touch "$sig/go"
	wait "$pid"
	assertEquals "the user's descriptor does not read the snapshot's secret" \
		"read: mine" "$(cat "$OVS_TMP/user.out")"
	assertEquals "secret restored" "SECRET" "$(cat "$SRC/home/secret")"
	assertEquals "secret: root's, 0600" "0:0 600" "$(stat -c '%u:%g %a' "$SRC/home/secret")"
	assertEquals "the setuid program is not the user's to write" \
		"$(printf '#!/bin/sh\necho root program')" "$(cat "$SRC/home/prog")"
	assertEquals "prog: root's, 4755" "0:0 4755" "$(stat -c '%u:%g %a' "$SRC/home/prog")"
}

# The same user, racing: the restore makes root's files anew in the
# user's directory, and between making one and giving it its data and
# metadata (held there by a test hook) the user renames it away and puts
# a file of their own, held open, at its name.  Neither the data (a clone
# by the daemon on XFS, a copy on ext4) nor root's owner and setuid mode
# may reach the user's file: the restore stops, saying the name changed.
restore_swap_body() {	# restore_swap_body FSTYPE NAME
	local fs=$1 name=$2 pid rpid rc sig=$OVS_TMP/signals.$1.$2 pause=$OVS_TMP/pause.$1.$2

	user_home_volume "$fs" "$sig" || return
	rm "$SRC/home/secret" "$SRC/home/prog"
	paused_restore "$pause" "home/$name" "$OVS_TMP/r" "$SRC" 1 home
	rpid=$PAUSED_PID
	setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups --inh-caps=-all \
		--bounding-set=-all -- /usr/bin/python3 - "$SRC/home" "$name" "$sig" \
		>"$OVS_TMP/user.out" 2>&1 <<'PY' &
import os, sys, time
home, name, sig = sys.argv[1:]
os.rename(os.path.join(home, name), os.path.join(home, "moved"))
f = os.open(os.path.join(home, name), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o755)
os.write(f, b"mine\n")
open(os.path.join(sig, "ready"), "w").close()
while not os.path.exists(os.path.join(sig, "go")):
    time.sleep(0.05)
print("read:", os.pread(f, 100, 0).decode().strip())
PY
	pid=$!
	ovs_wait_until 20 "[ -e '$sig/ready' ]" || fail "the user's file is not ready"
	touch "$pause"
	wait "$rpid"
	rc=$?
	assertNotEquals "the restore stops: $(cat "$OVS_TMP/r.err")" 0 "$rc"
	assertContains "it says the name changed" "$(cat "$OVS_TMP/r.err")" "changed during the restore"
	touch "$sig/go"
	wait "$pid"
	assertEquals "the user's file holds none of the snapshot's data" "read: mine" \
		"$(cat "$OVS_TMP/user.out")"
	assertEquals "the user's file is still the user's, not setuid" "$OVS_UID 755" \
		"$(stat -c '%u %a' "$SRC/home/$name")"
}

test_restore_gives_a_swapped_in_file_nothing_xfs() {
	restore_swap_body xfs secret
}

test_restore_gives_a_swapped_in_file_nothing_ext4() {
	restore_swap_body ext4 secret
}

test_restore_makes_no_swapped_in_file_setuid_xfs() {
	restore_swap_body xfs prog
}

# lib/clone.c: where the data must be copied (ext4) and the filesystem
# has no room for it, the restore fails with one line and the live file
# keeps its data (it is not truncated first); with room again it works.
test_restore_without_room_keeps_the_live_file_ext4() {
	local bfree bs

	ovs_mkfs ext4 256M || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
	head -c 40M /dev/urandom >"$OVS_TMP/big"
	cp "$OVS_TMP/big" "$SRC/big"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 1 "$OVS_OUT"
	head -c 1M /dev/zero | tr '\0' B >"$SRC/big"	# preserved into the layer
	sync
	# fill the filesystem (outside SRC) up to 8M free
	bfree=$(stat -f -c %f "$OVS_MNT") bs=$(stat -f -c %S "$OVS_MNT")
	fallocate -l $((bfree * bs - 8 * 1024 * 1024)) "$OVS_MNT/filler"
	assertEquals "the filler is there" 0 $?
	ovs_run "$OVSNAP" restore "$SRC" 1 big
	assertNotEquals "restore without room: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | grep -c .)"
	assertContains "says why: $OVS_ERR" "$OVS_ERR" "No space left"
	assertEquals "the live file keeps its data" \
		"$(head -c 1M /dev/zero | tr '\0' B | sha256sum)" "$(sha256sum <"$SRC/big")"
	rm "$OVS_MNT/filler"
	ovs_run "$OVSNAP" restore "$SRC" 1 big
	assertEquals "restore with room: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "big is back" "cmp -s '$OVS_TMP/big' '$SRC/big'"
}

# SIGKILL at several steps (a test hook counts the changes): running the
# same command again finishes it, with no second pre-rollback snapshot,
# and no snapshot changes.
test_killed_rollback_and_restore_finish_when_run_again() {
	local k pre n=1

	make_volume xfs || return
	for k in 0 1 4 9 13; do	# a rollback here makes 15 changes
		change_all
		manifest >"$OVS_TMP/before"
		ovs_run env OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_RESTORE_KILL_AFTER=$k \
			"$OVSNAP" rollback "$SRC" 1
		assertEquals "rollback killed after $k: $(ovs_ran)" 137 "$OVS_RC"
		n=$((n + 1))
		pre=$OVS_OUT
		assertEquals "killed after $k: the pre snapshot was printed" "$n" "$pre"
		mv "$OVS_TMP/before" "$M/$pre.manifest"
		if [ "$k" -gt 0 ]; then
			assertFalse "killed after $k: the tree is not snapshot 1 yet" \
				"manifest | cmp -s - '$M/1.manifest'"
		fi
		ovs_run "$OVSNAP" rollback "$SRC" "$pre"
		assertNotEquals "another rollback while one is pending" 0 "$OVS_RC"
		assertContains "says which" "$OVS_ERR" "interrupted rollback to snapshot 1"
		ovs_run "$OVSNAP" rollback "$SRC" 1
		assertEquals "killed after $k: rollback again: $(ovs_ran)" 0 "$OVS_RC"
		assertEquals "killed after $k: no new snapshot printed" "" "$OVS_OUT"
		assertContains "killed after $k: says it finishes" "$OVS_ERR" "finishing"
		assertEquals "killed after $k: snapshots" "$n" "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
		ovs_run diff "$M/1.manifest" <(manifest)
		assertEquals "killed after $k: live tree equals snapshot 1: $OVS_OUT" 0 "$OVS_RC"
	done

	# restore: killed, then run again
	change_all
	ovs_run env OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_RESTORE_KILL_AFTER=3 \
		"$OVSNAP" restore "$SRC" 1 f d sym xa newdir
	assertEquals "restore killed: $(ovs_ran)" 137 "$OVS_RC"
	ovs_run "$OVSNAP" restore "$SRC" 1 f d sym xa newdir
	assertEquals "restore again: $(ovs_ran)" 0 "$OVS_RC"
	manifest >"$OVS_TMP/now"
	ovs_run diff <(lines_of "$M/1.manifest" f d sym xa newdir) \
		<(lines_of "$OVS_TMP/now" f d sym xa newdir)
	assertEquals "restored paths equal snapshot 1: $OVS_OUT" 0 "$OVS_RC"
	# every pre-rollback snapshot shows the state before its rollback
	ovs_oracle_check "$SRC" "$M"
}

# The consistency oracle (DESIGN.md section 6) extended: a seeded random
# workload with takes, then a restore of random top-level paths from a
# random snapshot (those paths equal its manifest), then a rollback to
# another (the whole tree equals its manifest, the pre-rollback snapshot
# the state just before, every snapshot its own manifest).
# OVS_RESTORE_SEED=N picks another seed, OVS_RESTORE_EXTENDED=1 runs
# ovs-workload --extended.
oracle_body() {	# oracle_body FSTYPE SEED
	local fstype=$1 seed=${OVS_RESTORE_SEED:-$2} id k j paths=() pre

	ovs_mkfs "$fstype" 1G || return
	SRC=$OVS_MNT/src
	M=$OVS_TMP/manifests
	mkdir -p "$SRC" "$M"
	RANDOM=$seed
	ovs_run "$OVS_WORKLOAD" --seed "$((seed + 1000))" --ops 300 "$SRC"
	assertEquals "initial tree: $(ovs_ran)" 0 "$OVS_RC" || return
	manifest >"$M/first"
	id=$("$OVSNAP" take "$SRC") || { fail "take 1"; return; }
	mv "$M/first" "$M/$id.manifest"
	ovs_run "$OVS_WORKLOAD" ${OVS_RESTORE_EXTENDED:+--extended} --seed "$seed" --ops 600 --takes 3 \
		--take-cmd "'$OVSNAP' take '$SRC'" --manifest-dir "$M" "$SRC"
	assertEquals "workload (seed $seed): $(ovs_ran | tail -3)" 0 "$OVS_RC" || return
	# restore: 4 random top-level names of snapshot k or of the live tree
	k=$((RANDOM % 3 + 2))
	manifest >"$OVS_TMP/now"
	mapfile -t paths < <(cat "$M/$k.manifest" "$OVS_TMP/now" | cut -d' ' -f1 | grep -v '^\.$' |
		cut -d/ -f1 | sort -u | shuf --random-source=<(yes "$seed") -n 4)
	ovs_run "$OVSNAP" restore "$SRC" "$k" "${paths[@]}"
	assertEquals "seed $seed: restore from $k of ${paths[*]}: $(ovs_ran)" 0 "$OVS_RC"
	manifest >"$OVS_TMP/now"
	# hard links with names outside the restored paths are not compared
	ovs_run diff <(lines_of "$M/$k.manifest" "${paths[@]}" | sed 's/ hardlink=[^ ]*//') \
		<(lines_of "$OVS_TMP/now" "${paths[@]}" | sed 's/ hardlink=[^ ]*//')
	assertEquals "seed $seed: restored ${paths[*]} equal snapshot $k:
$(printf '%s\n' "$OVS_OUT" | head -20)" 0 "$OVS_RC"
	# rollback to another snapshot
	j=$((RANDOM % 4 + 1))
	manifest >"$OVS_TMP/before"
	ovs_run "$OVSNAP" rollback "$SRC" "$j"
	assertEquals "seed $seed: rollback to $j: $(ovs_ran)" 0 "$OVS_RC"
	pre=$OVS_OUT
	mv "$OVS_TMP/before" "$M/$pre.manifest"
	ovs_run diff "$M/$j.manifest" <(manifest)
	assertEquals "seed $seed: live tree equals snapshot $j after rollback:
$(printf '%s\n' "$OVS_OUT" | head -20)" 0 "$OVS_RC"
	OVS_ORACLE_WHAT="seed $seed" ovs_oracle_check "$SRC" "$M"
}

test_oracle_workload_restore_rollback_xfs() {
	oracle_body xfs 11
}

test_oracle_workload_restore_rollback_ext4() {
	oracle_body ext4 12
}

test_oracle_workload_restore_rollback_btrfs() {
	oracle_body btrfs 13
}

. "$SHUNIT2"
