# Shared helpers of bench/view-bench.sh and bench/merge-bench.sh (sourced,
# not run: the runner only runs *-bench.sh).
#
# bench_setup NAME     make the private work dir and arm the cleanup trap
# mkimg TYPE SIZE      loop image of TYPE (xfs with reflink, xfs-noreflink,
#                      ext4, btrfs)
#                      mounted at $work/TYPE
# now/ms/ratio/median/row, drop_caches, fileops_ms OP DIR [N [SIZE]], cpu_ms PID
#
# Every figure is quoted against a baseline of the same run: these machines
# are shared and noisy, absolute times mean little.
set -euo pipefail

OVSNAP=${OVSNAP:-$PWD/ovsnap}
FILEOPS=${FILEOPS:-$PWD/bench/ovs-fileops}
export OVSNAP_VIEWD=${OVSNAP_VIEWD:-$(dirname "$OVSNAP")/ovsnap-viewd}

work=
bench_images=()

# Daemons (ovsnapd, ovsnap-viewd) started for this run: their command line
# names a path under $work.  Found by PID, never killed by name pattern.
bench_our_daemons() {
	local p comm

	for p in /proc/[0-9]*; do
		comm=$(cat "$p/comm" 2>/dev/null) || continue
		# ovsnapd*: a build to compare with may be named ovsnapd.base
		case $comm in ovsnapd* | ovsnap-viewd) ;; *) continue ;; esac
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$work/" && echo "${p#/proc/}"
	done
	return 0
}

# bench_daemon_of SRC: the pid of our ovsnapd serving SRC (nothing if none)
bench_daemon_of() {
	local p

	for p in $(bench_our_daemons); do
		if [[ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" == *" $1 "* ]]; then
			echo "$p"
			return 0
		fi
	done
	return 0
}

bench_unmount_all() {
	local m

	# Deepest first: views and snapshot mounts sit on the images.
	for m in $(findmnt -rn -o TARGET | grep -F "$work/" | awk '{ print length, $0 }' |
		   sort -rn | cut -d' ' -f2-); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ||
			echo "bench: cannot unmount $m" >&2
	done
}

bench_cleanup() {
	local p i img d

	set +e
	trap - EXIT INT TERM
	[ -n "$work" ] && [ -d "$work" ] || return 0
	bench_unmount_all
	for p in $(bench_our_daemons); do kill -TERM "$p" 2>/dev/null; done
	for i in $(seq 30); do
		[ -z "$(bench_our_daemons)" ] && break
		sleep 0.1
	done
	for p in $(bench_our_daemons); do kill -KILL "$p" 2>/dev/null; done
	sleep 0.2
	bench_unmount_all
	# Detach exactly the loop devices that back our images.
	for img in "${bench_images[@]}"; do
		for d in $(losetup -n -O NAME -j "$img" 2>/dev/null); do
			losetup -d "$d" 2>/dev/null || echo "bench: cannot detach $d" >&2
		done
	done
	rm -rf "$work"
}

bench_setup() { # NAME
	work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ovsnap-$1.XXXXXX")
	# settings files too: a bench never writes /etc/ovsnap
	export OVSNAP_STATE_DIR=$work/state OVSNAP_RUN_DIR=$work/run OVSNAP_CONF_DIR=$work/conf
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
	# ovsnapd sizes its fd cache from this limit (a quarter of it); on a
	# filesystem without file handles it keeps an O_PATH fd per inode the
	# kernel remembers, and a low limit fails a large walk with EMFILE.
	# Baselines such as the plain passthrough inherit it too.
	ulimit -n "${BENCH_NOFILE:-1048576}" 2>/dev/null ||
		ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	echo "note: open file limit $(ulimit -n) (ovsnapd's fd cache: a quarter of it, at most 4096)"
	[ -x "$OVSNAP" ] || { echo "bench: no ovsnap at $OVSNAP (set OVSNAP)" >&2; exit 1; }
	[ -x "$FILEOPS" ] || { echo "bench: no ovs-fileops at $FILEOPS (set FILEOPS)" >&2; exit 1; }
}

mkimg() { # TYPE SIZE -> mounted at $work/TYPE
	local type=$1 size=$2 img=$work/$1.img dev

	truncate -s "$size" "$img"
	bench_images+=("$img")
	# BENCH_LOOP_DIO=1: the loop device writes straight to the disk, as a
	# real one does, not into the page cache of its image file (where a
	# cache flush of the loop device becomes an fsync of the image).
	if [ "${BENCH_LOOP_DIO:-0}" = 1 ]; then
		dev=$(losetup -f --show --direct-io=on "$img")
	else
		dev=$(losetup -f --show "$img")
	fi
	case $type in
	xfs) mkfs.xfs -q -m reflink=1 "$dev" ;;
	xfs-noreflink) mkfs.xfs -q -m reflink=0 "$dev" ;;	# copy-ups are copies
	ext4) mkfs.ext4 -q -F "$dev" ;;
	btrfs) mkfs.btrfs -q -f "$dev" >/dev/null 2>&1 ;;	# its notice of new defaults
	esac
	mkdir -p "$work/$type"
	mount "$dev" "$work/$type"
}

