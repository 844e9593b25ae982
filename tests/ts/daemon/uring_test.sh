#!/bin/bash
# FUSE over io_uring (issue 12 item 3).  ovsnapd never serves requests
# through libfuse's ring threads: they would call the operations directly,
# past the take barrier of its own request loop (DESIGN.md rule 13).  It
# says at start-up why io_uring is off: the build (libfuse < 3.18), the
# kernel, the admin's switch /sys/module/fuse/parameters/enable_uring
# (which nothing here changes), or its own refusal when the kernel offers
# it.  The daemon runs with libfuse's FUSE_URING_ENABLE=1 in its
# environment, which makes libfuse 3.18 start the rings whenever the
# kernel offers them and the daemon does not refuse.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

ENABLE_URING=/sys/module/fuse/parameters/enable_uring
export FUSE_URING_ENABLE=1

setUp() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
	printf 'original\n' >"$SRC/file"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take (stderr: $OVS_ERR)" 0 "$OVS_RC"
}

tearDown() {
	ovs_teardown
}

# What the start-up line must say on this build and kernel.
expected_reason() {
	if ! grep -q '^#define HAVE_FUSE_URING 1' "$OVSNAP_TOOLS/../config.h" 2>/dev/null; then
		echo "off (built against libfuse < 3.18)"
	elif [ ! -e "$ENABLE_URING" ]; then
		echo "off (this kernel has no FUSE over io_uring"
	elif [ "$(cat "$ENABLE_URING")" = Y ]; then
		echo "off (offered by the kernel; its ring threads would serve requests past the take barrier"
	else
		echo "off (the kernel does not offer it: the admin's switch $ENABLE_URING is N)"
	fi
}

test_ovsnapd_refuses_io_uring_and_says_why() {
	local pid rings line
	line=$(grep -h 'FUSE over io_uring:' "$OVSNAP_RUN_DIR"/*.log)
	assertEquals "one start-up line about io_uring ($line)" 1 "$(grep -c . <<<"$line")"
	assertContains "the daemon says why io_uring is off" "$line" "$(expected_reason)"
	pid=$(ovs_ctl status | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
	assertNotNull "daemon pid" "$pid"
	rings=$(grep -l '^fuse-ring-' /proc/"$pid"/task/*/comm 2>/dev/null | wc -l)
	assertEquals "no io_uring ring thread in ovsnapd" 0 "$rings"
	assertEquals "requests are served" original "$(cat "$SRC/file")"
}

. "$SHUNIT2"
