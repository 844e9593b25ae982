# shellcheck shell=bash
#
# Shared harness of the ovsnap shell tests.  A test script looks like:
#
#   #!/bin/bash
#   . "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
#   ovs_require_root            # exit 77 (automake skip) when not root
#   test_something() {
#       ovs_mkfs xfs            # fresh loop image mounted at $OVS_MNT
#       ovs_run "$OVSNAP" take "$OVS_MNT/src"
#       assertEquals "take exit" 0 "$OVS_RC"
#   }
#   . "$SHUNIT2"
#
# Environment (exported by `make check`; defaulted here so a script also
# runs by hand from a build directory):
#   OVSNAP OVSNAPD      the built binaries
#   OVSNAP_TOOLS        build dir of the tests: tools/ovs-manifest etc.
#   OVSNAP_SRCDIR       top of the source tree
#   SHUNIT2             the shunit2 library
#
# Every script gets a private $OVS_TMP and points OVSNAP_STATE_DIR,
# OVSNAP_RUN_DIR and OVSNAP_CONF_DIR into it, so tests never touch
# /var/lib/ovsnap, /run/ovsnap or /etc/ovsnap; daemons are forked
# (OVSNAP_DAEMON_START=fork), never started as systemd units of the host.
#
# Cleanup: helpers.sh defines shunit2's tearDown() and oneTimeTearDown().
# After every test, tearDown() unmounts everything under $OVS_TMP (deepest
# first), kills the ovsnapd processes started for it, detaches the loop
# devices of the test's images and wipes the state and run directories, so
# the tests of one script share nothing.  A script that needs its own
# tearDown/oneTimeTearDown/oneTimeSetUp must call ovs_teardown /
# ovs_onetime_teardown / ovs_onetime_setup from it.  An EXIT trap covers a
# script that dies before shunit2 runs, and a reaper process covers one
# that is killed outright (SIGKILL from a timeout).
#
# Functions:
#   ovs_require_root                exit 77 unless root (call before shunit2)
#   ovs_require_cmd CMD...          exit 77 unless every CMD is installed
#   ovs_require_fs TYPE...          exit 77 unless mkfs.TYPE and kernel support
#   ovs_skip_test REASON            skip the rest of the current test
#   ovs_mkfs TYPE [SIZE]            xfs (reflink) | ext4 | btrfs image, loop-
#                                   mounted at $OVS_MNT ($OVS_DEV, $OVS_IMG)
#   ovs_run CMD...                  sets $OVS_RC, $OVS_OUT, $OVS_ERR
#   ovs_overlay_mount TARGET LOWERS read-only kernel overlay, lowerdir=LOWERS
#   ovs_wait_unmounted PATH [SECS]  wait until nothing is mounted at PATH
#   ovs_wait_until SECS CONDITION   bounded wait until `eval CONDITION` holds
#   ovs_user                        the unprivileged user ovsnap-test ($OVS_USER, $OVS_UID)
#   ovs_as_user CMD...              ovs_run as that user, no capabilities
#   ovs_oracle_check SRC MANIFEST_DIR [MANIFEST_OPTS...]
#                                   every snapshot of SRC, seen through a
#                                   kernel overlay of its layers, equals
#                                   MANIFEST_DIR/<id>.manifest
#
# Results: every test function records its own result, one line
# "RESULT NAME [REASON]" (PASS, FAIL, SKIP; START when it begins, TIMEOUT
# when its watchdog fires) in $OVS_RESULTS, by default
# <build>/tests/ts/AREA/NAME_test.results next to the automake log.
# .ci/run counts from these files: a function with no result (the script
# died or was killed, a setUp failed before) is a failure.  helpers.sh
# runs the tests itself (it defines shunit2's suite() hook and replaces
# its test loop): the test's name is printed before its setUp, a failing
# setUp or tearDown fails that test only and the next one still runs.  A
# script must not define suite().
#
# Timeout: each test function (setUp, body, tearDown) gets
# $OVS_TEST_TIMEOUT seconds (default 300; set it before sourcing shunit2
# to change it for a script).  When they run out, the watchdog prints the
# stacks of the script's daemons (/proc/PID/task/*/stack, gdb backtraces)
# to the log, fails the test, kills the daemons (which unblocks a FUSE
# deadlock) and, if the test still does not return, the script.
#
# A skip names its reason; in CI (CI=true) .ci/run counts a skip as a
# failure unless its reason names the issue that allows it ("issue 12").

ovs__helpers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${OVSNAP_SRCDIR:=$(cd "$ovs__helpers_dir/.." && pwd)}"

# A script run by hand from a build directory finds the binaries there.
if [ -z "${OVSNAP:-}" ]; then
	if [ -x "$PWD/ovsnap" ]; then
		OVSNAP=$PWD/ovsnap
	else
		OVSNAP=$(command -v ovsnap || echo ovsnap)
	fi
