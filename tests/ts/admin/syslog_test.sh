#!/bin/bash
# Logging (issue 14 item 8): take, drop, merge, hold, release, retention
# decisions (with the rule), restore, rollback, fsck repairs and forget
# reach syslog as
# "volume=SRC snapshot=ID ..." lines.  The commands run in a private mount
# namespace whose /dev is a tmpfs holding the few devices they need and a
# /dev/log socket of our own, so nothing reaches (or needs) the host's
# syslog.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd unshare python3

# In the namespace: /dev of our own, a listener on /dev/log writing each
# message a line to $LOG, then the commands of $1.
in_private_syslog() {
	cat >"$OVS_TMP/ns.sh" <<NS
set -e
mkdir -p "$OVS_TMP/realdev"
mount --bind /dev "$OVS_TMP/realdev"
mount -t tmpfs -o mode=0755 ovsnap-test-dev /dev
for d in null zero full random urandom fuse ${OVS_DEV#/dev/}; do
	touch "/dev/\$d"
	mount --bind "$OVS_TMP/realdev/\$d" "/dev/\$d"
done
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
open(sys.argv[1] + ".ready", "w").close()
with open(sys.argv[1], "ab", 0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\\0\\n") + b"\\n")
' "$LOG" &
listener=\$!
# the listener goes whatever happens to the commands
trap 'kill \$listener' EXIT
while [ ! -e "$LOG.ready" ]; do sleep 0.05; done
set +e
(
$1
)
NS
	unshare -m --propagation private bash "$OVS_TMP/ns.sh"
}

test_take_drop_hold_retention_reach_syslog() {
	local src lines rc

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	LOG=$OVS_TMP/syslog.txt
	mkdir "$src"
	in_private_syslog "
		set -e
		$OVSNAP take --name first $src
		head -c 262144 /dev/urandom >$src/big
		$OVSNAP take --class timeline $src
		$OVSNAP hold $src first
		$OVSNAP release $src first
		echo b >$src/big
		$OVSNAP take --class timeline $src
		$OVSNAP drop --keep space=1K $src
		$OVSNAP take --class timeline $src
		$OVSNAP drop --keep last=1 $src
		$OVSNAP drop $src first
		echo new >$src/r
		$OVSNAP restore $src @latest r
		echo again >$src/r
		$OVSNAP rollback $src @latest
		$OVSNAP deactivate $src
		mkdir \$(echo $OVS_MNT/.ovsnap/*/layers)/99
		$OVSNAP fsck -y $src || [ \$? = 1 ]	# 1: errors corrected
		$OVSNAP forget --yes $src
	" >"$OVS_TMP/ns.out" 2>&1
	rc=$?
	assertEquals "the commands in the namespace: $(cat "$OVS_TMP/ns.out")" 0 "$rc"
	lines=$(cat "$LOG")
	assertContains "take: $lines" "$lines" "volume=$src snapshot=1 take name=first"
	assertContains "take 2: $lines" "$lines" "volume=$src snapshot=2 take name=-"
	assertContains "hold: $lines" "$lines" "volume=$src snapshot=1 hold"
	assertContains "release: $lines" "$lines" "volume=$src snapshot=1 release"
	assertContains "space rule decision: $lines" "$lines" \
		"volume=$src snapshot=2 retention drop rule=space class=timeline (policy space=1K"
	assertContains "retention drop done (merged): $lines" "$lines" \
		"volume=$src snapshot=2 drop merged-into=1"
	assertContains "count rule decision: $lines" "$lines" \
		"volume=$src snapshot=3 retention drop rule=last=1 class=timeline (no rule keeps it)"
	assertContains "retention drop done (merged): $lines" "$lines" \
		"volume=$src snapshot=3 drop merged-into=1"
	assertContains "drop of the oldest: $lines" "$lines" "volume=$src snapshot=1 drop oldest"
	assertContains "fsck repair: $lines" "$lines" "volume=$src fsck repaired check=layer-extra: layer directory"
	assertContains "restore: $lines" "$lines" " restore paths=1 changed=1 "
	assertContains "rollback: $lines" "$lines" " rollback changed="
	assertContains "forget: $lines" "$lines" "volume=$src forget snapshots="
	assertContains "the ident: $lines" "$lines" "ovsnap["
	# The daemon's own lines carry the same volume= prefix.
	assertContains "ovsnapd's lines: $lines" "$lines" "ovsnapd["
	assertNull "every ovsnapd line starts with volume=SRC: $lines" \
		"$(grep 'ovsnapd\[' "$LOG" | grep -v "ovsnapd\[[0-9]*\]: volume=$src ")"
}

. "$SHUNIT2"
