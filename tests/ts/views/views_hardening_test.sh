#!/bin/bash
# Snapshot views, hardened (issue 11): a lookup of a name the layers make
# absent ends (item 3); a view grants exactly what POSIX ACLs granted at
# the snapshot (item 8); trusted.* names are listed only to callers with
# CAP_SYS_ADMIN, ovsnap's own never (item 11); and a FUSE mount a user
# makes to look like a view does not hold a snapshot against drop
# (item 12).  Everything goes through the live snapshot mount and takes.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd setfacl getfacl getfattr setfattr setpriv

FAKEVIEW=$OVSNAP_TOOLS/tools/ovs-fakeview
FSOP=$OVSNAP_TOOLS/tools/ovs-fsop
VIEW=$OVS_TMP/view

# Through the live snapshot mount, asserted.
live() {
	ovs_run "$@"
	assertEquals "live: $*: $(ovs_ran)" 0 "$OVS_RC"
}

take() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
}

setup_volume() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC" "$VIEW"
}

mount_view() {
	ovs_run "$OVSNAP" mount "$SRC" "$1" "$VIEW"
	assertEquals "mount of snapshot $1: $(ovs_ran)" 0 "$OVS_RC"
}

# The ovsnap-viewd processes of this script's views.
viewd_pids() {
	local f

	for f in "$OVSNAP_RUN_DIR"/view-*.pid; do
		[ -f "$f" ] && cut -d' ' -f1 "$f"
	done
}

# bounded CMD...: like ovs_run, for a command that reads through a view.
# A view daemon that never answers leaves CMD waiting in the kernel: after
# 30 s kill the daemons (the request then fails) and set OVS_RC=124.  The
# limit is a watchdog against a hang, not a measure of speed.
bounded() {
	local pid i

	"$@" </dev/null >"$OVS_TMP/.bout" 2>"$OVS_TMP/.berr" &
	pid=$!
	for i in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		for i in $(viewd_pids); do kill -KILL "$i" 2>/dev/null; done
		wait "$pid"
		OVS_RC=124
	else
		wait "$pid"
		OVS_RC=$?
	fi
	OVS_OUT=$(cat "$OVS_TMP/.bout")
	OVS_ERR=$(cat "$OVS_TMP/.berr")
}

# ---- item 3 ----------------------------------------------------------------

# Snapshot 1 sees d/a and d/b.  After take 2, d is removed: U_2 holds d
# opaque, while U_1 holds d plain (d/a was preserved there after take 1);
# and newfile is created: U_2 holds a whiteout at it.  Through a view of
# snapshot 1 both names under d/ that never existed and newfile are
# absent by the layers alone.  Before the fix every such lookup spun the
# view daemon at 100% CPU for ever.
test_lookup_of_names_the_layers_make_absent_ends() {
	setup_volume || return
	mkdir "$SRC/d"
	echo a >"$SRC/d/a"
	echo b >"$SRC/d/b"
	take
	live sh -c "echo a2 >'$SRC/d/a'"
	take
	live rm -r "$SRC/d"
	live sh -c "echo n >'$SRC/newfile'"
	mount_view 1

	bounded stat -c %n "$VIEW/newfile"
	assertEquals "lookup of a name whited out in the newest layer: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "stat newfile: nothing on stdout" "" "$OVS_OUT"
	assertContains "stat newfile: ENOENT" "$OVS_ERR" "No such file or directory"

	bounded stat -c %n "$VIEW/d/never"
	assertEquals "lookup below a directory opaque in a newer layer, plain in an older:
$(ovs_ran)" 1 "$OVS_RC"
	assertEquals "stat d/never: nothing on stdout" "" "$OVS_OUT"
	assertContains "stat d/never: ENOENT" "$OVS_ERR" "No such file or directory"

	bounded cat "$VIEW/d/a" "$VIEW/d/b"
	assertEquals "d/a and d/b as at snapshot 1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "d/a and d/b content" "a
b" "$OVS_OUT"
	assertEquals "cat: no stderr" "" "$OVS_ERR"
}

# ---- item 8 ----------------------------------------------------------------

# user_reads PATH...: whether $OVS_USER can read each PATH (a directory:
# list it), one "name yes|no" line each.
user_reads() {
	local p

	for p in "$@"; do
		if [ -d "$p" ]; then
			ovs_as_user ls "$p"
		else
			ovs_as_user cat "$p"
		fi
		if [ "$OVS_RC" = 0 ]; then
			echo "${p##*/} yes"
		else
			echo "${p##*/} no"
		fi
	done
}

ACL_CASES="f_denied f_allowed f_masked f_inherited d_denied d_allowed d_denied/x d_allowed/x"

