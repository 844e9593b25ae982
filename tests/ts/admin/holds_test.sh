#!/bin/bash
# Day-to-day administration (issue 14 items 1-3): holds as commands
# (ovsnap hold / release) that every removal honours, cleanup classes that
# keep a retention rule off manual snapshots, and descriptions and user data
# that round-trip through list --json; bad input leaves the registry as it
# was.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3

# A volume with $1 snapshots (taken plainly: class manual) at $SRC.
volume() {
	local i

	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir "$SRC"
	for ((i = 1; i <= $1; i++)); do
		echo "$i" >"$SRC/f"
		ovs_run "$OVSNAP" take "$SRC"
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC" || return 1
	done
	[ "$1" -eq 0 ] ||
		REGISTRY=$(dirname "$(dirname "$(dirname "$(snap_field 1 upper)")")")/registry
}

# python3 over list --json SRC: the expression $1 of the snapshots "s"
# (a list of dicts), printed.
snaps_py() {
	"$OVSNAP" list --json "$SRC" | python3 -c '
import json, sys
s = json.load(sys.stdin)["snapshots"]
r = eval(sys.argv[1])
print(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False))' "$1"
}
ids() { snaps_py '" ".join(str(x["id"]) for x in s)'; }
# snap_field ID KEY: that key of that snapshot, as JSON (strings bare).
snap_field() { snaps_py "[x for x in s if x['id'] == $1][0]['$2']"; }

# A refused command: exit $1, nothing on stdout, one line on stderr that
# holds $2, and the registry byte for byte as it was.
refused() {
	local want_rc=$1 want_err=$2 before=$OVS_TMP/registry.before

	shift 2
	cp "$REGISTRY" "$before"
	ovs_run "$@"
	assertEquals "$*: exit: $(ovs_ran)" "$want_rc" "$OVS_RC"
	assertEquals "$*: nothing on stdout" "" "$OVS_OUT"
	assertEquals "$*: one line on stderr: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "$*: the error says why" "$OVS_ERR" "$want_err"
	assertTrue "$*: the registry is unchanged" "cmp -s '$before' '$REGISTRY'"
}

