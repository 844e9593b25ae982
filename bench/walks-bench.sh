#!/bin/bash
# Walks of big layers (issue 13 item 3): the time and the peak resident
# memory (max RSS) of each command that reads a whole tree or layer, at
# N entries (default 300,000; the issue's figure is 10^6):
#   the first take (ovsnapd's hard-link scan: the daemon's RSS after it),
#   `ovsnap list` (the SPACE column walks every layer),
#   `ovsnap fsck -n` (every layer and SRC, with N/2 hard-linked inodes of
#   two names each, the second name in another folder),
#   `ovsnap merge` of a layer of N entries into one holding only the folders
#   (every entry moves by rename), `ovsnap drop` of the oldest (N entries).
# SRC holds N/2 files in folders of 1000 and a hard link of each under
# links/ (N names); layer 2 holds N files (written natively into it while
# the volume is deactivated), layer 1 only their folders.
#
# Then fsck again, after LAYERS (20) more takes and, deactivated, a chmod
# of every name of SRC natively: N unprotected changes, each checked
# against every layer.
#
# FOLDER (default 10,000): layer 2's entries per folder; FOLDER=N puts them
# all in one folder.
#
# MKLAYERS=path/to/ovs-mklayers: also merge a layer of one folder of N
# entries (made natively) into one holding only that folder, with it and,
# with MKLAYERS_BASE=path/to/an/older/ovs-mklayers, with that one, each on
# layers of its own.
#
# OVSNAP_BASE=path/to/an/older/ovsnap: the first take (then forgotten),
# fsck and list are run with it too, on the same state, as the baseline of
# the same run (merge and drop change the volume, so they run once, with
# OVSNAP).
# Run as root: `bash bench/run.sh walks`, or
#   OVSNAP=build/ovsnap FILEOPS=build/bench/ovs-fileops bash bench/walks-bench.sh [N]
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

N=${1:-${N:-300000}}
case $N in '' | *[!0-9]*) echo "walks-bench: N must be a number of entries" >&2; exit 2 ;; esac
BASE=${OVSNAP_BASE:-}
LAYERS=${LAYERS:-20}
FOLDER=${FOLDER:-10000}

bench_setup walks
bench_header "ovsnap walks benchmark"
echo "SRC: $((N / 2)) files in folders of 1000, each with a second name in another folder ($N names)"
echo "layer 2: $N entries in folders of $FOLDER"
echo "max RSS from /usr/bin/time (KiB); ms wall time"
echo

mkimg xfs "$(((N / 100000 + 1) * 2))G"
src=$work/xfs/src
mkdir -p "$src"

# timed LABEL CMD...: one row: label, ms, max RSS KiB (CMD's output in
# $TIMED_OUT, or discarded)
timed() {
	local label=$1 out

	shift
	if out=$(/usr/bin/time -f '%e %M' "$@" 2>&1 >"${TIMED_OUT:-/dev/null}" | tail -1); then
		row "$label" "$(awk -v s="${out% *}" 'BEGIN { printf "%.0f", s * 1000 }')" "${out#* }" ""
	else
		# fsck exits non-zero on findings: still a measurement
		case $out in
		*[0-9].[0-9]*' '[0-9]*) row "$label" "$(awk -v s="${out% *}" 'BEGIN { printf "%.0f", s * 1000 }')" "${out#* }" "(exit != 0)" ;;
		*) row "$label" FAIL "" "$out" ;;
		esac
	fi
}
daemon_rss() {
	local p

	for p in $(bench_our_daemons); do
		[ "$(cat "/proc/$p/comm")" = ovsnapd ] && awk '/^VmHWM/ { print $2 }' "/proc/$p/status"
	done
	return 0
}

# upper_of SRC ID: the layer directory of snapshot ID
upper_of() {
	"$OVSNAP" list --json "$1" | tr ',{}' '\n\n\n' |
		awk -v id="$2" '/"id":/ { gsub(/[^0-9]/, ""); cur = $0 }
			cur == id && /"upper":/ { sub(/.*"upper": *"/, ""); sub(/".*/, ""); print; exit }'
}

t0=$(now)
mktree "$src/tree" "$((N / 2))"
cp -al "$src/tree" "$src/links"
# the second name in another folder: rotate the folders of links/ by one
nd=$(ls "$src/links" | wc -l)
for ((d = 0; d < nd; d++)); do mv "$src/links/d$d" "$src/links/x$(((d + 1) % nd))"; done
for ((b = 0; b * FOLDER < N; b++)); do mkdir -p "$src/new/b$b"; done
sync
echo "setup: $N names natively: $(ms "$t0" "$(now)") ms"

