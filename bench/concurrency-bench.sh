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
# not wait for the copy's dirty data either.
#
# OVSNAPD_BASE=/path/to/an/older/ovsnapd measures that daemon too, in
# alternate rounds on the same volume (deactivate, activate with the
# other daemon), and quotes the new one against it.
# BENCH_LOOP_DIO=1 makes the loop device write straight to the disk.
# FS=xfs-noreflink copies without ext4's journal ordering, under which a
# small file's fsync waits for the big copy's data (see results/).
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/concurrency-bench.sh
# Needs about 4 x SIZE_MB of free space under ${BENCH_DIR:-/var/tmp}
# (older snapshots are dropped between measurements).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

PROCS=${PROCS:-8}
FILES=${FILES:-100}
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
KIND=${KIND:-append}
FS=${FS:-ext4}
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
mkimg "$FS" "$((SIZE_MB * 4 + 1024))M"
src=$work/$FS/src
mkdir -p "$src"
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

# first_changes_ms: ms until all PROCS processes made their first changes.
first_changes_ms() {
	local t0 t1 p pids=() failed=0

	t0=$(now)
	for ((p = 0; p < PROCS; p++)); do
		if [ "$KIND" = names ]; then
			(for f in "$src/p$p"/f*; do mv "$f" "$f.moved" && rm "$f.moved" || exit 1; done) &
		else
			(for f in "$src/p$p"/f*; do printf 'x\n' >>"$f" || exit 1; done) &
		fi
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || failed=1; done
	t1=$(now)
	if [ "$failed" = 0 ]; then ms "$t0" "$t1"; else echo FAIL; fi
}

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

declare -A base with alone copy still renamed
for ((r = 0; r < ROUNDS; r++)); do
	for b in "${builds[@]}"; do
		use_daemon "$b"
		fresh_take
		# Each round after a take: every change is a first change again.
		[ "$KIND" = append ] || make_files
		"$OVSNAP" take "$src" >/dev/null
		base[$b]+="$(first_changes_ms) "
		[ "$KIND" = append ] || make_files
		"$OVSNAP" take "$src" >/dev/null
		with[$b]+="$(with_copy_up_ms) "
		read -r c st dn <"$work/copy"
		copy[$b]+="$c "
		still[$b]+="$st "
		renamed[$b]+="$dn "
		fresh_take
		alone[$b]+="$(copy_alone_ms) "
	done
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
	[ "$KIND" = append ] ||
		echo "files renamed (of $((PROCS * FILES))) when the copy ended, by round: ${renamed[$b]}"
done
if [ "${#builds[@]}" -gt 1 ]; then
	echo "-- new against base"
	row "first changes during the copy-up" "$(med "${with[new]}")" "$(med "${with[base]}")" \
		"$(ratio "$(med "${with[new]}")" "$(med "${with[base]}")")" ""
	row "the copy-up alone" "$(med "${alone[new]}")" "$(med "${alone[base]}")" \
		"$(ratio "$(med "${alone[new]}")" "$(med "${alone[base]}")")" ""
fi
