#!/bin/bash
# FUSE requests per operation, by opcode, for ovsnapd's live path and the
# plain passthrough (bench/fuse-passthrough.c) doing the same small-file
# workloads as bench/metadata-bench.sh (issue 12, item 1): counted in the
# kernel (the fuse:fuse_request_send tracepoint, kernel 6.16+, in a
# tracefs instance of this run's own), so neither daemon is changed or
# slowed to be counted.  Each figure is requests / N, per connection.
#
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   FUSE_PASSTHROUGH=build/bench/fuse-passthrough bash bench/requests-bench.sh
#
# N (default 200) files per folder.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$PWD/bench/fuse-passthrough}
N=${N:-200}
OPS="create stat rename append delete"
tr=/sys/kernel/tracing
# A fresh machine may not have tracefs mounted yet.
[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null || true
[ -d "$tr/events/fuse/fuse_request_send" ] || { echo "bench: no fuse tracepoints (kernel 6.16+, tracefs at $tr)" >&2; exit 1; }

bench_setup requests
inst=$tr/instances/ovsnap-requests.$$
mkdir "$inst"
trap 'echo 0 >"$inst/events/fuse/fuse_request_send/enable" 2>/dev/null; rmdir "$inst" 2>/dev/null; bench_cleanup' EXIT
echo 8192 >"$inst/buffer_size_kb"
bench_header "FUSE requests per operation (issue 12 item 1)"
echo "N=$N files per folder; libfuse $(ldd "$FUSE_PASSTHROUGH" | awk '/libfuse3/ { print $3 }')"
mkimg xfs 1G
x=$work/xfs
mkdir -p "$x/fp-real" "$x/fp" "$x/live"
"$OVSNAP" take "$x/live" >/dev/null
start_passthrough "$x/fp-real" "$x/fp"
mkdir "$x/fp-real/old" "$x/live/old"
"$FILEOPS" create "$x/fp-real/old" "$N" 4096 >/dev/null
"$FILEOPS" create "$x/live/old" "$N" 4096 >/dev/null
"$OVSNAP" take "$x/live" >/dev/null

# count WHERE OP DIR: run OP, print "OPCODE=COUNT ..." of WHERE's connection
count() {
	local dev
	dev=$(mountpoint -d "$x/$1" | awk -F: '{ print $1 * 1048576 + $2 }')
	sync
	[ "$2" = stat ] && drop_caches
	[ "$2" = append ] && "$FILEOPS" unrename "$3" "$N" >/dev/null
	echo >"$inst/trace"
	echo "connection == $dev" >"$inst/events/fuse/fuse_request_send/filter"
	echo 1 >"$inst/events/fuse/fuse_request_send/enable"
	case $2 in
	create | append) "$FILEOPS" "$2" "$3" "$N" 4096 >/dev/null ;;
	stat) "$FILEOPS" stat "$3" >/dev/null 2>&1 ;;
	*) "$FILEOPS" "$2" "$3" "$N" >/dev/null ;;
	esac
	echo 0 >"$inst/events/fuse/fuse_request_send/enable"
	grep -o '(FUSE_[A-Z_0-9]*)' "$inst/trace" | tr -d '()' | sed 's/^FUSE_//' |
		sort | uniq -c | awk -v n="$N" '{ printf "%s=%.2f ", $2, $1 / n }'
	grep -q 'LOST' "$inst/trace" && printf '(events lost) '
	echo
}

for kind in new old; do
	[ "$kind" = new ] && mkdir "$x/fp/new" "$x/live/new"
	for op in $OPS; do
		[ "$kind" = old ] && [ "$op" = create ] && continue
		for w in fp live; do
			printf '%-7s %-4s %-12s %s\n' "$op" "$kind" "$( [ $w = fp ] && echo passthrough || echo ovsnapd)" \
				"$(count "$w" "$op" "$x/$w/$kind")"
		done
	done
done
echo "(requests per file; stat is a cold walk of the folder; append opens, writes 4 KiB, closes)"
