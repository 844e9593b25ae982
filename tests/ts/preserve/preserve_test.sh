#!/bin/bash
# The preservation engine against a stock kernel overlay as the oracle:
# for each rule, record SRC, preserve, change SRC as the daemon would, and
# check that a read-only overlay of UPPER:SRC still shows the recorded
# state.  Runs every case on XFS (reflink), ext4 and btrfs.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

T=${OVSNAP_TOOLS:-$(dirname "$0")/../..}/unit/preserve-test
[ -x "$T" ] || { echo "preserve-test not built: $T" >&2; exit 1; }

# ---- helpers ----------------------------------------------------------------

# new_case NAME: fresh SRC/UPPER/WORK for one case on the current fs
new_case() {
	trap - ERR
	CASE=$1
	C=$OVS_MNT/$CASE
	S=$C/src U=$C/upper W=$C/work
	mkdir -p "$S"
}

# start_layer: the take (upper root gets SRC root's metadata), then the
# "before" manifest of SRC
# Every change a case then makes to SRC is checked: a command that fails
# (outside a condition) fails the case, through the ERR trap that
# check_view removes.
start_layer() {
	"$T" init "$S" "$U" "$W" || fail "$FS/$CASE: init layer"
	BEFORE=$("$T" manifest "$S")
	trap 'fail "$FS/$CASE: a change to SRC failed (exit $?): $BASH_COMMAND"' ERR
}

# pv OP PATH...: one preserve call, which must succeed
pv() {
	local op=$1
	shift
	"$T" "$op" "$S" "$U" "$W" "$@" ||
		fail "$FS/$CASE: preserve $op $*"
}

# check_view: the overlay of UPPER:SRC shows exactly the "before" state
check_view() {
	local view=$C/view
	local after

	trap - ERR
	# The changes happened: SRC no longer shows the "before" state.
	after=$("$T" manifest "$S")
	assertNotEquals "$FS/$CASE: the changes after the layer show in SRC" "$BEFORE" "$after"
	ovs_overlay_mount "$view" "$U:$S" || { fail "$FS/$CASE: overlay mount"; return; }
	after=$("$T" manifest "$view")
	assertEquals "$FS/$CASE: snapshot view equals the state before" "$BEFORE" "$after"
	umount "$view"
}

# upper_state: what the upper holds (to prove that repeated calls and
# calls on covered paths change nothing)
upper_state() {
	"$T" manifest "$U"
}

# ---- the cases ---------------------------------------------------------------

case_modify() {
	new_case modify
	printf 'old content\n' >"$S/f"
	mkdir "$S/d"; printf 'in d\n' >"$S/d/g"
	start_layer
	pv object f d/g
	printf 'appended\n' >>"$S/f"
	printf 'X' | dd of="$S/d/g" bs=1 seek=1 conv=notrunc status=none
	check_view
}

case_truncate() {
	new_case truncate
	seq 1 1000 >"$S/f"
	start_layer
	pv object f
	truncate -s 0 "$S/f"
	check_view
}

