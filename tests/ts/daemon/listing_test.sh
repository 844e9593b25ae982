#!/bin/bash
# Listings through the live path (issue 13 item 1): every chunk of a
# listing comes with its entries' attributes (READDIRPLUS, not the
# kernel's "auto" choice), so a walk that reads a whole directory before
# it stats costs no LOOKUP per entry; and the kernel keeps a listing
# across opens (cache_readdir), so a second walk asks for none, while
# every change of a name through the mount shows in the next listing;
# and listed again after a change, objects the daemon holds an fd of are
# only stat'ed, not opened again.
# The requests are counted in the kernel (the fuse:fuse_request_send
# tracepoint, Linux 6.16+, in a tracefs instance of the test's own).
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root

TRACEFS=/sys/kernel/tracing
INST=

setUp() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/big1" "$SRC/big2" "$SRC/big3" "$SRC/d" "$SRC/e"
	# 2,000 names: ten chunks or so of READDIRPLUS, the first one of
	# which the "auto" heuristic already answered with attributes
	for b in big1 big2 big3; do
		(cd "$SRC/$b" && touch $(seq -f 'f%g' 1 2000))
	done
	for n in a b c; do echo "$n" >"$SRC/d/$n"; done
	mkdir "$SRC/mid"
	(cd "$SRC/mid" && touch $(seq -f 'f%g' 1 100))
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

# trace_seen: the requests since trace_start, in order (for messages)
trace_seen() {
	grep -o '(FUSE_[A-Z_0-9]*)' "$INST/trace" | tr -d '()' | sed 's/^FUSE_//' | tr '\n' ' '
}

trace_stop() {
	[ -n "$INST" ] || return 0
	echo 0 >"$INST/events/fuse/fuse_request_send/enable" 2>/dev/null
	rmdir "$INST" 2>/dev/null
	INST=
}

# Other tests and benchmarks on the machine drop the kernel's caches
# (drop_caches), and with them the entries and listings counted on: a
# count is taken again, up to three times, until it is what the test
# wants; a regression misses every time.

test_a_walk_costs_no_lookup_per_entry() {
	local b sizes n seen=

	for b in big1 big2 big3; do
		stat "$SRC/$b" >/dev/null
		trace_start || return
		# the daemon has not listed it: the kernel knows none of its names
		sizes=$(find "$SRC/$b" -type f -printf '%s\n' | sort | uniq -c | awk '{ print $1, $2 }')
		assertEquals "find saw every file of $b, all empty" "2000 0" "$sizes"
		n=$(requests LOOKUP)
		seen="$seen $n"
		[ "$n" = 0 ] && break
	done
	assertEquals "LOOKUPs of walks of 2,000 names (before: about 1,800):$seen" 0 "$n"
}

# list DIR: its names, sorted, on one line
list() {
	ls -A "$1" | tr '\n' ' '
}

