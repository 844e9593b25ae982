#!/bin/bash
# ovsnap drop and ovsnap merge on a volume with snapshots taken through the
# snapshot mount: drop at every position (oldest, middle, newest of an
# inactive volume, newest of an active one while the live tree changes),
# merges of a run (also into the active layer), and SIGKILL
# at every step of a drop followed by recovery; each time every survivor,
# seen through a stock overlay of its layers, equals the manifest recorded
# at its take.  Then retention (--keep) with chosen creation times.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs overlay fuse
[ -e /dev/fuse ] || ovs_skip "needs /dev/fuse"
[ -x "$OVS_WORKLOAD" ] || ovs_skip "ovs-workload not built (run make check)"

MKVOL=$OVSNAP_TOOLS/ovs-mkvol
[ -x "$MKVOL" ] || MKVOL=$(ovs__tool ovs-mkvol)

# make_volume SEED OPS TAKES: SRC with a random tree, a first take, then a
# workload with TAKES more takes; manifests in $MF; left inactive.
make_volume() {
	local seed=$1 ops=$2 takes=$3

	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	MF=$OVS_TMP/manifests
	rm -rf "$MF"
	mkdir -p "$SRC" "$MF"
	ovs_run "$OVS_WORKLOAD" --seed "$((seed + 1000))" --ops 200 "$SRC"
	assertEquals "initial tree: $(ovs_ran)" 0 "$OVS_RC" || return 1
	ovs_take_with_manifest "$SRC" "$MF" "first take" || return 1
	ovs_run "$OVS_WORKLOAD" --seed "$seed" --ops "$ops" --takes "$takes" \
		--take-cmd "'$OVSNAP' take '$SRC'" --manifest-dir "$MF" "$SRC"
	assertEquals "workload: $(ovs_ran | tail -5)" 0 "$OVS_RC" || return 1
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC" || return 1
}

