#!/bin/bash
# Issue 13 item 2: first changes are locked by object, not by one daemon
# lock.  While one request's preserve is held (the test hook
# OVSNAPD_TEST_PRESERVE_GATE_IN holds only requests that preserved
# something under SRC/held, for as long as the gate file exists), creates
# in another folder and the first write of another file complete.  Then
# every snapshot still equals the manifest recorded at its take.  (Two
# racing first changes of one object: preserve_test.sh, and many
# processes at once below.)
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

MANIFEST=${OVSNAP_TOOLS}/tools/ovs-manifest
GATE=$OVS_TMP/gate
export OVSNAPD_TEST_HOOKS=1 OVSNAPD_TEST_PRESERVE_GATE=$GATE OVSNAPD_TEST_PRESERVE_GATE_IN=held

setUp() {
	rm -f "$GATE"
	BG=
	ovs_mkfs "${FSTYPE:-xfs}" 1G || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	rm -rf "$MF"
	mkdir -p "$SRC/held" "$SRC/other/deep" "$MF"
	printf 'original\n' >"$SRC/held/file"
	for i in 1 2 3; do printf '%s\n' "$i" >"$SRC/other/f$i"; done
	printf 'deep\n' >"$SRC/other/deep/d"
	take_snapshot
}

tearDown() {
	rm -rf "$GATE"
	[ -n "${BG:-}" ] && kill -9 "$BG" 2>/dev/null && wait "$BG" 2>/dev/null
	BG=
	# shellcheck disable=SC2086 # pids
	[ -n "${SMALL:-}" ] && kill -9 $SMALL 2>/dev/null && wait $SMALL 2>/dev/null
	SMALL=
	ovs_teardown
}

# Take a snapshot and keep the manifest of SRC as it shows it.
take_snapshot() {
	"$MANIFEST" "$SRC" >"$MF/pending" || fail "manifest of $SRC"
	ovs_run timeout 120 "$OVSNAP" take "$SRC"
	assertEquals "take exit status (stderr: $OVS_ERR)" 0 "$OVS_RC"
	mv "$MF/pending" "$MF/$OVS_OUT.manifest"
}

# wait_bounded SECONDS PID: PID's exit status, or 124 after killing it
# when it has not ended in time (a change that blocks fails the test
# instead of hanging it).
wait_bounded() {
	local i
	for i in $(seq $(($1 * 10))); do
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$2" 2>/dev/null; then
		kill -9 "$2" 2>/dev/null
		wait "$2" 2>/dev/null
		return 124
	fi
	wait "$2"
}

# waits_for_the_held_one WHAT PID: PID, a change started while a preserve
# is held, is still waiting a second later, and so is the held change;
# once the gate opens, both complete.
waits_for_the_held_one() {
	local what=$1 pid=$2 rc

	sleep 1
	kill -0 "$pid" 2>/dev/null
	assertTrue "$what waits for the held preserve" $?
	kill -0 "$BG" 2>/dev/null
	assertTrue "$what: the held change is still held" $?
	rm -f "$GATE"
	wait_bounded 60 "$BG"
	rc=$?
	BG=
	assertEquals "$what: the held change succeeds once released" 0 "$rc"
	wait_bounded 60 "$pid"
	assertEquals "$what completes once released" 0 $?
}

# Hold the first write of SRC/held/file at the gate.
hold_a_preserve() {
	ovs_start_held "$GATE" sh -c "printf 'changed\\n' >>'$SRC/held/file'"
}

# run_bounded WHAT COMMAND...: COMMAND completes within 20 seconds while
# the preserve is held.
run_bounded() {
	local what=$1 pid rc
	shift
	"$@" &
	pid=$!
	wait_bounded 20 "$pid"
	rc=$?
	assertEquals "$what completes while another file's preserve is held" 0 "$rc"
}

