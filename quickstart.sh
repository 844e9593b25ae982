#!/bin/bash
# Quick start on a fresh Debian 12 machine, as root:
#
#   ./quickstart.sh demo    install what is needed, build, run demo.sh
#   ./quickstart.sh check   install what is needed, build, run the tests
#
# Two builds, out of tree, so the source tree stays clean:
#   ./build          against a private libfuse 3.17 (scripts/build-libfuse.sh
#                    builds it from Debian's fuse3 source package into
#                    build/libfuse/prefix; rpath, nothing installed
#                    system-wide): FUSE passthrough for views (issue 12)
#   ./build-sysfuse  against Debian 12's own libfuse 3.14, no passthrough
# demo uses ./build; check runs the tests in both.  Set QUICKSTART_NO_APT=1
# to skip apt-get (the libfuse source must then be in build/libfuse/src).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-}

usage() {
	echo "Usage: $0 demo|check" >&2
	exit 2
}

# Build dependencies, and what the tests run: loop images of three
# filesystems, xattr and ACL tools, modprobe for overlay/fuse/btrfs,
# strace and python3 (diff_test counts syscalls and parses JSON), man-db
# and groff-base (cli_test renders every man page).
PACKAGES="build-essential autoconf automake libtool pkg-config
	libmount-dev libblkid-dev libsmartcols-dev libpopt-dev libfuse3-dev
	fuse3 shunit2 xfsprogs btrfs-progs e2fsprogs acl attr
	util-linux mount kmod strace python3 dpkg-dev meson ninja-build
	man-db groff-base"

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

# build DIR [CONFIGURE ARGS...]
build_tree() {
	local dir=$1
	shift
	echo "== build in $dir"
	mkdir -p "$dir"
	cd "$dir"
	"$here/configure" -q "$@"
	make -j"$(nproc)" >/dev/null || make
}

build() {
	local prefix
	cd "$here"
	autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
	echo "== libfuse >= 3.17.1 into $here/build/libfuse"
	prefix=$(bash "$here/scripts/build-libfuse.sh" "$here/build/libfuse" | tail -n 1)
	build_tree "$here/build" PKG_CONFIG_PATH="$prefix/lib/pkgconfig" \
		LDFLAGS="-Wl,-rpath,$prefix/lib"
	grep -q '^#define HAVE_FUSE_PASSTHROUGH 1' "$here/build/config.h" || {
		echo "$0: $here/build did not get libfuse's passthrough API (see build/config.log)" >&2
		exit 1
	}
	# demo needs only the first
	if [ "$mode" = check ]; then
		build_tree "$here/build-sysfuse"
	fi
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
	# Tools and unit test programs in parallel; the tests themselves one
	# at a time: they mount images and time races, and a loaded two-core
	# machine makes the timing ones flaky.  Both builds, one after the
	# other; the status fails if either does.
	status=0
	for dir in "$here/build" "$here/build-sysfuse"; do
		echo "== make check in $dir"
		cd "$dir"
		s=0
		make -j"$(nproc)" check TESTS= >/dev/null || s=$?
		[ "$s" -ne 0 ] || make check || s=$?
		if [ "$s" -ne 0 ]; then
			echo "Failures: see $dir/test-suite.log and $dir/tests/**/*.log"
			status=$s
		fi
	done
	exit "$status"
	;;
esac