fi
if [ -z "${OVSNAPD:-}" ]; then
	if [ -x "$(dirname "$OVSNAP")/ovsnapd" ]; then
		OVSNAPD=$(dirname "$OVSNAP")/ovsnapd
	else
		OVSNAPD=$(command -v ovsnapd || echo ovsnapd)
	fi
fi
if [ -z "${OVSNAP_TOOLS:-}" ]; then
	OVSNAP_TOOLS=$(dirname "$OVSNAP")/tests
fi
if [ -z "${SHUNIT2:-}" ]; then
	for f in /usr/share/shunit2/shunit2 /usr/bin/shunit2; do
		[ -r "$f" ] && { SHUNIT2=$f; break; }
	done
fi
export OVSNAP OVSNAPD OVSNAP_TOOLS OVSNAP_SRCDIR SHUNIT2

OVS_TMP=$(mktemp -d "${OVS_TMPDIR:-/var/tmp}/ovsnap-test.XXXXXX") || {
	echo "helpers.sh: cannot create a temporary directory" >&2
	exit 99
}
# Tests as an unprivileged user (ovs_as_user) must reach the images below.
chmod 0755 "$OVS_TMP"
OVSNAP_STATE_DIR=$OVS_TMP/state
OVSNAP_RUN_DIR=$OVS_TMP/run
OVSNAP_CONF_DIR=$OVS_TMP/conf
OVSNAP_DAEMON_START=fork
mkdir -p -m 0755 "$OVSNAP_STATE_DIR" "$OVSNAP_RUN_DIR"
export OVS_TMP OVSNAP_STATE_DIR OVSNAP_RUN_DIR OVSNAP_CONF_DIR OVSNAP_DAEMON_START
# Until ovs_mkfs succeeds, $OVS_MNT names a regular file: "$OVS_MNT/src"
# of a test whose ovs_mkfs failed unseen can never be created or reach a
# directory of the host (it used to be "/src").
OVS__NO_FS=$OVS_TMP/ovs_mkfs-failed-or-not-called
: >"$OVS__NO_FS"
OVS_MNT=$OVS__NO_FS
OVS_DEV=
OVS_IMG=
OVS_RC=
OVS_OUT=
OVS_ERR=
ovs__nfs=0

# ---------------------------------------------------------------------------
# Requirements: decided before shunit2 runs, so a skip is a clean exit 77.

ovs_skip() {
	echo "SKIP: $*" >&2
	ovs__result SCRIPT-SKIP "-" "$*"
	exit 77
}

ovs_require_root() {
	[ "$(id -u)" -eq 0 ] || ovs_skip "needs root"
	[ -n "${SHUNIT2:-}" ] && [ -r "$SHUNIT2" ] || ovs_skip "shunit2 not found (set SHUNIT2)"
	ovs_require_cmd losetup findmnt mount umount
}

ovs_require_cmd() {
	local c

	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || ovs_skip "needs $c"
	done
}

ovs__kernel_has_fs() {
	grep -qw "$1" /proc/filesystems 2>/dev/null && return 0
	modprobe "$1" >/dev/null 2>&1
	grep -qw "$1" /proc/filesystems 2>/dev/null
}

ovs_require_fs() {
	local t

	for t in "$@"; do
		case $t in
		xfs | ext4 | btrfs)
			command -v "mkfs.$t" >/dev/null 2>&1 || ovs_skip "needs mkfs.$t"
			;;
		esac
		ovs__kernel_has_fs "$t" || ovs_skip "kernel lacks $t"
	done
}

# ovs_skip_test REASON: inside a test, skip its remaining asserts (shunit2
# counts them as skipped; .ci/run counts the test as skipped).  Skipping
# ends with the test.  CI installs everything: a skip there is a bug, and
# .ci/run counts it as a failure unless REASON names the issue that allows
# it ("... until issue 12").  The same holds for ovs_skip (exit 77), which
# skips every test function of the script.
ovs_skip_test() {
	echo "SKIPPED: $*"
	ovs__skip_reason="$*"
	startSkipping
}

# ---------------------------------------------------------------------------
# Running commands

# ovs_run CMD...: run CMD with stdin from /dev/null; $OVS_RC is its exit
# status, $OVS_OUT and $OVS_ERR its stdout and stderr (trailing newlines
# stripped, as $(...) does).
ovs_run() {
	OVS_OUT=$("$@" </dev/null 2>"$OVS_TMP/.stderr")
	OVS_RC=$?
	OVS_ERR=$(cat "$OVS_TMP/.stderr")
	return 0
}

# A failure message with what the last ovs_run printed.
ovs_ran() {
	printf 'rc=%s\nstdout: %s\nstderr: %s' "$OVS_RC" "$OVS_OUT" "$OVS_ERR"
}

# ---------------------------------------------------------------------------
# Loop images

