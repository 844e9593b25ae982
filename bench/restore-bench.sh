#!/bin/bash
# Benchmark of ovsnap restore and rollback (issue 15):
#  - restoring a 1 GiB file (overwritten since the snapshot, and the
#    overwritten state in a newer snapshot, so the restore preserves it
#    too) on XFS and ext4: time and data space used (df), against copying
#    it back from a view
#    (`cp VIEW/big SRC/big`, the way before restore existed), both in this
#    run;
#  - rolling back ${CHANGED:-1000} changed files in a tree of
#    ${FILES:-1000000} files, against `rsync -a --delete` from a view;
#  - (issue 13 item 3) rolling back ${MANY:-100000} changed paths: time
#    and peak RSS (/usr/bin/time) of the rollback, and with
#    OVSNAP_BASE=/path/to/ovsnap (another build, e.g. main's) of its
#    rollback on an identical volume in the same run, ${ROUNDS:-1}
#    alternating round(s).  The changes are made cheaply: snapshot 1's
#    layer gets folders of 1000 fifos with 100-byte names while the volume
#    is deactivated (the rollback makes them again through the snapshot
#    mount; 10^5 changes made through it would take many minutes).
# Run as root: OVSNAP=... FILEOPS=... bash bench/restore-bench.sh
# (PARTS="big rollback many" picks the measurements.)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"

FILES=${FILES:-1000000}
CHANGED=${CHANGED:-1000}
MANY=${MANY:-100000}
ROUNDS=${ROUNDS:-1}
OVSNAP_BASE=${OVSNAP_BASE:-}
PARTS=${PARTS:-big rollback many}	# which measurements

bench_setup restore
bench_header "ovsnap restore/rollback benchmark"
echo

used_mib() { df -B1M --output=used "$1" | tail -1; }

restore_big() { # TYPE
	local type=$1 src t u0 u1 t_cp u_cp

	src=$work/$type/src
	mkdir -p "$src"
	dd if=/dev/urandom of="$src/big" bs=1M count=1024 status=none
	"$OVSNAP" take "$src" >/dev/null
	dd if=/dev/urandom of="$src/big" bs=1M count=1024 conv=notrunc status=none
	# a snapshot of the overwritten file: the restore must preserve it
	"$OVSNAP" take "$src" >/dev/null
	sync
	u0=$(used_mib "$work/$type")
	t=$(time_ms "$OVSNAP" restore -q "$src" 1 big)
	sync
	u1=$(used_mib "$work/$type")
	# baseline: overwrite again, then copy the old version from a view
	dd if=/dev/urandom of="$src/big" bs=1M count=1024 conv=notrunc status=none
	"$OVSNAP" take "$src" >/dev/null
	mkdir -p "$work/view-$type"
	"$OVSNAP" mount "$src" 1 "$work/view-$type"
	sync
	local c0
	c0=$(used_mib "$work/$type")
	t_cp=$(time_ms cp "$work/view-$type/big" "$src/big")
	sync
	u_cp=$(( $(used_mib "$work/$type") - c0 ))
	"$OVSNAP" umount "$work/view-$type"
	row "restore 1 GiB file, $type" "$t" "$t_cp" "$(ratio "$t_cp" "$t")" "cp from a view"
	row "  data space used (MiB), $type" "$((u1 - u0))" "$u_cp" "" "cp from a view"
	"$OVSNAP" deactivate "$src" >/dev/null
}

[[ " $PARTS " == *" big "* || " $PARTS " == *" rollback "* ]] &&
	row "what" "ms" "baseline ms" "speedup" "baseline"
mkimg xfs "${IMG_SIZE:-20G}"
[[ " $PARTS " == *" big "* ]] && mkimg ext4 8G
if [[ " $PARTS " == *" big "* ]]; then
	restore_big xfs
	restore_big ext4
fi

# rollback of CHANGED files in a tree of FILES (a second volume on the
# XFS image)
change_files() { # SRC
	local i j n=0 dirs=$(((FILES + 999) / 1000)) per

	per=$(((CHANGED + dirs - 1) / dirs))
	for ((i = 0; n < CHANGED; i++)); do
		for ((j = 1; j <= per && n < CHANGED; j++, n++)); do
			echo "changed $RANDOM" >>"$1/d$i/f$j"
		done
	done
}

rollback_tree() {
	local src=$work/xfs/tree t t_rs id

	mktree "$src" "$FILES"
	"$OVSNAP" take "$src" >/dev/null
	change_files "$src"
	drop_caches
	t=$(time_ms "$OVSNAP" rollback -q "$src" 1)
	change_files "$src"
	id=$("$OVSNAP" take "$src")
	mkdir -p "$work/view-tree"
	"$OVSNAP" mount "$src" 1 "$work/view-tree"
	drop_caches
	t_rs=$(time_ms rsync -a --delete "$work/view-tree/" "$src/")
	"$OVSNAP" umount "$work/view-tree"
	row "rollback $CHANGED of $FILES files, xfs" "$t" "$t_rs" "$(ratio "$t_rs" "$t")" \
		"rsync -a --delete from a view"
	"$OVSNAP" deactivate "$src" >/dev/null
	: "$id"
}
if [[ " $PARTS " == *" rollback "* ]]; then
	if command -v rsync >/dev/null; then
		rollback_tree
	else
		echo "rollback: rsync is not installed (the baseline)"
	fi
fi

# rollback of MANY changed paths: one fresh volume per run
many_run() { # BIN TAG: prints "MS KB", or "FAIL FAIL"
	local bin=$1 src=$work/xfs/many-$2 upper d t0 t1 per=1000

	mkdir -p "$src"
	echo k >"$src/k"
	"$bin" take "$src" >/dev/null
	upper=$("$bin" list --json "$src" | grep -oE '"upper"[[:space:]]*:[[:space:]]*"[^"]*"' |
		head -1 | sed -E 's/.*"([^"]*)"$/\1/')
	"$bin" deactivate "$src" >/dev/null
	for ((d = 0; d * per < MANY; d++)); do
		mkdir -p "$upper/big/d$d"
		(cd "$upper/big/d$d" && seq -f "%06g-$(printf 'n%.0s' {1..93})" \
			$((MANY - d * per < per ? MANY - d * per : per)) | xargs mkfifo)
	done
	"$bin" activate "$src" >/dev/null
	drop_caches
	t0=$(now)
	if /usr/bin/time -f %M -o "$work/.rss" "$bin" rollback -q "$src" 1 >/dev/null; then
		t1=$(now)
		echo "$(ms "$t0" "$t1") $(cat "$work/.rss")"
	else
		echo "FAIL FAIL"
	fi
	"$bin" deactivate "$src" >/dev/null
}

if [[ " $PARTS " == *" many "* ]]; then
	echo
	echo "rollback of $MANY changed paths (fifos in folders of 1000), $ROUNDS round(s)"
	[ -n "$OVSNAP_BASE" ] && echo "base: $OVSNAP_BASE"
	row "what" "ms" "peak RSS KiB" "" ""
	for ((r = 1; r <= ROUNDS; r++)); do
		if [ -n "$OVSNAP_BASE" ]; then
			line=$(many_run "$OVSNAP_BASE" "base$r")
			row "rollback $MANY paths, base, round $r" "${line% *}" "${line#* }" "" ""
		fi
		line=$(many_run "$OVSNAP" "this$r")
		row "rollback $MANY paths, this, round $r" "${line% *}" "${line#* }" "" ""
	done
fi