concurrent_first_changes() {
	local rc
	hold_a_preserve || return
	run_bounded "a create in another folder" touch "$SRC/other/new"
	run_bounded "a mkdir in another folder" mkdir "$SRC/other/newdir"
	run_bounded "a create in a folder made meanwhile" \
		sh -c "printf 'n\n' >'$SRC/other/newdir/inner'"
	run_bounded "a create in a deeper folder" touch "$SRC/other/deep/new"
	run_bounded "the first write of another file" \
		sh -c "printf 'more\n' >>'$SRC/other/f1'"
	run_bounded "a chmod of another file" chmod 600 "$SRC/other/f2"
	kill -0 "$BG" 2>/dev/null
	assertTrue "the held write is still held" $?
	rm -f "$GATE"
	wait_bounded 60 "$BG"
	rc=$?
	BG=
	assertEquals "the held write succeeds once released" 0 "$rc"
	assertEquals "the live file has the write" "original
changed" "$(cat "$SRC/held/file")"
	take_snapshot
	printf 'after\n' >>"$SRC/other/f1"
	ovs_oracle_check "$SRC" "$MF"
}

# A CREATE that reaches an existing object (a name made behind the mount
# while the kernel caches a negative entry for it) with O_TRUNC changes
# that object: it waits for the object's held preserve (its busy mark,
# rule 9) instead of truncating it between that preserve and its change.
# The object here is held/file, whose second name other/late was linked
# behind the mount (a bypass the map of hard links does not know, so the
# snapshot's copy of that name is not checked: rule 6 cannot hold there).
test_create_over_an_existing_object_waits_for_its_preserve() {
	local under=$OVS_TMP/under upper pid rc

	assertFalse "no other/late yet (the kernel caches a negative entry)" \
		"[ -e '$SRC/other/late' ]"
	ovs_mount_behind "$under"
	ln "$under/src/held/file" "$under/src/other/late" || fail "link behind the mount"
	ovs_run timeout 120 "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	hold_a_truncate "$SRC/held/file" || return
	printf 'new\n' >"$SRC/other/late" &
	waits_for_the_held_one "the create over the held object" $!
	assertEquals "the live file" "new" "$(cat "$under/src/held/file")"
	upper=$(ovs_snapshot_layers "$SRC" | tail -1 | cut -d' ' -f2-)
	assertEquals "the snapshot keeps held/file" "original" "$(cat "$upper/held/file" 2>&1)"
	umount "$under"
}

