#!/bin/bash
# Listings through the live path (issue 13 item 1): every chunk of a
# listing comes with its entries' attributes (READDIRPLUS, not the
# kernel's "auto" choice), so a walk that reads a whole directory before
# it stats costs no LOOKUP per entry.
# The requests are counted in the kernel (the fuse:fuse_request_send
# tracepoint, Linux 6.16+, in a tracefs instance of the test's own).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

TRACEFS=/sys/kernel/tracing
INST=

setUp() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/big" "$SRC/d" "$SRC/e"
	# 2,000 names: ten chunks or so of READDIRPLUS, the first one of
	# which the "auto" heuristic already answered with attributes
	(cd "$SRC/big" && touch $(seq -f 'f%g' 1 2000))
	for n in a b c; do echo "$n" >"$SRC/d/$n"; done
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
}

tearDown() {
	trace_stop
	ovs_teardown
}

# trace_start: count the requests of the snapshot mount from now on
trace_start() {
	local dev

	[ -d "$TRACEFS/events" ] || mount -t tracefs nodev "$TRACEFS" 2>/dev/null
	if [ ! -d "$TRACEFS/events/fuse/fuse_request_send" ]; then
		ovs_skip_test "no fuse tracepoints (Linux 6.16+, tracefs)"
		return 1
	fi
	if [ -z "$INST" ]; then
		INST=$TRACEFS/instances/ovsnap-listing.$$
		mkdir "$INST" || { fail "tracefs instance $INST"; INST=; return 1; }
		echo 4096 >"$INST/buffer_size_kb"
	fi
	dev=$(mountpoint -d "$SRC" | awk -F: '{ print $1 * 1048576 + $2 }')
	echo 0 >"$INST/events/fuse/fuse_request_send/enable"
	echo >"$INST/trace"
	echo "connection == $dev" >"$INST/events/fuse/fuse_request_send/filter"
	echo 1 >"$INST/events/fuse/fuse_request_send/enable"
}

# requests OPCODE: how many since trace_start
requests() {
	echo 0 >"$INST/events/fuse/fuse_request_send/enable"
	grep -c "(FUSE_$1)" "$INST/trace"
}

trace_stop() {
	[ -n "$INST" ] || return 0
	echo 0 >"$INST/events/fuse/fuse_request_send/enable" 2>/dev/null
	rmdir "$INST" 2>/dev/null
	INST=
}

test_a_walk_costs_no_lookup_per_entry() {
	local sizes

	stat "$SRC/big" >/dev/null
	trace_start || return
	# the daemon is new: the kernel knows none of the 2,000 names
	sizes=$(find "$SRC/big" -type f -printf '%s\n' | sort | uniq -c | awk '{ print $1, $2 }')
	assertEquals "find saw every file, all empty" "2000 0" "$sizes"
	assertEquals "LOOKUPs of a walk of 2,000 names (before: about 1,800)" 0 "$(requests LOOKUP)"
}

. "$SHUNIT2"