case_metadata() {
	new_case metadata
	printf 'x\n' >"$S/f"
	mkdir -p "$S/d/e"
	# chown before chmod: a chown clears the set-id bits
	chown 12:34 "$S/f"; chmod 4755 "$S/f"
	touch -d '2001-02-03 04:05:06.123456789' "$S/f"
	touch -a -d '2002-02-03 04:05:06.5' "$S/f"
	chown 5:6 "$S/d/e"; chmod 2750 "$S/d/e"
	touch -d '2003-01-01 00:00:00.25' "$S/d/e"
	# Copies are made with the permission bits and chowned or chmodded
	# only where they differ: root's files (no chown) with any mode, with
	# set-id and sticky bits (which the copy is not made with), and with
	# bits this process's umask (022) takes from a create; a user's file
	# whose copy needs only the chown.
	local m modes="0 6777 1664 4755 2755 1755 666 644" rs=()
	for m in $modes; do
		printf 'r\n' >"$S/r$m"; chmod "$m" "$S/r$m"
		rs+=("r$m")
	done
	printf 'u\n' >"$S/u"; chown 12:34 "$S/u"; chmod 644 "$S/u"
	start_layer
	pv object f d/e u "${rs[@]}"
	assertEquals "$FS/$CASE: the copies' modes" "$(echo 4755 2750 $modes 644 12:34)" \
		"$(echo $(stat -c %a "$U/f" "$U/d/e" "${rs[@]/#/$U/}") $(stat -c '%a %u:%g' "$U/u"))"
	chmod 600 "$S/f"; chown 1:1 "$S/f"; touch "$S/f"
	chmod 700 "${rs[@]/#/$S/}"
	chown 0:0 "$S/u"
	chmod 700 "$S/d/e"; chown 0:0 "$S/d/e"; touch "$S/d/e"
	# the root and its parents' times are preserved too (rule 7)
	chmod 700 "$S"; touch "$S/d"
	check_view
}

case_xattrs() {
	new_case xattrs
	printf 'x\n' >"$S/f"
	mkdir "$S/d"
	ln -s f "$S/l"
	setfattr -n user.a -v one "$S/f"
	setfattr -n trusted.b -v two "$S/f"
	setfattr -n trusted.overlay.opaque -v y "$S/d"	# user data, not ours
	setfattr -n trusted.overlay.foo -v bar "$S/f"
	setfacl -m u:123:rw,g:45:r "$S/f"
	setfacl -d -m u:7:rwx "$S/d"
	setfattr -h -n trusted.sym -v s "$S/l"
	printf 'y\n' >"$S/d/inside"
	start_layer
	pv object f d l
	setfattr -x user.a "$S/f"
	setfattr -n trusted.overlay.foo -v changed "$S/f"
	setfacl -b "$S/f"
	setfacl -k "$S/d"
	setfattr -x trusted.overlay.opaque "$S/d"
	setfattr -h -n trusted.sym -v changed "$S/l"
	check_view
	assertEquals "$FS/$CASE: user trusted.overlay.foo is stored escaped" "bar" \
		"$(getfattr --only-values -n trusted.overlay.overlay.foo "$U/f" 2>/dev/null)"
	assertNotNull "$FS/$CASE: origin identity recorded" \
		"$(getfattr --only-values -n trusted.overlay.ovsnap.origin "$U/f" 2>/dev/null)"
	assertNull "$FS/$CASE: the user's opaque xattr does not make the copy opaque" \
		"$(getfattr --only-values -n trusted.overlay.opaque "$U/d" 2>/dev/null)"
}

case_create() {
	new_case create
	mkdir "$S/d"
	start_layer
	pv name new d/new2 d/newdir
	printf 'born later\n' >"$S/new"
	printf 'born later\n' >"$S/d/new2"
	mkdir "$S/d/newdir"; printf 'z' >"$S/d/newdir/z"
	check_view
}

case_unlink_recreate() {
	new_case unlink_recreate
	printf 'first\n' >"$S/f"
	start_layer
	pv object f
	rm "$S/f"
	pv name f
	printf 'second, longer\n' >"$S/f"
	check_view
}

# Rule 1 before an unlink, as the daemon makes it: on XFS the file itself
# moves into the upper (its inode, birth time and data as they were; the
# origin xattr keeps the ctime the rename changes); where a move would not
# keep it as it was (two names: rule 6; a user's trusted.overlay.* xattr:
# rule 14), where the path is covered, and on ext4 and btrfs, a copy or
# nothing, then the unlink.
case_unlink_move() {
	local ino ctime got want
	new_case unlink_move
	mkdir -p "$S/d/e"
	printf 'only name\n' >"$S/d/e/f"
	chown 12:34 "$S/d/e/f"; chmod 4750 "$S/d/e/f"
	setfattr -n user.a -v one "$S/d/e/f"
	setfacl -m u:123:rw "$S/d/e/f"
	touch -d '2001-02-03 04:05:06.123456789' "$S/d/e/f"
	# g: its folder is in the upper by then (the preserve's walk hands
	# the move its directory, on SRC's mount); r: at the top
	printf 'second\n' >"$S/d/e/g"
	printf 'top\n' >"$S/r"
	printf 'escaped\n' >"$S/o"
	setfattr -n trusted.overlay.foo -v bar "$S/o"
	printf 'linked\n' >"$S/h1"
	ln "$S/h1" "$S/h2"
	printf 'covered\n' >"$S/c"
	ino=$(stat -c %i "$S/d/e/f")
	ctime=$(stat -c %Z "$S/d/e/f")
	inos="$ino $(stat -c %i "$S/d/e/g" "$S/r" | xargs)"
	start_layer
	pv object c
	got=$("$T" unlink "$S" "$U" "$W" d/e/f d/e/g r o h1 c) || fail "$FS/$CASE: preserve unlink"
	want="unlinked unlinked unlinked unlinked unlinked unlinked"
	[ "$FS" = xfs ] && want="moved moved moved unlinked unlinked unlinked"
	assertEquals "$FS/$CASE: moved or unlinked" "$want" "$(echo $got)"
	# the other name of h1 changes: h1 in the view must not
	printf 'changed\n' >>"$S/h2"
	check_view
	[ "$FS" = xfs ] &&
		assertEquals "$FS/$CASE: the upper holds the files themselves" "$inos" \
			"$(stat -c %i "$U/d/e/f" "$U/d/e/g" "$U/r" | xargs)"
	assertContains "$FS/$CASE: its origin, with the ctime it had" \
		"$(getfattr --only-values -n trusted.overlay.ovsnap.origin "$U/d/e/f" 2>/dev/null)" \
		"ino=$ino ctime=$ctime."
	assertEquals "$FS/$CASE: user trusted.overlay.foo is stored escaped" "bar" \
		"$(getfattr --only-values -n trusted.overlay.overlay.foo "$U/o" 2>/dev/null)"
}

case_rmdir_recreate() {
	new_case rmdir_recreate
	mkdir -p "$S/empty" "$S/d"
	printf 'x\n' >"$S/d/x"
	chmod 711 "$S/d"
	start_layer
	pv rmdir empty
	rmdir "$S/empty"
	pv name empty empty/new
	mkdir "$S/empty"; touch "$S/empty/new"
	# a directory emptied first, then removed and made again
	pv object d/x
	rm "$S/d/x"
	pv rmdir d
	rmdir "$S/d"
	pv name d
	mkdir "$S/d"; printf 'other\n' >"$S/d/y"
	check_view
}

case_dir_rename() {
	new_case dir_rename
	mkdir -p "$S/d/sub/deeper" "$S/d/gone"
	printf 'a\n' >"$S/d/a"
	printf 'b\n' >"$S/d/sub/b"
	printf 'c\n' >"$S/d/sub/deeper/c"
	ln "$S/d/a" "$S/d/sub/a-link"
	ln -s ../a "$S/d/sub/sym"
	mkfifo "$S/d/fifo"
	touch -d '2000-01-01' "$S/d/sub"
	start_layer
	# earlier changes inside the subtree: the upper's entries must win
	pv object d/sub/b
	printf 'b changed\n' >"$S/d/sub/b"
	pv name d/born
	printf 'born\n' >"$S/d/born"
	pv rmdir d/gone
	rmdir "$S/d/gone"
	# the rename itself: subtree of the source, whiteout at the target
	pv subtree d
	pv name e
	mv "$S/d" "$S/e"
	printf 'after\n' >>"$S/e/a"
	check_view
	local a_ino l_ino
	a_ino=$(stat -c %i "$U/d/a")
	l_ino=$(stat -c %i "$U/d/sub/a-link")
	assertEquals "$FS/$CASE: links inside the subtree stay linked" "$a_ino" "$l_ino"
	assertEquals "$FS/$CASE: subtree directories are opaque" "y" \
		"$(getfattr --only-values -n trusted.overlay.opaque "$U/d/sub/deeper" 2>/dev/null)"
}

case_file_rename() {
	new_case file_rename
	printf 'a\n' >"$S/a"
	mkdir "$S/d"
	start_layer
	pv object a
	pv name d/b
	mv "$S/a" "$S/d/b"
	check_view
}

case_rename_over() {
	new_case rename_over
	printf 'a\n' >"$S/a"
	printf 'b\n' >"$S/b"
	mkdir "$S/emptydir"
	mkdir -p "$S/full/sub"
	printf 'kept\n' >"$S/full/sub/f"
	start_layer
	pv object a
	pv name b
	mv "$S/a" "$S/b"
	# rename over an empty directory is its rmdir
	pv name emptydir
	rmdir "$S/emptydir" && mv "$S/b" "$S/emptydir"
	# c is born after the layer: it must not show
	pv name c
	printf 'c\n' >"$S/c"
	# A create over a non-empty directory fails (EEXIST, ENOTEMPTY):
	# preserving its name must not turn it into an empty opaque copy.
	pv name full
	assertFalse "$FS/$CASE: mkdir over a non-empty directory fails" "mkdir '$S/full' 2>/dev/null"
	pv name full/sub
	check_view
}

case_hardlink() {
	new_case hardlink
	mkdir "$S/sub"
	printf 'shared\n' >"$S/h1"
	ln "$S/h1" "$S/sub/h2"
	ln "$S/h1" "$S/h3"
	start_layer
	pv object h1
	printf 'changed through h1\n' >>"$S/h1"
	check_view
	assertEquals "$FS/$CASE: both names linked in the upper" \
		"$(stat -c %i "$U/h1")" "$(stat -c %i "$U/sub/h2")"
}

case_special() {
	new_case special
	ln -s some/target "$S/l"
	mkfifo -m 640 "$S/p"
	mknod -m 600 "$S/null" c 1 3
	mknod -m 600 "$S/blk" b 7 200
	start_layer
	pv object l p null blk
	rm "$S/l"; pv name l; ln -s other "$S/l"
	chmod 666 "$S/p" "$S/null" "$S/blk"
	check_view
}

case_sparse() {
	new_case sparse
	truncate -s 64M "$S/sp"
	printf 'data at 1M' | dd of="$S/sp" bs=1 seek=$((1 << 20)) conv=notrunc status=none
	printf 'data at 40M' | dd of="$S/sp" bs=1 seek=$((40 << 20)) conv=notrunc status=none
	local blocks
	blocks=$(stat -c %b "$S/sp")
	start_layer
	pv object sp
	dd if=/dev/urandom of="$S/sp" bs=1M count=2 seek=8 conv=notrunc status=none
	check_view
	local ublocks
	ublocks=$(stat -c %b "$U/sp")
	assertTrue "$FS/$CASE: holes preserved ($ublocks blocks, source had $blocks)" \
		"[ $ublocks -le $((blocks * 2 + 64)) ]"
	# the first data is at 1 MiB (or its block), not at 0
	local first
	first=$(xfs_io -r -c 'seek -d 0' "$U/sp" | awk '/^DATA/ { print $2 }')
	assertTrue "$FS/$CASE: SEEK_DATA finds the first data past 0 (at $first)" \
		"[ -n '$first' ] && [ '$first' -gt 0 ]"
}

case_clone() {
	new_case clone
	dd if=/dev/urandom of="$S/big" bs=1M count=64 status=none
	start_layer
	local how
	how=$("$T" cloned "$S" "$U" "$W" big)
	case $FS in
	xfs|btrfs) assertEquals "$FS/$CASE: 64 MiB copy-up is a clone" clone "$how" ;;
	ext4) assertEquals "$FS/$CASE: ext4 falls back to a copy" copy "$how" ;;
	esac
	dd if=/dev/zero of="$S/big" bs=1M count=1 seek=10 conv=notrunc status=none
	check_view
}

