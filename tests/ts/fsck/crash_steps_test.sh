#!/bin/bash
# SIGKILL at each step of a take, a merge and a drop (issues 3, 5 and 6),
# then fsck: `fsck -n` reports exactly what the interruption left (a dead
# snapshot mount, an extra layer directory, a pending intent), `fsck -p`
# repairs what it can, `ovsnap activate` serves the volume again, the
# interrupted command can be repeated, and every snapshot equals the
# manifest recorded at its take (the overlay oracle).
#
# The daemon dies by its test hook (OVSNAPD_TEST_HOOKS=1
# OVSNAPD_TEST_CRASH_AFTER=N: _exit after step N of a take, see
# cmd/daemon-loop.c); the CLI's merge and drop by the library's
# (OVSNAP_TEST_CRASH_AFTER=N, lib/merge.c).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs overlay fuse
[ -e /dev/fuse ] || ovs_skip "needs /dev/fuse"
[ -x "$OVS_WORKLOAD" ] || ovs_skip "ovs-workload not built (run make check)"

FSCK_OK=0 FSCK_CORRECTED=1 FSCK_UNCORRECTED=4
export OVSNAPD_TEST_HOOKS=1

ids() { ovs_snapshot_layers "$SRC" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'; }

# A volume with a random tree and three snapshots taken through the
# snapshot mount, manifests in $MF; left active.
make_volume() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	mkdir -p "$SRC" "$MF"
	ovs_run "$OVS_WORKLOAD" --seed 500 --ops 200 "$SRC"
	assertEquals "initial tree: $(ovs_ran)" 0 "$OVS_RC" || return 1
	"$OVS_MANIFEST" "$SRC" >"$MF/.pending"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "first take: $(ovs_ran)" 0 "$OVS_RC" || return 1
	mv "$MF/.pending" "$MF/$OVS_OUT.manifest"
	ovs_run "$OVS_WORKLOAD" --seed 501 --ops 300 --takes 2 \
		--take-cmd "'$OVSNAP' take '$SRC'" --manifest-dir "$MF" "$SRC"
	assertEquals "workload: $(ovs_ran | tail -5)" 0 "$OVS_RC" || return 1
	STORE=$(echo "$OVS_MNT"/.ovsnap/*)
}

dead_line() {
	echo "$SRC: the snapshot mount does not answer (ENOTCONN): its daemon died; fsck does not start daemons: run 'ovsnap activate $SRC'"
}

# Kill the daemon after step N of a take, for every N.  Before each take
# a few files change (preserved into the newest layer, one through a
# shared mapping); fsck must then see nothing but the dead mount (and at
# step 4 the unregistered layer).  (A mapping left dirty for the take to
# flush would make the manifest unstable: the file's mtime on disk is
# that of the writeback, not the one the kernel showed before it.)
test_sigkill_take_at_every_step() {
	local n next before after what f

	make_volume || return
	mkdir -p "$SRC/fixed" && for f in f1 f2 f3; do echo "$f" >"$SRC/fixed/$f"; done
	"$OVS_MANIFEST" "$SRC" >"$MF/.pending"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	mv "$MF/.pending" "$MF/$OVS_OUT.manifest"
	for n in 1 2 3 4 5 6 7; do
		what="take killed after step $n"
		echo "before take $n" >>"$SRC/fixed/f1"
		echo "before take $n" >"$SRC/fixed/f2"
		"$OVSNAP_TOOLS/tools/ovs-fsop" mmap-write "$SRC/fixed/f3" 0 "m$n" ||
			fail "$what: write through a shared mapping"
		before=$(ids)
		next=$(sed -n 's/^next-id //p' "$STORE/registry")
		"$OVS_MANIFEST" "$SRC" >"$MF/.pending"
		assertEquals "$what: arm the hook" "ok" "$(ovs_ctl "take-crash-after $n")"
		ovs_run "$OVSNAP" take "$SRC"
		assertNotEquals "$what: the take fails" 0 "$OVS_RC"
		assertContains "$what: the take says why" "$OVS_ERR" "hung up without answering"
		assertFalse "$what: the daemon is gone" "[ -n \"$(ovs__our_daemons)\" ]"
		after=$(ids)

		# What the interruption left, and the repair.
		if [ "$n" -eq 4 ]; then
			ovs_expect_fsck "$what" $FSCK_UNCORRECTED "$(dead_line)
layers/$next: layer directory not in the registry (left over by an interrupted take or drop): not repaired (fsck -p removes it)
$SRC: 2 errors, 0 repaired, 2 left" -n
			ovs_expect_fsck "$what" $((FSCK_CORRECTED | FSCK_UNCORRECTED)) "$(dead_line)
layers/$next: layer directory not in the registry (left over by an interrupted take or drop): removed
$SRC: 2 errors, 1 repaired, 1 left" -p
		else
			ovs_expect_fsck "$what" $FSCK_UNCORRECTED "$(dead_line)
$SRC: 1 error, 0 repaired, 1 left" -n
			ovs_expect_fsck "$what" $FSCK_UNCORRECTED "$(dead_line)
$SRC: 1 error, 0 repaired, 1 left" -p
		fi
		# From step 5 on the snapshot exists (empty: the tree as it
		# was at the take); before, nothing is registered.
		if [ "$n" -ge 5 ]; then
			assertEquals "$what: the snapshot was registered" "$before $next" "$after"
			mv "$MF/.pending" "$MF/$next.manifest"
		else
			assertEquals "$what: no snapshot registered" "$before" "$after"
		fi

		ovs_run "$OVSNAP" activate "$SRC"
		assertEquals "$what: activate: $(ovs_ran)" 0 "$OVS_RC" || return
		ovs_expect_fsck "$what, activated again" $FSCK_OK "$SRC: clean" -n
		"$OVS_MANIFEST" "$SRC" >"$MF/.pending"
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "$what: the take repeated: $(ovs_ran)" 0 "$OVS_RC" || return
		mv "$MF/.pending" "$MF/$OVS_OUT.manifest"
	done
	OVS_ORACLE_WHAT="takes killed at every step" ovs_oracle_check "$SRC" "$MF"
}

# crash_loop WHAT INTENT-LINE-RE CMD...: for every step n of CMD (an
# inactive volume, restored from a copy of the store each time), kill it
# after step n, then fsck -n must report the interrupted operation, fsck
# -p finish it, fsck -n be clean, and the survivors equal their
# manifests.  $GONE lists the snapshots CMD removes.
crash_loop() {
	local what=$1 intent=$2 n rc g
	shift 2

	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "$what: deactivate: $(ovs_ran)" 0 "$OVS_RC" || return
	rm -rf "$OVS_TMP/store.orig" "$OVS_TMP/gone"
	cp -a "$STORE" "$OVS_TMP/store.orig" || return
	mkdir -p "$OVS_TMP/gone"
	for ((n = 1; n < 400; n++)); do
		rm -rf "$STORE" && cp -a "$OVS_TMP/store.orig" "$STORE"
		OVSNAP_TEST_CRASH_AFTER=$n "$@" >/dev/null 2>"$OVS_TMP/crash.err"
		rc=$?
		[ "$rc" -eq 0 ] && break
		assertEquals "$what, step $n: killed by the hook: $(cat "$OVS_TMP/crash.err")" 9 "$rc" || break
		if [ -s "$STORE/intent" ]; then
			ovs_run "$OVSNAP" fsck -n "$SRC"
			assertEquals "$what, step $n: fsck -n exit: $(ovs_ran)" $FSCK_UNCORRECTED "$OVS_RC"
			assertContains "$what, step $n: fsck -n names the interrupted operation" \
				"$OVS_OUT" "intent: interrupted operation '$intent': not repaired (fsck -p finishes it)"
			ovs_run "$OVSNAP" fsck -p "$SRC"
			assertEquals "$what, step $n: fsck -p exit: $(ovs_ran)" $FSCK_CORRECTED "$OVS_RC"
		else
			# Killed after its last step (the intent cleared):
			# all done, nothing to report.
			ovs_expect_fsck "$what, step $n (all done)" $FSCK_OK "$SRC: clean" -n
		fi
		ovs_expect_fsck "$what, step $n, repaired" $FSCK_OK "$SRC: clean" -n
		assertEquals "$what, step $n: snapshots after the repair" "$SURVIVORS" "$(ids)"
		for g in $GONE; do mv "$MF/$g.manifest" "$OVS_TMP/gone/"; done
		OVS_ORACLE_WHAT="$what killed after step $n, fsck -p" ovs_oracle_check "$SRC" "$MF"
		rc=$?
		mv "$OVS_TMP"/gone/*.manifest "$MF/" 2>/dev/null
		[ "$rc" -eq 0 ] || break
	done
	echo "$what made $((n - 1)) steps, each interrupted once"
	assertTrue "$what: finished without the hook at some point" "[ $n -lt 400 ]"
	assertTrue "$what: it had several steps" "[ $n -gt 3 ]"
}

test_sigkill_merge_at_every_step_fsck() {
	make_volume || return
	SURVIVORS="1" GONE="2 3" crash_loop "merge 1..3" "merge 1 3" "$OVSNAP" merge "$SRC" 1 3
}

test_sigkill_drop_oldest_at_every_step_fsck() {
	make_volume || return
	SURVIVORS="2 3" GONE="1" crash_loop "drop of the oldest" "drop 1" "$OVSNAP" drop "$SRC" 1
}

# The daemon killed in the middle of merging the active layer away (drop
# of the newest while active): its mount is dead with the barrier up, fsck
# -p finishes the merge, activate serves again with the merged layer.
# Each daemon gets the library's crash hook in its environment from the
# `ovsnap activate` that starts it (after fsck -p has finished the
# previous merge: activate would otherwise run the recovery, and its
# steps, itself).  No deactivation in between: fsck would take the
# protected changes since then for unprotected ones.
test_sigkill_daemon_in_active_drop() {
	local n newest

	make_volume || return
	kill -9 $(ovs__our_daemons)
	ovs_run "$OVSNAP" fsck -p "$SRC"
	for n in 1 3 6 0; do
		if [ "$n" -gt 0 ]; then
			OVSNAP_TEST_CRASH_AFTER=$n ovs_run "$OVSNAP" activate "$SRC"
		else
			ovs_run "$OVSNAP" activate "$SRC"
		fi
		assertEquals "step $n: activate: $(ovs_ran)" 0 "$OVS_RC" || return
		ovs_expect_fsck "step $n, activated" $FSCK_OK "$SRC: clean" -n
		[ "$n" -gt 0 ] || break
		"$OVS_MANIFEST" "$SRC" >"$MF/.pending"
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "step $n: take: $(ovs_ran)" 0 "$OVS_RC" || return
		newest=$OVS_OUT
		mv "$MF/.pending" "$MF/$newest.manifest"
		ovs_run "$OVS_WORKLOAD" --seed $((700 + n)) --ops 150 "$SRC"
		assertEquals "step $n: changes: $(ovs_ran)" 0 "$OVS_RC" || return
		ovs_run "$OVSNAP" drop "$SRC" "$newest"
		assertNotEquals "step $n: the drop fails (the daemon died)" 0 "$OVS_RC"
		ovs_run "$OVSNAP" fsck -n "$SRC"
		assertEquals "step $n: fsck -n exit: $(ovs_ran)" $FSCK_UNCORRECTED "$OVS_RC"
		assertContains "step $n: fsck -n: the dead mount" "$OVS_OUT" "$(dead_line)"
		assertContains "step $n: fsck -n: the interrupted merge" "$OVS_OUT" \
			"interrupted operation 'merge"
		ovs_run "$OVSNAP" fsck -p "$SRC"
		assertEquals "step $n: fsck -p: $(ovs_ran)" $((FSCK_CORRECTED | FSCK_UNCORRECTED)) "$OVS_RC"
		assertFalse "step $n: the merge was finished" "[ -s '$STORE/intent' ]"
		assertFalse "step $n: $newest is gone" "ids | grep -qw $newest"
		rm -f "$MF/$newest.manifest"
	done
	OVS_ORACLE_WHAT="daemons killed in active drops" ovs_oracle_check "$SRC" "$MF"
}

. "$SHUNIT2"
