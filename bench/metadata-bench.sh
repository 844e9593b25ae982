#!/bin/bash
# Metadata and small-write speed of the live path against a plain FUSE
# passthrough built against the same libfuse (issue 12, item 1), in one
# run on one XFS image:
#   create, stat walk, rename, append (a small write to each file),
#   chmod, delete: N files in a folder new since the take, and in folders
#   that existed at the take (every first change is preserved there: each
#   old-folder operation but the walk has a folder of its own, so that
#   every one of them is a first change, not a change of files an earlier
#   operation of the round preserved already)
# Targets take turns round after round (this VM drifts by 2-4x within
# minutes), each round starting with the next one; each figure is the
# median of its rounds.  The passthrough runs
# twice: in this script's session, and in one of its own as a daemon does
# (bench-lib.sh, start_passthrough: the fair floor for ovsnapd).  A snapshot is taken
# at the start of every round, so the "old" folder of the round holds
# files that the newest snapshot must keep.
#
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops \
#   FUSE_PASSTHROUGH=build/bench/fuse-passthrough bash bench/metadata-bench.sh
#
# OVSNAPD_BASE=/path/to/another/ovsnapd adds a column for that daemon
# (e.g. the build of main before a change), measured in the same rounds.
# N (default 5000) files, ROUNDS (default 3).  DEPTH (default 0): the new
# folder lies that many folders deep in old ones (made before the take),
# as a new folder in a real tree does, rather than at the top.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$PWD/bench/fuse-passthrough}
N=${N:-5000}
ROUNDS=${ROUNDS:-3}
DEPTH=${DEPTH:-0}
chain=
for ((i = 1; i <= DEPTH; i++)); do chain+=/l$i; done
OPS="create stat rename append chmod delete"

bench_setup metadata
[ -x "$FUSE_PASSTHROUGH" ] || { echo "bench: no fuse-passthrough at $FUSE_PASSTHROUGH (make bench/fuse-passthrough)" >&2; exit 1; }
bench_header "ovsnap metadata benchmark (issue 12 item 1)"
echo "N=$N files per folder, medians of $ROUNDS rounds; libfuse $(ldd "$FUSE_PASSTHROUGH" | awk '/libfuse3/ { print $3 }')"
[ "$DEPTH" -gt 0 ] && echo "the new folder $DEPTH folders deep in old ones: old.R$chain/new"
mkimg xfs 4G
x=$work/xfs

targets="native fp fpd live"
mkdir -p "$x/native" "$x/fp-real" "$x/fp" "$x/fpd-real" "$x/fpd" "$x/live"
"$OVSNAP" take "$x/live" >/dev/null
if [ -n "${OVSNAPD_BASE:-}" ]; then
	mkdir -p "$x/base"
	OVSNAPD=$OVSNAPD_BASE "$OVSNAP" take "$x/base" >/dev/null
	targets="$targets base"
fi
start_passthrough "$x/fp-real" "$x/fp"
start_passthrough "$x/fpd-real" "$x/fpd" own-session

# The daemons' own CPU time per operation too (utime + stime): steadier
# than the times on this VM, and what a change to the daemon's work moves.
declare -A runs cpu pid_of
pid_of[live]=$(bench_daemon_of "$x/live")
[ -n "${OVSNAPD_BASE:-}" ] && pid_of[base]=$(bench_daemon_of "$x/base")
one() { # WHERE KIND OP DIR
	local t c0=0
	sync
	[ -n "${pid_of[$1]:-}" ] && c0=$(cpu_ms "${pid_of[$1]}")
	case $3 in
	create) t=$(fileops_ms create "$4" "$N" 4096) ;;
	stat) drop_caches; t=$(fileops_ms stat "$4") ;;
	rename) t=$(fileops_ms rename "$4" "$N") ;;
	append)
		# The new folder's files were renamed just before.
		[ -e "$4/f00000000.r" ] && fileops_ms unrename "$4" "$N" >/dev/null
		t=$(fileops_ms append "$4" "$N" 16) ;;
	chmod) t=$(fileops_ms chmod "$4" "$N") ;;
	delete) t=$(fileops_ms delete "$4" "$N") ;;
	esac
	[ -n "${pid_of[$1]:-}" ] &&
		cpu[$1,$2,$3]+="$(awk -v a="$c0" -v b="$(cpu_ms "${pid_of[$1]}")" 'BEGIN { print b - a }') "
	sync
	runs[$1,$2,$3]+="$t "
}