# Issue 13 item 2: an unlink, a link, a rename of a file (in its folder,
# across folders, over another file) and an rmdir of an empty folder move
# no other object's names, so they complete while another file's preserve
# is held, and the snapshot taken before shows each as it was.  A rename
# of a directory moves the chains of everything below it, which the held
# preserve walks: it waits for the preserve.
namespace_changes_during_a_held_preserve() {
	local rc mvpid
	mkdir "$SRC/other/empty" "$SRC/other2" "$SRC/moving" "$SRC/moving/dir"
	for f in u r1 r2 over target l hl; do
		printf '%s\n' "$f" >"$SRC/other/$f"
	done
	ln "$SRC/other/hl" "$SRC/other2/hl2"
	printf 'below\n' >"$SRC/moving/dir/f"
	take_snapshot
	hold_a_preserve || return
	run_bounded "an unlink of another file" rm "$SRC/other/u"
	run_bounded "a rename of another file in its folder" \
		mv "$SRC/other/r1" "$SRC/other/r1.new"
	run_bounded "a rename of another file across folders" \
		mv "$SRC/other/r2" "$SRC/other2/r2"
	run_bounded "a rename of another file over a third" \
		mv "$SRC/other/over" "$SRC/other/target"
	run_bounded "a link of another file" ln "$SRC/other/l" "$SRC/other2/l.link"
	run_bounded "an unlink of one name of a hard-linked file" rm "$SRC/other2/hl2"
	run_bounded "an rmdir of an empty folder" rmdir "$SRC/other/empty"
	run_bounded "a write through a new link" \
		sh -c "printf 'linked\n' >>'$SRC/other2/l.link'"
	# Last: the kernel keeps moving/ locked while the rename waits.
	mv "$SRC/moving/dir" "$SRC/moving/dir.moved" &
	waits_for_the_held_one "a rename of a directory" $!
	assertEquals "the live tree after the changes" \
"moving/dir.moved/f
other/deep/d
other/f1
other/f2
other/f3
other/hl
other/l
other/r1.new
other/target
other2/l.link
other2/r2" "$(cd "$SRC" && find moving other other2 -type f | LC_ALL=C sort)"
	assertEquals "the rename over a file replaced it" "over" "$(cat "$SRC/other/target")"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

test_namespace_changes_during_a_held_preserve_xfs() {
	namespace_changes_during_a_held_preserve
}

test_namespace_changes_during_a_held_preserve_ext4() {
	ovs_teardown
	FSTYPE=ext4 setUp
	namespace_changes_during_a_held_preserve
}

# hold_a_truncate FILE: hold the preserve of an O_TRUNC open of FILE (under
# SRC/held) at the gate.  The open reaches the daemon without the kernel's
# inode lock, so changes of the file's other names come to the daemon
# meanwhile and meet only its busy mark.
hold_a_truncate() {
	touch "$GATE"
	: >"$1" &
	BG=$!
	ovs_wait_held "$1"
}

# Issue 13 item 2: an unlink, a rename and a link of another name of a
# hard-linked file whose preserve is held wait for it (the object's busy
# mark): run meanwhile, they would preserve the object's names apart from
# it, and the snapshot would show two copies where there was one file
# (rule 6).  Each case holds the preserve of its own pair of names; the
# oracle's manifests name hard links by shared st_ino (hardlink=), so the
# snapshot taken before must show each pair as one file with its old
# content.
changes_of_another_name_wait_for_its_preserve() {
	local c rc pid
	mkdir "$SRC/other2"
	for c in rm mv ln; do
		printf 'old %s\n' "$c" >"$SRC/held/$c"
		ln "$SRC/held/$c" "$SRC/other/$c.2"
	done
	take_snapshot
	for c in rm mv ln; do
		hold_a_truncate "$SRC/held/$c" || return
		case $c in
		rm) rm "$SRC/other/rm.2" & ;;
		mv) mv "$SRC/other/mv.2" "$SRC/other/mv.3" & ;;
		ln) ln "$SRC/other/ln.2" "$SRC/other2/ln.4" & ;;
		esac
		waits_for_the_held_one "$c of another name" $!
	done
	assertEquals "the live names after the changes" \
"held/file 1 9
held/ln 3 0
held/mv 2 0
held/rm 1 0
other/deep/d 1 5
other/f1 1 2
other/f2 1 2
other/f3 1 2
other/ln.2 3 0
other/mv.3 2 0
other2/ln.4 3 0" "$(cd "$SRC" && find held other other2 -type f \
		-printf '%p %n %s\n' | LC_ALL=C sort)"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

test_changes_of_another_name_wait_for_its_preserve_xfs() {
	changes_of_another_name_wait_for_its_preserve
}

test_changes_of_another_name_wait_for_its_preserve_ext4() {
	ovs_teardown
	FSTYPE=ext4 setUp
	changes_of_another_name_wait_for_its_preserve
}

# A name replaced behind the mount (through the filesystem beneath SRC)
# while an unlink or a rename of it waits for its object's busy mark: under
# the marks it finds another object than the one it marked, so it starts
# again under ns_lock for writing (NS_RELOCK, reachable only this way).  It
# completes, acts on the object now under the name, and the held truncate
# of the old object's other name still lands on that object.
test_name_replaced_behind_the_mount_while_a_change_waits() {
	local c rc pid n0 bypass=$OVS_TMP/bypass

	for c in rm mv; do
		printf 'old %s\n' "$c" >"$SRC/held/$c"
		ln "$SRC/held/$c" "$SRC/other/$c.2"
	done
	take_snapshot
	ovs_mount_behind "$bypass" || return
	for c in rm mv; do
		n0=$(ovs_relocks)
		hold_a_truncate "$SRC/held/$c" || return
		case $c in
		rm) rm "$SRC/other/rm.2" & ;;
		mv) mv "$SRC/other/mv.2" "$SRC/other/mv.3" & ;;
		esac
		pid=$!
		sleep 1
		kill -0 "$pid" 2>/dev/null
		assertTrue "$c waits for the object's held preserve" $?
		printf 'behind %s\n' "$c" >"$bypass/src/other/$c.new" &&
			mv "$bypass/src/other/$c.new" "$bypass/src/other/$c.2" ||
			fail "replace other/$c.2 behind the mount"
		rm -f "$GATE"
		wait_bounded 60 "$BG"
		rc=$?
		BG=
		assertEquals "the held truncate of $c succeeds once released" 0 "$rc"
		wait_bounded 60 "$pid"
		assertEquals "$c completes once released" 0 $?
		assertEquals "$c started again under the lock of every name change" \
			$((n0 + 1)) "$(ovs_relocks)"
	done
	# The kernel's attributes of what changed behind it may be stale:
	# read the filesystem itself.
	assertEquals "the names after the changes" \
