#!/bin/bash
# Benchmark of concurrent first changes (issue 13 item 2) on ext4, where a
# copy-up is a real copy: ${PROCS:-8} processes each make the first change
# to ${FILES:-100} files of their own folder after a take (KIND=append: an
# append; KIND=names: a rename in the folder, then an unlink),
#   baseline      with nothing else running,
#   with copy-up  while the first write to a ${SIZE_MB:-1024} MiB file
#                 copies it up (held in its preserve for the whole time
#                 when it lasts that long),
# and the ratio of the two; then the copy-up of the big file alone (its
# throughput: write-behind must not slow the copy).  With one global
# change lock the eight wait for the whole copy; with locking by object
# they should not, and with write-behind in the copy their fsyncs should
# not wait for the copy's dirty data either; and a copy-up of more than
# 64 MiB gives way to them between its chunks (the daemon's status counts
# the chunks after which it waited: "gave way", by round).
#
# The floor, measured in the same rounds on the same filesystem outside
# the volume (NATIVE=0 leaves it out): the same processes make the same
# first changes as a program without ovsnap would, each file's old data
# copied durably to a folder of its own as a preserve on ext4 does
# (`ovs-fileops save-append`: write, fsync, rename, fsync of the folder)
# and then appended to, alone and while a native file of the same size
# is copied:
#   copyup  by bench/ovs-copy, the library's copy-up copy (write-behind,
#           an fsync at the end) with no daemon and no FUSE: the floor
#           ovsnap's own slowdown is quoted against;
#   direct  by dd with direct I/O, 8 MiB at a time;
#   cp      by cp and an fsync: a plain program, which leaves writeback
#           to the kernel.
# Caches are dropped before each measurement, on both sides, so every copy
# reads its source from the disk.
#
# OVSNAPD_BASE=/path/to/an/older/ovsnapd measures that daemon too, in
# alternate rounds on the same volume (deactivate, activate with the
# other daemon), and quotes the new one against it.
# BENCH_LOOP_DIO=1 makes the loop device write straight to the disk.
# FS=xfs-noreflink copies without ext4's journal ordering, under which a
# small file's fsync waits for the big copy's data (see results/).
# Run as root: `make bench` or OVSNAP=... FILEOPS=... [OVS_COPY=...] bash bench/concurrency-bench.sh
# Needs about 4 x SIZE_MB (6 x with the floor) of free space under ${BENCH_DIR:-/var/tmp}
# (older snapshots are dropped between measurements).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

PROCS=${PROCS:-8}
FILES=${FILES:-100}
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
KIND=${KIND:-append}
FS=${FS:-ext4}
NATIVE=${NATIVE:-1}
OVS_COPY=${OVS_COPY:-$(dirname "$FILEOPS")/ovs-copy}
if [ "$NATIVE" = 1 ] && [ ! -x "$OVS_COPY" ]; then
	echo "concurrency-bench: no ovs-copy at $OVS_COPY (set OVS_COPY, or NATIVE=0)" >&2
	exit 1
fi
case $KIND in append | names) ;; *) echo "KIND must be append or names" >&2; exit 2 ;; esac
OVSNAPD_NEW=${OVSNAPD:-$(dirname "$OVSNAP")/ovsnapd}
builds=(new)
[ -n "${OVSNAPD_BASE:-}" ] && builds=(base new)

bench_setup concurrency
bench_header "ovsnap concurrent first changes benchmark"
echo "size: ${PROCS} processes x ${FILES} first changes (${KIND}) each; copy-up of ${SIZE_MB} MiB on ${FS};" \
	"medians of ${ROUNDS}; loop direct I/O: ${BENCH_LOOP_DIO:-0}"
echo "daemons: new $OVSNAPD_NEW${OVSNAPD_BASE:+, base $OVSNAPD_BASE (alternate rounds)}"
echo