# ovs_mkfs TYPE [SIZE [MKFS-OPTION...]]: a fresh sparse image (default 512M: mkfs.xfs wants
# 300M at least) on its own loop device, mounted at $OVS_TMP/fsN.  Sets
# $OVS_MNT, $OVS_DEV and $OVS_IMG.  Returns non-zero (after failing the
# test) when something is missing: CI installs everything, so that is a
# bug there, not a skip.  Call it as `ovs_mkfs xfs || return`: until it
# succeeds $OVS_MNT names a regular file under $OVS_TMP, so paths below it
# fail instead of reaching the host.
ovs_mkfs() {
	local type=$1 size=${2:-512M} img dev mnt
	# Options after the size go to mkfs (for XFS instead of reflink=1).
	shift 2 2>/dev/null || shift $#

	ovs__nfs=$((ovs__nfs + 1))
	img=$OVS_TMP/fs$ovs__nfs.img
	mnt=$OVS_TMP/fs$ovs__nfs
	if ! command -v "mkfs.$type" >/dev/null 2>&1; then
		fail "ovs_mkfs: mkfs.$type is not installed"
		return 1
	fi
	truncate -s "$size" "$img" || { fail "ovs_mkfs: truncate $img"; return 1; }
	dev=$(losetup -f --show "$img") || { fail "ovs_mkfs: losetup $img"; return 1; }
	echo "$dev $img" >>"$OVS_TMP/.loops"
	case $type in
	xfs) mkfs.xfs -q -f "${@:--mreflink=1}" "$dev" ;;
	ext4) mkfs.ext4 -q -F "$@" "$dev" ;;
	btrfs) mkfs.btrfs -q -f "$@" "$dev" ;;
	*) false ;;
	esac >"$OVS_TMP/.mkfs.log" 2>&1 || {
		fail "ovs_mkfs: mkfs.$type failed: $(tail -3 "$OVS_TMP/.mkfs.log")"
		return 1
	}
	mkdir -p "$mnt"
	mount -t "$type" "$dev" "$mnt" || { fail "ovs_mkfs: mount $type at $mnt"; return 1; }
	OVS_MNT=$mnt
	OVS_DEV=$dev
	OVS_IMG=$img
	return 0
}

# ovs_mount_behind DIR: the test filesystem bind-mounted at DIR: a way to
# SRC (DIR/src/...) that bypasses the snapshot mount, for changes made
# behind it.  Fails the test and returns 1 if it cannot be mounted.
ovs_mount_behind() {
	mkdir -p "$1" && mount --bind "$OVS_MNT" "$1" && return 0
	fail "bind mount of $OVS_MNT at $1"
	return 1
}

# ovs_overlay_mount TARGET LOWER1:LOWER2:...: read-only kernel overlay of
# the given layers, leftmost on top (the test oracle).  TARGET outside
# $OVS_TMP is remembered and unmounted by the cleanup all the same.
ovs_overlay_mount() {
	local target=$1 lowers=$2

	mkdir -p "$target" || return 1
	case $target in
	"$OVS_TMP"/*) ;;
	*) echo "$target" >>"$OVS_TMP/.mounts" ;;
	esac
	mount -t overlay overlay -o "ro,lowerdir=$lowers" "$target"
}

# ovs_wait_unmounted PATH [SECONDS]: 0 once nothing is mounted at PATH,
# 1 after SECONDS (default 10).
ovs_wait_unmounted() {
	local path=$1 tries=$((${2:-10} * 10))

	while findmnt -rn -M "$path" >/dev/null 2>&1; do
		tries=$((tries - 1))
		[ "$tries" -gt 0 ] || return 1
		sleep 0.1
	done
	return 0
}

# ovs_wait_until SECONDS CONDITION: 0 as soon as `eval CONDITION` is true
# (checked every 0.1 s), 1 when SECONDS have passed without.  A bounded
# wait for something the test can observe, instead of a sleep.
ovs_wait_until() {
	local end=$((SECONDS + $1))

	while ! eval "$2"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
	return 0
}

# ovs_strace_attach PID TRACE [STRACE OPTIONS...]: strace every thread of
# PID, and those it makes, into the file TRACE, in the background (the
# tracer's pid in $OVS_TRACER).  strace attaches to the threads one by
# one: this returns 0 once none is left untraced, 1 if some still were
# after 20 s.  ovs_strace_detach stops it; the trace is complete then.
ovs_strace_attach() {
	local pid=$1 trace=$2

	shift 2
	strace -f -qq "$@" -o "$trace" -p "$pid" &
	OVS_TRACER=$!
	ovs_wait_until 20 "! grep -L '^TracerPid:[[:space:]]*$OVS_TRACER\$' /proc/$pid/task/*/status | grep -q ."
}

ovs_strace_detach() {
	[ -n "${OVS_TRACER:-}" ] || return 0
	kill "$OVS_TRACER" 2>/dev/null
	wait "$OVS_TRACER" 2>/dev/null
	OVS_TRACER=
}

# ---------------------------------------------------------------------------
# Cleanup