"held/file 1 9
held/mv 1 0
held/rm 1 0
other/deep/d 1 5
other/f1 1 2
other/f2 1 2
other/f3 1 2
other/mv.3 1 10" "$(cd "$bypass/src" && find held other -type f -printf '%p %n %s\n' | LC_ALL=C sort)"
	umount "$bypass"
}

# Many processes at once, each making first changes: different files in
# its own folder, creates in one shared folder, and the same files (an
# O_TRUNC open reaches the daemon without the kernel's inode lock), among
# them both names of hard-linked files at once: preserved twice in
# parallel, the two names would each get a copy of their own (rule 6).
parallel_first_changes() {
	local p i pids=() rc=0
	mkdir "$SRC/shared" "$SRC/la" "$SRC/lb"
	for i in $(seq 30); do
		printf 'linked %s\n' "$i" >"$SRC/la/l$i"
		ln "$SRC/la/l$i" "$SRC/lb/l$i"
	done
	for p in 0 1 2 3 4 5 6 7; do
		mkdir "$SRC/p$p"
		for i in $(seq 20); do printf '%s %s\n' "$p" "$i" >"$SRC/p$p/f$i"; done
	done
	for i in 1 2 3; do printf 'same %s\n' "$i" >"$SRC/same$i"; done
	take_snapshot
	for p in 0 1 2 3 4 5 6 7; do
		(
			for i in $(seq 20); do
				printf 'changed\n' >>"$SRC/p$p/f$i" || exit 1
				printf 'new\n' >"$SRC/shared/p$p.$i" || exit 1
			done
			for i in 1 2 3; do
				printf 'by %s\n' "$p" >"$SRC/same$i" || exit 1
			done
		) &
		pids+=($!)
	done
	for p in a b; do
		(
			for i in $(seq 30); do
				if [ "$p" = a ]; then
					printf 'appended\n' >>"$SRC/la/l$i" || exit 1
				else
					printf 'truncated\n' >"$SRC/lb/l$i" || exit 1
				fi
			done
		) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait_bounded 60 "$p" || rc=1
	done
	assertEquals "every process made its changes" 0 "$rc"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

# nswait: "E S", the requests waiting for ns_lock exclusive (renames of
# directories) and shared (other changes).
nswait() {
	ovs_ctl status | sed -n 's/.* nswait=\([0-9]*\)\/\([0-9]*\) .*/\1 \2/p'
}

preserving() {
	ovs_status_field preserving
}

# A rename of a directory is not starved by a stream of changes: changes
# of SRC/held/fI follow one another, each held at its own gate
# ($GATE/fI) until the next one has arrived, so there is always one
# under way.  The rename gets in once the one it found is done: within
# two of them, not after the stream (a bound of N changes) ends.
test_directory_rename_not_starved_by_changes() {
	local n=6 i pids=() mover rc done_at=0
	for i in $(seq $n); do printf '%s\n' "$i" >"$SRC/held/f$i"; done
	take_snapshot
	mkdir "$GATE"
	touch "$GATE/f1"
	chmod 600 "$SRC/held/f1" &
	pids[1]=$!
	ovs_wait_held "the change of held/f1" || return
	mv "$SRC/other/deep" "$SRC/other/deep.moved" &
	mover=$!
	ovs_wait_until 30 '[ "$(nswait | cut -d" " -f1)" = 1 ]'
	rc=$?
	assertEquals "the rename waits for the held change ($(nswait))" 0 "$rc"
	for i in $(seq 2 $n); do
		touch "$GATE/f$i"
		chmod 600 "$SRC/held/f$i" &
		pids[i]=$!
		# Under way (held at its gate) or waiting behind the rename.
		ovs_wait_until 30 '[ "$(preserving)" -ge 2 ] || [ "$(nswait | cut -d" " -f2)" -ge 1 ]'
		assertTrue "change $i under way or waiting" $?
		rm -f "$GATE/f$((i - 1))"
		wait_bounded 30 "${pids[i - 1]}"
		rc=$?
		assertEquals "change $((i - 1)) completes once released" 0 "$rc"
		# Give the rename its chance (bounded by the test's limit).
		ovs_wait_until 10 '! kill -0 $mover 2>/dev/null'
		if ! kill -0 "$mover" 2>/dev/null; then
			done_at=$i
			break
		fi
	done
	rm -rf "$GATE"
	wait_bounded 60 "$mover"
	rc=$?
	assertEquals "the rename succeeds" 0 "$rc"
	assertTrue "the rename completes within the stream of $n changes, not after it" \
		"[ $done_at -gt 0 ]"
	for i in $(seq "$((done_at > 0 ? done_at : n))" $n); do
		[ -n "${pids[i]:-}" ] || continue
		wait_bounded 60 "${pids[i]}"
		assertEquals "change $i completes" 0 $?
	done
	[ -d "$SRC/other/deep.moved" ] || fail "the folder was not renamed"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

# Takes during a long preserve (rule 13) with first changes between
# them: each change waits for the preserves into layers retired before
# its own, never for a newer one, so they cannot wait for each other
# (three takes and two waiting changes deadlocked once: each waited for
# the other's retired layer).
test_takes_during_a_held_preserve() {
	local p1 p2 rc first
	first=$(ls "$MF")
	hold_a_preserve || return
	take_unchanged
	sh -c "printf 'more\n' >>'$SRC/other/f1'" &
	p1=$!
	take_unchanged
	sh -c "printf 'more\n' >>'$SRC/other/f2'" &
	p2=$!
	take_unchanged
	rm -f "$GATE"
	wait_bounded 60 "$BG"
	rc=$?
	BG=
	assertEquals "the held write succeeds once released" 0 "$rc"
	wait_bounded 30 "$p1"
	assertEquals "the first change after the first take completes" 0 $?
	wait_bounded 30 "$p2"
	assertEquals "the first change after the second take completes" 0 $?
	ovs_run timeout 30 mv "$SRC/other/f3" "$SRC/other/f3.moved"
	assertEquals "a rename after them completes: $(ovs_ran)" 0 "$OVS_RC"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

# A take while the held write and the changes queued behind it have not
# reached SRC: its state is still the first snapshot's (SRC cannot be
# read for a manifest now: the held write keeps its file locked).
take_unchanged() {
	ovs_run timeout 120 "$OVSNAP" take "$SRC"
	assertEquals "take during the held preserve: $(ovs_ran)" 0 "$OVS_RC"
	cp "$MF/$first" "$MF/$OVS_OUT.manifest"
}

# race_worker DIR ROUNDS SHARED ROLE: first changes, links, unlinks and
# renames of hard-linked and plain files in DIR/a and DIR/b, one after
# another; and each round one change of the hard-linked files SHARED/a/h*
# (with second names in SHARED/b or SHARED/c) that the other workers
# change too: ROLE 0 appends to them, 2 rewrites them (first changes
# preserve every name, rule 6; an O_TRUNC open reaches the daemon without
# the kernel's inode lock, which serialises the others), 1 moves their second names between SHARED/b and
# SHARED/c, 3 links a third name in SHARED/d and unlinks it.
# Each file's hard link goes through three phases, four files in turn:
# made and written through, moved to the other folder while the first
# name is written, then the first name unlinked and the other renamed
# back to it.  Plain files are made, renamed in their folder over the
# previous one, moved across folders and unlinked; an empty folder is
# made and removed.  Any failure ends it with status 1.
race_worker() {
	local d=$1 rounds=$2 sh=$3 role=$4 i k
	set -e
	for ((i = 0; i < rounds; i++)); do
		k=$((i % 4))
		case $role in
		0)	printf 'w%s %s\n' "$role" "$i" >>"$sh/a/h$k" ;;
		2)	printf 'w%s %s\n' "$role" "$i" >"$sh/a/h$k" ;;
		1)	if [ $((i / 4 % 2)) -eq 0 ]; then
				mv "$sh/b/h$k" "$sh/c/h$k"
			else
				mv "$sh/c/h$k" "$sh/b/h$k"
			fi ;;
		3)	ln "$sh/a/h$k" "$sh/d/h$k"
			rm "$sh/d/h$k" ;;
		esac
		case $((i / 4 % 3)) in
		0)	ln "$d/a/f$k" "$d/b/l$k"
			printf 'l%s\n' "$i" >>"$d/b/l$k" ;;
		1)	printf 'f%s\n' "$i" >>"$d/a/f$k"
			mv "$d/b/l$k" "$d/a/l$k" ;;
		2)	printf 'm%s\n' "$i" >>"$d/a/l$k"
			rm "$d/a/f$k"
			mv "$d/a/l$k" "$d/a/f$k" ;;
		esac
		printf 'p%s\n' "$i" >"$d/b/p$k"
		mv "$d/b/p$k" "$d/b/q$k"
		if [ $((i % 3)) -eq 0 ]; then
			mv "$d/b/q$k" "$d/a/q$k"
		elif [ -e "$d/a/q$k" ]; then
			rm "$d/a/q$k"
		fi
		mkdir "$d/b/e"
		rmdir "$d/b/e"
	done
}

