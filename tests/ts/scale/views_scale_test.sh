#!/bin/bash
# Views at scale (issue 13 item 1): the views daemon holds no descriptor
# per cached inode, so a walk of a tree far larger than its open-file
# limit works, and the descriptors it holds stay few whatever the walk
# has cached.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd prlimit python3

VIEW=$OVS_TMP/view
NFILES=50000
# What the views daemon may hold whatever it caches: the layers, SRC, the
# store, the FUSE device, the log, and a few per request in flight.
FD_BOUND=64

# The ovsnap-viewd processes of this script's views.
viewd_pids() {
	local f

	for f in "$OVSNAP_RUN_DIR"/view-*.pid; do
		[ -f "$f" ] && cut -d' ' -f1 "$f"
	done
}

# make_tree DIR N: N files in 100-file folders, each holding its own path.
make_tree() {
	python3 - "$1" "$2" <<'PY'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = "d%03d" % (i // 100)
    if i % 100 == 0:
        os.makedirs(os.path.join(top, d), exist_ok=True)
    rel = "%s/f%05d" % (d, i)
    with open(os.path.join(top, rel), "w") as f:
        f.write(rel + "\n")
PY
}

test_view_walk_of_50k_files_at_an_fd_limit_of_1024() {
	local pid sampler max bad=0 i rel rc

	ovs_mkfs xfs 2G || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC" "$VIEW"
	make_tree "$SRC" "$NFILES" || fail "making the tree"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	# a few changes through the live path: the view must show the old
	for i in 7 1234 49999; do
		rel=$(printf 'd%03d/f%05d' $((i / 100)) "$i")
		echo changed >"$SRC/$rel" || fail "change of $rel"
	done
	rm "$SRC/d100/f10001" || fail "rm through the live path"
	ovs_run "$OVSNAP" mount "$SRC" 1 "$VIEW"
	assertEquals "mount of the view: $(ovs_ran)" 0 "$OVS_RC" || return
	pid=$(viewd_pids | head -1)
	assertNotNull "the views daemon's pid" "$pid" || return
	prlimit --pid "$pid" --nofile=1024:1024 || fail "prlimit"

	# sample the daemon's descriptors while the walk runs
	(
		while kill -0 "$pid" 2>/dev/null; do
			ls "/proc/$pid/fd" 2>/dev/null | wc -l
			sleep 0.05
		done
	) >"$OVS_TMP/fds" &
	sampler=$!
	find "$VIEW" -type f -printf '%s %P\n' >"$OVS_TMP/walk" 2>"$OVS_TMP/walk.err"; rc=$?
	assertEquals "the walk of the view: $(head -3 "$OVS_TMP/walk.err")" 0 "$rc"
	# The kernel forgets the view's dentries and inodes (FUSE forgets)
	# while it still holds their children: the daemon's nodes must live
	# on for the children and be found again by a second walk.
	sync
	echo 2 >/proc/sys/vm/drop_caches || fail "drop_caches"
	find "$VIEW" -type f -printf '%s %P\n' >"$OVS_TMP/walk2" 2>"$OVS_TMP/walk2.err"; rc=$?
	assertEquals "the walk after drop_caches: $(head -3 "$OVS_TMP/walk2.err")" 0 "$rc"
	assertEquals "the second walk sees what the first saw" "" \
		"$(diff <(sort "$OVS_TMP/walk") <(sort "$OVS_TMP/walk2") | head -3)"
	for ((i = 0; i < NFILES; i += 97)); do
		rel=$(printf 'd%03d/f%05d' $((i / 100)) "$i")
		[ "$(cat "$VIEW/$rel" 2>&1)" = "$rel" ] || {
			bad=$((bad + 1))
			echo "$rel: $(cat "$VIEW/$rel" 2>&1)"
		}
	done >"$OVS_TMP/reads"
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null

	assertEquals "every file seen, stat'ed without error" "$NFILES" \
		"$(wc -l <"$OVS_TMP/walk")"
	assertEquals "sizes as at the take" "" \
		"$(awk '$1 != 12 { print; exit }' "$OVS_TMP/walk")"
	assertEquals "a sample read back as at the take: $(head -3 "$OVS_TMP/reads")" 0 "$bad"
	assertEquals "a changed file shows its old content" d000/f00007 \
		"$(cat "$VIEW/d000/f00007")"
	assertEquals "and a removed one is still there" d100/f10001 \
		"$(cat "$VIEW/d100/f10001")"
	assertEquals "the live path has the change" changed "$(cat "$SRC/d000/f00007")"
	max=$(sort -n "$OVS_TMP/fds" | tail -1)
	echo "most fds the views daemon held during the walk: $max; its RSS: $(awk '/VmRSS/ { print $2, $3 }' "/proc/$pid/status")"
	assertTrue "fds sampled during the walk ($(wc -l <"$OVS_TMP/fds") samples)" \
		"[ -s '$OVS_TMP/fds' ]"
	assertTrue "the daemon held at most $FD_BOUND fds (most seen: $max)" \
		"[ '${max:-9999}' -le $FD_BOUND ]"
	assertTrue "the views daemon is still running" "kill -0 $pid"
	ovs_run "$OVSNAP" umount "$VIEW"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