# Mount points under $OVS_TMP (and the ones registered outside it), deepest
# first, so FUSE and overlay mounts go before the images below them.
ovs__our_mounts() {
	{
		findmnt -rn -o TARGET | while read -r t; do
			# findmnt escapes blanks as \x20; our paths have none.
			case $t in "$OVS_TMP"/*) echo "$t" ;; esac
		done
		[ -f "$OVS_TMP/.mounts" ] && while read -r t; do
			findmnt -rn -M "$t" >/dev/null 2>&1 && echo "$t"
		done <"$OVS_TMP/.mounts"
	} | awk '{ print length($0), $0 }' | sort -rn -k1,1 | cut -d' ' -f2- | uniq
}

# ovs__umount_all [lazy]: without "lazy", a busy mount stays for the next
# pass (an image is busy until the daemon working on it has exited).
ovs__umount_all() {
	local m

	for m in $(ovs__our_mounts); do
		umount "$m" 2>/dev/null && continue
		[ "${1:-}" = lazy ] || continue
		umount -l "$m" 2>/dev/null || echo "helpers.sh: cannot unmount $m" >&2
	done
}

# PIDs of ovsnapd processes whose command line names something in $OVS_TMP.
# Builtins only: a fork per process of the machine cost seconds per test
# on a loaded machine.
ovs__our_daemons() {
	local p comm args

	for p in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$p/comm" || continue
		[ "$comm" = ovsnapd ] || continue
		mapfile -d '' args 2>/dev/null <"$p/cmdline" || continue
		[[ "${args[*]}" == *"$OVS_TMP"* ]] && echo "${p#/proc/}"
	done
}

ovs__kill_daemons() {
	local pids p i

	pids=$(ovs__our_daemons)
	[ -n "$pids" ] || return 0
	for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	for i in $(seq 30); do
		pids=$(ovs__our_daemons)
		[ -n "$pids" ] || return 0
		sleep 0.1
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	sleep 0.2
}

ovs__detach_loops() {
	local dev img d

	[ -f "$OVS_TMP/.loops" ] || return 0
	while read -r dev img; do
		# Detach exactly the devices that still back our image; the
		# number may have been reused if the test detached it itself.
		for d in $(losetup -n -O NAME -j "$img" 2>/dev/null); do
			losetup -d "$d" 2>/dev/null ||
				echo "helpers.sh: cannot detach $d ($img)" >&2
		done
	done <"$OVS_TMP/.loops"
	rm -f "$OVS_TMP/.loops"
}

# ovs_teardown: leave $OVS_TMP as the next test expects it: nothing
# mounted, no daemon, no loop device, no image, empty state and run dirs.
# Views of this script through ovsnap umount, which waits for ovsnap-viewd
# to let go of the layers, so the images below can be unmounted at once.
ovs__umount_views() {
	local t

	for t in $(findmnt -rn -t fuse.ovsnap-view,overlay -o TARGET 2>/dev/null | sort -r); do
		case $t in
		"$OVS_TMP"/*) "$OVSNAP" umount "$t" >/dev/null 2>&1 || umount -l "$t" ;;
		esac
	done
}

ovs_teardown() {
	[ -n "${OVS_TMP:-}" ] && [ -d "$OVS_TMP" ] || return 0
	# a tracer a failed test left attached
	ovs_strace_detach
	# Views and the snapshot mounts first: a daemon exits when its FUSE
	# mount goes, and only then is its image free.
	ovs__umount_views
	ovs__umount_all
	ovs__kill_daemons
	# Whatever is left: dead daemons' FUSE mounts, the images.
	ovs__umount_all lazy
	ovs__detach_loops
	rm -rf "${OVS_TMP:?}"/fs* "$OVS_TMP/.mounts" "$OVSNAP_STATE_DIR" \
		"$OVSNAP_RUN_DIR" "$OVSNAP_CONF_DIR" "$OVS_TMP"/view* 2>/dev/null
	mkdir -p -m 0755 "$OVSNAP_STATE_DIR" "$OVSNAP_RUN_DIR"
	OVS_MNT=$OVS__NO_FS OVS_DEV= OVS_IMG=
	: >"$OVS__NO_FS"
	return 0
}

ovs_onetime_teardown() {
	ovs_teardown
	if [ -n "$(ovs__our_mounts)" ]; then
		# Something is still (lazily) mounted: do not delete under it.
		echo "helpers.sh: mounts left under $OVS_TMP" >&2
		return 1
	fi
	rm -rf "${OVS_TMP:?}"
	return 0
}

ovs_onetime_setup() {
	ovs__install_runner
	return 0
}

tearDown() { ovs_teardown; }
oneTimeTearDown() { ovs_onetime_teardown; }
oneTimeSetUp() { ovs_onetime_setup; }

# Before shunit2 takes the EXIT trap over (its handler calls the tear downs
# above), this one cleans up after a script that exits early.
trap 'ovs_onetime_teardown' EXIT

# The reaper: a script killed with SIGKILL runs no trap at all.  It ignores
# the signals a Ctrl-C or a test timeout sends to the process group.
(
	trap '' INT TERM HUP
	parent=$$
	while kill -0 "$parent" 2>/dev/null; do sleep 2; done
	[ -d "$OVS_TMP" ] && ovs_onetime_teardown
) </dev/null >/dev/null 2>&1 &
disown 2>/dev/null

# ---------------------------------------------------------------------------
# Results, the test loop and the per-test watchdog (see the header).

# $OVS_RESULTS: <cwd>/<path of the script below the source tree>.results,
# where automake writes the script's .log; a script run from elsewhere
# writes next to its private directory's name.
ovs__results_path() {
	local script src rel

	script=$(readlink -f "${BASH_SOURCE[-1]:-$0}" 2>/dev/null) || script=
	src=$(readlink -f "$OVSNAP_SRCDIR" 2>/dev/null) || src=
	rel=${script#"$src"/}
	if [ -n "$script" ] && [ -n "$src" ] && [ "$rel" != "$script" ] &&
		[ -d "$PWD/$(dirname "$rel")" ]; then
		echo "$PWD/${rel%.sh}.results"
	else
		echo "$OVS_TMP.results"
	fi
}
: "${OVS_RESULTS:=$(ovs__results_path)}"
: "${OVS_TEST_TIMEOUT:=300}"
: >"$OVS_RESULTS" || {
	echo "helpers.sh: cannot write $OVS_RESULTS" >&2
	exit 99
}
export OVS_RESULTS

# ovs__result WHAT NAME [REASON]: one result line.
ovs__result() {
	printf '%s %s%s\n' "$1" "$2" "${3:+ $(printf '%s' "$3" | tr '\n' ' ')}" >>"$OVS_RESULTS"
}

# ovs__stacks: the kernel and user stacks of this script's daemons and of
# the script's own processes, for a test that hangs.
ovs__descendants() {
	local p

	for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do
		echo "$p"
		ovs__descendants "$p"
	done
}

ovs__stacks() {
	local p t pids

	pids=$(for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in
		ovsnapd | ovsnap-viewd) ;;
		*) continue ;;
		esac
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$OVS_TMP" && echo "${p#/proc/}"
	done)
	for p in $pids; do
		echo "---- daemon $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		for t in /proc/"$p"/task/*; do
			echo "-- task ${t##*/} ($(cat "$t/comm" 2>/dev/null)) $(cat "$t/wchan" 2>/dev/null)"
			cat "$t/stack" 2>/dev/null
		done
		if command -v gdb >/dev/null 2>&1; then
			timeout 60 gdb -batch -nx -p "$p" -ex 'thread apply all bt' 2>&1 |
				grep -vE '^\[(New|Thread debugging)|^Using host|^warning:'
		fi
	done
	for p in $(ovs__descendants "$1"); do
		[ -d "/proc/$p" ] || continue
		echo "---- test process $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-200)"
		cat "/proc/$p/stack" 2>/dev/null
	done
	echo "$pids" >"$OVS_TMP/.hung-daemons"
}

