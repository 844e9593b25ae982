#!/bin/bash
# ovsnap diff prints nothing until the diff has succeeded: the changes
# wait in a spool, an unlinked file in /tmp, or a memory file where /tmp
# is read-only or fills up (then the diff runs again into memory); the
# output is the same wherever they wait.  A delegated diff (root's work
# for a user) caps its spool and fails with one line beyond the cap.
# The volume lock is let go before the changes are written out.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd unshare

setUp() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
	# about 150 KiB of output: more than the small /tmp below holds
	mkdir "$SRC/d" && (cd "$SRC/d" && seq -f "%g-$(printf 'n%.0s' {1..60})" 2000 |
		xargs touch) || fail "files"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	(cd "$SRC/d" && seq -f "%g-$(printf 'n%.0s' {1..60})" 2000 | xargs rm) || fail "rm"
	mkdir "$SRC/e" && echo e >"$SRC/e/f"
	ovs_run "$OVSNAP" diff "$SRC" 1
	assertEquals "diff with /tmp: $(ovs_ran | head -3)" 0 "$OVS_RC"
	WANT=$OVS_OUT
	assertEquals "diff with /tmp: lines" 2002 "$(wc -l <<<"$WANT")"
}

tearDown() {
	ovs_teardown
}

# in_tmpfs OPTIONS ARGS...: ovsnap ARGS in a mount namespace of its own
# whose /tmp is a tmpfs mounted with OPTIONS
in_tmpfs() {
	local opts=$1
	shift
	ovs_in_tmpfs "$opts" "$OVSNAP" "$@"
}

test_read_only_tmp() {
	in_tmpfs ro diff "$SRC" 1
	assertEquals "exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "stderr" "" "$OVS_ERR"
	assertTrue "the same changes" '[ "$WANT" = "$OVS_OUT" ]'
	in_tmpfs ro diff --json "$SRC" 1
	assertEquals "json: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertContains "json: the changes" "$OVS_OUT" '"path": "e/f"'
}

test_tmp_fills_up() {
	in_tmpfs size=32k diff "$SRC" 1
	assertEquals "exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "stderr" "" "$OVS_ERR"
	assertTrue "the same changes" '[ "$WANT" = "$OVS_OUT" ]'
	in_tmpfs size=32k diff --json "$SRC" 1
	assertEquals "json: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertEquals "json: one object" 1 "$(wc -l <<<"$OVS_OUT")"
}

# Once the diff is complete the lock is let go: a reader that stalls
# (a pager) with more than a pipe's worth of changes holds up no take.
test_lock_let_go_before_printing() {
	local pid i

	mkfifo "$OVS_TMP/fifo" || fail "mkfifo"
	"$OVSNAP" diff "$SRC" 1 >"$OVS_TMP/fifo" 2>"$OVS_TMP/diff.err" &
	pid=$!
	exec 9<"$OVS_TMP/fifo"
	# (anon_)pipe_write: blocked on the full pipe
	for ((i = 0; i < 100; i++)); do
		[[ "$(cat /proc/$pid/wchan 2>/dev/null)" = *pipe_write ]] && break
		sleep 0.1
	done
	assertTrue "the diff waits for its reader: $(cat /proc/$pid/wchan)" \
		"[[ \"\$(cat /proc/$pid/wchan)\" = *pipe_write ]]"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take meanwhile: $(ovs_ran)" 2 "$OVS_OUT"
	timeout 20 cat <&9 >"$OVS_TMP/got" &
	wait "$pid"
	local rc=$?
	assertEquals "diff: exit: $(cat "$OVS_TMP/diff.err")" 0 "$rc"
	exec 9<&-
	wait
	assertEquals "diff: the changes" "$WANT" "$(cat "$OVS_TMP/got")"
}

# The cap (256 MiB) made small by a test hook; the diff run as the
# delegate runs it (OVSNAP_DELEGATED_UID: root's work for that user).
# As ovsnap-delegate runs the CLI: the caller's ids, and the identity of
# the SRC it checked.
delegated() {
	ovs_run env OVSNAP_DELEGATED_UID=65534 OVSNAP_DELEGATED_GROUPS=65534 \
		OVSNAP_DELEGATED_SRC_ID="$(stat -c '%d:%i' "$SRC")" "$@"
}

test_delegated_spool_cap() {
	delegated "$OVSNAP" diff "$SRC" 1
	assertEquals "uncapped: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertTrue "uncapped: the same changes" '[ "$WANT" = "$OVS_OUT" ]'
	delegated OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_DIFF_SPOOL_MAX=200000 "$OVSNAP" diff "$SRC" 1
	assertEquals "under the cap: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertTrue "under the cap: the same changes" '[ "$WANT" = "$OVS_OUT" ]'
	delegated OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_DIFF_SPOOL_MAX=50000 "$OVSNAP" diff "$SRC" 1
	assertEquals "over the cap: exit: $(ovs_ran | head -3)" 1 "$OVS_RC"
	assertEquals "over the cap: nothing on stdout" "" "$OVS_OUT"
	assertEquals "over the cap: one line" 1 "$(wc -l <<<"$OVS_ERR")"
	assertContains "over the cap: says so" "$OVS_ERR" \
		"diff output larger than 1 MiB; ask an administrator to run it"
	# a full /tmp is not the cap
	delegated OVSNAPD_TEST_HOOKS=1 OVSNAP_TEST_DIFF_SPOOL_MAX=200000 unshare -m -- \
		bash -c "$OVS_TMPFS_RUN" _ size=32k "$OVSNAP" diff "$SRC" 1
	assertEquals "full /tmp, under the cap: exit: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertTrue "full /tmp, under the cap: the same" '[ "$WANT" = "$OVS_OUT" ]'
}

. "$SHUNIT2"