test_a_second_listing_asks_nothing_and_changes_show() {
	local try n seen=

	for try in 1 2 3; do
		assertEquals "first listing" "a b c " "$(list "$SRC/d")"
		find "$SRC/big1" >/dev/null
		trace_start || return
		assertEquals "second listing" "a b c " "$(list "$SRC/d")"
		find "$SRC/big1" >/dev/null
		n=$(($(requests READDIRPLUS) + $(requests READDIR)))
		seen="$seen $n ($(trace_seen))"
		[ "$n" = 0 ] && break
	done
	assertEquals "READDIR(PLUS) of listings the kernel has (without the listing cache: 13): $seen" \
		0 "$n"

	# each change of a name through the mount, then the listing
	echo n >"$SRC/d/new"
	assertEquals "after a create" "a b c new " "$(list "$SRC/d")"
	rm "$SRC/d/a"
	assertEquals "after an unlink" "b c new " "$(list "$SRC/d")"
	mv "$SRC/d/b" "$SRC/d/b2"
	assertEquals "after a rename in the folder" "b2 c new " "$(list "$SRC/d")"
	mv "$SRC/d/c" "$SRC/e/c"
	assertEquals "after a rename out: the old folder" "b2 new " "$(list "$SRC/d")"
	assertEquals "after a rename out: the new folder" "c " "$(list "$SRC/e")"
	ln "$SRC/e/c" "$SRC/d/l"
	assertEquals "after a link" "b2 l new " "$(list "$SRC/d")"
	ln -s b2 "$SRC/d/s"
	assertEquals "after a symlink" "b2 l new s " "$(list "$SRC/d")"
	mkdir "$SRC/d/sub"
	assertEquals "after a mkdir" "b2 l new s sub " "$(list "$SRC/d")"
	rmdir "$SRC/d/sub"
	assertEquals "after an rmdir" "b2 l new s " "$(list "$SRC/d")"
	mknod "$SRC/d/fifo" p
	assertEquals "after a mknod" "b2 fifo l new s " "$(list "$SRC/d")"
	python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    sys.exit(os.strerror(ctypes.get_errno()))' "$SRC/d/new" "$SRC/e/c" ||
		fail "RENAME_EXCHANGE"
	assertEquals "after an exchange: same names" "b2 fifo l new s " "$(list "$SRC/d")"
	assertEquals "after an exchange: the content moved" "n" "$(cat "$SRC/e/c")"
	mv "$SRC/e" "$SRC/d/e"
	assertEquals "after a folder moved in" "b2 e fifo l new s " "$(list "$SRC/d")"
	assertEquals "the moved folder" "c " "$(list "$SRC/d/e")"
}

# A folder listed again after a change of it (the kernel dropped its
# listing): the daemon holds fds of its objects (fewer than its fd
# cache's bound), so it stats each name, and neither opens it nor asks
# its handle again (before: an openat, a name_to_handle_at and a close
# each); what changed shows.
test_a_listing_again_stats_known_objects_only() {
	local pid tracer trace=$OVS_TMP/relist.strace ino2

	ovs_require_cmd strace || return
	pid=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	assertNotNull "the daemon of $SRC" "$pid" || return
	ls -l "$SRC/mid" >/dev/null
	ino2=$(stat -c %i "$SRC/mid/f2")
	echo x >"$SRC/mid/f1"
	mv "$SRC/mid/f2" "$SRC/mid/f3"
	touch "$SRC/mid/new"
	strace -f -qq -o "$trace" -p "$pid" &
	tracer=$!
	ovs_wait_until 20 "! grep -L '^TracerPid:[[:space:]]*$tracer\$' /proc/$pid/task/*/status | grep -q ."
	assertTrue "strace attached to every thread of the daemon" $?
	ovs_run ls -l --time-style=+ "$SRC/mid"
	kill "$tracer"
	wait "$tracer" 2>/dev/null
	assertEquals "ls -l: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "names listed" 100 "$(echo "$OVS_OUT" | grep -c ' [fn][0-9ew]*$')"
	assertEquals "the size written through the mount" 2 \
		"$(echo "$OVS_OUT" | awk '$NF == "f1" { print $5 }')"
	assertEquals "f2 moved over f3" "$ino2" "$(stat -c %i "$SRC/mid/f3")"
	assertEquals "f2 gone" "" "$(echo "$OVS_OUT" | awk '$NF == "f2"')"
	assertTrue "the listing went to the daemon (trace: $(head -c 2000 "$trace"))" \
		"grep -q 'getdents64(' '$trace'"
	assertTrue "at most 3 opens of names for 100 known objects, not $(grep -c 'O_PATH' "$trace")" \
		"[ $(grep -c 'O_PATH' "$trace") -le 3 ]"
	assertTrue "at most 3 handles asked for 100 known objects, not $(grep -c 'name_to_handle_at(' "$trace")" \
		"[ $(grep -c 'name_to_handle_at(' "$trace") -le 3 ]"
}

. "$SHUNIT2"