test_hold_release_drop_merge() {
	volume 1 || return
	ovs_run "$OVSNAP" take --name two "$SRC"
	assertEquals "take two: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$SRC"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take 4: $(ovs_ran)" 0 "$OVS_RC"
	# by name and by reference, in one change
	ovs_run "$OVSNAP" hold "$SRC" two @oldest
	assertEquals "hold: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "hold prints nothing" "" "$OVS_OUT"
	assertEquals "held in list --json" "[true, true, false, false]" "$(snaps_py '[x["hold"] for x in s]')"
	ovs_run "$OVSNAP" list "$SRC"
	assertEquals "the table says held: $OVS_OUT" 2 "$(printf '%s\n' "$OVS_OUT" | grep -c 'frozen,held')"
	ovs_run "$OVSNAP" hold "$SRC" 2
	assertEquals "hold of a held snapshot is no error: $(ovs_ran)" 0 "$OVS_RC"

	refused 1 "snapshot 2 (two) is held: use --force to drop it" "$OVSNAP" drop "$SRC" 3 2
	refused 1 "snapshot 2 (two) is held and would be merged away: use --force" \
		"$OVSNAP" merge "$SRC" 1 3
	refused 1 "has no snapshot 9" "$OVSNAP" hold "$SRC" 3 9
	refused 1 "has no snapshot 9" "$OVSNAP" release "$SRC" 1 9
	ovs_run "$OVSNAP" hold "$SRC"
	assertEquals "hold without SNAP: usage error" 2 "$OVS_RC"
	refused 1 "not a volume" "$OVSNAP" release "$OVS_MNT" 1
	assertEquals "nothing was removed" "1 2 3 4" "$(ids)"

	ovs_run "$OVSNAP" release "$SRC" 1
	assertEquals "release: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "released" "[false, true, false, false]" "$(snaps_py '[x["hold"] for x in s]')"
	ovs_run "$OVSNAP" drop "$SRC" 1
	assertEquals "a released snapshot drops: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" merge --force "$SRC" 2 3
	assertEquals "merge --force merges into the held one: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" drop --force "$SRC" 2
	assertEquals "drop --force drops a held one: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "what is left" "4" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# A manual snapshot survives --keep and the rotation timer's take (its
# ExecStart: take --wait --quiet --keep SPEC); a held timeline snapshot
# survives them too, and the rule names it.
# Rollback (issue 15) removes no snapshot, held or not: a rollback to a
# held snapshot keeps it and its hold, and every snapshot after it.
test_hold_and_rollback() {
	volume 3 || return
	ovs_run "$OVSNAP" hold "$SRC" 1 3
	assertEquals "hold: $(ovs_ran)" 0 "$OVS_RC"
	echo live >"$SRC/f"
	ovs_run "$OVSNAP" rollback "$SRC" 1
	assertEquals "rollback to a held snapshot: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the tree is snapshot 1's" 1 "$(cat "$SRC/f")"
	assertEquals "every snapshot is left, and the pre-rollback one added" "1 2 3 4" "$(ids)"
	assertEquals "the holds stay" "[true, false, true, false]" "$(snaps_py '[x["hold"] for x in s]')"
	ovs_run "$OVSNAP" rollback "$SRC" 4
	assertEquals "rollback to the pre-rollback snapshot: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the tree is as before the first rollback" live "$(cat "$SRC/f")"
	assertEquals "still every snapshot" "1 2 3 4 5" "$(ids)"
	refused 1 "snapshot 1 is held" "$OVSNAP" drop "$SRC" 1
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

test_classes_and_keep() {
	volume 1 || return
	ovs_run "$OVSNAP" take --class timeline "$SRC"
	assertEquals "take --class timeline: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take --name pinned --keep last=5 "$SRC"
	assertEquals "take --keep: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" hold "$SRC" pinned
	ovs_run "$OVSNAP" take --wait --quiet --keep last=1 "$SRC"
	assertEquals "the timer's take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the timer's take prints the id only" "4" "$OVS_OUT"
	assertEquals "the manual and the held snapshot survive the rule" "1 3 4" "$(ids)"
	assertEquals "classes" '["manual", "timeline", "timeline"]' "$(snaps_py '[x["class"] for x in s]')"
	ovs_run "$OVSNAP" list "$SRC"
	assertContains "CLASS column" "$(printf '%s\n' "$OVS_OUT" | head -1)" "CLASS"

	ovs_run "$OVSNAP" drop --keep last=1 "$SRC"
	assertEquals "drop --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the rule names the held snapshot it keeps" \
		"ovsnap: drop $SRC: keeping snapshot 3 (pinned) the policy would drop: it is held ('ovsnap release' it first)" \
		"$OVS_ERR"
	ovs_run "$OVSNAP" drop --keep last=0 --explain --dry-run "$SRC"
	assertEquals "explain: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "explain gives the reasons" "keep class
keep hold
keep newest" "$(printf '%s\n' "$OVS_OUT" | awk '{ print $4, $5 }')"
	# --class manual: the rule judges manual snapshots instead
	ovs_run "$OVSNAP" drop --keep last=0 --class manual "$SRC"
	assertEquals "drop --keep --class manual: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the manual one is gone" "3 4" "$(ids)"
	ovs_run "$OVSNAP" modify --class manual "$SRC" 4
	assertEquals "modify --class: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "reclassed" "manual" "$(snap_field 4 class)"
	refused 2 "manual or timeline" "$OVSNAP" modify --class pre "$SRC" 4
	refused 2 "unknown class 'hourly'" "$OVSNAP" drop --keep last=1 --class hourly "$SRC"
	refused 2 "--class needs --keep" "$OVSNAP" drop --class manual "$SRC" 3
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"

	# A registry written by the previous version (format 1: no class, no
	# descriptions) still loads, all manual; fsck accepts both formats.
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck of a version 2 registry: $(ovs_ran)" 0 "$OVS_RC"
	sed -i -e '1s/ 2$/ 1/' -e 's/^\(snapshot [0-9].*\) [a-z]*$/\1/' "$REGISTRY"
	ovs_run "$OVSNAP" list --json "$SRC"
	assertEquals "list of a version 1 registry: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "all manual" '["manual", "manual"]' "$(snaps_py '[x["class"] for x in s]')"
	ovs_run "$OVSNAP" fsck -n "$SRC"
	assertEquals "fsck of a version 1 registry: $(ovs_ran)" 0 "$OVS_RC"
}

# space=SIZE: the oldest timeline snapshots go until the layers the volume
# keeps fit; manual and newest ones stay.  Layers 2 to 5 each hold a
# 4 MiB rewritten file of their own.
test_space_limit() {
	local i

	volume 1 || return
	for i in 2 3 4 5; do
		if [ "$i" = 2 ]; then
			dd if=/dev/urandom of="$SRC/f" bs=1M count=4 status=none
		else
			dd if=/dev/urandom of="$SRC/f" bs=1M count=4 conv=notrunc status=none
		fi || fail "write f"
		ovs_run "$OVSNAP" take --class timeline "$SRC"
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	dd if=/dev/urandom of="$SRC/f" bs=1M count=4 conv=notrunc status=none
	sync
	assertEquals "layers 2..5 hold 4 MiB each" "0 1 1 1 1" \
		"$(snaps_py '" ".join(str(int(x["space"] >= 4 << 20)) for x in s)')"
	ovs_run "$OVSNAP" drop --keep space=9M --dry-run "$SRC"
	assertEquals "dry run: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the oldest timeline snapshots would go" "would drop 2
would drop 3" "$OVS_OUT"
	ovs_run "$OVSNAP" take --keep space=9M "$SRC"
	assertEquals "take --keep space=9M: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "oldest first, stopping at the limit (8 MiB left)" "1 4 5 6" "$(ids)"
	ovs_run "$OVSNAP" drop --keep space=1K "$SRC"
	assertEquals "drop --keep space=1K: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the manual and the newest one stay" "1 6" "$(ids)"
	refused 2 "needs a percentage" "$OVSNAP" drop --keep space=101% "$SRC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

# Pre/post pairs: take --pre / --post PRE, and run around a failing, a
# succeeding and a missing command, exiting with the command's status.
test_pre_post_run() {
	volume 1 || return
	ovs_run "$OVSNAP" run -d "apt upgrade" "$SRC" -- sh -c "echo new >'$SRC/f'; exit 3"
	assertEquals "run of a failing command: its status: $(ovs_ran)" 3 "$OVS_RC"
	assertEquals "run: stdout is the command's" "" "$OVS_OUT"
	assertContains "run names the pair" "$OVS_ERR" "pre snapshot 2, post snapshot 3"
	assertEquals "the command ran between the two" "new" "$(cat "$SRC/f")"
	ovs_run "$OVSNAP" run -q "$SRC" -- echo hello
	assertEquals "run of a succeeding command: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the command's output" "hello" "$OVS_OUT"
	assertEquals "-q: nothing else" "" "$OVS_ERR"
	ovs_run "$OVSNAP" run "$SRC" -- "$OVS_TMP/no-such-command"
	assertEquals "run of a missing command: 127" 127 "$OVS_RC"
	assertEquals "classes, pre links, descriptions" \
		'[["manual", null, null], ["pre", null, "apt upgrade"], ["post", 2, "apt upgrade"], ["pre", null, null], ["post", 4, null], ["pre", null, null], ["post", 6, null]]' \
		"$(snaps_py '[[x["class"], x["pre"], x["description"]] for x in s]')"
	ovs_run "$OVSNAP" list "$SRC"
	assertContains "the table links the post to its pre" "$OVS_OUT" "post:2"

	ovs_run "$OVSNAP" take --pre "$SRC"
	assertEquals "take --pre prints the id: $(ovs_ran)" "8" "$OVS_OUT"
	ovs_run "$OVSNAP" take --post 8 "$SRC"
	assertEquals "take --post 8: $(ovs_ran)" "9" "$OVS_OUT"
	assertEquals "linked" "8" "$(snap_field 9 pre)"
	refused 1 "snapshot 1 is a manual snapshot, not a pre one" "$OVSNAP" take --post 1 "$SRC"
	refused 2 "cannot be used together" "$OVSNAP" take --pre --class manual "$SRC"
	refused 2 "control character" "$OVSNAP" run -d $'a\nb' "$SRC" -- true
	ovs_run "$OVSNAP" drop --keep last=0 "$SRC"
	assertEquals "drop --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "a timeline rule leaves the pairs alone" "1 2 3 4 5 6 7 8 9" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

test_descriptions_and_userdata() {
	local odd got

	volume 0 || return
	odd=' café "quoted" back\slash {"id": 9} $(x) `y` '\''z'\'' '
	ovs_run "$OVSNAP" take --description "$odd" --userdata 'ticket=OPS 12' \
		-u 'k.v:1=a=b' "$SRC"
	assertEquals "take with text: $(ovs_ran)" 0 "$OVS_RC"
	REGISTRY=$(dirname "$(dirname "$(dirname "$(snap_field 1 upper)")")")/registry
	ovs_run "$OVSNAP" take "$SRC"
	got=$(snaps_py 's[0]["description"]')
	assertEquals "the description round-trips exactly" "$odd" "$got"
	assertEquals "user data" '{"k.v:1": "a=b", "ticket": "OPS 12"}' "$(snap_field 1 userdata)"
	assertEquals "no description is null, no user data {}" '[null, {}]' \
		"$(snaps_py '[s[1]["description"], s[1]["userdata"]]')"
	ovs_run env LC_ALL=C.UTF-8 "$OVSNAP" list "$SRC"
	assertEquals "list in a UTF-8 locale: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the table shows the description" "$OVS_OUT" "$odd"
	assertContains "the table shows the user data" "$OVS_OUT" "k.v:1=a=b, ticket=OPS 12"
	ovs_run env LC_ALL=C "$OVSNAP" list "$SRC"
	assertEquals "list in the C locale: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "non-ASCII escaped in the C locale" "$OVS_OUT" ' caf\xc3\xa9 "quoted"'

	ovs_run "$OVSNAP" modify "$SRC" 1 2 --description 'après apt upgrade' \
		--userdata ticket= --userdata new=1
	assertEquals "modify: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "modified" '[["après apt upgrade", {"k.v:1": "a=b", "new": "1"}], ["après apt upgrade", {"new": "1"}]]' \
		"$(snaps_py '[[x["description"], x["userdata"]] for x in s]')"
	ovs_run "$OVSNAP" modify -d '' "$SRC" 2
	assertEquals "modify -d '' removes it: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "removed" "null" "$(snap_field 2 description)"

	refused 2 "control character" "$OVSNAP" take --description $'two\nlines' "$SRC"
	refused 2 "control character" "$OVSNAP" modify -d $'tab\there' "$SRC" 1
	refused 2 "too long" "$OVSNAP" modify -d "$(printf 'x%.0s' {1..257})" "$SRC" 1
	refused 2 "not UTF-8" "$OVSNAP" modify -d $'\xff' "$SRC" 1
	refused 2 "bad user data key 'a b'" "$OVSNAP" take -u 'a b=1' "$SRC"
	refused 2 "not KEY=VALUE" "$OVSNAP" modify -u novalue "$SRC" 1
	refused 2 "control character" "$OVSNAP" modify -u $'k=\e[31m' "$SRC" 1
	refused 1 "more than 8 user data keys" "$OVSNAP" modify -u a=1 -u b=1 -u c=1 \
		-u d=1 -u e=1 -u f=1 -u g=1 "$SRC" 1
	refused 1 "has no snapshot named nope" "$OVSNAP" modify -d x "$SRC" 1 nope
	assertEquals "no snapshot was taken by the refused takes" "1 2" "$(ids)"
	ovs_run "$OVSNAP" modify "$SRC" 1
	assertEquals "modify without a change: usage error" 2 "$OVS_RC"
	assertContains "modify without a change says so" "$OVS_ERR" "nothing to change"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
}

. "$SHUNIT2"