ids() { ovs_snapshot_layers "$SRC" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//'; }

# drop_and_check WHAT ID: drop ID, forget its manifest, check the rest.
drop_and_check() {
	ovs_run "$OVSNAP" drop "$SRC" "$2"
	assertEquals "$1: drop $2: $(ovs_ran)" 0 "$OVS_RC" || return 1
	rm -f "$MF/$2.manifest"
	OVS_ORACLE_WHAT="after dropping $2 ($1)" ovs_oracle_check "$SRC" "$MF"
}

test_drop_at_every_position() {
	make_volume 11 800 5 || return
	assertEquals "snapshots" "1 2 3 4 5 6" "$(ids)"
	OVS_ORACLE_WHAT="before any drop" ovs_oracle_check "$SRC" "$MF"
	drop_and_check "a middle one" 3
	drop_and_check "the oldest" 1
	drop_and_check "the newest, inactive" 6
	assertEquals "snapshots left" "2 4 5" "$(ids)"
	ovs_run "$OVSNAP" list --json "$SRC"
	assertEquals "list --json after the drops: $(ovs_ran)" 0 "$OVS_RC"
	printf '%s\n' "$OVS_OUT" | grep -q '"id": 5,[^}]*"state": "active"'
	rc=$?
	assertEquals "the new newest (5) is the active one: $OVS_OUT" 0 "$rc"
	ovs_run "$OVSNAP" merge "$SRC" 2 5
	assertEquals "merge 2 5: $(ovs_ran)" 0 "$OVS_RC"
	rm -f "$MF/4.manifest" "$MF/5.manifest"
	assertEquals "snapshots left after merge 2..5" "2" "$(ids)"
	OVS_ORACLE_WHAT="after merging 2..5" ovs_oracle_check "$SRC" "$MF"
	# Activation and a take after all that work on the merged layer.
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate after the drops: $(ovs_ran)" 0 "$OVS_RC"
	ovs_take_with_manifest "$SRC" "$MF" "take after the drops"
	OVS_ORACLE_WHAT="after a new take" ovs_oracle_check "$SRC" "$MF"
}

# more_changes SEED OPS TAKES: the workload through the live mount, with
# takes recorded in $MF.
more_changes() {
	ovs_run "$OVS_WORKLOAD" --seed "$1" --ops "$2" --takes "$3" \
		--take-cmd "'$OVSNAP' take '$SRC'" --manifest-dir "$MF" "$SRC"
	assertEquals "workload $1: $(ovs_ran | tail -5)" 0 "$OVS_RC"
}

# while_changing SEED CMD...: run CMD while workloads (no takes) keep
# changing the live tree from before it starts until after it ends; CMD
# and every workload must succeed.  "Before" and "after" are counted, not
# slept: a whole workload has finished before CMD starts and another one
# after CMD has ended.
bg_count() { local k=0; read -r k 2>/dev/null <"$OVS_TMP/bg.count"; echo "${k:-0}"; }
while_changing() {
	local seed=$1 pid wrc cmd_rc cmd_out cmd_err after
	shift
	rm -f "$OVS_TMP/bg.stop" "$OVS_TMP/bg.fail" "$OVS_TMP/bg.count"
	(
		k=0
		while [ ! -e "$OVS_TMP/bg.stop" ]; do
			"$OVS_WORKLOAD" --seed "$((seed * 100 + k))" --ops 300 "$SRC" \
				>"$OVS_TMP/bg.out" 2>&1 || { cp "$OVS_TMP/bg.out" "$OVS_TMP/bg.fail"; exit 1; }
			k=$((k + 1))
			echo "$k" >"$OVS_TMP/bg.count"
		done
	) &
	pid=$!
	ovs_wait_until 120 '[ "$(bg_count)" -ge 1 ] || [ -e "$OVS_TMP/bg.fail" ]'
	assertTrue "a workload finished before the command" "[ $(bg_count) -ge 1 ]"
	ovs_run "$@"
	cmd_rc=$OVS_RC cmd_out=$OVS_OUT cmd_err=$OVS_ERR
	after=$(bg_count)
	ovs_wait_until 120 '[ "$(bg_count)" -gt $after ] || [ -e "$OVS_TMP/bg.fail" ]'
	touch "$OVS_TMP/bg.stop"
	wait "$pid"
	wrc=$?
	assertEquals "the workloads running meanwhile: $(tail -5 "$OVS_TMP/bg.fail" 2>/dev/null)" 0 "$wrc"
	assertTrue "a workload running when the command ended finished (at the end $after, now $(bg_count))" \
		"[ $(bg_count) -gt $after ]"
	OVS_RC=$cmd_rc OVS_OUT=$cmd_out OVS_ERR=$cmd_err
}

active_layer() {
	"$OVSNAP" list --json "$SRC" | grep -oE '"id": [0-9]+,[^}]*"state": "active"' |
		sed -E 's/"id": ([0-9]+),.*/\1/'
}

# Issue 5: dropping the newest while the volume is active merges it into
# the one before under the daemon's barrier; the live tree stays online,
# a daemon-served view of an older snapshot keeps working, and changes
# after the drop are preserved into the new newest.
test_drop_newest_while_active() {
	make_volume 12 300 2 || return
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC" || return
	more_changes 40 300 2 || return
	assertEquals "snapshots" "1 2 3 4 5" "$(ids)"
	mkdir -p "$OVS_TMP/view1"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/view1"
	assertEquals "mount a view of 1: $(ovs_ran)" 0 "$OVS_RC" || return
	while_changing 41 "$OVSNAP" drop "$SRC" 5
	assertEquals "drop of the active snapshot: $(ovs_ran)" 0 "$OVS_RC" || return
	rm -f "$MF/5.manifest"
	assertEquals "snapshots after the drop" "1 2 3 4" "$(ids)"
	assertEquals "4 is the active one now" "4" "$(active_layer)"
	findmnt -rn -M "$SRC" -t fuse.ovsnap >/dev/null
	assertTrue "the snapshot mount stayed" $?
	"$OVS_MANIFEST" "$OVS_TMP/view1" >"$OVS_TMP/view1.manifest"
	diff -u "$MF/1.manifest" "$OVS_TMP/view1.manifest" >"$OVS_TMP/view1.diff"
	rc=$?
	assertEquals "the view of 1, mounted through the drop, still shows 1: $(head -20 "$OVS_TMP/view1.diff")" 0 "$rc"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view1"
	assertEquals "umount the view: $(ovs_ran)" 0 "$OVS_RC"
	# Changes after the drop are preserved into 4's layer.
	more_changes 42 400 1 || return
	OVS_ORACLE_WHAT="after dropping the active 5" ovs_oracle_check "$SRC" "$MF"
}

test_merge_into_newest_while_active() {
	make_volume 15 300 3 || return
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC" || return
	assertEquals "snapshots" "1 2 3 4" "$(ids)"
	while_changing 43 "$OVSNAP" merge "$SRC" 2 4
	assertEquals "merge 2..4 (the active one): $(ovs_ran)" 0 "$OVS_RC" || return
	rm -f "$MF/3.manifest" "$MF/4.manifest"
	assertEquals "snapshots after the merge" "1 2" "$(ids)"
	assertEquals "2 is the active one now" "2" "$(active_layer)"
	more_changes 44 400 1 || return
	OVS_ORACLE_WHAT="after merging 2..4 while active" ovs_oracle_check "$SRC" "$MF"
}

# What still refuses: a view of the active snapshot; and the daemon's
# barrier is down again after the refusal.  The only snapshot may go: the
# daemon then preserves nothing until the next take.
test_active_newest_refusals_and_the_only_one() {
	make_volume 16 200 1 || return
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC" || return
	mkdir -p "$OVS_TMP/view2"
	ovs_run "$OVSNAP" mount "$SRC" 2 "$OVS_TMP/view2"
	assertEquals "mount a view of 2: $(ovs_ran)" 0 "$OVS_RC" || return
	ovs_run "$OVSNAP" drop "$SRC" 2
	assertEquals "drop of a mounted active snapshot: exit" 1 "$OVS_RC"
	assertContains "the message names the view" "$OVS_ERR" "snapshot 2 is mounted at $OVS_TMP/view2"
	ovs_run timeout 10 touch "$SRC/after-refusal"
	assertEquals "the live tree is writable after the refusal" 0 "$OVS_RC"
	ovs_run "$OVSNAP" umount "$OVS_TMP/view2"
	# Frozen layers can go while the daemon runs; then the only one.
	drop_and_check "a frozen one, volume active" 1
	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate again: $(ovs_ran)" 0 "$OVS_RC" || return
	ovs_run "$OVSNAP" drop "$SRC" 2
	assertEquals "drop of the only snapshot while active: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "no snapshot left" "" "$(ids)"
	findmnt -rn -M "$SRC" -t fuse.ovsnap >/dev/null
	assertTrue "the snapshot mount stayed" $?
	rm -f "$MF"/*.manifest
	more_changes 45 200 2 || return
	OVS_ORACLE_WHAT="after dropping the only snapshot while active" ovs_oracle_check "$SRC" "$MF"
}

test_usage_errors() {
	make_volume 13 100 1 || return
	ovs_run "$OVSNAP" drop "$SRC"
	assertEquals "drop without SNAP or --keep" 2 "$OVS_RC"
	ovs_run "$OVSNAP" drop --keep daily=x "$SRC"
	assertEquals "bad SPEC: exit" 2 "$OVS_RC"
	assertContains "bad SPEC: message" "$OVS_ERR" "daily=x"
	ovs_run "$OVSNAP" drop "$SRC" 99
	assertEquals "unknown snapshot: exit" 1 "$OVS_RC"
	ovs_run "$OVSNAP" merge "$SRC" 2 1
	assertEquals "merge B older than A: exit" 2 "$OVS_RC"
	ovs_run "$OVSNAP" merge "$SRC" 1 1
	assertEquals "merge A A: exit" 2 "$OVS_RC"
	assertEquals "nothing dropped" "1 2" "$(ids)"
}

# SIGKILL (the library's test hook) after each step of a middle drop,
# then the next command finishes it; the survivors equal their manifests.
test_crash_at_every_step() {
	local store n rc

	make_volume 14 150 3 || return
	store=$("$OVSNAP" list --json "$SRC" | sed -E 's/.*"store": "([^"]*)".*/\1/; s/\\\\/\\/g')
	cp -a "$store" "$OVS_TMP/store.orig" || return
	for ((n = 1; n < 400; n++)); do
		rm -rf "$store" && cp -a "$OVS_TMP/store.orig" "$store"
		OVSNAP_TEST_CRASH_AFTER=$n "$OVSNAP" drop "$SRC" 3 >/dev/null 2>&1
		rc=$?
		[ "$rc" -eq 0 ] && break
		assertEquals "step $n: killed by the hook" 9 "$rc" || break
		ovs_run "$OVSNAP" drop --keep last=100 "$SRC"
		assertEquals "step $n: the next command recovers: $(ovs_ran)" 0 "$OVS_RC" || break
		assertEquals "step $n: snapshots after recovery" "1 2 4" "$(ids)"
		mv "$MF/3.manifest" "$MF/3.saved"
		OVS_ORACLE_WHAT="killed after step $n, recovered" ovs_oracle_check "$SRC" "$MF" ||
			{ mv "$MF/3.saved" "$MF/3.manifest"; break; }
		mv "$MF/3.saved" "$MF/3.manifest"
	done
	echo "a drop of snapshot 3 made $((n - 1)) steps, each interrupted once"
	assertTrue "the drop finished without the hook at some point" "[ $n -lt 400 ]"
	assertTrue "it had several steps" "[ $n -gt 3 ]"
}

# Retention on a volume made by ovs-mkvol with chosen creation times
# (OVSNAP_TEST_NOW): --dry-run and --explain change nothing, then the
# policy drops exactly what it said.
test_keep_policy_dry_run_explain() {
	local t

	ovs_mkfs xfs || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
	# 1: Dec 31 22:00, 2: Dec 31 23:30, 3: Jan 1 00:10, 4: Jan 1 09:00,
	# 5: Jan 2 08:00 (UTC)
	for t in 1767218400 1767223800 1767226200 1767258000 1767340800; do
		OVSNAP_TEST_NOW=$t "$MKVOL" "$SRC" --snapshots 1 || { fail "ovs-mkvol"; return; }
	done
	assertEquals "snapshots" "1 2 3 4 5" "$(ids)"
	ovs_run "$OVSNAP" drop --keep daily=2 --class manual --dry-run "$SRC"
	assertEquals "dry run: exit" 0 "$OVS_RC"
	assertEquals "dry run: what it would drop" "would drop 1
would drop 2
would drop 3" "$OVS_OUT"
	assertEquals "dry run: nothing dropped" "1 2 3 4 5" "$(ids)"
	ovs_run "$OVSNAP" drop --keep daily=2,yearly=2 --class manual --explain --dry-run "$SRC"
	assertEquals "explain: exit" 0 "$OVS_RC"
	assertEquals "explain: every snapshot, its fate and rule" \
"1      -                    2025-12-31T22:00:00.000000000Z drop
2      -                    2025-12-31T23:30:00.000000000Z keep yearly
3      -                    2026-01-01T00:10:00.000000000Z drop
4      -                    2026-01-01T09:00:00.000000000Z keep daily
5      -                    2026-01-02T08:00:00.000000000Z keep daily,yearly,newest" "$OVS_OUT"
	assertEquals "explain --dry-run: nothing dropped" "1 2 3 4 5" "$(ids)"
	ovs_run "$OVSNAP" drop --keep daily=2,yearly=2 --class manual "$SRC"
	assertEquals "drop --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "kept by daily=2,yearly=2" "2 4 5" "$(ids)"
	ovs_run "$OVSNAP" drop --keep last=1 "$SRC" 4
	assertEquals "--keep with SNAP arguments" 2 "$OVS_RC"
}

. "$SHUNIT2"
