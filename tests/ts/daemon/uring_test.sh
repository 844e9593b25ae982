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
#
# ovsnap-viewd, which has no barrier to bypass, takes io_uring wherever
# the kernel offers it and says so in the view's log; --no-io-uring keeps
# the /dev/fuse loop.  Where the switch is N (CI) the log line is what is
# checked; with the switch on, the rings too.
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

offered() {
	grep -q '^#define HAVE_FUSE_URING 1' "$OVSNAP_TOOLS/../config.h" 2>/dev/null &&
		[ "$(cat "$ENABLE_URING" 2>/dev/null)" = Y ]
}

# What the start-up line must say on this build and kernel; WHEN_OFFERED:
# what the daemon says when the kernel offers io_uring.
expected_reason() {
	if ! grep -q '^#define HAVE_FUSE_URING 1' "$OVSNAP_TOOLS/../config.h" 2>/dev/null; then
		echo "off (built against libfuse < 3.18)"
	elif [ ! -e "$ENABLE_URING" ]; then
		echo "off (this kernel has no FUSE over io_uring"
	elif [ "$(cat "$ENABLE_URING")" = Y ]; then
		echo "$1"
	else
		echo "off (the kernel does not offer it: the admin's switch $ENABLE_URING is N)"
	fi
}

test_ovsnapd_refuses_io_uring_and_says_why() {
	local pid rings line
	line=$(grep -h 'FUSE over io_uring:' "$OVSNAP_RUN_DIR"/*.log)
	assertEquals "one start-up line about io_uring ($line)" 1 "$(grep -c . <<<"$line")"
	assertContains "the daemon says why io_uring is off" "$line" "$(expected_reason \
		"off (offered by the kernel; its ring threads would serve requests past the take barrier")"
	pid=$(ovs_ctl status | sed -n 's/.*pid=\([0-9]*\).*/\1/p')
	assertNotNull "daemon pid" "$pid"
	assertEquals "no io_uring ring thread in ovsnapd" 0 "$(rings "$pid")"
	assertEquals "requests are served" original "$(cat "$SRC/file")"
}

rings() { # PID: its libfuse io_uring ring threads
	grep -l '^fuse-ring-' /proc/"$1"/task/*/comm 2>/dev/null | wc -l
}

# view NAME [VIEWD-OPTION]: snapshot 1 at $OVS_TMP/NAME; $VLOG its log,
# $VPID its server
view() {
	local v=$OVS_TMP/$1 viewd=${OVSNAP_VIEWD:-$(dirname "$OVSNAP")/ovsnap-viewd} wrap
	wrap=$viewd
	if [ -n "${2:-}" ]; then
		wrap=$OVS_TMP/viewd-$1
		printf '#!/bin/sh\nexec %q %s "$@"\n' "$viewd" "$2" >"$wrap"
		chmod +x "$wrap"
	fi
	mkdir -p "$v"
	ovs_run env OVSNAP_VIEWD="$wrap" "$OVSNAP" mount "$SRC" 1 "$v"
	assertEquals "mount the view: $(ovs_ran) $(cat "$OVSNAP_RUN_DIR"/view-*"$1".log 2>&1)" \
		0 "$OVS_RC" || return 1
	VLOG=$(ls "$OVSNAP_RUN_DIR"/view-*"$1".log | head -1)
	VPID=$(cut -d' ' -f1 "${VLOG%.log}.pid")
	assertEquals "the view serves the snapshot" original "$(cat "$v/file")"
}

test_viewd_takes_io_uring_where_offered() {
	local line
	view v1 || return
	line=$(grep -h 'FUSE over io_uring:' "$VLOG")
	assertContains "the view says whether it uses io_uring" "$line" \
		"$(expected_reason "on (one ring thread per CPU")"
	if offered; then
		assertNotEquals "the view runs ring threads" 0 "$(rings "$VPID")"
	else
		assertEquals "no ring thread where the kernel does not offer them" 0 "$(rings "$VPID")"
	fi
	view v2 --no-io-uring || return
	assertContains "--no-io-uring: said" "$(grep -h 'FUSE over io_uring:' "$VLOG")" \
		"$(expected_reason "off (--no-io-uring)")"
	assertEquals "--no-io-uring: no ring thread" 0 "$(rings "$VPID")"
}

. "$SHUNIT2"