test_view_grants_what_posix_acls_granted() {
	local expect

	ovs_user || return
	setup_volume || return
	chmod 0755 "$SRC"
	for f in f_denied f_allowed f_masked; do echo "$f" >"$SRC/$f"; done
	mkdir "$SRC/d_denied" "$SRC/d_allowed" "$SRC/dflt"
	echo x >"$SRC/d_denied/x"
	echo x >"$SRC/d_allowed/x"
	take
	# The ACLs, set through the live mount after the first take.
	live chmod 0644 "$SRC/f_denied"
	live setfacl -m "u:$OVS_USER:---" "$SRC/f_denied"
	live chmod 0600 "$SRC/f_allowed"
	live setfacl -m "u:$OVS_USER:r" "$SRC/f_allowed"
	# the mask (the group bits) takes read away from the named entry,
	# while the other bits alone would let anyone read
	live setfacl -m "u:$OVS_USER:rw" "$SRC/f_masked"
	live chmod 0624 "$SRC/f_masked"
	live chmod 0755 "$SRC/d_denied"
	live setfacl -m "u:$OVS_USER:---" "$SRC/d_denied"
	live chmod 0700 "$SRC/d_allowed"
	live setfacl -m "u:$OVS_USER:rx" "$SRC/d_allowed"
	live chmod 0755 "$SRC/dflt"
	live setfacl -d -m "u:$OVS_USER:---" "$SRC/dflt"
	live sh -c "echo inherited >'$SRC/dflt/f_inherited'"
	live chmod 0644 "$SRC/dflt/f_inherited"
	live mv "$SRC/dflt/f_inherited" "$SRC/f_inherited"
	take
	expect="f_denied no
f_allowed yes
f_masked no
f_inherited no
d_denied no
d_allowed yes
x no
x yes"
	assertEquals "what the user may read on the live path" "$expect" \
		"$(user_reads $(for c in $ACL_CASES; do echo "$SRC/$c"; done))"
	# After the take the live tree grants everything: the view must not.
	live setfacl -b "$SRC/f_denied" "$SRC/f_masked" "$SRC/d_denied" "$SRC/f_inherited"
	mount_view 2
	assertEquals "ACLs of the view: as on the live path at snapshot 2" \
		"$(getfacl -p "$SRC/f_allowed" 2>&1 | sed 1d)" \
		"$(getfacl -p "$VIEW/f_allowed" 2>&1 | sed 1d)"
	assertEquals "what the user may read through the view of snapshot 2" "$expect" \
		"$(user_reads $(for c in $ACL_CASES; do echo "$VIEW/$c"; done))"
}

# ---- item 11 -----------------------------------------------------------------

# The names getfattr lists for PATH, sorted (as root, or as $OVS_USER
# when the first argument is "user").
xattr_names() {
	if [ "$1" = user ]; then
		ovs_as_user getfattr --absolute-names -m - "$2"
	else
		ovs_run getfattr --absolute-names -m - "$1"
	fi
	printf '%s\n' "$OVS_OUT" | grep -v '^#' | grep . | LC_ALL=C sort
}

test_view_lists_trusted_xattrs_only_to_privileged_callers() {
	ovs_user || return
	setup_volume || return
	echo s >"$SRC/in_src"
	echo l >"$SRC/in_layer"
	chmod 0644 "$SRC/in_src" "$SRC/in_layer"
	take
	for f in in_src in_layer; do
		live setfattr -n trusted.secret -v x "$SRC/$f"
		live setfattr -n user.visible -v y "$SRC/$f"
	done
	take
	# in_layer is preserved into layer 2 (with ovsnap's own
	# trusted.overlay.* xattrs) before it changes; in_src stays in SRC.
	live setfattr -n user.later -v z "$SRC/in_layer"
	mount_view 2
	for f in in_src in_layer; do
		assertEquals "$f as root: trusted and user names, nothing of ovsnap's" \
			"trusted.secret
user.visible" "$(xattr_names "$VIEW/$f")"
		assertEquals "$f as root: getfattr exit" 0 "$OVS_RC"
		assertEquals "$f as $OVS_USER: no trusted.* names, as XFS lists them" \
			"user.visible" "$(xattr_names user "$VIEW/$f")"
		assertEquals "$f as $OVS_USER: getfattr exit" 0 "$OVS_RC"
		assertEquals "$f as $OVS_USER: getfattr stderr" "" "$OVS_ERR"
	done
	# what XFS itself lists to the user, for the record
	echo n >"$OVS_MNT/native"
	chmod 0644 "$OVS_MNT/native"
	setfattr -n trusted.secret -v x "$OVS_MNT/native"
	setfattr -n user.visible -v y "$OVS_MNT/native"
	assertEquals "a native XFS file as $OVS_USER: no trusted.* names" "user.visible" \
		"$(xattr_names user "$OVS_MNT/native")"
}

