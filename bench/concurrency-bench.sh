#!/bin/bash
# Benchmark of concurrent first changes (issue 13 item 2) on ext4, where a
# copy-up is a real copy: ${PROCS:-8} processes each make the first change
# to ${FILES:-100} files of their own folder after a take (KIND=append: an
# append; KIND=names: a rename in the folder, then an unlink),
#   baseline      with nothing else running,
#   with copy-up  while the first write to a ${SIZE_MB:-1024} MiB file
#                 copies it up (held in its preserve for the whole time
#                 when it lasts that long),
# and the ratio of the two.  With one global change lock the eight wait
# for the whole copy; with locking by object they should not (renames and
# unlinks of files hold the change lock for reading since the nslock
# branch; for writing before, so they waited for the copy).
# Run as root: `make bench` or OVSNAP=... FILEOPS=... bash bench/concurrency-bench.sh
# Needs about (ROUNDS + 2) x SIZE_MB of free space under ${BENCH_DIR:-/var/tmp}.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

PROCS=${PROCS:-8}
FILES=${FILES:-100}
SIZE_MB=${SIZE_MB:-1024}
ROUNDS=${ROUNDS:-3}
KIND=${KIND:-append}
# FS=xfs-noreflink: copies without ext4's journal ordering, under which a
# small file's fsync waits for the big copy's data (see results/).
FS=${FS:-ext4}
case $KIND in append | names) ;; *) echo "KIND must be append or names" >&2; exit 2 ;; esac

bench_setup concurrency
bench_header "ovsnap concurrent first changes benchmark"
echo "size: ${PROCS} processes x ${FILES} first changes (${KIND}) each; copy-up of ${SIZE_MB} MiB" \
	"on ${FS}; medians of ${ROUNDS}"
echo

# The source, and one preserved copy per round.
mkimg "$FS" "$((SIZE_MB * (ROUNDS + 2) + 1024))M"
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
		case $(daemon_status) in *preserving=[1-9]*) break ;; esac
		sleep 0.02
	done
	first_changes_ms >"$work/procs" &
	procs=$!
	wait "$big"
	copy=$(ms "$t0" "$(now)")
	kill -0 "$procs" 2>/dev/null && still=no || still=yes
	# KIND=names: how many files the processes had renamed by then.
	done_by=-
	[ "$KIND" = append ] ||
		done_by=$((PROCS * FILES - $(find "$src" -mindepth 2 -maxdepth 2 -name 'f*' \
			! -name '*.moved' | wc -l)))
	wait "$procs"
	echo "$copy $still $done_by" >>"$work/copy"
	cat "$work/procs"
}

: >"$work/copy"
base=() with=()
for ((r = 0; r < ROUNDS; r++)); do
	# Each round after a take: every change is a first change again.
	[ "$KIND" = append ] || make_files
	"$OVSNAP" take "$src" >/dev/null
	base+=("$(first_changes_ms)")
	[ "$KIND" = append ] || make_files
	"$OVSNAP" take "$src" >/dev/null
	with+=("$(with_copy_up_ms)")
done

b=$(printf '%s\n' "${base[@]}" | median)
w=$(printf '%s\n' "${with[@]}" | median)
c=$(awk '{ print $1 }' "$work/copy" | median)
row "measure" "ms" "baseline" "ratio" ""
row "${PROCS} x ${FILES} first changes (${KIND})" "$b" "-" "-" "rounds: ${base[*]}"
row "the same during a ${SIZE_MB} MiB copy-up" "$w" "$b" "$(ratio "$w" "$b")" "rounds: ${with[*]}"
row "the copy-up itself (first write to big)" "$c" "-" "-" \
	"rounds: $(awk '{ print $1 }' "$work/copy" | tr '\n' ' ')"
echo "still copying when the ${PROCS} ended, by round: $(awk '{ print $2 }' "$work/copy" | tr '\n' ' ')"
[ "$KIND" = append ] ||
	echo "files renamed (of $((PROCS * FILES))) when the copy ended, by round:" \
		"$(awk '{ print $3 }' "$work/copy" | tr '\n' ' ')"
