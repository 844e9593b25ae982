#!/bin/bash
# Build a libfuse >= 3.17.1 (the kernel's FUSE passthrough of file data,
# issue 12) into a private prefix inside the build tree, from Debian's own
# fuse3 source package of a later release.  Nothing is installed
# system-wide: ovsnap links to it with an rpath.
#
#   scripts/build-libfuse.sh DIR     build into DIR (DIR/prefix is the result)
#
# Prints the prefix on its last line.  A prefix already built is reused.
# The deb-src entry lives in a file of its own under /etc/apt/sources.list.d/
# only while the source is fetched, and is removed again (also on failure),
# followed by an apt-get update so the lists are as before.  Needs root for
# apt; set QUICKSTART_NO_APT=1 to never call apt (the source must then be
# unpacked in DIR/src already).  LIBFUSE_SUITE picks the Debian release
# (default trixie).
set -euo pipefail

dir=${1:?usage: $0 DIR}
suite=${LIBFUSE_SUITE:-trixie}
want=3.17.1
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
prefix=$dir/prefix
srcdir=$dir/src
pcdir=$prefix/lib/pkgconfig
list=/etc/apt/sources.list.d/ovsnap-libfuse-src.list

have_version() { # PCDIR: is a fuse3 >= $want there?
	[ -f "$1/fuse3.pc" ] &&
		PKG_CONFIG_PATH=$1 PKG_CONFIG_LIBDIR=$1 pkg-config --atleast-version="$want" fuse3
}

if have_version "$pcdir"; then
	echo "libfuse $(PKG_CONFIG_PATH=$pcdir pkg-config --modversion fuse3) already built in $prefix" >&2
	echo "$prefix"
	exit 0
fi

apt_ok() { [ -z "${QUICKSTART_NO_APT:-}" ]; }
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }

cleanup_list() {
	if [ -e "$list" ]; then
		rm -f "$list"
		apt_get update -qq || echo "$0: apt-get update after removing $list failed" >&2
	fi
}

# A run killed between adding the deb-src entry and removing it (SIGKILL
# runs no trap) left it behind: remove it whatever this run does next.
cleanup_list

# The Debian archive this machine already uses (a local mirror or proxy
# where deb.debian.org is not reachable), as apt itself reports it:
# the first main archive that is not the security one.
debian_mirror() {
	local uri
	uri=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' 2>/dev/null |
		awk '$1 !~ /security/ && $2 !~ /-/ { print $1; exit }')
	echo "${uri:-http://deb.debian.org/debian/}"
}

unpacked() { find "$srcdir" -maxdepth 2 -name meson.build -path '*/fuse3-*/meson.build' 2>/dev/null | head -1; }

if [ -z "$(unpacked)" ]; then
	if ! apt_ok; then
		echo "$0: no libfuse source in $srcdir and QUICKSTART_NO_APT is set" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	missing=
	for p in dpkg-dev meson ninja-build pkg-config; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "== apt-get install$missing (to build libfuse)" >&2
		apt_get update -qq
		# shellcheck disable=SC2086
		apt_get install -y -qq --no-install-recommends $missing >/dev/null
	fi
	echo "== apt-get source fuse3 ($suite) into $srcdir" >&2
	trap cleanup_list EXIT
	trap 'exit 1' INT TERM HUP
	printf '# ovsnap scripts/build-libfuse.sh: removed again right after apt-get source\n' >"$list"
	printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
		"$(debian_mirror)" "$suite" >>"$list"
	apt_get update -qq || { echo "$0: apt-get update with the deb-src entry for $suite failed" >&2; exit 1; }
	rm -rf "$srcdir.tmp"
	mkdir -p "$srcdir.tmp"
	# (no _apt sandbox: the download goes into a root-owned directory)
	(cd "$srcdir.tmp" && apt_get -o APT::Sandbox::User=root source -qq "fuse3/$suite" >/dev/null) ||
		{ echo "$0: apt-get source fuse3/$suite failed" >&2; exit 1; }
	cleanup_list
	trap - EXIT INT TERM HUP
	rm -rf "$srcdir"
	mv "$srcdir.tmp" "$srcdir"
fi
src=$(dirname "$(unpacked)")
[ -d "$src" ] || { echo "$0: no fuse3 source unpacked in $srcdir" >&2; exit 1; }

for p in meson ninja; do
	command -v "$p" >/dev/null || { echo "$0: $p not found: install the Debian package ${p/ninja/ninja-build}" >&2; exit 1; }
done
echo "== build $(basename "$src") into $prefix" >&2
rm -rf "$dir/build" "$prefix"
# Only the library: fusermount3 and the init scripts stay the system's.
meson setup "$dir/build" "$src" --prefix="$prefix" --libdir=lib \
	--buildtype=release -Dutils=false -Dexamples=false -Dtests=false >"$dir/meson.log" 2>&1 ||
	{ tail -20 "$dir/meson.log" >&2; exit 1; }
ninja -C "$dir/build" -j"$(nproc)" >>"$dir/meson.log" 2>&1 || { tail -30 "$dir/meson.log" >&2; exit 1; }
ninja -C "$dir/build" install >>"$dir/meson.log" 2>&1 || { tail -20 "$dir/meson.log" >&2; exit 1; }
if ! have_version "$pcdir"; then
	echo "$0: the build did not give fuse3 >= $want in $pcdir" >&2
	exit 1
fi
echo "$prefix"
