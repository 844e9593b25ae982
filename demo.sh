#!/bin/bash
# A tour of ovsnap on a throw-away loop-mounted XFS image: a sample
# directory, snapshots taken while it changes, `ovsnap list`, and a
# mounted snapshot showing the old data where this version has views.
# Everything it creates is removed on exit, also on failure or Ctrl-C.
#
# Run as root from the top of the source tree after building in ./build
# (./quickstart.sh demo does both), or: OVSNAP=/path/to/ovsnap bash demo.sh
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
OVSNAP=${OVSNAP:-$here/build/ovsnap}
[ -x "$OVSNAP" ] || { echo "demo.sh: $OVSNAP not built (run ./quickstart.sh demo)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "demo.sh: run as root (it mounts a loop image)" >&2; exit 1; }

work=$(mktemp -d /var/tmp/ovsnap-demo.XXXXXX)
# A private registry, run directory and settings directory: the demo
# leaves the machine's /var/lib/ovsnap, /run/ovsnap and /etc/ovsnap alone.
export OVSNAP_STATE_DIR=$work/state OVSNAP_RUN_DIR=$work/run OVSNAP_CONF_DIR=$work/conf
dev=
src=$work/fs/projects

cleanup() {
	local m p

	set +e
	cd /
	# Deepest mount first: the view, the snapshot mount over src, the image.
	for m in $(findmnt -rn -o TARGET | grep "^$work/" | awk '{ print length($0), $0 }' |
		   sort -rn | cut -d' ' -f2-); do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = ovsnapd ] || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$work/" && kill "${p#/proc/}"
	done
	sleep 0.2
	findmnt -rn -M "$work/fs" >/dev/null 2>&1 && { umount "$work/fs" || umount -l "$work/fs"; }
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	rm -rf "$work"
	echo "demo: cleaned up $work"
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "A throw-away XFS filesystem (reflink on) on a loop device"
truncate -s 1G "$work/xfs.img"
dev=$(losetup -f --show "$work/xfs.img")
mkfs.xfs -q -m reflink=1 "$dev"
mkdir -p "$work/fs"
mount "$dev" "$work/fs"
echo "mounted $dev at $work/fs"

step "A sample directory"
mkdir -p "$src/docs" "$src/src"
echo "Version 1 of the plan" >"$src/docs/plan.txt"
printf 'int main(void) { return 0; }\n' >"$src/src/main.c"
dd if=/dev/urandom of="$src/data.bin" bs=1M count=8 status=none
run ls -lR "$src"

step "First snapshot: sets up the volume and the snapshot mount over $src"
run "$OVSNAP" take --name before "$src"
findmnt -n -o TARGET,FSTYPE,SOURCE "$src" || true

step "Change things (through the same path)"
echo "Version 2 of the plan" >"$src/docs/plan.txt"
rm "$src/src/main.c"
echo "new notes" >"$src/docs/notes.txt"
run cat "$src/docs/plan.txt"

step "Second snapshot, then more changes"
run "$OVSNAP" take --name after-edit "$src"
mv "$src/docs" "$src/documents"
echo "Version 3 of the plan" >"$src/documents/plan.txt"
run ls -R "$src"

step "The snapshots of the volume"
run "$OVSNAP" list "$src"

step "Mount the first snapshot read-only"
mkdir -p "$work/view"
set +e
out=$("$OVSNAP" mount "$src" before "$work/view" 2>&1)
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
	echo "$out"
	run ls -R "$work/view"
	run cat "$work/view/docs/plan.txt"
	run test -e "$work/view/src/main.c"
	echo "(the deleted file is back in the snapshot; the live tree is unchanged)"
	run "$OVSNAP" umount "$work/view"
elif printf '%s' "$out" | grep -q 'not implemented'; then
	echo "views not available in this version ($out)"
else
	echo "ovsnap mount failed: $out" >&2
	exit 1
fi

step "Switch the snapshot mount off"
run "$OVSNAP" deactivate "$src"
echo
echo "demo: done"