# ovs__abort_fuse: kill the script's daemons and abort their FUSE
# connections, so that whatever waits on them returns (ENOTCONN).
ovs__abort_fuse() {
	local p m minor

	for p in $(cat "$OVS_TMP/.hung-daemons" 2>/dev/null); do
		kill -KILL "$p" 2>/dev/null
	done
	[ -d /sys/fs/fuse/connections ] || return 0
	findmnt -rn -t fusectl >/dev/null 2>&1 ||
		mount -t fusectl fusectl /sys/fs/fuse/connections 2>/dev/null
	findmnt -rn -o TARGET,MAJ:MIN,FSTYPE | while read -r m minor t; do
		case $m in "$OVS_TMP"/*) ;; *) continue ;; esac
		case $t in fuse*) ;; *) continue ;; esac
		minor=${minor#*:}
		[ -w "/sys/fs/fuse/connections/$minor/abort" ] &&
			echo 1 >"/sys/fs/fuse/connections/$minor/abort" 2>/dev/null
	done
}

# ovs__watchdog NAME: started (detached, so a test's `wait` does not wait
# for it) when a test begins; it returns as soon as $OVS_TMP/.running is
# gone, the test's end.
ovs__watchdog() {
	local name=$1 parent=$$ end=$((SECONDS + OVS_TEST_TIMEOUT)) flag=$OVS_TMP/.running i
	local running

	# Whether the test $name is still running (no fork: the machine may be
	# loaded).
	running() { running=; read -r running 2>/dev/null <"$flag"; [ "$running" = "$name" ]; }

	while [ "$SECONDS" -lt "$end" ]; do
		running || return 0
		kill -0 "$parent" 2>/dev/null || return 0
		sleep 1
	done
	ovs__result TIMEOUT "$name" "after $OVS_TEST_TIMEOUT s"
	{
		echo "ASSERT:helpers.sh: TIMEOUT: $name ran longer than $OVS_TEST_TIMEOUT s (OVS_TEST_TIMEOUT); stacks:"
		ovs__stacks "$parent"
		echo "helpers.sh: killing the daemons and aborting their FUSE connections"
	} >&2
	ovs__abort_fuse
	# The test should now fail its asserts and return.  If it does not,
	# end its commands, and in the end the script (the reaper cleans up;
	# .ci/run counts the rest as failures).
	for i in $(seq 30); do
		running || return 0
		sleep 1
	done
	echo "helpers.sh: TIMEOUT: $name still running: killing its commands" >&2
	for i in $(ovs__descendants "$parent"); do kill -KILL "$i" 2>/dev/null; done
	for i in $(seq 30); do
		running || return 0
		sleep 1
	done
	echo "helpers.sh: TIMEOUT: $name still running: killing the script" >&2
	kill -KILL "$parent" 2>/dev/null
}

# shunit2 calls suite() after it has defined its functions and before it
# runs the tests: the place to put our own test loop in.  It is shunit2
# 2.1.8's _shunit_execSuite, with the name printed before setUp, a result
# recorded per test, a failing setUp/tearDown failing that test only, and
# the watchdog.
ovs__exec_suite() {
	local rc

	for _shunit_test_ in ${__shunit_suite}; do
		__shunit_testSuccess=${SHUNIT_TRUE}
		ovs__skip_reason=
		endSkipping
		echo "${__SHUNIT_TEST_PREFIX}${_shunit_test_}"
		ovs__result START "$_shunit_test_"
		echo "$_shunit_test_" >"$OVS_TMP/.running"
		( (ovs__watchdog "$_shunit_test_" </dev/null) & )
		if setUp; then
			eval "${_shunit_test_}"
			rc=$?
			if [ "$rc" -ne "${SHUNIT_TRUE}" ]; then
				_shunit_error "${_shunit_test_}() returned non-zero return code."
				__shunit_testSuccess=${SHUNIT_ERROR}
				_shunit_incFailedCount
			fi
		else
			_shunit_error "setUp() of ${_shunit_test_} returned non-zero return code."
			__shunit_testSuccess=${SHUNIT_ERROR}
			_shunit_incFailedCount
		fi
		if ! tearDown; then
			_shunit_error "tearDown() of ${_shunit_test_} returned non-zero return code."
			__shunit_testSuccess=${SHUNIT_ERROR}
			_shunit_incFailedCount
		fi
		rm -f "$OVS_TMP/.running"
		if grep -qx "TIMEOUT $_shunit_test_ .*" "$OVS_RESULTS" 2>/dev/null; then
			_shunit_error "${_shunit_test_} timed out"
			__shunit_testSuccess=${SHUNIT_ERROR}
		fi
		if [ "${__shunit_testSuccess}" -eq "${SHUNIT_TRUE}" ]; then
			__shunit_testsPassed=$((__shunit_testsPassed + 1))
			if [ "${__shunit_skip}" -eq "${SHUNIT_TRUE}" ]; then
				ovs__result SKIP "$_shunit_test_" "${ovs__skip_reason:-skipped without a reason}"
			else
				ovs__result PASS "$_shunit_test_"
			fi
		else
			__shunit_testsFailed=$((__shunit_testsFailed + 1))
			ovs__result FAIL "$_shunit_test_"
		fi
	done
	unset _shunit_test_
}

ovs__install_runner() {
	if ! declare -F _shunit_execSuite >/dev/null ||
		[ "${SHUNIT_VERSION:-}" != 2.1.8 ]; then
		echo "shunit2:FATAL helpers.sh: its test loop is written for shunit2 2.1.8, not ${SHUNIT_VERSION:-?}" >&2
		exit 99
	fi
	_shunit_execSuite() { ovs__exec_suite; }
}
# Both hooks install it: shunit2 skips suite() when test names are given
# on the command line (`bash x_test.sh -- test_a test_b`).
suite() { ovs__install_runner; }

# ---------------------------------------------------------------------------
# The consistency oracle

ovs__tool() {
	if [ -x "$OVSNAP_TOOLS/tools/$1" ]; then
		echo "$OVSNAP_TOOLS/tools/$1"
	else
		command -v "$1" || echo "$OVSNAP_TOOLS/tools/$1"
	fi
}
OVS_MANIFEST=$(ovs__tool ovs-manifest)
OVS_WORKLOAD=$(ovs__tool ovs-workload)

# ovs_snapshot_layers SRC: "ID UPPER" per snapshot, oldest first, from
# `ovsnap list --json SRC`.  No JSON tool is assumed installed: the keys
# "id" and "upper" occur only in the snapshot objects, in that order, and
# test paths hold no quotes or backslashes.
ovs_snapshot_layers() {
	local json

	json=$("$OVSNAP" list --json "$1") || return 1
	printf '%s\n' "$json" |
		grep -oE '"(id|upper)"[[:space:]]*:[[:space:]]*("[^"]*"|[0-9]+)' |
		sed -E 's/^"(id|upper)"[[:space:]]*:[[:space:]]*"?([^"]*)"?$/\1 \2/' |
		awk '$1 == "id" { id = $2 } $1 == "upper" { sub(/^upper /, ""); print id, $0 }'
}

# ovs_volume_with_snapshot_1: a 1 GiB XFS image with SRC=$OVS_MNT/src
# holding keep/k, and snapshot 1 of it taken: the start of the tests
# that fill a snapshot's layer by hand while the volume is deactivated.
ovs_volume_with_snapshot_1() {
	ovs_mkfs xfs 1G || return
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/keep" && echo k >"$SRC/keep/k"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 1: $(ovs_ran)" 1 "$OVS_OUT"
}

# ovs_peak_rss CMD ARGS...: ovs_run CMD ARGS under GNU time; the peak RSS
# of CMD in KiB in $RSS (the scale tests' bound on memory)
ovs_peak_rss() {
	ovs_run /usr/bin/time -o "$OVS_TMP/.time" -f '%M' "$@"
	RSS=$(tail -1 "$OVS_TMP/.time")
}

# OVS_TMPFS_RUN OPTIONS CMD ARGS... (a bash script, for unshare -m): CMD ARGS
# with a tmpfs mounted with OPTIONS on /tmp.  A build that lies under
# /tmp (a CI clone there) stays reachable: the top directory of the
# build under the old /tmp (held open as fd 9) is bound back into the
# tmpfs before a read-only one is made read-only.
OVS_TMPFS_RUN='set -e
opts=$1; shift
mount --make-rprivate /
exec 9</tmp
build=$(realpath "$1")
mount -t tmpfs -o "$(sed "s/\(^\|,\)ro\(,\|$\)/\1rw\2/" <<<"$opts")" ovsnap-test-tmp /tmp
case $build in
/tmp/?*)
	top=${build#/tmp/}
	top=${top%%/*}
	mkdir "/tmp/$top"
	mount --no-canonicalize --bind "/proc/self/fd/9/$top" "/tmp/$top"
	;;
esac
case ,$opts, in *,ro,*) mount -o remount,ro /tmp ;; esac
exec "$@"'

# ovs_in_tmpfs OPTIONS CMD ARGS...: ovs_run CMD ARGS in a mount namespace
# of its own whose /tmp is a tmpfs mounted with OPTIONS ("ro", "size=32k")
ovs_in_tmpfs() {
	local opts=$1

	shift
	ovs_run unshare -m -- bash -c "$OVS_TMPFS_RUN" _ "$opts" "$@"
}

# ovs_ctl REQUEST: send one request to the control socket of the daemon
# this script started (the only socket in $OVSNAP_RUN_DIR apart from
# those of lazily detached daemons, detached-PID.sock) and print the
# reply.  Test hooks need OVSNAPD_TEST_HOOKS=1 in the daemon's
# environment.
# The system's python3 first: a pyenv shim costs seconds on a loaded
# machine, which a test holding the barrier cannot spend.
ovs__python3=$(command -v /usr/bin/python3 || command -v python3 || echo python3)
ovs_ctl() {
	local sock

	sock=$(ls "$OVSNAP_RUN_DIR"/*.sock | grep -v '/detached-[0-9]*\.sock$')
	"$ovs__python3" - "$sock" "$1" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(sys.argv[2].encode())
print(s.recv(4096).decode())
EOF
}

# ovs_status_field NAME: the number NAME=N of the daemon's status reply
# (ovsnapd(8), CONTROL SOCKET).
ovs_status_field() {
	ovs_ctl status | sed -n "s/.* $1=\([0-9]*\) .*/\1/p"
}