# passthrough_mount REAL MNT [OPTION...]: the plain libfuse passthrough
# ($FUSE_PASSTHROUGH, the floor of what FUSE costs) of REAL mounted at MNT;
# its pid in PASSTHROUGH_PID, its stderr in $work/NAME.log.  The bench
# stops with the log when it has not mounted within 5 seconds.
passthrough_mount() {
	local real=$1 mnt=$2 log
	shift 2
	log=$work/$(basename "$mnt").log
	${PASSTHROUGH_SETSID:+setsid} "$FUSE_PASSTHROUGH" "$@" "$real" "$mnt" </dev/null 2>"$log" &
	PASSTHROUGH_PID=$!
	for _ in $(seq 50); do
		findmnt -n "$mnt" >/dev/null && return 0
		sleep 0.1
	done
	cat "$log" >&2
	echo "bench: the passthrough did not mount at $mnt" >&2
	exit 1
}

# cpu_ms PID: the user + system time of process PID so far, all its
# threads, in ms (0 without a PID: native targets)
cpu_ms() {
	[ -n "$1" ] || { echo 0; return; }
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) * 1000 / hz }' "/proc/$1/stat"
}

# Rounds in which targets take turns (view-walk, live-walk): vals[KEY]
# holds each round's ms, cpus[KEY] the serving process's CPU ms (the
# caller declares both: declare -A vals cpus).
# round_measure KEY PID CMD...: run CMD, which prints ms, and add a round
round_measure() {
	local key=$1 p=$2 c0 v c1

	shift 2
	c0=$(cpu_ms "$p")
	v=$("$@")
	c1=$(cpu_ms "$p")
	vals[$key]+="$v "
	cpus[$key]+="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }') "
}
# round_median KEY, round_cpu KEY: the medians (FAIL if a round failed)
round_median() {
	case " ${vals[$1]}" in *" FAIL "*) echo FAIL; return ;; esac
	printf '%s\n' ${vals[$1]} | median
}
round_cpu() { printf '%s\n' ${cpus[$1]} | median; }

now() { date +%s%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# ratio A B: A/B, or "-" when either is not a number (a failed measurement)
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b == 0) print "-"
		else printf "%.2f", a / b }'
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
row() { printf '%-44s %12s %12s %10s   %s\n' "$@"; }

# time_ms CMD...: milliseconds CMD took, or FAIL (its error on stderr)
time_ms() {
	local t0 t1

	t0=$(now)
	if "$@" >/dev/null; then
		t1=$(now)
		ms "$t0" "$t1"
	else
		echo FAIL
	fi
}

# ns_ms CMD...: CMD prints the nanoseconds it took; its ms, or FAIL (a
# failure must not read as 0 ms), with CMD's errors on stderr
ns_ms() {
	local ns

	if ns=$("$@" 2>"$work/.ns_ms.err"); then
		awk -v n="$ns" 'BEGIN { printf "%.1f", n / 1e6 }'
	else
		cat "$work/.ns_ms.err" >&2
		echo FAIL
	fi
}

# fileops_ms OP DIR [N [SIZE]]: ms of ovs-fileops, or FAIL
fileops_ms() { ns_ms "$FILEOPS" "$@"; }

read_ms() { # FILE: cold sequential read
	drop_caches
	time_ms dd if="$1" of=/dev/null bs=1M status=none
}

walk_ms() { # DIR: cold walk, stat of every entry
	drop_caches
	fileops_ms stat "$1"
}

mktree() { # DIR N: N empty files in folders of 1000
	local dir=$1 n=$2 d

	mkdir -p "$dir"
	for ((d = 0; d * 1000 < n; d++)); do
		mkdir "$dir/d$d"
		(cd "$dir/d$d" && touch $(seq -f 'f%g' 1 $((n - d * 1000 < 1000 ? n - d * 1000 : 1000))))
	done
}

bench_header() { # TITLE
	echo "$1, $(date -u +%FT%TZ), $(uname -r), $(nproc) cores"
}

# start_passthrough REAL MOUNTPOINT [own-session]: the plain passthrough
# ($FUSE_PASSTHROUGH) in the background, back once it is mounted.  With
# own-session it runs in a session of its own (setsid), as a daemon does
# (fuse_daemonize(), ovsnapd): the scheduler then puts it in a group of
# its own (autogroup), not the benchmark's.  Without, it shares the
# benchmark's group, and every request hands the CPU straight from the
# caller to the daemon inside that group, which no daemon started apart
# from its callers gets (ovsnapd(8), Costs): on a loaded machine that
# floor is 2-3 times faster per request.
start_passthrough() {
	if [ "${3:-}" = own-session ]; then
		PASSTHROUGH_SETSID=1 passthrough_mount "$1" "$2"
	else
		passthrough_mount "$1" "$2"
	fi
}