# ---- rule 15 with no snapshot mount ------------------------------------------

# A view of a deactivated volume: SRC's objects as SRC holds them, with no
# snapshot mount whose state the view could check an answer against.
deactivated_view() {
	setup_volume || return 1
	mkdir "$SRC/pub"
	echo a >"$SRC/a"
	take
	mount_view 1
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# A folder of SRC swapped for a symlink to a folder only root may read
# (RENAME_EXCHANGE, over and over, as a user who owns pub/ may) while the
# view reads the xattrs of a file below it.  The view daemon gave the
# whole relative path to getxattr, which followed the symlink in its
# middle: it answered the xattr of the root-only file outside SRC, after
# about a hundred reads.  Its folders are now opened one by one with no
# symlink followed.  (readlink took the same path, but the kernel caches
# a view's link texts, so a race cannot reach it twice.)
test_deactivated_view_follows_no_symlink_swapped_in() {
	local out

	deactivated_view || return
	out=$OVS_MNT/rootonly
	mkdir -m 0700 "$out"
	echo x >"$out/f"
	setfattr -n user.secret -v TOPSECRET "$out/f"
	mkdir "$SRC/pub/d"
	echo m >"$SRC/pub/d/f"
	setfattr -n user.secret -v mine "$SRC/pub/d/f"
	ln -s ../../rootonly "$SRC/pub/link"
	assertEquals "the view shows SRC's file and its xattr" "mine" \
		"$(getfattr --absolute-names --only-values -n user.secret "$VIEW/pub/d/f" 2>&1)"
	ovs_run "$FSOP" race-read "$SRC/pub/d" "$SRC/pub/link" xattr "$VIEW/pub/d/f" \
		user.secret TOPSECRET 5
	assertEquals "getxattr through the view while pub/d is swapped: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the reads ran" "$OVS_OUT" " reads, "
}

# A file of SRC replaced by a FIFO while the kernel still holds the
# view's inode of the file: an open of that inode (here through
# /proc/PID/fd, which looks nothing up again) reached the view daemon,
# whose open of the FIFO waited for a writer, holding one of its threads
# for ever (enough of them and every view of the snapshot hung, root's
# too).  It is no regular file: the open fails at once.
test_deactivated_view_open_of_a_fifo_does_not_wait() {
	deactivated_view || return
	echo x >"$SRC/pub/g"
	exec 3<"$VIEW/pub/g"
	assertEquals "the view reads SRC's file" "x" "$(cat <&3)"
	rm "$SRC/pub/g"
	mkfifo "$SRC/pub/g"
	bounded cat "/proc/$$/fd/3"
	exec 3<&-
	assertNotEquals "the open of what is now a FIFO does not wait: $(ovs_ran)" 124 "$OVS_RC"
	assertNotEquals "... and fails" 0 "$OVS_RC"
	bounded cat "$VIEW/a"
	assertEquals "the view still reads: $(ovs_ran)" "0 a" "$OVS_RC $OVS_OUT"
}

# ---- rule 15: root's TARGET -------------------------------------------------

# Root mounts a view at a path through a folder a user owns.  The user
# swaps that folder for a symlink to a directory of root's (here
# "victim"; /etc, say, on a real machine) over and over: the target was
# checked by one lookup of the path and mounted by another, and the view
# (files of the user's choosing in SRC) went over the victim on the
# second try.  TARGET is now opened once and the view goes on that very
# directory.  A symlink as TARGET itself is refused: it was followed.
test_root_mount_goes_on_the_directory_it_checked() {
	local i victim home mounted=0

	setup_volume || return
	echo a >"$SRC/a"
	take
	victim=$OVS_MNT/victim
	home=$OVS_MNT/home
	mkdir -p "$victim" "$home/rv" "$home/rvl.d"
	echo root >"$victim/keep"
	ln -s "$victim" "$home/rvlink"

	ovs_run "$OVSNAP" mount "$SRC" 1 "$home/rvlink"
	assertNotEquals "a symlink as TARGET: refused" 0 "$OVS_RC"
	assertContains "... saying so: $(ovs_ran)" "$OVS_ERR" "symbolic link"
	assertFalse "nothing mounted over the victim" "mountpoint -q '$victim'"
	mountpoint -q "$victim" && umount -l "$victim"

	"$FSOP" exchange-loop 30 "$home/rv" "$home/rvlink" &
	local pid=$!
	for i in $(seq 40); do
		ovs_run "$OVSNAP" mount "$SRC" 1 "$home/rv"
		if mountpoint -q "$victim"; then
			mounted=1
			umount -l "$victim"
			break
		fi
		if [ "$OVS_RC" = 0 ]; then
			ovs_run "$OVSNAP" umount "$(findmnt -rn -S "ovsnap-view:$SRC:1" -o TARGET |
				head -1)"
			assertEquals "umount of view $i: $(ovs_ran)" 0 "$OVS_RC"
		fi
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	assertEquals "the view never went over the victim" 0 "$mounted"
	assertEquals "the victim's file is there" root "$(cat "$victim/keep")"
}