# The source, and room for a few preserved copies of big.
mkimg "$FS" "$((SIZE_MB * (NATIVE == 1 ? 6 : 4) + 1024))M"
src=$work/$FS/src
mkdir -p "$src"
# The floor's files, beside the volume on the same filesystem.
nat=$work/$FS/native
if [ "$NATIVE" = 1 ]; then
	for ((p = 0; p < PROCS; p++)); do
		mkdir -p "$nat/p$p"
		"$FILEOPS" create "$nat/p$p" "$FILES" 9 >/dev/null
	done
	dd if=/dev/urandom of="$nat/big" bs=1M count="$SIZE_MB" status=none
fi
# The files of the processes, as they were before a round (KIND=names
# removes them).
make_files() {
	local p i

	for ((p = 0; p < PROCS; p++)); do
		mkdir -p "$src/p$p"
		(cd "$src/p$p" && for ((i = 0; i < FILES; i++)); do echo original >"f$i"; done)
	done
}
make_files
dd if=/dev/urandom of="$src/big" bs=1M count="$SIZE_MB" status=none
sync
"$OVSNAP" take "$src" >/dev/null

# The daemon's status line (its control socket, as tests/helpers.sh's ovs_ctl).
daemon_status() {
	python3 - "$(ls "$OVSNAP_RUN_DIR"/*.sock | grep -v '/detached-[0-9]*\.sock$')" status <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(sys.argv[2].encode())
print(s.recv(4096).decode())
EOF
}

# timed_procs FN: ms until FN 0 .. FN PROCS-1, run at once in the
# background, all ended; FAIL when one of them failed.
timed_procs() {
	local t0 t1 p pids=() failed=0

	t0=$(now)
	for ((p = 0; p < PROCS; p++)); do
		"$1" "$p" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	t1=$(now)
	if [ "$failed" = 0 ]; then ms "$t0" "$t1"; else echo FAIL; fi
}

# first_changes P: process P's first changes, through the volume.
first_changes() {
	local f

	if [ "$KIND" = names ]; then
		for f in "$src/p$1"/f*; do mv "$f" "$f.moved" && rm "$f.moved" || return 1; done
	else
		for f in "$src/p$1"/f*; do printf 'x\n' >>"$f" || return 1; done
	fi
}

# first_changes_ms: ms until all PROCS processes made their first changes.
first_changes_ms() { timed_procs first_changes; }

# with_copy_up_ms: first_changes_ms while the big file is copied up; the
# copy's own time, whether it was still running when the eight ended and
# (KIND=names) how many files they had renamed by its end go to $work/copy.
with_copy_up_ms() {
	local t0 big i still procs copy done_by

	t0=$(now)
	printf 'x' >>"$src/big" &
	big=$!
	for i in $(seq 100); do
		kill -0 "$big" 2>/dev/null || break	# done already: a small copy
		case $(daemon_status) in *preserving=[1-9]*) break ;; esac
		sleep 0.02
	done
	first_changes_ms >"$work/procs" &
	procs=$!
	wait "$big"
	copy=$(ms "$t0" "$(now)")
	kill -0 "$procs" 2>/dev/null && still=no || still=yes
	done_by=-
	[ "$KIND" = append ] ||
		done_by=$((PROCS * FILES - $(find "$src" -mindepth 2 -maxdepth 2 -name 'f*' \
			! -name '*.moved' | wc -l)))
	wait "$procs"
	echo "$copy $still $done_by" >"$work/copy"
	cat "$work/procs"
}

: >"$work/copy"

# use_daemon BUILD: the volume's snapshot mount served by that build.
use_daemon() {
	local d=$OVSNAPD_NEW

	[ "$1" = base ] && d=$OVSNAPD_BASE
	[ "${#builds[@]}" -gt 1 ] || return 0
	"$OVSNAP" deactivate "$src" >/dev/null
	OVSNAPD=$d "$OVSNAP" activate "$src" >/dev/null
}

# copy_alone_ms: the first write to big with nothing else running.
copy_alone_ms() {
	local t0

	t0=$(now)
	printf 'x' >>"$src/big"
	ms "$t0" "$(now)"
}