# stop_groups PGID...: stop every process of each process group and wait
# until each is stopped: a process stops only once its request has left
# the daemon, so then no change is between its preserve and SRC.
stop_groups() {
	local g pid state tries
	for g; do
		kill -STOP -- "-$g" 2>/dev/null
	done
	for g; do
		for pid in $(pgrep -g "$g"); do
			for ((tries = 0; tries < 3000; tries++)); do
				state=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' \
					"/proc/$pid/stat" 2>/dev/null)
				[ -z "$state" ] || [ "$state" = T ] || [ "$state" = Z ] && break
				sleep 0.01
			done
			if [ -n "$state" ] && [ "$state" != T ] && [ "$state" != Z ]; then
				fail "worker $pid did not stop (state $state)"
				return 1
			fi
		done
	done
}

# Rule 9 with changes of names under ns_lock for reading: workers make
# first changes, links, unlinks and renames of hard-linked and plain
# files at once, each in its own folders, while takes come between them
# (every worker stopped, the manifest recorded, then the take); every
# snapshot must equal its manifest, hard links included (rule 6).
race_of_name_changes() {
	local w pgids=() t rc bad=0 takes=0
	for w in 0 1 2 3; do
		mkdir -p "$SRC/w$w/a" "$SRC/w$w/b"
		for k in 0 1 2 3; do printf 'w%s f%s\n' "$w" "$k" >"$SRC/w$w/a/f$k"; done
	done
	mkdir -p "$SRC/shared/a" "$SRC/shared/b" "$SRC/shared/c" "$SRC/shared/d"
	for k in 0 1 2 3; do
		printf 'h%s\n' "$k" >"$SRC/shared/a/h$k"
		ln "$SRC/shared/a/h$k" "$SRC/shared/b/h$k"
	done
	take_snapshot
	for w in 0 1 2 3; do
		# its own process group, to stop its commands with it
		setsid bash -c "$(declare -f race_worker); race_worker '$SRC/w$w' 60 '$SRC/shared' $w" \
			</dev/null >"$OVS_TMP/race.$w.log" 2>&1 &
		pgids+=($!)
	done
	for ((t = 0; t < 6; t++)); do
		sleep 0.3
		pgrep -g "$(IFS=,; echo "${pgids[*]}")" >/dev/null || break
		stop_groups "${pgids[@]}" || break
		take_snapshot
		takes=$((takes + 1))
		for w in "${pgids[@]}"; do kill -CONT -- "-$w" 2>/dev/null; done
	done
	echo "race: $takes takes while the workers ran"
	for w in "${pgids[@]}"; do kill -CONT -- "-$w" 2>/dev/null; done
	for w in "${!pgids[@]}"; do
		wait_bounded 60 "${pgids[w]}"
		rc=$?
		[ "$rc" -eq 0 ] || bad=1
		assertEquals "worker $w: $(tail -3 "$OVS_TMP/race.$w.log")" 0 "$rc"
	done
	assertEquals "every worker made all its changes" 0 "$bad"
	assertTrue "takes came while the workers ran ($takes)" "[ $takes -ge 1 ]"
	take_snapshot
	ovs_oracle_check "$SRC" "$MF"
}