# ---- item 12 -----------------------------------------------------------------

FAKE_PID=

# fake_view ID DIR: as $OVS_USER, a FUSE mount at DIR whose mount-table
# entry reads like a view of snapshot ID of $SRC.  Through fusermount3,
# as any user can; where /dev/fuse is closed to users (some containers)
# with mount(2) by a process of the user's uid that keeps CAP_SYS_ADMIN:
# the mount-table entry is the same (user_id=<uid>).
fake_view() {
	local ready=

	mkdir -p "$2"
	chown "$OVS_UID:$OVS_GID" "$2"
	mkfifo "$OVS_TMP/.fake"
	if setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups -- \
		test -r /dev/fuse -a -w /dev/fuse; then
		setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups -- \
			"$FAKEVIEW" "$SRC" "$1" "$2" >"$OVS_TMP/.fake" 2>"$OVS_TMP/.fake.err" &
	else
		echo "note: /dev/fuse is closed to users here: mounting as uid $OVS_UID with mount(2)"
		setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups \
			--inh-caps=+sys_admin,+dac_override --ambient-caps=+sys_admin,+dac_override -- \
			"$FAKEVIEW" --direct "$SRC" "$1" "$2" >"$OVS_TMP/.fake" 2>"$OVS_TMP/.fake.err" &
	fi
	FAKE_PID=$!
	read -r -t 30 ready <"$OVS_TMP/.fake"
	rm -f "$OVS_TMP/.fake"
	assertEquals "fake view mounted: $(cat "$OVS_TMP/.fake.err")" ok "$ready"
}

test_fake_view_made_by_a_user_does_not_block_drop() {
	local fake=$OVS_TMP/fake

	ovs_user || return
	setup_volume || return
	echo 1 >"$SRC/f"
	take
	live sh -c "echo 2 >'$SRC/f'"
	take
	live sh -c "echo 3 >'$SRC/f'"
	take
	fake_view 1 "$fake"
	assertEquals "the fake reads like a view of snapshot 1, made by $OVS_USER" \
		"ovsnap-view:$SRC:1 fuse.ovsnap-view $OVS_UID" \
		"$(findmnt -rn -M "$fake" -o SOURCE,FSTYPE,OPTIONS |
			sed -E 's/ [^ ]*user_id=([0-9]+).*/ \1/')"
	# A real view of snapshot 2 still holds it.
	mount_view 2

	ovs_run "$OVSNAP" list "$SRC"
	assertEquals "list: $(ovs_ran)" 0 "$OVS_RC"
	assertNotContains "list: the fake is no view" "$OVS_OUT" "$fake"
	assertContains "list: the real view is one" "$OVS_OUT" "$VIEW"

	# retention: only the real view keeps what the policy would drop
	ovs_run "$OVSNAP" drop --keep last=1 --class manual --dry-run "$SRC"
	assertEquals "drop --keep last=1 --dry-run: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "retention would drop the snapshot the fake names" "would drop 1" "$OVS_OUT"
	assertContains "retention keeps the one a real view shows" "$OVS_ERR" \
		"keeping snapshot 2 the policy would drop: a mounted view uses it"
	assertNotContains "retention: not kept for the fake" "$OVS_ERR" "keeping snapshot 1 "

	ovs_run "$OVSNAP" drop "$SRC" 1
	assertEquals "drop of the snapshot the fake names: $(ovs_ran)" 0 "$OVS_RC"
	assertNotContains "drop 1: no word of the fake" "$OVS_ERR" "$fake"

	ovs_run "$OVSNAP" drop "$SRC" 2
	assertNotEquals "drop of a snapshot a real view shows: refused" 0 "$OVS_RC"
	assertEquals "drop 2: nothing on stdout" "" "$OVS_OUT"
	assertContains "drop 2: names the view" "$OVS_ERR" "snapshot 2 is mounted at $VIEW"

	ovs_run "$OVSNAP" umount "$fake"
	assertNotEquals "ovsnap umount refuses the fake" 0 "$OVS_RC"
	assertContains "umount of the fake: why" "$OVS_ERR" "not an ovsnap snapshot view"
	umount "$fake"
	assertEquals "umount of the fake by root" 0 $?
	wait "$FAKE_PID"
}

. "$SHUNIT2"
