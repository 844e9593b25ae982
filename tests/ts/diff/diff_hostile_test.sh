#!/bin/bash
# ovsnap diff (and restore and rollback, which diff first) against a user
# who changes SRC while they read it (DESIGN.md rule 15): a file of SRC
# swapped for a FIFO between the listing and the read of its data is
# read without waiting for a writer.  The diff held a restore's volume
# lock meanwhile, so takes failed as busy until someone wrote the FIFO.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs

FSOP=$OVSNAP_TOOLS/tools/ovs-fsop

setUp() {
	ovs_mkfs xfs 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC"
}

tearDown() {
	ovs_teardown
}

# watched SECONDS CMD...: ovs_run CMD, killed after SECONDS (OVS_RC 124):
# a watchdog against a hang, not a measure of speed.
watched() {
	local secs=$1

	shift
	ovs_run timeout -s KILL "$secs" "$@"
	[ "$OVS_RC" = 137 ] && OVS_RC=124
}

test_a_fifo_swapped_in_is_never_waited_for() {
	local i pairs=() pid

	# Files the diff must read (size and times as in the snapshot, the
	# data not), each with a FIFO to be swapped with it.
	for i in $(seq 50); do
		echo "old$i" >"$SRC/f$i"
		mkfifo "$SRC/p$i"
	done
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	for i in $(seq 50); do
		touch -r "$SRC/f$i" "$OVS_TMP/t"
		echo "new$i" >"$SRC/f$i"
		touch -r "$OVS_TMP/t" "$SRC/f$i"
		pairs+=("$SRC/f$i" "$SRC/p$i")
	done
	"$FSOP" exchange-loop 60 "${pairs[@]}" &
	pid=$!
	for i in $(seq 30); do
		watched 30 "$OVSNAP" diff "$SRC" 1
		assertNotEquals "diff $i while files and FIFOs are swapped: no wait" 124 "$OVS_RC"
		[ "$OVS_RC" = 124 ] && break
		assertEquals "diff $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	# Swapped back into place: the diff reads the files' data again.
	for i in $(seq 50); do
		[ -p "$SRC/f$i" ] && "$FSOP" exchange "$SRC/f$i" "$SRC/p$i"
	done
	watched 30 "$OVSNAP" diff "$SRC" 1
	assertEquals "diff once the swaps stopped: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "f1's data changed" "$OVS_OUT" "f1"
	watched 60 "$OVSNAP" take "$SRC"
	assertEquals "take afterwards: $(ovs_ran)" 2 "$OVS_OUT"
}

# Names a user gives files, shown to root: a diff line and an error line
# passed C1 controls (U+009B is ESC [ to a terminal), bidirectional
# overrides and bytes of no valid UTF-8 as they were, so a name could
# move the cursor, erase a line or print a fake one ("restored 3 paths").
# They are now \ooo octal, as control bytes already were; valid UTF-8
# (aé) is shown as it is.
test_names_never_reach_the_terminal_raw() {
	local csi rlo bad shown
	csi=$(printf 'c1\302\2332K')
	rlo=$(printf 'rlo\342\200\256txt.exe')
	bad=$(printf 'bad\377')

	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 1 "$OVS_OUT"
	touch "$SRC/$csi" "$SRC/$rlo" "$SRC/$bad" "$SRC/aé" "$SRC/$(printf 'esc\033[1A')"
	ovs_run "$OVSNAP" diff "$SRC" 1
	assertEquals "diff: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "every name escaped but aé" "$(printf '%s\n' \
		'+	aé' '+	bad\377' '+	c1\302\2332K' '+	esc\033[1A' '+	rlo\342\200\256txt.exe')" \
		"$(printf '%s\n' "$OVS_OUT" | sort)"
	ovs_run "$OVSNAP" list "$OVS_TMP/$(printf 'nope\033[2K\r\302\233')"
	assertEquals "list of a path that is not there: exit" 1 "$OVS_RC"
	shown=0
	case $OVS_ERR in *'nope\033[2K\015\302\233: No such file'*) shown=1 ;; esac
	assertEquals "its error line shows the name escaped: $(printf '%s' "$OVS_ERR" | od -c |
		head -3)" 1 "$shown"
	case $OVS_ERR in *$'\033'* | *$'\r'*) shown=raw ;; esac
	assertEquals "and nothing raw" 1 "$shown"
}

. "$SHUNIT2"