# fresh_take: a take after dropping the older snapshots, whose copies of
# big are given back to the disk (fstrim), so the image needs room for
# two or three copies, not one per round.
fresh_take() {
	"$OVSNAP" take "$src" >/dev/null
	"$OVSNAP" drop -q -k last=1 -c manual "$src" >/dev/null
	fstrim "$work/$FS" 2>/dev/null || true
	sync
}

# native_prepare: empty folders for the floor's copies, and a shared work
# folder, made before the clock (and any copy) starts.
native_prepare() {
	local p

	rm -rf "$nat/save"
	mkdir -p "$nat/save/work"
	for ((p = 0; p < PROCS; p++)); do mkdir -p "$nat/save/p$p"; done
}

# native_changes P: process P's first changes without ovsnap, in the
# folders native_prepare made.
native_changes() {
	"$FILEOPS" save-append "$nat/p$1" "$FILES" "$nat/save/p$1" "$nat/save/work" >/dev/null
}

# native_changes_ms: ms until all PROCS processes made their first changes
# without ovsnap (the floor).
native_changes_ms() { timed_procs native_changes; }

# native_with_copy_ms copyup|direct|cp: native_changes_ms while the native
# big file is copied that way (above); the copy's time and whether it was
# still copying when the processes ended go to $work/copy.  FAIL when the
# copy failed.
native_with_copy_ms() {
	local t0 t1 big procs still copied=ok

	rm -f "$nat/big.copy"
	fstrim "$work/$FS" 2>/dev/null || true
	native_prepare
	drop_caches
	t0=$(now)
	case $1 in
	copyup) "$OVS_COPY" "$nat/big" "$nat/big.copy" >/dev/null & ;;
	direct) dd if="$nat/big" of="$nat/big.copy" bs=8M iflag=direct oflag=direct conv=fsync \
			status=none & ;;
	cp) (cp --reflink=never "$nat/big" "$nat/big.copy" && sync "$nat/big.copy") & ;;
	esac
	big=$!
	sleep 0.1
	native_changes_ms >"$work/procs" &
	procs=$!
	wait "$big" || copied=FAIL
	t1=$(now)
	kill -0 "$procs" 2>/dev/null && still=no || still=yes
	wait "$procs"
	rm -f "$nat/big.copy"
	if [ "$copied" = ok ]; then
		echo "$(ms "$t0" "$t1") $still -" >"$work/copy"
		cat "$work/procs"
	else
		echo "FAIL $still -" >"$work/copy"
		echo FAIL
	fi
}

# daemon_yields: the chunks after which the daemon's copies gave way to
# other first changes so far (empty for a daemon that does not say).
daemon_yields() {
	daemon_status | sed -n 's/.* yields=\([0-9]*\) .*/\1/p'
}

declare -A base with alone copy still renamed yields
for ((r = 0; r < ROUNDS; r++)); do
	for b in "${builds[@]}"; do
		use_daemon "$b"
		fresh_take
		# Each round after a take: every change is a first change again.
		[ "$KIND" = append ] || make_files
		"$OVSNAP" take "$src" >/dev/null
		drop_caches
		base[$b]+="$(first_changes_ms) "
		[ "$KIND" = append ] || make_files
		"$OVSNAP" take "$src" >/dev/null
		drop_caches
		y0=$(daemon_yields)
		with[$b]+="$(with_copy_up_ms) "
		y1=$(daemon_yields)
		yields[$b]+="$([ -n "$y0" ] && [ -n "$y1" ] && echo $((y1 - y0)) || echo -) "
		read -r c st dn <"$work/copy"
		copy[$b]+="$c "
		still[$b]+="$st "
		renamed[$b]+="$dn "
		fresh_take
		drop_caches
		alone[$b]+="$(copy_alone_ms) "
	done
	if [ "$NATIVE" = 1 ]; then
		native_prepare
		drop_caches
		base[native]+="$(native_changes_ms) "
		for k in copyup direct cp; do
			with[$k]+="$(native_with_copy_ms $k) "
			read -r c st dn <"$work/copy"
			copy[$k]+="$c "
			still[$k]+="$st "
		done
	fi
