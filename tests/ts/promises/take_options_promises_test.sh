#!/bin/bash
# Promises of ovsnap-take(8) about later takes: the volume lock and --wait,
# names, --hold, --keep, --json, --quiet, the upper root and the 499 limit.
# Each promise is tagged in the man page source (.\" promise: NAME) and
# its test is test_promise_NAME; tests/promises.sh lists them and fails on
# a promise without a test.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
. "$OVSNAP_SRCDIR/tests/ts/promises/promise_helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3 setfattr getfattr mkfifo

# A lock holder that writes its note as ovsnap does ("PID WHAT").
hold_lock() {
	local lock
	lock=$(ls "$OVS_MNT"/.ovsnap/*/lock)
	start_user lock python3 -c '
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.pwrite(fd, b"%d promise-holder\n" % os.getpid(), 0)
os.write(3, b"ready\n"); os.close(3)
signal.pause()' "$lock"
	LOCK_PID=$USER_PID
}

test_promise_take_busy_volume_names_holder() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	hold_lock
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take fails while the volume is locked: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertContains "names the holder" "$OVS_ERR" "promise-holder (pid $LOCK_PID)"
	assertEquals "no snapshot was taken" "1" "$(snap_ids)"
	stop_user "$LOCK_PID"
}

test_promise_take_wait() {
	local pid i rc waiting=0
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	hold_lock
	"$OVSNAP" take --wait "$SRC" >"$OVS_TMP/wait.out" 2>"$OVS_TMP/wait.err" &
	pid=$!
	# Bounded wait until the kernel shows its flock blocked on the lock.
	for i in $(seq 300); do
		grep -qE -- "-> FLOCK +ADVISORY +WRITE +$pid " /proc/locks && { waiting=1; break; }
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	assertEquals "take --wait blocks on the volume lock" 1 "$waiting"
	assertTrue "and is still running" "kill -0 $pid"
	assertEquals "no snapshot yet" "1" "$(snap_ids)"
	stop_user "$LOCK_PID"
	wait "$pid"
	rc=$?
	assertEquals "take --wait succeeds once the lock is free ($(cat "$OVS_TMP/wait.err"))" \
		0 "$rc"
	assertEquals "it prints the new id" "2" "$(cat "$OVS_TMP/wait.out")"
	# issue 14 item 9: a take that waits says whom for, and nothing else
	assertEquals "stderr: whom it waited for" \
		"ovsnap: take $SRC: waiting for promise-holder (pid $LOCK_PID) to finish" \
		"$(cat "$OVS_TMP/wait.err")"
	assertEquals "snapshot 2 is there" "1 2" "$(snap_ids)"
}

test_promise_take_upper_root_carries_src_metadata() {
	local up
	chmod 0751 "$SRC" && chown 12:34 "$SRC" && setfattr -n user.tag -v one "$SRC" &&
		touch -d '2001-02-03 04:05:06.123456789' "$SRC" || { fail "set SRC metadata"; return; }
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	up=$(snap_upper 1)
	assertEquals "upper root mode" "751" "$(stat -c %a "$up")"
	assertEquals "upper root owner" "12:34" "$(stat -c %u:%g "$up")"
	assertEquals "upper root mtime" "2001-02-03 04:05:06.123456789" "$(stat -c %y "$up" | cut -c1-29)"
	assertEquals "upper root xattr" "one" "$(getfattr --absolute-names --only-values -n user.tag "$up" 2>&1)"
	# Changed through the snapshot mount, then the next take.
	chmod 0705 "$SRC"
	assertEquals "chmod through the mount" 0 $?
	setfattr -n user.tag -v two "$SRC"
	assertEquals "setxattr through the mount" 0 $?
	touch -d '2002-03-04 05:06:07.5' "$SRC"
	assertEquals "utimes through the mount" 0 $?
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "second take: $(ovs_ran)" 0 "$OVS_RC"
	up=$(snap_upper 2)
	assertEquals "second upper root mode" "705" "$(stat -c %a "$up")"
	assertEquals "second upper root xattr" "two" "$(getfattr --absolute-names --only-values -n user.tag "$up" 2>&1)"
	assertEquals "second upper root mtime" "2002-03-04 05:06:07.500000000" \
		"$(stat -c %y "$up" | cut -c1-29)"
}

test_promise_take_name_rules() {
	local bad
	ovs_run "$OVSNAP" take --name good.name_1-x "$SRC"
	assertEquals "a valid name: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --name good.name_1-x "$SRC"
	assertEquals "a name used already is refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "says so" "$OVS_ERR" "exists already"
	for bad in 123 @x .x -- -x 'a/b' 'sp ace' 'é'; do
		ovs_run "$OVSNAP" take "--name=$bad" "$SRC"
		assertEquals "name '$bad' is a usage error: $(ovs_ran)" 2 "$OVS_RC"
		assertEquals "name '$bad': nothing on stdout" "" "$OVS_OUT"
		assertNotEquals "name '$bad': an error line" "" "$OVS_ERR"
	done
	assertEquals "only the valid take happened" "1" "$(snap_ids)"
}

test_promise_take_hold_survives_keep() {
	local i
	ovs_run "$OVSNAP" take --hold "$SRC"
	assertEquals "take --hold: $(ovs_ran)" 0 "$OVS_RC"
	for i in 2 3 4; do
		ovs_run "$OVSNAP" take --class timeline "$SRC"
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	ovs_run "$OVSNAP" drop --keep last=1 "$SRC"
	assertEquals "drop --keep last=1: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the held snapshot and the last one remain" "1 4" "$(snap_ids)"
}

test_promise_take_hold_drop_needs_force() {
	ovs_run "$OVSNAP" take --hold "$SRC"
	assertEquals "take --hold: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" drop "$SRC" 1
	assertEquals "drop of a held snapshot refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "says it is held" "$OVS_ERR" "held"
	assertContains "and how to drop it" "$OVS_ERR" "--force"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertEquals "still there" "1 2" "$(snap_ids)"
	ovs_run "$OVSNAP" drop --force "$SRC" 1
	assertEquals "drop --force of a held snapshot: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "dropped" "2" "$(snap_ids)"
}

test_promise_take_keep() {
	local i
	for i in 1 2 3; do
		ovs_run "$OVSNAP" take --class timeline "$SRC"
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	ovs_run "$OVSNAP" take --keep last=2 "$SRC"
	assertEquals "take --keep last=2: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints the new id" "4" "$OVS_OUT"
	assertEquals "the policy pruned after the take" "3 4" "$(snap_ids)"
	ovs_run "$OVSNAP" take --keep bogus=1 "$SRC"
	assertEquals "an invalid SPEC is a usage error: $(ovs_ran)" 2 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertEquals "refused before the take" "3 4" "$(snap_ids)"
}

test_promise_take_keep_keeps_the_new_snapshot() {
	ovs_run "$OVSNAP" take --hold "$SRC"
	assertEquals "take --hold: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --class timeline "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	# A policy that keeps nothing still keeps the new snapshot.
	ovs_run "$OVSNAP" take --keep last=0 "$SRC"
	assertEquals "take --keep last=0: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints the new id" "3" "$OVS_OUT"
	assertEquals "the held one and the new one remain" "1 3" "$(snap_ids)"
}

test_promise_take_json() {
	local check
	ovs_run "$OVSNAP" take --json --name first "$SRC"
	assertEquals "take --json: $(ovs_ran)" 0 "$OVS_RC"
	check=$(printf '%s' "$OVS_OUT" | python3 -c '
import json, re, sys
o = json.load(sys.stdin)
assert sorted(o) == ["created", "id", "name", "upper"], sorted(o)
assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", o["created"]), o["created"]
print(o["id"], o["name"], o["upper"])' 2>&1)
	assertEquals "one JSON object with id, name, created (UTC, ns), upper" \
		"1 first $(snap_upper 1)" "$check"
	ovs_run "$OVSNAP" take -J "$SRC"
	assertEquals "take -J: $(ovs_ran)" 0 "$OVS_RC"
	check=$(printf '%s' "$OVS_OUT" | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["id"], o["name"])' 2>&1)
	assertEquals "no name is null" "2 None" "$check"
}

test_promise_take_quiet() {
	local view=$OVS_TMP/view1
	ovs_run "$OVSNAP" take --class timeline "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --class timeline "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	mkdir -p "$view"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$view"
	assertEquals "mount a view of 1: $(ovs_ran)" 0 "$OVS_RC"
	# Without --quiet, --keep says which snapshot a view keeps.
	ovs_run "$OVSNAP" take --keep last=1 "$SRC"
	assertEquals "take --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints the id" "3" "$OVS_OUT"
	assertContains "a note on stderr" "$OVS_ERR" "a mounted view uses it"
	ovs_run "$OVSNAP" take --quiet --keep last=1 "$SRC"
	assertEquals "take --quiet --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "still prints the requested id" "4" "$OVS_OUT"
	assertEquals "nothing else" "" "$OVS_ERR"
	ovs_run "$OVSNAP" take -q "$SRC"
	assertEquals "take -q: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "-q prints the id" "5" "$OVS_OUT"
	ovs_run "$OVSNAP" umount "$view"
	assertEquals "umount the view: $(ovs_ran)" 0 "$OVS_RC"
}

test_promise_take_limit_499() {
	local st
	"$MKVOL" "$SRC" --snapshots 498
	assertEquals "ovs-mkvol: 498 snapshots" 0 $?
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "the 499th take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "prints 499" "499" "$OVS_OUT"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "the 500th take is refused: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "nothing on stdout" "" "$OVS_OUT"
	assertContains "says why" "$OVS_ERR" "499 snapshots"
	assertEquals "a one-line error" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertEquals "still 499 snapshots" 499 "$(ovs_snapshot_layers "$SRC" | wc -l)"
	st=$(ovs_ctl status)
	assertContains "the daemon keeps layer 499 ($st)" "$st" " layer=499 "
	assertContains "and its barrier is down ($st)" "$st" " barrier=0 "
	printf 'changed\n' >"$SRC/file"
	assertEquals "the live tree still takes changes" 0 $?
	assertEquals "preserved into 499" "original" "$(cat "$(snap_upper 499)/file")"
}

. "$SHUNIT2"