# rotated N WORD...: the words, the first N mod their number moved to the
# end.  Each round starts with another target: measured in a fixed order,
# the one after the passthroughs renamed 1.1-1.3x slower than the same
# build right after it (bench/results/2026-12-07-unlink-move.txt).
rotated() {
	local n=$1
	shift
	local a=("$@") k=$((n % $#))
	echo "${a[@]:k}" "${a[@]:0:k}"
}

for ((r = 1; r <= ROUNDS; r++)); do
	# The old folders first, made natively before the round's take
	# (the passthrough's through its real directory).
	for w in $targets; do
		real=$x/$w
		[ "$w" = fp ] || [ "$w" = fpd ] && real=$x/$w-real
		for o in old old-append old-chmod old-delete; do
			mkdir "$real/$o.$r"
			"$FILEOPS" create "$real/$o.$r" "$N" 4096 >/dev/null
		done
		[ -n "$chain" ] && mkdir -p "$real/old.$r$chain"
	done
	"$OVSNAP" take "$x/live" >/dev/null
	[ -n "${OVSNAPD_BASE:-}" ] && "$OVSNAP" take "$x/base" >/dev/null
	for kind in new old; do
		for op in $OPS; do
			for w in $(rotated "$r" $targets); do
				d=$x/$w/$kind.$r
				[ "$kind" = new ] && [ -n "$chain" ] && d=$x/$w/old.$r$chain/new
				case $kind,$op in
				old,append | old,chmod | old,delete) d=$x/$w/old-$op.$r ;;
				esac
				[ "$kind" = new ] && [ "$op" = create ] && mkdir "$d"
				[ "$kind" = old ] && [ "$op" = create ] && continue
				one "$w" "$kind" "$op" "$d"
			done
		done
	done
done

med() { # KEY
	if [[ " ${runs[$1]:-FAIL}" == *" FAIL "* ]]; then echo FAIL; else tr ' ' '\n' <<<"${runs[$1]}" | grep . | median; fi
}
echo
printf '%-22s %9s %9s %9s %9s %9s   %s\n' "ms" native passthr pt-daemon ovsnapd "${OVSNAPD_BASE:+base}" \
	"ovsnapd's speed vs passthrough, vs pt-daemon${OVSNAPD_BASE:+ | base, the same}"
for kind in new old; do
	for op in $OPS; do
		[ "$kind" = old ] && [ "$op" = create ] && continue
		n=$(med "native,$kind,$op"); p=$(med "fp,$kind,$op"); pd=$(med "fpd,$kind,$op")
		l=$(med "live,$kind,$op")
		b=; [ -n "${OVSNAPD_BASE:-}" ] && b=$(med "base,$kind,$op")
		printf '%-22s %9s %9s %9s %9s %9s   %s\n' "$op ($kind folder)" "$n" "$p" "$pd" "$l" "$b" \
			"$(ratio "$p" "$l")x $(ratio "$pd" "$l")x${b:+ | $(ratio "$p" "$b")x $(ratio "$pd" "$b")x}"
	done
done
echo
printf '%-22s %9s %9s   %s\n' "daemon CPU ms" ovsnapd "${OVSNAPD_BASE:+base}" "${OVSNAPD_BASE:+ovsnapd's CPU time / base's}"
for kind in new old; do
	for op in $OPS; do
		[ "$kind" = old ] && [ "$op" = create ] && continue
		l=$(printf '%s\n' ${cpu[live,$kind,$op]:-} | median)
		b=; [ -n "${OVSNAPD_BASE:-}" ] && b=$(printf '%s\n' ${cpu[base,$kind,$op]:-} | median)
		printf '%-22s %9s %9s   %s\n' "$op ($kind folder)" "$l" "$b" "${b:+$(ratio "$l" "$b")}"
	done
done
echo "(passthr: the plain passthrough in this script's session; pt-daemon: the same"
echo " in a session of its own, as a daemon runs, and as ovsnapd does)"
echo "(in the old folders each rename, append, chmod and delete is its file's first"
echo " change since the take: a preserve; stat is a cold walk of the N files)"