done

med() { printf '%s\n' $1 | median; }
mibs() { awk -v m="$1" -v s="$SIZE_MB" 'BEGIN {
	if (m !~ /^[0-9.]+$/ || m == 0) print "-"; else printf "%.0f MiB/s", s / (m / 1000) }'; }
row "measure" "ms" "baseline" "ratio" ""
for b in "${builds[@]}"; do
	bm=$(med "${base[$b]}")
	wm=$(med "${with[$b]}")
	echo "-- daemon: $b"
	row "${PROCS} x ${FILES} first changes" "$bm" "-" "-" "rounds: ${base[$b]}"
	row "the same during a ${SIZE_MB} MiB copy-up" "$wm" "$bm" "$(ratio "$wm" "$bm")" \
		"rounds: ${with[$b]}"
	row "that copy-up (first write to big)" "$(med "${copy[$b]}")" "-" "-" \
		"rounds: ${copy[$b]}"
	row "the copy-up alone" "$(med "${alone[$b]}")" "-" "-" \
		"$(mibs "$(med "${alone[$b]}")"); rounds: ${alone[$b]}"
	echo "still copying when the ${PROCS} ended, by round: ${still[$b]}"
	echo "chunks after which the copy-up gave way to them, by round: ${yields[$b]}"
	[ "$KIND" = append ] ||
		echo "files renamed (of $((PROCS * FILES))) when the copy ended, by round: ${renamed[$b]}"
done
if [ "$NATIVE" = 1 ]; then
	bm=$(med "${base[native]}")
	declare -A nr
	echo "-- the floor: no ovsnap, the same changes copied durably by the processes"
	row "${PROCS} x ${FILES} first changes" "$bm" "-" "-" "rounds: ${base[native]}"
	for k in copyup direct cp; do
		wm=$(med "${with[$k]}")
		nr[$k]=$(ratio "$wm" "$bm")
		row "the same during a ${SIZE_MB} MiB copy ($k)" "$wm" "$bm" "${nr[$k]}" \
			"rounds: ${with[$k]% }; still copying at their end: ${still[$k]% }"
		row "that copy ($k)" "$(med "${copy[$k]}")" "-" "-" \
			"$(mibs "$(med "${copy[$k]}")"); rounds: ${copy[$k]}"
	done
	echo "-- time the copy added (ms): ovsnap's, the floor's (copyup), the one against the other"
	fadded=$(awk -v w="$(med "${with[copyup]}")" -v b="$bm" 'BEGIN { printf "%.1f", w - b }')
	for b in "${builds[@]}"; do
		added=$(awk -v w="$(med "${with[$b]}")" -v b="$(med "${base[$b]}")" 'BEGIN { printf "%.1f", w - b }')
		sr=$(ratio "$(med "${with[$b]}")" "$(med "${base[$b]}")")
		row "daemon: $b" "$added" "$fadded" "$(ratio "$added" "$fadded")" \
			"slowdown ${sr} against the floor's ${nr[copyup]}: $(ratio "$sr" "${nr[copyup]}"); against direct's $(ratio "$sr" "${nr[direct]}"), cp's $(ratio "$sr" "${nr[cp]}")"
	done
fi
if [ "${#builds[@]}" -gt 1 ]; then
	echo "-- new against base"
	row "first changes during the copy-up" "$(med "${with[new]}")" "$(med "${with[base]}")" \
		"$(ratio "$(med "${with[new]}")" "$(med "${with[base]}")")" ""
	row "the copy-up alone" "$(med "${alone[new]}")" "$(med "${alone[base]}")" \
		"$(ratio "$(med "${alone[new]}")" "$(med "${alone[base]}")")" ""
fi