case_idempotent() {
	new_case idempotent
	mkdir -p "$S/d/sub" "$S/r"
	printf 'x\n' >"$S/d/f"
	ln "$S/d/f" "$S/d/sub/f2"
	start_layer
	pv object d/f
	pv name d/new
	pv rmdir r
	pv subtree d
	local first
	first=$(upper_state)
	pv object d/f
	pv name d/new
	pv rmdir r
	pv subtree d
	pv object d/sub/f2
	assertEquals "$FS/$CASE: a second call changes nothing" "$first" "$(upper_state)"
	# a leftover temp in work (crash) is harmless
	printf 'junk' >"$W/#ovs.1.1"
	pv object d/sub
	rmdir "$S/r"
	pv name moved
	mv "$S/d" "$S/moved"
	check_view
}

case_covered() {
	new_case covered
	mkdir -p "$S/gone" "$S/keep"
	printf 'k\n' >"$S/keep/k"
	start_layer
	pv name w
	mkdir "$S/w"; printf 'new\n' >"$S/w/x"	# born after: covered by the whiteout
	pv rmdir gone
	rmdir "$S/gone"; mkdir "$S/gone"; printf 'n\n' >"$S/gone/n"
	local first
	first=$(upper_state)
	assertEquals "$FS/$CASE: coverage" "1 1 1 1 0 0" \
		"$("$T" covered "$S" "$U" "$W" w w/x gone gone/n keep keep/k | tr '\n' ' ' | sed 's/ $//')"
	pv object w/x gone/n
	pv name w/y gone/m
	pv subtree w
	pv rmdir gone
	assertEquals "$FS/$CASE: covered paths are not touched" "$first" "$(upper_state)"
	check_view
}

