#!/bin/bash
# FUSE over io_uring against the plain /dev/fuse request loop (issue 12,
# item 3), in one run on one XFS image: the same plain passthrough
# (bench/fuse-passthrough, built against libfuse >= 3.18) mounted twice,
# once with --io-uring, next to native XFS:
#   create   N files of 4 KiB in a new folder
#   stat     a cold stat walk of them (caches dropped; needs create in OPS)
#   write4k  IO_N buffered 4 KiB writes into one file (one WRITE each:
#            no writeback cache)
#   read4k   IO_N O_DIRECT 4 KiB reads of it (one READ each)
#   seqread  a cold sequential read of a SEQ_MB MiB file, 1 MiB reads
# and, where ovsnap-viewd is built next to OVSNAP (VIEWS=0: not), a view
# served by ovsnap-viewd with io_uring against one with --no-io-uring:
#   vwalk    a cold walk (find -printf %s) of TREE_N files through the view
#   vseqread a cold sequential read of a VSEQ_MB MiB file through the view
#            (shared with the live tree: served by the view, not passthrough)
#   vparread 4 readers at once, each a cold sequential read of its own
#            VSEQ_MB/4 MiB file (the rings serve one request at a time
#            per CPU, the /dev/fuse loop up to 16 at once)
# Targets take turns round after round, in an order that rotates each round
# (this VM drifts by 2-4x within minutes); each figure is the median of its
# rounds, in ms, and the ratio is plain loop time / io_uring time (> 1:
# io_uring is faster).
#
#   FILEOPS=build/bench/ovs-fileops FUSE_PASSTHROUGH=build/bench/fuse-passthrough \
#   bash bench/uring-bench.sh [--set-enable-uring]
#
# The kernel offers io_uring to FUSE servers only while
# /sys/module/fuse/parameters/enable_uring is Y: that is the admin's switch,
# and this script never changes it unless told to.  --set-enable-uring sets
# it to Y for the run and puts the previous value back at the end, on
# failure and on interruption too (a run killed with SIGKILL leaves a note in
# $OVSNAP_URING_NOTE that the next run restores first).  Without the option
# and with the switch off, the script says so and measures nothing.
#
# N (default 5000) files, IO_N (default 20000) 4 KiB operations, SEQ_MB
# (default 1024), ROUNDS (default 3), TREE_N (default 20000), VSEQ_MB
# (default 256); OPS and VOPS pick operations.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$PWD/bench/fuse-passthrough}
N=${N:-5000}
IO_N=${IO_N:-20000}
SEQ_MB=${SEQ_MB:-1024}
ROUNDS=${ROUNDS:-3}
OPS=${OPS:-create stat write4k read4k seqread}
TREE_N=${TREE_N:-20000}
VSEQ_MB=${VSEQ_MB:-256}
VOPS=${VOPS:-vwalk vseqread vparread}
param=/sys/module/fuse/parameters/enable_uring
note=${OVSNAP_URING_NOTE:-/run/ovsnap-uring-bench.enable_uring}

set_uring=
case ${1:-} in
--set-enable-uring) set_uring=1 ;;
'') ;;
-h | --help)
	sed -n '2,/^here=/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 0 ;;
*) echo "bench: unknown option $1 (known: --set-enable-uring)" >&2; exit 2 ;;
esac

# The switch back to the value noted before we changed it (a no-op when we
# changed nothing).  Only once no ring of ours is left: the kernel refuses
# every ring command while the switch is off.
restore_uring() {
	local old

	[ -f "$note" ] || return 0
	old=$(cat "$note")
	if echo "$old" >"$param" 2>/dev/null; then
		rm -f "$note"
		echo "note: $param restored to $old"
	else
		echo "bench: cannot restore $param to $old (note kept in $note)" >&2
	fi
}
# A run killed by SIGKILL changed the switch and ran no trap.
restore_uring

if [ ! -e "$param" ]; then
	echo "bench: this kernel has no FUSE over io_uring ($param missing; 6.14+ has it): nothing measured"
	exit 0
fi
if [ "$(cat "$param")" != Y ] && [ -z "$set_uring" ]; then
	echo "bench: $param is $(cat "$param"): the kernel offers FUSE over io_uring to no server."
	echo "bench: nothing measured; the admin may enable it, or rerun with --set-enable-uring" \
		"(sets it to Y for this run only and restores it)"
	exit 0
fi

[ -x "$FUSE_PASSTHROUGH" ] || { echo "bench: no fuse-passthrough at $FUSE_PASSTHROUGH (make bench/fuse-passthrough)" >&2; exit 1; }
# Built against libfuse < 3.18 it refuses --io-uring before it looks at
# its arguments: then there is nothing to compare, and no switch to touch.
if [ "$("$FUSE_PASSTHROUGH" --io-uring /nonexistent /nonexistent 2>&1)" != \
     "fuse-passthrough: /nonexistent: No such file or directory" ]; then
	echo "bench: $FUSE_PASSTHROUGH has no --io-uring (built against libfuse < 3.18): nothing measured"
	exit 0
