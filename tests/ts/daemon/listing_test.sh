#!/bin/bash
# Listings through the live path (issue 13 item 1): every chunk of a
# listing comes with its entries' attributes (READDIRPLUS, not the
# kernel's "auto" choice), so a walk that reads a whole directory before
# it stats costs no LOOKUP per entry; and listed again after a change,
# objects the daemon holds an fd of are only stat'ed, not opened again,
# nor are the others it knows, whose handles it compares instead (and
# caches those it finds so again soon).
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

# A folder listed again after a change of it (the kernel dropped its
# listing): the daemon holds fds of its objects (fewer than its fd
# cache's bound), so it stats each name, and neither opens it nor asks
# its handle again (before: an openat, a name_to_handle_at and a close
# each); what changed shows.
test_a_listing_again_stats_known_objects_only() {
	local pid trace=$OVS_TMP/relist.strace ino2

	ovs_require_cmd strace || return
	pid=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	assertNotNull "the daemon of $SRC" "$pid" || return
	ls -l "$SRC/mid" >/dev/null
	ino2=$(stat -c %i "$SRC/mid/f2")
	echo x >"$SRC/mid/f1"
	mv "$SRC/mid/f2" "$SRC/mid/f3"
	touch "$SRC/mid/new"
	ovs_strace_attach "$pid" "$trace"
	assertTrue "strace attached to every thread of the daemon" $?
	ovs_run ls -l --time-style=+ "$SRC/mid"
	ovs_strace_detach
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

# The same past the fd cache's bound: with the daemon's open file limit
# lowered to 256 (a cache of 64 fds), it holds fds of few of a folder's
# 2,000 known objects, so for the others it asks the name's handle and
# compares it with the node's; it opens none of them (before: an openat,
# a name_to_handle_at and a close each), nor when the folder is listed
# once more (2,000 finds later: more than the cache holds).  A name given
# another known object behind the mount shows that object.
test_a_listing_again_past_the_fd_cache_opens_no_known_object() {
	local pid under=$OVS_TMP/under ino8 try opens handles again out

	ovs_require_cmd strace prlimit || return
	pid=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	assertNotNull "the daemon of $SRC" "$pid" || return
	prlimit --pid "$pid" --nofile=256:256 || { fail "prlimit"; return; }
	echo eight >"$SRC/big2/f8"
	find "$SRC/big2" -printf '%s\n' >/dev/null
	ino8=$(stat -c %i "$SRC/big2/f8")
	ovs_mount_behind "$under" || return
	mv "$under/src/big2/f8" "$under/src/big2/f7"
	assertTrue "f7 replaced by f8 behind the mount" $?
	umount "$under"
	for try in 1 2 3; do
		touch "$SRC/big2/new$try"
		relist_traced big2
		opens=$OPENS handles=$HANDLES out=$OVS_OUT
		touch "$SRC/big2/again$try"
		relist_traced big2
		again=$OPENS
		[ "$opens" -le 3 ] && [ "$handles" -ge 1900 ] && [ "$again" -le 3 ] && break
		# another test dropped the kernel's caches, and it forgot the
		# nodes: known again
		find "$SRC/big2" -printf '%s\n' >/dev/null
	done
	echo "listing again 2,000 known objects, 64 fds cached: $opens opens, $handles handles of names; once more: $again opens"
	assertEquals "names listed" 1999 "$(grep -cE ' f[0-9]+$' <<<"$out")"
	assertEquals "f7 shows f8's object" "$ino8 6 f7" "$(grep ' f7$' <<<"$out")"
	assertEquals "f8 gone" "" "$(grep ' f8$' <<<"$out")"
	assertEquals "f7 reads f8's data" "eight" "$(cat "$SRC/big2/f7")"
	assertTrue "at most 3 opens of names for 2,000 known objects, not $opens" \
		"[ $opens -le 3 ]"
	assertTrue "their handles asked by name instead: at least 1,900, not $handles" \
		"[ $handles -ge 1900 ]"
	assertTrue "listed once more: at most 3 opens for 2,000 known objects, not $again" \
		"[ $again -le 3 ]"
}

# relist_traced FOLDER: find of SRC/FOLDER with the daemon ($pid) traced:
# its opens of names in $OPENS, its handles of names in $HANDLES
relist_traced() {
	local trace=$OVS_TMP/relist.$1.$RANDOM.strace

	OPENS= HANDLES=
	ovs_strace_attach "$pid" "$trace"
	assertTrue "strace attached to every thread of the daemon" $?
	ovs_run find "$SRC/$1" -printf '%i %s %f\n'
	ovs_strace_detach
	assertEquals "find $1: $(ovs_ran | head -3)" 0 "$OVS_RC"
	assertTrue "the listing of $1 went to the daemon" "grep -q 'getdents64(' '$trace'"
	OPENS=$(grep -c 'O_PATH' "$trace")
	HANDLES=$(grep -c 'name_to_handle_at([0-9]*, "' "$trace")
}

# Objects found by their handle twice within fewer such finds than the
# fd cache holds are opened and cached the second time, so a folder
# listed again and again costs a stat per object, as an LRU cache would
# give: 40 objects whose fds were evicted, with a cache of 64, are found
# by handle, then opened, then only stat'ed.
test_a_folder_listed_again_and_again_is_cached() {
	local pid i try d o1 h1 o2 o3 h3

	ovs_require_cmd strace prlimit || return
	pid=$(pgrep -f "ovsnapd .*$SRC\$" | head -1)
	assertNotNull "the daemon of $SRC" "$pid" || return
	prlimit --pid "$pid" --nofile=256:256 || { fail "prlimit"; return; }
	for try in 1 2 3; do
		d=small$try
		mkdir "$SRC/$d"
		(cd "$SRC/$d" && touch $(seq -f 's%g' 1 40))
		find "$SRC/$d" -printf '%s\n' >/dev/null
		# 200 other objects opened: the cache (64) keeps none of its
		for i in $(seq 1 200); do cat "$SRC/big3/f$i"; done
		touch "$SRC/$d/x1"
		relist_traced "$d"
		o1=$OPENS h1=$HANDLES
		touch "$SRC/$d/x2"
		relist_traced "$d"
		o2=$OPENS
		touch "$SRC/$d/x3"
		relist_traced "$d"
		o3=$OPENS h3=$HANDLES
		[ "$o1" -le 3 ] && [ "$h1" -ge 40 ] && [ "$o2" -ge 40 ] && [ "$o3" -le 3 ] &&
			[ "$h3" -le 3 ] && break
		# another test dropped the kernel's caches: a new folder
	done
	echo "40 known objects listed again: $o1 opens, $h1 handles; a third time: $o2 opens; a fourth: $o3 opens, $h3 handles"
	assertTrue "listed again: at most 3 opens of 40 known objects, not $o1" "[ $o1 -le 3 ]"
	assertTrue "listed again: at least 40 handles of names, not $h1" "[ $h1 -ge 40 ]"
	assertTrue "listed a third time: the 40 objects opened to be cached, $o2 opens" \
		"[ $o2 -ge 40 ]"
	assertTrue "listed a fourth time: at most 3 opens, not $o3" "[ $o3 -le 3 ]"
	assertTrue "listed a fourth time: at most 3 handles, not $h3" "[ $h3 -le 3 ]"
	assertEquals "every name listed" 43 "$(grep -cE ' (s[0-9]+|x[0-9])$' <<<"$OVS_OUT")"
}

. "$SHUNIT2"
