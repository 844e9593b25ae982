#!/bin/bash
# Metadata and small-write speed of the live path against a plain FUSE
# passthrough built against the same libfuse (issue 12, item 1), in one
# run on one XFS image:
#   create, stat walk, rename, append (a small write to each file),
#   delete: N files in a folder new since the take, and in a folder that
#   existed at the take (every first change is preserved there)
# Targets take turns round after round (this VM drifts by 2-4x within
# minutes); each figure is the median of its rounds.  The passthrough runs
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
# N (default 5000) files, ROUNDS (default 3).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
FUSE_PASSTHROUGH=${FUSE_PASSTHROUGH:-$PWD/bench/fuse-passthrough}
N=${N:-5000}
ROUNDS=${ROUNDS:-3}
OPS="create stat rename append delete"

bench_setup metadata
[ -x "$FUSE_PASSTHROUGH" ] || { echo "bench: no fuse-passthrough at $FUSE_PASSTHROUGH (make bench/fuse-passthrough)" >&2; exit 1; }
bench_header "ovsnap metadata benchmark (issue 12 item 1)"
echo "N=$N files per folder, medians of $ROUNDS rounds; libfuse $(ldd "$FUSE_PASSTHROUGH" | awk '/libfuse3/ { print $3 }')"
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

declare -A runs
one() { # WHERE KIND OP DIR
	local t
	sync
	case $3 in
	create) t=$(fileops_ms create "$4" "$N" 4096) ;;
	stat) drop_caches; t=$(fileops_ms stat "$4") ;;
	rename) t=$(fileops_ms rename "$4" "$N") ;;
	append) t=$(fileops_ms unrename "$4" "$N" >/dev/null; fileops_ms append "$4" "$N" 16) ;;
	delete) t=$(fileops_ms delete "$4" "$N") ;;
	esac
	sync
	runs[$1,$2,$3]+="$t "
}

for ((r = 1; r <= ROUNDS; r++)); do
	# The old folders first, made natively before the round's take
	# (the passthrough's through its real directory).
	for w in $targets; do
		real=$x/$w
		[ "$w" = fp ] || [ "$w" = fpd ] && real=$x/$w-real
		mkdir "$real/old.$r"
		"$FILEOPS" create "$real/old.$r" "$N" 4096 >/dev/null
	done
	"$OVSNAP" take "$x/live" >/dev/null
	[ -n "${OVSNAPD_BASE:-}" ] && "$OVSNAP" take "$x/base" >/dev/null
	for kind in new old; do
		for op in $OPS; do
			for w in $targets; do
				d=$x/$w/$kind.$r
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
echo "(passthr: the plain passthrough in this script's session; pt-daemon: the same"
echo " in a session of its own, as a daemon runs, and as ovsnapd does)"
echo "(append in the old folder is each file's first change since the take: a preserve;"
echo " rename and delete there preserve the name; stat is a cold walk of the N files)"