# Issue 13: the daemon preserves different objects in parallel, and two
# racing changes of one object may both reach the engine (a write and a
# create over it).  Many threads at once on one layer: different files
# in one directory and in directories not yet in the upper (their parents
# made by several threads at once), the same file several times, a
# hard-linked file, whiteouts in one directory and the same name twice.
# (Two names of one linked inode at once are not among them: the daemon
# locks the inode, and two copies would each link the other name.)  The
# view must show the state before, directory times included (rule 7).
case_parallel() {
	local round calls i d
	for round in 1 2 3; do
		new_case parallel$round
		mkdir -p "$S/deep/a/b/c" "$S/flat"
		for i in $(seq 0 7); do
			mkdir -p "$S/d$i/sub"
			printf 'd%s\n' "$i" >"$S/d$i/sub/f"
			printf 'flat%s\n' "$i" >"$S/flat/f$i"
			printf 'deep%s\n' "$i" >"$S/deep/a/b/c/f$i"
		done
		printf 'same\n' >"$S/same"
		printf 'linked\n' >"$S/d0/h1"; ln "$S/d0/h1" "$S/d1/h2"
		start_layer
		calls=()
		for i in $(seq 0 7); do
			calls+=("object:d$i/sub/f" "object:flat/f$i" "object:deep/a/b/c/f$i"
				"name:flat/new$i" "name:d$i/sub/new" "object:same")
		done
		calls+=(object:d0/h1 name:flat/twice name:flat/twice)
		"$T" parallel "$S" "$U" "$W" "${calls[@]}" ||
			fail "$FS/$CASE: parallel preserves"
		for i in $(seq 0 7); do
			printf 'changed\n' >>"$S/d$i/sub/f"
			printf 'changed\n' >>"$S/flat/f$i"
			printf 'changed\n' >>"$S/deep/a/b/c/f$i"
			printf 'new\n' >"$S/flat/new$i"
			printf 'new\n' >"$S/d$i/sub/new"
		done
		printf 'changed\n' >>"$S/same"
		printf 'changed\n' >>"$S/d1/h2"
		printf 'new\n' >"$S/flat/twice"
		check_view
	done
}

