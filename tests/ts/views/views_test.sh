#!/bin/bash
# Snapshot views (ovsnap mount / umount, ovsnap-viewd): a view shows
# exactly its snapshot, stays coherent while the live tree changes under
# already-open handles and later takes, works on deep stacks, and bad
# input gets one clear line and a non-zero exit.
#
# Until the snapshot-mount daemon runs these tests, the daemon is
# simulated the way it must behave: preserve into the newest layer FIRST
# (the engine, through preserve-test), then change SRC; takes register a
# new layer through the library (ovs-mkvol).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd perl setfattr getfattr setfacl getfacl

MKVOL=$OVSNAP_TOOLS/ovs-mkvol
MANIFEST=$OVSNAP_TOOLS/tools/ovs-manifest
PRESERVE=$OVSNAP_TOOLS/unit/preserve-test

layer_dir() {	# layer_dir ID upper|work
	echo "$OVS_MNT"/.ovsnap/*/layers/"$1"/"$2"
}

newest_id() {
	ovs_snapshot_layers "$SRC" | tail -n 1 | cut -d' ' -f1
}

# What the daemon does before a change: preserve_OP path... into U_n.
preserve() {
	local op=$1 id
	shift
	id=$(newest_id)
	"$PRESERVE" "$op" "$SRC" "$(layer_dir "$id" upper)" "$(layer_dir "$id" work)" "$@" ||
		fail "preserve $op $* failed"
}

take() {
	"$MKVOL" "$SRC" --snapshots 1 || fail "take (ovs-mkvol) failed"
	"$MANIFEST" "$SRC" >"$OVS_TMP/snap.$(newest_id).manifest"
}

setup_tree() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/d/sub" "$SRC/e" "$OVS_TMP/view" "$OVS_TMP/kview"
	head -c 4M /dev/urandom >"$SRC/big"
	echo "old f" >"$SRC/f"
	echo "old g" >"$SRC/g"
	echo "old h" >"$SRC/h"
	echo "old k" >"$SRC/k"
	echo inner >"$SRC/d/sub/x"
	echo y >"$SRC/d/y"
	ln "$SRC/f" "$SRC/d/f-link"
	ln -s ../f "$SRC/d/sym"
	mkfifo "$SRC/e/fifo"
	mknod "$SRC/e/null" c 1 3
	chown 1234:5678 "$SRC/g"
	chmod 0640 "$SRC/g"
	setfattr -n user.colour -v blue "$SRC/h" || fail "setfattr user.colour on h"
	setfacl -m u:4321:r "$SRC/k" || fail "setfacl on k"
	touch -d '2001-02-03 04:05:06.123456789' "$SRC/k"
	G_INO=$(stat -c %i "$SRC/g")
	K_INO=$(stat -c %i "$SRC/k")
	take
}

# A few changes after the newest snapshot, each preserved first.
change_tree() {
	preserve object f d/f-link
	echo "new f $1" >"$SRC/f"
	preserve object g
	truncate -s 0 "$SRC/g"
	preserve object h
	preserve name h.renamed
	mv "$SRC/h" "$SRC/h.renamed"
	preserve object k
	rm "$SRC/k"
	preserve name "d/new$1"
	echo new >"$SRC/d/new$1"
	preserve object d/y
	rm "$SRC/d/y"
	preserve subtree d/sub
	preserve name d/sub2
	mv "$SRC/d/sub" "$SRC/d/sub2"
}

# Changes after a second snapshot, to what the first round left.
change_tree_again() {
	preserve object f d/f-link
	echo "newer f" >"$SRC/f"
	preserve object h.renamed
	rm "$SRC/h.renamed"
	preserve object d/new1
	rm "$SRC/d/new1"
	preserve subtree d/sub2
	preserve name d/sub3
	mv "$SRC/d/sub2" "$SRC/d/sub3"
	preserve name e/late
	mkdir "$SRC/e/late"
}

test_view_shows_exactly_the_snapshot() {
	setup_tree
	change_tree 1
	take
	change_tree_again

	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertEquals "mount of snapshot 1: $OVS_ERR" 0 "$OVS_RC"
	ovs_run "$OVSNAP" mount --kernel "$SRC" 1 "$OVS_TMP/kview"
	assertEquals "mount --kernel of snapshot 1: $OVS_ERR" 0 "$OVS_RC"
	"$MANIFEST" "$OVS_TMP/view" >"$OVS_TMP/view.manifest"
	"$MANIFEST" "$OVS_TMP/kview" >"$OVS_TMP/kview.manifest"
	assertEquals "view of 1 differs from snapshot 1 as taken" "" \
		"$(diff "$OVS_TMP/snap.1.manifest" "$OVS_TMP/view.manifest" | head -20)"
	assertEquals "view of 1 differs from stock overlayfs of its layers" "" \
		"$(diff "$OVS_TMP/kview.manifest" "$OVS_TMP/view.manifest" | head -20)"

	# identity and metadata a manifest may not show
	assertEquals "hard links share st_ino" "$(stat -c %i "$OVS_TMP/view/f")" \
		"$(stat -c %i "$OVS_TMP/view/d/f-link")"
	assertEquals "nlink of a hard link" 2 "$(stat -c %h "$OVS_TMP/view/f")"
	assertEquals "st_ino of a copied-up file is the original one" "$G_INO" \
		"$(stat -c %i "$OVS_TMP/view/g")"
	assertEquals "st_ino of a deleted file is the original one" "$K_INO" \
		"$(stat -c %i "$OVS_TMP/view/k")"
	assertEquals "fifo" fifo "$(stat -c %F "$OVS_TMP/view/e/fifo")"
	assertEquals "device" "1,3" "$(stat -c '%t,%T' "$OVS_TMP/view/e/null")"
	assertEquals "owner of g" "1234:5678 640" "$(stat -c '%u:%g %a' "$OVS_TMP/view/g")"
	assertEquals "ns mtime of k" "2001-02-03 04:05:06.123456789" \
		"$(stat -c %y "$OVS_TMP/view/k" | cut -c1-29)"
	assertEquals "xattr" blue "$(getfattr --only-values -n user.colour "$OVS_TMP/view/h")"
	assertContains "ACL of the deleted k" "$(getfacl -n "$OVS_TMP/view/k" 2>/dev/null)" "user:4321:r--"
	assertEquals "no overlay xattrs leak" "" \
		"$(getfattr -d -m 'trusted\.overlay' "$OVS_TMP/view/g" 2>/dev/null)"

	# read-only, nosuid, nodev by default
	assertFalse "write into a view" "echo x >'$OVS_TMP/view/f' 2>/dev/null"
	assertFalse "create in a view" "touch '$OVS_TMP/view/newfile' 2>/dev/null"
	assertContains "mount options" "$(findmnt -rn -o OPTIONS "$OVS_TMP/view")" "ro,nosuid,nodev"

	# snapshot 2 and the live tree are untouched by all this
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $OVS_ERR" 0 "$OVS_RC"
	ovs_run "$OVSNAP" mount -o dev,suid "$SRC" @latest "$OVS_TMP/view"
	assertEquals "mount @latest: $OVS_ERR" 0 "$OVS_RC"
	"$MANIFEST" "$OVS_TMP/view" >"$OVS_TMP/view2.manifest"
	assertEquals "view of 2 differs from snapshot 2 as taken" "" \
		"$(diff "$OVS_TMP/snap.2.manifest" "$OVS_TMP/view2.manifest" | head -20)"
	assertNotContains "-o dev,suid" "$(findmnt -rn -o OPTIONS "$OVS_TMP/view")" "nosuid"

	# ovsnap list can find the views
	assertContains "views in the mount table" \
		"$(findmnt -rn -o SOURCE "$OVS_TMP/view")" "ovsnap-view:$SRC:2"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $OVS_ERR" 0 "$OVS_RC"
	ovs_run "$OVSNAP" umount "$OVS_TMP/kview"
	assertEquals "umount of a --kernel view: $OVS_ERR" 0 "$OVS_RC"
	assertFalse "view still mounted" "findmnt -rn '$OVS_TMP/view' >/dev/null"
	assertFalse "ovsnap-viewd still running" "pgrep -f 'ovsnap-viewd.*$OVS_TMP' >/dev/null"
}

# The reader: opens a file and a directory in the view, reads a little,
# waits for "go", then reads the rest through the same handles.
READER='
use strict;
my ($view) = @ARGV;
$| = 1;
open(my $big, "<", "$view/big") or die "big: $!";
open(my $f, "<", "$view/f") or die "f: $!";
open(my $g, "<", "$view/g") or die "g: $!";
open(my $h, "<", "$view/h") or die "h: $!";
open(my $k, "<", "$view/k") or die "k: $!";
opendir(my $d, "$view/d") or die "d: $!";
my $first = readdir($d);
sysread($big, my $head, 4096);
print "ready\n";
my $go = <STDIN>;
sub rd { my ($fh, $off, $len) = @_; sysseek($fh, $off, 0); sysread($fh, my $b, $len); return $b; }
my $md5 = sub { my $x = 0; $x = ($x * 33 + ord($_)) % 4294967291 for split //, $_[0]; $x };
print "big ", $md5->(rd($big, 3 << 20, 65536)), "\n";
print "f ", rd($f, 0, 100);
print "g ", rd($g, 0, 100);
print "h ", rd($h, 0, 100);
print "k ", rd($k, 0, 100);
rewinddir($d);
print "d ", join(",", sort grep { !/^\.\.?$/ } readdir($d)), "\n";
'

test_open_handles_stay_coherent() {
	local line want_big got

	setup_tree
	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertEquals "mount: $OVS_ERR" 0 "$OVS_RC"
	want_big=$(perl -e 'open(my $b, "<", $ARGV[0]); sysseek($b, 3 << 20, 0); sysread($b, my $x, 65536); my $s = 0; $s = ($s * 33 + ord($_)) % 4294967291 for split //, $x; print $s' "$SRC/big")

	coproc READ { perl -e "$READER" "$OVS_TMP/view" 2>&1; }
	read -r -t 20 line <&"${READ[0]}"
	assertEquals "reader opened its handles" ready "$line"

	# overwrite, truncate, rename, delete the live objects; change the
	# live directory; then take a new snapshot and change them again
	preserve object big
	head -c 4M /dev/zero >"$SRC/big"
	change_tree 1
	take
	preserve object f d/f-link
	echo "newer f" >"$SRC/f"
	echo go >&"${READ[1]}"
	got=$(timeout 20 cat <&"${READ[0]}")
	assertContains "big through an open handle" "$got" "big $want_big"
	assertContains "f through an open handle" "$got" "f old f"
	assertContains "g (truncated live)" "$got" "g old g"
	assertContains "h (renamed live)" "$got" "h old h"
	assertContains "k (deleted live)" "$got" "k old k"
	assertContains "directory through an open handle" "$got" "d f-link,sub,sym,y"

	# and fresh lookups after all that
	assertEquals "fresh read of f" "old f" "$(cat "$OVS_TMP/view/f")"
	assertEquals "fresh listing of d" "f-link sub sym y" "$(ls "$OVS_TMP/view/d" | xargs)"
	assertEquals "fresh listing of d/sub" "x" "$(ls "$OVS_TMP/view/d/sub" | xargs)"
	assertEquals "view still equals snapshot 1" "" \
		"$(diff "$OVS_TMP/snap.1.manifest" <("$MANIFEST" "$OVS_TMP/view") | head -20)"
}

test_deep_stack() {
	local i n=200 id

	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC" "$OVS_TMP/view" "$OVS_TMP/kview"
	echo v1 >"$SRC/f"
	echo keep >"$SRC/same"
	take
	for ((i = 2; i <= n; i++)); do
		preserve object f
		echo "v$i" >"$SRC/f"
		"$MKVOL" "$SRC" --snapshots 1 || fail "take $i"
	done
	ovs_run "$OVSNAP" mount "$SRC" @oldest "$OVS_TMP/view"
	assertEquals "mount of the oldest of $n: $OVS_ERR" 0 "$OVS_RC"
	assertEquals "oldest view" "v1" "$(cat "$OVS_TMP/view/f")"
	assertEquals "unchanged file through $n layers" "keep" "$(cat "$OVS_TMP/view/same")"
	ovs_run "$OVSNAP" mount --kernel "$SRC" @oldest "$OVS_TMP/kview"
	assertEquals "--kernel with $n layers (> 4 KiB of options): $OVS_ERR" 0 "$OVS_RC"
	assertEquals "--kernel oldest" "v1" "$(cat "$OVS_TMP/kview/f")"
	assertEquals "view and --kernel agree" "" \
		"$(diff <("$MANIFEST" "$OVS_TMP/view") <("$MANIFEST" "$OVS_TMP/kview") | head)"
	ovs_run "$OVSNAP" umount "$OVS_TMP/kview"
	assertEquals "umount --kernel: $OVS_ERR" 0 "$OVS_RC"
	ovs_run "$OVSNAP" mount "$SRC" @-10 "$OVS_TMP/kview"
	assertEquals "mount @-10: $OVS_ERR" 0 "$OVS_RC"
	assertEquals "@-10" "v$((n - 10))" "$(cat "$OVS_TMP/kview/f")"
}

# one line on stderr, non-zero exit
assert_refused() {
	local what=$1
	shift
	ovs_run "$@"
	assertNotEquals "$what: exit status" 0 "$OVS_RC"
	assertEquals "$what: one line on stderr: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | grep -c .)"
}

test_bad_input() {
	setup_tree
	take
	touch "$OVS_TMP/afile"
	assert_refused "unknown snapshot" "$OVSNAP" mount "$SRC" 99 "$OVS_TMP/view"
	assertContains "unknown snapshot message" "$OVS_ERR" "99"
	assert_refused "missing target" "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/nowhere"
	assert_refused "target not a directory" "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/afile"
	assertContains "not a directory message" "$OVS_ERR" "not a directory"
	assert_refused "target inside SRC" "$OVSNAP" mount "$SRC" 1 "$SRC/d"
	assert_refused "bad option" "$OVSNAP" mount -o rw "$SRC" 1 "$OVS_TMP/view"
	assert_refused "unknown option" "$OVSNAP" mount -o frobnicate "$SRC" 1 "$OVS_TMP/view"
	assert_refused "not a volume" "$OVSNAP" mount "$OVS_TMP" 1 "$OVS_TMP/view"

	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view"
	assertEquals "mount: $OVS_ERR" 0 "$OVS_RC"
	assert_refused "target already a mount point" "$OVSNAP" mount "$SRC" 2 "$OVS_TMP/view"
	assertContains "mount point message" "$OVS_ERR" "mount point"

	assert_refused "umount of the image" "$OVSNAP" umount "$OVS_MNT"
	assertContains "not a view message" "$OVS_ERR" "not an ovsnap snapshot view"
	assertTrue "the image is still mounted" "findmnt -rn '$OVS_MNT' >/dev/null"
	assert_refused "umount of a plain directory" "$OVSNAP" umount "$OVS_TMP/kview"
	assert_refused "umount of nothing" "$OVSNAP" umount "$OVS_TMP/nowhere"

	# a view of a dropped snapshot
	ovs_run "$OVSNAP" drop "$SRC" 2
	assertEquals "drop snapshot 2: $(ovs_ran)" 0 "$OVS_RC"
	assert_refused "view of a dropped snapshot" "$OVSNAP" mount "$SRC" 2 "$OVS_TMP/kview"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view"
	assertEquals "umount: $OVS_ERR" 0 "$OVS_RC"
}

# With the real daemon: a view keeps working when the volume is
# deactivated (it reads SRC and the layers itself, not through ovsnapd).
test_view_survives_deactivate() {
	local src view

	ovs_mkfs xfs || return
	src=$OVS_MNT/live
	view=$OVS_TMP/dview
	mkdir -p "$src/d" "$view"
	printf 'old\n' >"$src/d/f"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	printf 'new\n' >"$src/d/f"
	ovs_run "$OVSNAP" mount "$src" @latest "$view"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the view shows the snapshot" old "$(cat "$view/d/f")"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate with a view mounted: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the view still shows the snapshot" old "$(cat "$view/d/f")"
	# (What changes in SRC from now on is not preserved: every snapshot,
	# viewed or not, shows it; fsck reports it.)
	ovs_run "$OVSNAP" umount "$view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