fi

bench_setup uring
trap 'bench_cleanup; restore_uring' EXIT
lib=$(ldd "$FUSE_PASSTHROUGH" | awk '/libfuse3/ { print $3 }')
bench_header "ovsnap FUSE over io_uring benchmark (issue 12 item 3)"
echo "N=$N creates, IO_N=$IO_N 4 KiB ops, SEQ_MB=$SEQ_MB, medians of $ROUNDS rounds; libfuse $lib"
echo "note: $param is $(cat "$param") at the start"

if [ "$(cat "$param")" != Y ]; then
	cat "$param" >"$note"
	sync "$note" 2>/dev/null || true
	echo Y >"$param"
	echo "note: $param set to Y for this run (--set-enable-uring)"
fi

mkimg xfs 6G
x=$work/xfs
mkdir -p "$x/native" "$x/fp-real" "$x/fp" "$x/fpu-real" "$x/fpu"

declare -A pid
mount_fp() { # NAME [OPTION]: mount the passthrough of $x/NAME-real at $x/NAME
	local name=$1

	shift
	passthrough_mount "$x/$name-real" "$x/$name" "$@"
	pid[$name]=$PASSTHROUGH_PID
	stat "$x/$name" >/dev/null	# INIT is answered: the rings are up
}
rings() { # NAME: how many io_uring ring threads the daemon runs
	grep -l '^fuse-ring-' /proc/"${pid[$1]}"/task/*/comm 2>/dev/null | wc -l
}
mount_fp fp
if ! mount_fp fpu --io-uring; then
	exit 1
fi
sed 's/^/note: /' "$work/fpu.log"
# libfuse drops an init's flags when it mixes conn->want and want_ext:
# the two targets would then differ in more than the transport.
if grep -h "fuse_convert_to_conn_want_ext" "$work/fp.log" "$work/fpu.log" >&2; then
	echo "bench: libfuse ignored the passthrough's INIT flags" >&2
	exit 1
fi
if [ "$(rings fp)" != 0 ]; then
	echo "bench: the plain target runs io_uring ring threads" >&2
	exit 1
fi
if [ "$(rings fpu)" = 0 ]; then
	echo "bench: the io_uring target started no ring thread (libfuse built without liburing?):" >&2
	cat "$work/fpu.log" >&2
	exit 1
fi
echo "note: plain loop: pid ${pid[fp]}, 0 ring threads; io_uring: pid ${pid[fpu]}, $(rings fpu) ring threads"

# Views: a volume with a tree and a file, one snapshot of it, mounted twice.
views=
if [ "${VIEWS:-1}" = 1 ] && [ -x "$OVSNAP_VIEWD" ]; then
	views="view viewplain"
	mkdir -p "$x/live" "$x/view" "$x/viewplain"
	mktree "$x/live/tree" "$TREE_N"
	dd if=/dev/zero of="$x/live/vseq" bs=1M count="$VSEQ_MB" status=none conv=fsync
	for i in 0 1 2 3; do
		dd if=/dev/zero of="$x/live/vpar.$i" bs=1M count=$((VSEQ_MB / 4)) status=none conv=fsync
	done
	"$OVSNAP" take "$x/live" >/dev/null
	"$OVSNAP" mount "$x/live" 1 "$x/view" >/dev/null
	printf '#!/bin/sh\nexec %q --no-io-uring "$@"\n' "$OVSNAP_VIEWD" >"$work/viewd-plain"
	chmod +x "$work/viewd-plain"
	OVSNAP_VIEWD=$work/viewd-plain "$OVSNAP" mount "$x/live" 1 "$x/viewplain" >/dev/null
	for v in $views; do
		stat "$x/$v" >/dev/null
		for p in $(bench_our_daemons); do
			[ "$(cat /proc/"$p"/comm)" = ovsnap-viewd ] &&
				tr '\0' ' ' <"/proc/$p/cmdline" | grep -q " $x/$v *\$" && pid[$v]=$p
		done
		[ -n "${pid[$v]:-}" ] || { echo "bench: no ovsnap-viewd for $x/$v" >&2; exit 1; }
		echo "note: $v: pid ${pid[$v]}, $(rings "$v") ring threads," \
			"$(grep -h 'io_uring' "$OVSNAP_RUN_DIR"/view-*"${v}".log | sed 's/^ovsnap-viewd: //')"
	done
	[ "$(rings viewplain)" = 0 ] || { echo "bench: the view with --no-io-uring runs rings" >&2; exit 1; }
	[ "$(rings view)" != 0 ] || { echo "bench: the io_uring view started no ring thread" >&2; exit 1; }
fi

# The data files, written once per target through the target itself.
for w in native fp fpu; do
	dd if=/dev/zero of="$x/$w/seq" bs=1M count="$SEQ_MB" status=none conv=fsync
	dd if=/dev/zero of="$x/$w/io" bs=4k count="$IO_N" status=none conv=fsync
done

declare -A runs
parallel_read() { # FILE...: read them all at once; fails if one fails
	local f p rc=0 pids=()

	for f; do
		dd if="$f" of=/dev/null bs=1M status=none &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}
one() { # WHERE OP ROUND
	local d=$x/$1 t

	sync
	case $2 in
	create) mkdir "$d/c.$3"; t=$(fileops_ms create "$d/c.$3" "$N" 4096) ;;
	stat) drop_caches; t=$(fileops_ms stat "$d/c.$3") ;;
	write4k) t=$(time_ms dd if=/dev/zero of="$d/io" bs=4k count="$IO_N" conv=notrunc status=none) ;;
	read4k) t=$(time_ms dd if="$d/io" of=/dev/null bs=4k count="$IO_N" iflag=direct status=none) ;;
	seqread) t=$(read_ms "$d/seq") ;;
	vwalk) drop_caches; t=$(time_ms find "$d/tree" -printf '%s\n') ;;
	vseqread) t=$(read_ms "$d/vseq") ;;
	vparread) drop_caches; t=$(time_ms parallel_read "$d"/vpar.*) ;;
	esac
	runs[$1,$2]+="$t "
}

order=(native fp fpu)
for ((r = 1; r <= ROUNDS; r++)); do
	for op in $OPS; do
		for w in "${order[@]}"; do
			one "$w" "$op" "$r"
		done
	done
	order=("${order[@]:1}" "${order[0]}")
	if [ -n "$views" ]; then
		vorder=(view viewplain)
		((r % 2)) || vorder=(viewplain view)
		for op in $VOPS; do
			for w in "${vorder[@]}"; do
				one "$w" "$op" "$r"
			done
		done
	fi
	# A ring thread that died takes the mount with it: check every round.
	for w in fp fpu; do
		kill -0 "${pid[$w]}" 2>/dev/null && findmnt -n "$x/$w" >/dev/null ||
			{ echo "bench: $w is gone after round $r" >&2; cat "$work/$w.log" >&2; exit 1; }
	done
done

med() { tr ' ' '\n' <<<"${runs[$1,$2]}" | grep -v '^$' | median; }
# PLAIN URING OP: the median of the rounds' own ratios (the two targets
# ran next to each other in each round, so drift between rounds cancels)
paired() {
	paste <(tr ' ' '\n' <<<"${runs[$1,$3]}" | grep -v '^$') \
	      <(tr ' ' '\n' <<<"${runs[$2,$3]}" | grep -v '^$') |
		while read -r a b; do echo "$(ratio "$a" "$b")"; done | median
}
echo
row "operation (median ms)" "plain loop" "io_uring" "plain/uring" "native XFS"
for op in $OPS; do
	p=$(med fp "$op")
	u=$(med fpu "$op")
	row "$op" "$p" "$u" "$(ratio "$p" "$u") ($(paired fp fpu "$op"))" "$(med native "$op")"
done
echo "(plain/uring: ratio of the medians, in brackets the median of each round's ratio)"
if [ -n "$views" ]; then
	echo
	row "view operation (median ms)" "plain loop" "io_uring" "plain/uring" ""
	for op in $VOPS; do
		p=$(med viewplain "$op")
		u=$(med view "$op")
		row "$op" "$p" "$u" "$(ratio "$p" "$u") ($(paired viewplain view "$op"))" ""
	done
fi
echo
echo "rounds (ms): $(for k in "${!runs[@]}"; do echo "$k: ${runs[$k]}"; done | sort | tr '\n' ';')"
echo "note: io_uring ring threads at the end: $(rings fpu)"

# What an admin who turns the switch off again does to servers that run
# rings (only when this run turned it on, so it is ours to turn off): do
# they keep serving?
if [ -f "$note" ]; then
	restore_uring
	for w in fpu $views; do
		[ "$w" = viewplain ] && continue
		f=$x/$w/seq
		[ "$w" = view ] && f=$x/$w/vseq
		drop_caches
		if dd if="$f" of=/dev/null bs=1M count=16 status=none 2>"$work/probe.err" &&
		   kill -0 "${pid[$w]}" 2>/dev/null; then
			echo "note: $w still serves after the switch went back to N ($(rings "$w") ring threads)"
		else
			echo "note: $w stopped serving after the switch went back to N: $(head -1 "$work/probe.err")"
		fi
	done
fi