# A directory removed behind the engine (no rmdir preserve: what a
# change that bypasses the snapshot mount does) after a copy of it was
# kept: the snapshot then shows the copy's entries alone, and a directory
# SRC gets at that name must not merge into it, whether made there
# (dir_gone_behind) or moved there over a file that took the folder's
# place, as an exchange does (dir_replaced_behind).
view_now() {
	local view=$C/view

	ovs_overlay_mount "$view" "$U:$S" || { fail "$FS/$CASE: overlay mount"; return; }
	"$T" manifest "$view"
	umount "$view"
}

dir_behind_case() {
	new_case "$1"
	mkdir "$S/d"; printf 'a\n' >"$S/d/a"; printf 'b\n' >"$S/d/b"
	start_layer
	pv object d/a
	printf 'changed\n' >>"$S/d/a"
	pv name d/x
	printf 'x\n' >"$S/d/x"
	rm -r "$S/d"
	[ "$1" = dir_replaced_behind ] && printf 'a file\n' >"$S/d"
	# what the snapshot shows now: d with a alone (b was never kept)
	BEFORE=$(view_now)
	assertContains "$FS/$CASE: the kept copy shows" "$BEFORE" "d/a"
	assertNotContains "$FS/$CASE: and only it" "$BEFORE" "d/b"
	if [ "$1" = dir_replaced_behind ]; then
		pv object d
		rm "$S/d"
	else
		pv name d
	fi
	mkdir "$S/d"; printf 'new\n' >"$S/d/new"; printf 'new b\n' >"$S/d/b"
	printf 'new x\n' >"$S/d/x"
	check_view
}

