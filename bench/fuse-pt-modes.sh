#!/bin/sh
# bench/fuse-pt-modes.sh — what the running kernel does when opens of one
# FUSE inode get different io modes (issue 12; ovsnapd(8), FUSE
# passthrough).  Not a benchmark: it prints one line per case.
#
#   sh bench/fuse-pt-modes.sh [BUILDDIR]     (as root; needs mkfs.xfs, python3)
#
# BUILDDIR holds bench/fuse-pt-modes (make bench/fuse-pt-modes), built
# against libfuse 3.17.1+.
set -eu
B=${1:-build}
PM=$B/bench/fuse-pt-modes
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$PM" ] || { echo "fuse-pt-modes.sh: $PM missing (make bench/fuse-pt-modes)" >&2; exit 1; }
rc=0; "$PM" >/dev/null 2>&1 || rc=$?
[ $rc -ne 77 ] || { echo "fuse-pt-modes.sh: $PM was built against libfuse < 3.17.1" >&2; exit 77; }
T=$(mktemp -d /tmp/ptmodes.XXXXXX)
LOOP=
PID=
cleanup() {
	[ -n "$PID" ] && { umount "$T/m" 2>/dev/null || umount -l "$T/m"; wait "$PID" 2>/dev/null || true; }
	mountpoint -q "$T/x" && umount "$T/x"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	rm -rf "$T"
}
trap cleanup EXIT
truncate -s 300M "$T/img"
mkfs.xfs -q "$T/img"
LOOP=$(losetup -f --show "$T/img")
mkdir "$T/x" "$T/m"
mount "$LOOP" "$T/x"
mkdir "$T/x/src"
echo "kernel $(uname -r)"
for allow in 0 1; do
	: >"$T/log"
	echo c >"$T/ctl"
	if [ $allow = 1 ]; then "$PM" --allow-mmap "$T/x/src" "$T/m" "$T/ctl" 2>"$T/log" &
	else "$PM" "$T/x/src" "$T/m" "$T/ctl" 2>"$T/log" &
	fi
	PID=$!
	i=0
	until mountpoint -q "$T/m"; do
		i=$((i + 1)); [ $i -lt 100 ] || { echo "no mount" >&2; exit 1; }
		sleep 0.05
	done
	python3 "$HERE/fuse-pt-modes.py" "$T/m" "$T/x/src" "$T/ctl" "$T/log" $allow
	grep INIT "$T/log" || true
	umount "$T/m"
	wait "$PID" || true
	PID=
	rm -f "$T/x/src"/*
done
dmesg 2>/dev/null | grep -i 'fuse' | tail -5 || true