# ovs_relocks: the daemon's count of name changes that met another object
# under the name than the one they had marked (ovsnapd(8), status).
ovs_relocks() {
	ovs_status_field relocks
}

# ovs_wait_held [WHAT]: wait (10 s at most) until the daemon this script
# started holds a preserve at its test gate (OVSNAPD_TEST_HOOKS=1 and the
# gate file present); otherwise fail the current test, naming WHAT.
ovs_wait_held() {
	local i status

	for i in $(seq 200); do
		status=$(ovs_ctl status)
		case $status in *preserving=[1-9]*) return 0 ;; esac
		sleep 0.05
	done
	fail "no preserve${1:+ of $1} held at the gate ($status)"
	return 1
}

# ovs_start_held GATE COMMAND...: create GATE, start COMMAND in the
# background (its pid in BG) and wait until its preserve is held there.
ovs_start_held() {
	touch "$1"
	shift
	"$@" &
	BG=$!
	ovs_wait_held
}

# ovs_expect_fsck WHAT STATUS EXPECTED-STDOUT ARGS...: `ovsnap fsck ARGS
# $SRC` exits with STATUS and prints EXPECTED-STDOUT.
ovs_expect_fsck() {
	local what=$1 status=$2 want=$3
	shift 3

	ovs_run "$OVSNAP" fsck "$@" "$SRC"
	assertEquals "$what: fsck $* exit: $(ovs_ran)" "$status" "$OVS_RC"
	assertEquals "$what: fsck $* report" "$want" "$OVS_OUT"
}