case_dir_gone_behind() { dir_behind_case dir_gone_behind; }
case_dir_replaced_behind() { dir_behind_case dir_replaced_behind; }

run_cases() {
	FS=$1
	ovs_mkfs "$FS" 1G || return 1
	case_modify
	case_truncate
	case_metadata
	case_xattrs
	case_create
	case_unlink_recreate
	case_unlink_move
	case_rmdir_recreate
	case_dir_gone_behind
	case_dir_replaced_behind
	case_dir_rename
	case_file_rename
	case_rename_over
	case_hardlink
	case_special
	case_sparse
	case_clone
	case_idempotent
	case_covered
	case_parallel
}

test_xfs() { run_cases xfs; }
test_ext4() { run_cases ext4; }
test_btrfs() { run_cases btrfs; }

# A copy (ext4 cannot clone) of files several write-behind chunks long
# (8 MiB, lib/copyup.c), sizes not a multiple of a chunk, with holes:
# the snapshot's copy is byte for byte what SRC held, its holes stay
# holes, and the copy does not stay in the page cache.
test_write_behind_copy_ext4() {
	ovs_mkfs ext4 1G || return 1
	FS=ext4
	new_case write_behind
	local mib=$((1 << 20)) f
	# data 0-3M, hole 3M-20M (two chunks), data to 45M + 4321 bytes
	dd if=/dev/urandom of="$S/tail_data" bs=1M count=3 status=none
	dd if=/dev/urandom of="$S/tail_data" bs=1M count=25 seek=20 conv=notrunc status=none
	head -c 4321 /dev/urandom >>"$S/tail_data"
	# data 5M-29M + 1 byte, then a hole to 61M + 777 bytes
	truncate -s $((61 * mib + 777)) "$S/tail_hole"
	dd if=/dev/urandom of="$S/tail_hole" bs=1M count=24 seek=5 conv=notrunc status=none
	printf 'z' | dd of="$S/tail_hole" bs=1 seek=$((29 * mib)) conv=notrunc status=none
	mkdir "$C/expect"
	for f in tail_data tail_hole; do
		cp --sparse=always "$S/$f" "$C/expect/$f"
	done
	start_layer
	local how
	how=$("$T" cloned "$S" "$U" "$W" tail_data tail_hole | tr '\n' ' ')
	dd if=/dev/zero of="$S/tail_data" bs=1M count=30 seek=1 conv=notrunc status=none
	truncate -s 10M "$S/tail_hole"
	check_view
	assertEquals "$FS/$CASE: copies, not clones" "copy copy " "$how"
	for f in tail_data tail_hole; do
		cmp "$C/expect/$f" "$U/$f" >/dev/null
		assertEquals "$FS/$CASE: the copy of $f is byte for byte the original" 0 $?
		assertEquals "$FS/$CASE: size of the copy of $f" \
			"$(stat -c %s "$C/expect/$f")" "$(stat -c %s "$U/$f")"
	done
	assertEquals "$FS/$CASE: tail_data's hole stays a hole" $((20 * mib)) \
		"$(xfs_io -r -c "seek -d $((3 * mib))" "$U/tail_data" | awk '/^DATA/ { print $2 }')"
	assertEquals "$FS/$CASE: tail_hole starts with a hole" $((5 * mib)) \
		"$(xfs_io -r -c 'seek -d 0' "$U/tail_hole" | awk '/^DATA/ { print $2 }')"
	assertEquals "$FS/$CASE: tail_hole ends with a hole" $((29 * mib + 4096)) \
		"$(xfs_io -r -c "seek -h $((5 * mib))" "$U/tail_hole" | awk '/^HOLE/ { print $2 }')"
	local past
	past=$(xfs_io -r -c "seek -d $((29 * mib + 4096))" "$U/tail_hole" |
		awk '/^DATA/ { print $2 }')
	assertEquals "$FS/$CASE: no data in tail_hole past 29M + 1" EOF "$past"

	# Write-behind drops the copy from the page cache.  Checked on a
	# copy nothing read since (fincore's mmap sets its atime: no view).
	new_case write_behind_cache
	dd if=/dev/urandom of="$S/f" bs=1M count=20 status=none
	"$T" init "$S" "$U" "$W" || fail "$FS/$CASE: init layer"
	"$T" object "$S" "$U" "$W" f || fail "$FS/$CASE: preserve f"
	local cached
	cached=$(fincore -b -n -o RES "$U/f" | tr -d ' ')
	assertTrue "$FS/$CASE: the copy is not kept cached ($cached bytes)" \
		"[ '$cached' -lt $((8 * mib)) ]"
}

