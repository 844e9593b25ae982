# shellcheck shell=bash
# What the promise tests share: a fresh XFS with SRC (a file and a dir) per
# test, and small helpers.  Sourced after tests/helpers.sh.

# shellcheck disable=SC2034 # used by the scripts that source this
MKVOL=$OVSNAP_TOOLS/ovs-mkvol

setUp() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir "$SRC" && printf 'original\n' >"$SRC/file" && mkdir "$SRC/dir"
}

# A clean stop of the daemon first: the shared teardown then finds no
# daemon to wait for.
tearDown() {
	local p
	# Users a failed test left behind would keep the images busy.
	[ -f "$OVS_TMP/.users" ] && for p in $(cat "$OVS_TMP/.users"); do
		kill "$p" 2>/dev/null
	done
	rm -f "$OVS_TMP/.users"
	[ -n "${SRC:-}" ] && "$OVSNAP" deactivate "$SRC" >/dev/null 2>&1
	ovs_teardown
}

# The ids of SRC's snapshots, oldest first, on one line.
snap_ids() {
	ovs_snapshot_layers "$SRC" | cut -d' ' -f1 | xargs
}

# The upper directory of snapshot $1.
snap_upper() {
	ovs_snapshot_layers "$SRC" | awk -v id="$1" '$1 == id { sub(/^[^ ]* /, ""); print }'
}

mount_type() {
	findmnt -n -o FSTYPE --mountpoint "$1" | tail -1
}

# start_user NAME CMD...: run CMD in the background with its pid in
# $USER_PID, after it has written "ready" to a fifo (no sleep: the fifo
# read returns once the process has done what precedes the write).
start_user() {
	local fifo=$OVS_TMP/ready.$1
	shift
	rm -f "$fifo" && mkfifo "$fifo" || { fail "mkfifo $fifo"; return 1; }
	"$@" 3>"$fifo" &
	USER_PID=$!
	echo "$USER_PID" >>"$OVS_TMP/.users"
	read -r _ <"$fifo"
	rm -f "$fifo"
}

stop_user() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

