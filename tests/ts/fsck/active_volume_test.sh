#!/bin/bash
# ovsnap fsck of an active volume while users change files (issue 13).
# The daemon preserves without the volume lock fsck holds, so the work
# directory of the layer it preserves into holds the copies it is making
# while fsck looks.  They are no leftovers of a crash: fsck must not
# report them (it did, as "work-leftover" errors, exit 4), while the
# temporary of another process (a daemon that died) is still reported.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs ext4 fuse
[ -e /dev/fuse ] || ovs_skip "needs /dev/fuse"

FSCK_OK=0 FSCK_UNCORRECTED=4

setUp() {
	ovs_mkfs ext4 2G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
	echo a >"$SRC/a"
	# Data, not holes: its preserve on ext4 is a copy that takes a while.
	dd if=/dev/zero of="$SRC/big" bs=1M count=256 status=none
	take
	STORE=$(echo "$OVS_MNT"/.ovsnap/*)
}

tearDown() {
	[ -n "${BG:-}" ] && wait "$BG" 2>/dev/null
	BG=
	ovs_teardown
}

# take: a snapshot; PID, LAYER and WORK: the daemon, the layer it
# preserves into and that layer's work directory.
take() {
	local st

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return 1
	st=$(ovs_ctl status)
	PID=$(echo "$st" | sed -n 's/^ok pid=\([0-9]*\) .*/\1/p')
	LAYER=$(echo "$st" | sed -n 's/.* layer=\([0-9]*\) .*/\1/p')
	WORK=$(echo "$OVS_MNT"/.ovsnap/*)/layers/$LAYER/work
}

# The daemon's copy in progress, as it sits in the work directory (the
# name the engine gives it, lib/copyup.c), next to the temporary of a
# daemon that died.
test_copy_in_progress_is_no_leftover() {
	echo partial >"$WORK/#ovs.$PID.999999"
	ovs_expect_fsck "a copy of the running daemon in progress" $FSCK_OK "$SRC: clean" -n
	ovs_expect_fsck "a copy of the running daemon in progress" $FSCK_OK "$SRC: clean" -p
	[ -e "$WORK/#ovs.$PID.999999" ] || fail "fsck -p removed a copy in progress"
	rm -f "$WORK/#ovs.$PID.999999"
	echo partial >"$WORK/#ovs.1.7"
	ovs_expect_fsck "a dead process's temporary" $FSCK_UNCORRECTED \
"snapshot $LAYER: work/#ovs.1.7: leftover of an unfinished copy-up: not repaired (fsck -p removes it)
$SRC: 1 error, 0 repaired, 1 left" -n
	rm -f "$WORK/#ovs.1.7"
}

# A writer's first changes of a big file (a copy on ext4), a take before
# each so that it needs preserving again, and fsck run over and over
# while each one is under way: fsck finds the volume clean every time.
# How many runs overlapped the copy in the work directory goes to the
# log (the machine's speed decides; no assertion on it).
test_fsck_while_a_writer_changes_files() {
	local round runs=0 overlapped=0 before

	for round in 1 2 3 4; do
		[ "$round" = 1 ] || take || return
		echo "$round" >>"$SRC/big" &
		BG=$!
		while kill -0 "$BG" 2>/dev/null; do
			before=$(ls "$WORK" | grep "^#ovs\.$PID\." | head -1)
			ovs_expect_fsck "round $round, a first change under way" $FSCK_OK "$SRC: clean" -n
			runs=$((runs + 1))
			[ -n "$before" ] && [ -e "$WORK/$before" ] && overlapped=$((overlapped + 1))
		done
		wait "$BG"
		assertEquals "round $round: the change succeeds" 0 $?
		BG=
		echo "$round" >>"$SRC/a"
	done
	echo "fsck ran during a copy $overlapped times of $runs"
	[ "$(tail -c 2 "$SRC/big")" = 4 ] || fail "the last change of big is lost"
}

. "$SHUNIT2"