# kernels before 6.13 have no *xattrat calls: the /proc/self/fd fallback
# must reach a symlink's own xattrs just the same
test_xattr_fallback() {
	ovs_mkfs xfs || return 1
	FS=xfs-no-xattrat
	export OVSNAP_TEST_NO_XATTRAT=1
	case_xattrs
	case_rmdir_recreate
	case_dir_gone_behind
	case_dir_replaced_behind
	case_dir_rename
	unset OVSNAP_TEST_NO_XATTRAT
}

# Rule 8: once a preserve returned, its result survives a crash even when
# the change that followed it was made durable (fsync of SRC only).  The
# shutdown ioctl without a log flush is the power cut.
crash_case() {
	FS=$1-crash
	ovs_mkfs "$1" || return 1
	new_case crash
	mkdir -p "$S/d/sub" "$S/e"
	seq 1 20000 >"$S/f"
	seq 1 10000 >"$S/d/sub/g"
	ln "$S/f" "$S/d/f2"
	start_layer
	sync	# the starting state is durable: only the preserves are tested
	pv object f
	printf 'new\n' >>"$S/f"
	xfs_io -c fsync "$S/f"
	pv name newfile
	printf 'n\n' >"$S/newfile"
	xfs_io -c fsync "$S/newfile"
	pv rmdir e
	rmdir "$S/e"
	pv subtree d
	pv name d2
	mv "$S/d" "$S/d2"
	printf 'more\n' >>"$S/d2/sub/g"
	xfs_io -c fsync "$S/d2/sub/g"
	xfs_io -c fsync "$S/d2"
	xfs_io -c fsync "$S"
	xfs_io -x -c shutdown "$OVS_MNT" || { fail "$FS: shutdown"; return; }
	umount "$OVS_MNT" && mount "$OVS_DEV" "$OVS_MNT" || { fail "$FS: remount"; return; }
	check_view
}

test_crash_xfs() { crash_case xfs; }
test_crash_ext4() { crash_case ext4; }

# A daemon that crashed (a power cut) left temps in work, and the next one
# runs with the same pid (pids at boot repeat): its temp names are taken.
# Preserving must step over them, never fail the change with EIO, and
# never remove them (they are not its own).  The engine runs in a fresh
# process per call, so temps are left for the pids that come next.
test_stale_temps_of_a_dead_daemon_with_the_same_pid() {
	ovs_mkfs xfs || return 1
	FS=xfs
	new_case stale
	mkdir -p "$S/d/sub" "$S/e"
	printf 'f\n' >"$S/f"
	ln -s f "$S/l"
	printf 'g\n' >"$S/d/sub/g"
	start_layer
	local p n
	# Builtins only: a forked process would use up the pids to come.
	for ((p = BASHPID; p < BASHPID + 400; p++)); do
		for n in 1 2 3 4; do
			printf 'stale' >"$W/#ovs.$p.$n"
		done
	done
	pv object f l
	printf 'new\n' >>"$S/f"
	pv name newfile
	printf 'n\n' >"$S/newfile"
	pv rmdir e
	rmdir "$S/e"
	pv subtree d
	pv name d2
	mv "$S/d" "$S/d2"
	assertEquals "$FS/$CASE: the stale temps are left alone" 1600 \
		"$(find "$W" -maxdepth 1 -name '#ovs.*' | wc -l)"
	check_view
}

