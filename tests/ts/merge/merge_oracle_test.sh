#!/bin/bash
# The merge oracle: for seeded random pairs of overlay layers A (older) and
# B (newer) over a random lower tree C, the kernel overlay mount of A':C
# after merging B into A must equal that of A:B:C.  Each case also checks
# the userspace resolver against the kernel mount of A:B:C.
#
# OVS_MERGE_SEEDS overrides the number of cases (default 200);
# OVS_MERGE_SEED_BASE shifts the seeds for an exploratory run.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs overlay

MKLAYERS=$(ovs__tool ovs-mklayers)
[ -x "$MKLAYERS" ] || MKLAYERS=$OVSNAP_TOOLS/ovs-mklayers
[ -x "$MKLAYERS" ] || ovs_skip "ovs-mklayers not built (run make check)"
[ -x "$OVS_MANIFEST" ] || ovs_skip "ovs-manifest not built (run make check)"

SEEDS=${OVS_MERGE_SEEDS:-200}
BASE=${OVS_MERGE_SEED_BASE:-0}

# One case: generate, view, merge, view again.  Prints what went wrong.
merge_case() {
	local seed=$1 d=$OVS_MNT/case.$1 view=$OVS_TMP/view

	mkdir -p "$d/C" "$d/A" "$d/B" || return 1
	"$MKLAYERS" gen "$seed" "$d/C" "$d/A" "$d/B" || { echo "gen failed"; return 1; }
	ovs_overlay_mount "$view" "$d/A:$d/B:$d/C" || { echo "mount A:B:C failed"; return 1; }
	"$OVS_MANIFEST" "$view" >"$d/before" 2>&1 || { echo "manifest A:B:C: $(head -3 "$d/before")"; umount "$view"; return 1; }
	if ! out=$("$MKLAYERS" resolve-check "$view" "$d/A" "$d/B" "$d/C" 2>&1); then
		umount "$view"
		echo "resolver differs from the kernel:"
		printf '%s\n' "$out" | head -10
		return 1
	fi
	umount "$view" || return 1
	out=$("$MKLAYERS" merge "$d/A" "$d/B" 2>&1) || { echo "merge failed: $out"; return 1; }
	ovs_overlay_mount "$view" "$d/A:$d/C" || { echo "mount A':C failed"; return 1; }
	"$OVS_MANIFEST" "$view" >"$d/after" 2>&1 || { echo "manifest A':C: $(head -3 "$d/after")"; umount "$view"; return 1; }
	umount "$view" || return 1
	if ! out=$(diff -u "$d/before" "$d/after"); then
		echo "merged view differs:"
		printf '%s\n' "$out" | head -30
		return 1
	fi
	# A second run finds nothing left to do and changes nothing.
	out=$("$MKLAYERS" merge "$d/A" "$d/B" 2>&1) || { echo "re-run of merge failed: $out"; return 1; }
	case $out in
	*"moved 0 "*"opaqued 0") ;;
	*) echo "re-run of merge changed something: $out"; return 1 ;;
	esac
	rm -rf "$d"
	return 0
}

test_merged_layer_shows_what_both_showed() {
	local seed out bad=0

	ovs_mkfs xfs || return
	for ((seed = BASE + 1; seed <= BASE + SEEDS; seed++)); do
		if ! out=$(merge_case "$seed"); then
			fail "seed $seed: $out"
			bad=$((bad + 1))
			[ "$bad" -ge 5 ] && break
		fi
	done
	assertEquals "cases that failed (of $SEEDS)" 0 "$bad"
}

# A redirect (never written by ovsnap) is refused before anything changes.
test_redirect_is_refused_untouched() {
	local d

	ovs_mkfs xfs || return
	d=$OVS_MNT/redir
	mkdir -p "$d/A/x" "$d/B/x/y" "$d/B/z"
	setfattr -n trusted.overlay.redirect -v /q "$d/B/x"
	ovs_run "$MKLAYERS" merge "$d/A" "$d/B"
	assertNotEquals "merge exit" 0 "$OVS_RC"
	assertContains "merge error" "$OVS_ERR" "redirect"
	assertTrue "B untouched" "[ -d '$d/B/z' ] && [ ! -e '$d/A/z' ]"
}

. "$SHUNIT2"