# yields: how many times a bulk copy gave way to other first changes.
yields() {
	ovs_status_field yields
}

# small_first_changes DIR STOP: a first change (an append) of each file of
# DIR, until STOP exists; DIR.out tells that the files ran out first.
small_first_changes() {
	local f
	for f in "$1"/f*; do
		[ -e "$2" ] && return 0
		printf 'x\n' >>"$f" || return 1
	done
	touch "$1.out"
}

# A copy-up of more than 64 MiB (a real copy on ext4) gives way, between
# its chunks, to first changes of other files running beside it, and
# still ends with the old data in the snapshot (issue 13 item 2; the time
# it saves them: bench/concurrency-bench.sh).  While the first write to a
# 160 MiB file copies it up, three processes (started first) make first
# changes of 1,500 small files each; the daemon's status counts the
# chunks after which the copy waited.  A copy with nothing
# beside it (its own preserve is no other first change) never waits,
# neither before nor after (no first change left counted).
test_promise_ovsnapd_bulk_copy_gives_way() {
	local p i before
	ovs_teardown
	FSTYPE=ext4 setUp
	head -c $((72 << 20)) /dev/urandom >"$SRC/alone"
	head -c $((160 << 20)) /dev/urandom >"$SRC/big"
	for p in 0 1 2; do
		mkdir "$SRC/small$p"
		(cd "$SRC/small$p" && for ((i = 0; i < 1500; i++)); do echo "$i" >"f$i"; done)
	done
	take_snapshot
	printf 'more\n' >>"$SRC/alone"
	assertEquals "the first write of a big file alone" 0 $?
	assertEquals "a copy-up alone never gives way ($(ovs_ctl status))" 0 "$(yields)"
	for p in 0 1 2; do
		small_first_changes "$SRC/small$p" "$OVS_TMP/stop" &
		SMALL+=" $!"
	done
	ovs_wait_held "the small files' first changes"
	timeout 120 sh -c "printf 'more\n' >>'$SRC/big'"
	assertEquals "the first write of the big file" 0 $?
	touch "$OVS_TMP/stop"
	for p in $SMALL; do
		wait_bounded 60 "$p"
		assertEquals "first changes beside the copy-up" 0 $?
	done
	SMALL=
	rm -f "$OVS_TMP/stop"
	before=$(yields)
	echo "the copy-up gave way after $before chunks"
	assertTrue "the copy-up gave way to the first changes ($(ovs_ctl status); \
the small changes that ran out before it ended: $(cd "$SRC" && echo small*.out))" \
		"[ '$before' -ge 1 ]"
	assertEquals "the live file has the write" "more" "$(tail -c 5 "$SRC/big")"
	take_snapshot
	printf 'again\n' >>"$SRC/alone"
	assertEquals "the first write of a big file alone, after" 0 $?
	assertEquals "a copy-up alone never gives way, after ($(ovs_ctl status))" \
		"$before" "$(yields)"
	ovs_oracle_check "$SRC" "$MF"
}

test_race_of_name_changes_xfs() {
	race_of_name_changes
}

test_race_of_name_changes_ext4() {
	ovs_teardown
	FSTYPE=ext4 setUp
	race_of_name_changes
}

test_parallel_first_changes_xfs() {
	parallel_first_changes
}

test_parallel_first_changes_btrfs() {
	ovs_teardown
	FSTYPE=btrfs setUp
	parallel_first_changes
}

test_concurrent_first_changes_xfs() {
	concurrent_first_changes
}

test_concurrent_first_changes_ext4() {
	ovs_teardown
	FSTYPE=ext4 setUp
	concurrent_first_changes
}

. "$SHUNIT2"