test_hlmap() {
	ovs_mkfs xfs || return 1
	local s=$OVS_MNT/hl
	mkdir -p "$s/d" "$OVS_MNT/outside"
	printf 'a\n' >"$s/a"; ln "$s/a" "$s/d/b"
	printf 's\n' >"$s/single"
	printf 'c\n' >"$s/d/c"; ln "$s/d/c" "$OVS_MNT/outside/c"
	"$T" hlmap "$s"
	assertEquals "hard link map keeps up with link, unlink and rename" 0 $?
}

# The daemon hands the engine the open SRC directory that holds the last
# name (srcdirfd), for a plain file and for a linked one.
# What the engine reports covered around an object it preserves or
# unlinks, which ovsnapd remembers per folder until the next take: every
# name in the path's folder, only where an ancestor of the path covers
# it in the upper (a whiteout, a file, an opaque folder), never for an
# entry at the path itself.
test_object_walk_reports_covered_folder() {
	local f

	ovs_mkfs xfs || return 1
	FS=xfs
	new_case objectcov
	mkdir -p "$S/old/sub"
	printf 'f\n' >"$S/old/f"
	printf 'g\n' >"$S/old/g"
	start_layer
	trap - ERR
	assertEquals "an old file, copied: its folder is not" - \
		"$("$T" objectcov "$S" "$U" "$W" old/f)"
	assertEquals "the same, covered by its own entry now" - \
		"$("$T" objectcov "$S" "$U" "$W" old/f)"
	assertEquals "an unlink in an old folder" - \
		"$("$T" unlinkcov "$S" "$U" "$W" old/g | tail -1)"
	# A folder new since the take: a whiteout at its name.
	pv name new
	mkdir -p "$S/new/d"
	for f in new/x new/z new/d/y; do printf '%s\n' "$f" >"$S/$f"; done
	assertEquals "a file in a new folder: every name there is covered" siblings \
		"$("$T" objectcov "$S" "$U" "$W" new/x)"
	assertEquals "a file two folders down in it" siblings \
		"$("$T" objectcov "$S" "$U" "$W" new/d/y)"
	assertEquals "the new folder itself: its folder is an old one" - \
		"$("$T" objectcov "$S" "$U" "$W" new)"
	assertEquals "an unlink in the new folder" siblings \
		"$("$T" unlinkcov "$S" "$U" "$W" new/z | tail -1)"
	assertFalse "which unlinked it" "[ -e '$S/new/z' ]"
	# An old folder removed and made again: opaque in the upper.
	pv rmdir old/sub
	rmdir "$S/old/sub"
	mkdir "$S/old/sub"
	printf 's\n' >"$S/old/sub/s"
	assertEquals "a file in a folder made again" siblings \
		"$("$T" objectcov "$S" "$U" "$W" old/sub/s)"
	assertEquals "the opaque folder itself" - \
		"$("$T" objectcov "$S" "$U" "$W" old/sub)"
}

test_srcdirfd() {
	ovs_mkfs xfs || return 1
	FS=xfs
	new_case srcdirfd
	mkdir -p "$S/d/e" "$S/g"
	printf 'f\n' >"$S/d/e/f"
	printf 'h\n' >"$S/d/e/h"; ln "$S/d/e/h" "$S/g/h2"
	start_layer
	"$T" objectat "$S" "$U" "$W" d/e d/e/f d/e/h ||
		fail "$FS/$CASE: preserve from the open directory"
	printf 'more\n' >>"$S/d/e/f"
	printf 'more\n' >>"$S/g/h2"
	check_view
	# It is read from there, not found again from the root: given SRC/x
	# for the chain d/f, the upper's d/f is x's f.
	new_case srcdirfd_used
	mkdir -p "$S/d" "$S/x"
	printf 'named\n' >"$S/d/f"
	printf 'open\n' >"$S/x/f"
	"$T" init "$S" "$U" "$W" || fail "$FS/$CASE: init layer"
	"$T" objectat "$S" "$U" "$W" x d/f || fail "$FS/$CASE: preserve from x"
	assertEquals "$FS/$CASE: the copy comes from the open directory" open "$(cat "$U/d/f")"
}

. "$SHUNIT2"