# ovs_take_with_manifest SRC MDIR [WHAT]: SRC's manifest (its state at
# the take), then ovsnap take SRC; the manifest is kept as
# MDIR/ID.manifest, what ovs_oracle_check compares snapshot ID with.  A
# failure fails the current test (WHAT: in the message) and returns 1.
ovs_take_with_manifest() {
	local src=$1 mdir=$2 what=${3:+$3: }

	"$OVS_MANIFEST" "$src" >"$mdir/.pending" || { fail "${what}ovs-manifest $src"; return 1; }
	ovs_run "$OVSNAP" take "$src"
	assertEquals "${what}ovsnap take: $(ovs_ran)" 0 "$OVS_RC" || return 1
	mv "$mdir/.pending" "$mdir/$OVS_OUT.manifest"
}

# ovs_oracle_check SRC MANIFEST_DIR [MANIFEST_OPTS...]: deactivate SRC,
# then mount every snapshot k read-only as a stock overlay of
# upper_k:...:upper_n:SRC and compare its manifest with
# MANIFEST_DIR/k.manifest.  Each mismatch fails the current test with the
# head of the diff; returns the number of snapshots that differ.
ovs_oracle_check() {
	local src=$1 mdir=$2 ids=() uppers=() i j lowers view bad=0 n out
	shift 2

	# The layers must not change under the kernel overlay.
	if "$OVSNAP" list --json "$src" 2>/dev/null | grep -q '"active"[[:space:]]*:[[:space:]]*true'; then
		ovs_run "$OVSNAP" deactivate "$src"
		if [ "$OVS_RC" -ne 0 ]; then
			fail "oracle: ovsnap deactivate $src: $(ovs_ran)"
			return 1
		fi
	fi
	while read -r i j; do
		ids+=("$i")
		uppers+=("$j")
	done < <(ovs_snapshot_layers "$src")
	n=${#ids[@]}
	if [ "$n" -eq 0 ]; then
		fail "oracle: ovsnap list --json $src shows no snapshots"
		return 1
	fi
	for ((i = 0; i < n; i++)); do
		if [ ! -f "$mdir/${ids[i]}.manifest" ]; then
			fail "oracle: snapshot ${ids[i]} has no manifest in $mdir"
			bad=$((bad + 1))
			continue
		fi
		lowers=
		for ((j = i; j < n; j++)); do
			lowers+="${uppers[j]}:"
		done
		lowers+=$src
		view=$OVS_TMP/view.${ids[i]}
		if ! out=$(ovs_overlay_mount "$view" "$lowers" 2>&1); then
			fail "oracle: overlay mount of snapshot ${ids[i]} failed: $out"
			bad=$((bad + 1))
			continue
		fi
		"$OVS_MANIFEST" "$@" "$view" >"$OVS_TMP/view.${ids[i]}.manifest" 2>"$OVS_TMP/.manifest.err" ||
			fail "oracle: ovs-manifest of snapshot ${ids[i]}: $(head -3 "$OVS_TMP/.manifest.err")"
		umount "$view" || umount -l "$view"
		if ! out=$(diff -u "$mdir/${ids[i]}.manifest" "$OVS_TMP/view.${ids[i]}.manifest"); then
			fail "oracle: snapshot ${ids[i]} differs from its manifest (${OVS_ORACLE_WHAT:-}):
$(printf '%s\n' "$out" | head -40 | cut -c1-300)"
			bad=$((bad + 1))
		fi
	done
	return "$bad"
}

# ---------------------------------------------------------------------------
# An unprivileged user, for tests of what users may and may not do.

# ovs_user: make sure the system user "ovsnap-test" exists (it is created
# once and kept: tests of other scripts may use it too) and set $OVS_USER,
# $OVS_UID and $OVS_GID.  Fails the test when useradd is missing.
ovs_user() {
	OVS_USER=ovsnap-test
	if ! id "$OVS_USER" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /bin/sh "$OVS_USER" 2>/dev/null ||
			id "$OVS_USER" >/dev/null 2>&1 || {
			fail "ovs_user: useradd $OVS_USER failed"
			return 1
		}
	fi
	OVS_UID=$(id -u "$OVS_USER")
	OVS_GID=$(id -g "$OVS_USER")
	export OVS_USER OVS_UID OVS_GID
	return 0
}

# ovs_as_user CMD...: run CMD as $OVS_USER (call ovs_user first), with no
# capabilities and no supplementary groups, like ovs_run: sets $OVS_RC,
# $OVS_OUT and $OVS_ERR.
ovs_as_user() {
	ovs_run setpriv --reuid="$OVS_UID" --regid="$OVS_GID" --clear-groups \
		--inh-caps=-all --bounding-set=-all -- "$@"
}
