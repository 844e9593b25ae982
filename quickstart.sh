#!/bin/bash
# Quick start on a fresh Debian 12 machine, as root:
#
#   ./quickstart.sh demo    install what is needed, build, run demo.sh
#   ./quickstart.sh check   install what is needed, build, run the tests
#
# The build happens out of tree in ./build, so the source tree stays
# clean for other builds.  Set QUICKSTART_NO_APT=1 to skip apt-get.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-}

usage() {
	echo "Usage: $0 demo|check" >&2
	exit 2
}

# Build dependencies, and what the tests run: loop images of three
# filesystems, xattr and ACL tools, modprobe for overlay/fuse/btrfs,
# strace and python3 (diff_test counts syscalls and parses JSON).
PACKAGES="build-essential autoconf automake libtool pkg-config
	libmount-dev libblkid-dev libsmartcols-dev libpopt-dev libfuse3-dev
	fuse3 shunit2 xfsprogs btrfs-progs e2fsprogs acl attr
	util-linux mount kmod strace python3"

install_deps() {
	if [ -n "${QUICKSTART_NO_APT:-}" ]; then
		return 0
	fi
	echo "== apt-get install (build and test dependencies)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null
}

build() {
	echo "== build in $here/build"
	cd "$here"
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
	mkdir -p build
	cd build
	../configure -q
	make -j"$(nproc)" >/dev/null || make
}

[ "$mode" = demo ] || [ "$mode" = check ] || usage
if [ "$(id -u)" -ne 0 ]; then
	echo "$0: run as root: it installs packages and mounts loop images" >&2
	exit 1
fi

install_deps
build
for m in overlay fuse xfs btrfs ext4 loop; do
	modprobe "$m" 2>/dev/null || true
done

case $mode in
demo)
	OVSNAP=$here/build/ovsnap bash "$here/demo.sh"
	;;
check)
	echo "== make check"
	cd "$here/build"
	# Tools and unit test programs in parallel; the tests themselves one
	# at a time: they mount images and time races, and a loaded two-core
	# machine makes the timing ones flaky.
	make -j"$(nproc)" check TESTS= >/dev/null
	status=0
	make check || status=$?
	[ "$status" -eq 0 ] || echo "Failures: see $here/build/test-suite.log and build/tests/**/*.log"
	exit "$status"
	;;
esac