row "command" "ms" "max RSS KiB" ""
if [ -n "$BASE" ]; then
	# the same first take with the baseline's daemon, then forgotten
	drop_caches
	t0=$(now)
	"$BASE" take -w "$src" >/dev/null
	row "first take (ovsnapd's hard-link scan) [base]" "$(ms "$t0" "$(now)")" "$(daemon_rss)" "(ovsnapd's peak RSS)"
	"$BASE" deactivate -w "$src" >/dev/null
	"$BASE" forget -y -w "$src" >/dev/null
fi
drop_caches
t0=$(now)
s1=$("$OVSNAP" take -w "$src")
row "first take (ovsnapd's hard-link scan)${BASE:+ [new]}" "$(ms "$t0" "$(now)")" "$(daemon_rss)" "(ovsnapd's peak RSS)"
# layer 1: the folders of new/, not their entries (so a merge into it
# moves entry by entry)
for b in "$src"/new/b*; do touch "$b/first"; done
s2=$("$OVSNAP" take -w "$src")
# Layer 2's N entries are written natively while the volume is
# deactivated (copies of files deleted since, as far as the views can
# tell): making them through the live path costs about 2 ms each.
"$OVSNAP" deactivate -w "$src" >/dev/null
u2=$(upper_of "$src" "$s2")
t0=$(now)
for ((b = 0; b * FOLDER < N; b++)); do
	mkdir -p "$u2/new/b$b"
	"$FILEOPS" create "$u2/new/b$b" $((N - b * FOLDER < FOLDER ? N - b * FOLDER : FOLDER)) 0 >/dev/null
done
sync
echo "setup: $N entries in layer $s2: $(ms "$t0" "$(now)") ms"
"$OVSNAP" activate -w "$src" >/dev/null
s3=$("$OVSNAP" take -w "$src")
"$OVSNAP" deactivate -w "$src" >/dev/null

for bin in ${BASE:+"$BASE"} "$OVSNAP"; do
	tag=
	[ -n "$BASE" ] && { [ "$bin" = "$BASE" ] && tag=" [base]" || tag=" [new]"; }
	drop_caches
	timed "list (SPACE of 3 layers)$tag" "$bin" list "$src"
	drop_caches
	timed "fsck -n$tag" "$bin" fsck -n "$src"
done
# Unprotected changes (fsck names the snapshots each one may show wrong):
# $LAYERS more snapshots, then, deactivated, a chmod of every name of SRC
# natively; fsck reports N changes and checks each against every layer.
"$OVSNAP" activate -w "$src" >/dev/null
for ((i = 0; i < LAYERS; i++)); do "$OVSNAP" take -w "$src" >/dev/null; done
"$OVSNAP" deactivate -w "$src" >/dev/null
chmod -R g-w "$src"
for bin in ${BASE:+"$BASE"} "$OVSNAP"; do
	tag=
	[ -n "$BASE" ] && { [ "$bin" = "$BASE" ] && tag=" [base]" || tag=" [new]"; }
	drop_caches
	TIMED_OUT=$work/fsck$tag.out timed "fsck -n, $((LAYERS + 3)) layers, changes$tag" "$bin" fsck -n "$src"
done
[ -z "$BASE" ] || {
	cmp -s "$work/fsck [base].out" "$work/fsck [new].out" && same=yes || same=NO
	echo "fsck's findings of the changes the same with both: $same ($(wc -l <"$work/fsck [new].out") lines)"
}
drop_caches
timed "merge $s1 $s2 (layer of $N entries)" "$OVSNAP" merge -q "$src" "$s1" "$s2"
drop_caches
timed "drop $s1 (oldest, $N entries)" "$OVSNAP" drop -q "$src" "$s1"
: "$s3"
# merge of one folder of N entries by the library alone, on layers made
# natively, with each ovs-mklayers
for ml in ${MKLAYERS_BASE:+"$MKLAYERS_BASE"} ${MKLAYERS:+"$MKLAYERS"}; do
	tag=
	[ -n "$MKLAYERS_BASE" ] && { [ "$ml" = "$MKLAYERS_BASE" ] && tag=" [base]" || tag=" [new]"; }
	mkdir -p "$work/xfs/ml/A/big" "$work/xfs/ml/B/big"
	"$FILEOPS" create "$work/xfs/ml/B/big" "$N" 0 >/dev/null
	sync
	drop_caches
	timed "merge of one folder of $N entries (ovs-mklayers)$tag" "$ml" merge "$work/xfs/ml/A" "$work/xfs/ml/B"
	rm -rf "$work/xfs/ml"
done
