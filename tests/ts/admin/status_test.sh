#!/bin/bash
# ovsnap status (issue 11 item 17): protected, deactivated or broken per
# volume, with the daemon's pid, layer, open handles, last take and what to
# do; exit 0 / 3 / 4 for monitoring.  And ovsnap list showing a volume
# whose daemon died as broken, in the table and in JSON.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs

# The value of "key": in the JSON of $OVS_OUT (numbers, strings, null).
json_value() {
	printf '%s\n' "$OVS_OUT" | grep -oE "\"$1\": (\"[^\"]*\"|[0-9]+|null)" | head -1 |
		sed -E "s/^\"$1\": \"?//; s/\"$//"
}

test_status_of_protected_deactivated_and_broken_volumes() {
	local a b pid

	ovs_mkfs xfs || return
	a=$OVS_MNT/a
	b=$OVS_MNT/b
	mkdir "$a" "$b"
	ovs_run "$OVSNAP" take -N first "$a"
	assertEquals "take a: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" take "$b"
	assertEquals "take b: $(ovs_ran)" 0 "$OVS_RC"

	ovs_run "$OVSNAP" status
	assertEquals "status, all protected: exit" 0 "$OVS_RC"
	assertEquals "status, all protected: stderr" "" "$OVS_ERR"
	assertContains "a is protected" "$OVS_OUT" "$a: protected"
	assertContains "b is protected" "$OVS_OUT" "$b: protected"
	assertContains "the last take is named" "$OVS_OUT" "(snapshot 1 first)"

	ovs_run "$OVSNAP" status --json "$a"
	assertEquals "status --json a: exit" 0 "$OVS_RC"
	assertEquals "status --json a: stderr" "" "$OVS_ERR"
	assertEquals "json state" "protected" "$(json_value state)"
	assertEquals "json layer" "1" "$(json_value layer)"
	assertEquals "json open handles" "0" "$(json_value open_handles)"
	assertEquals "json problem" "null" "$(json_value problem)"
	pid=$(json_value pid)
	assertEquals "json pid is the daemon's" "ovsnapd" "$(cat "/proc/$pid/comm" 2>/dev/null)"

	# a file held open through the snapshot mount counts
	printf 'x\n' >"$a/held" || fail "create a/held"
	exec 8<"$a/held"
	ovs_run "$OVSNAP" status --json "$a"
	assertEquals "an open file: exit" 0 "$OVS_RC"
	assertEquals "an open file is counted" "1" "$(json_value open_handles)"
	exec 8<&-

	ovs_run "$OVSNAP" deactivate "$b"
	assertEquals "deactivate b: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" status
	assertEquals "status with b deactivated: exit" 3 "$OVS_RC"
	assertEquals "status with b deactivated: stderr" "" "$OVS_ERR"
	assertContains "b is deactivated" "$OVS_OUT" "$b: deactivated"
	assertContains "what to do with b" "$OVS_OUT" "run 'ovsnap activate $b'"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "status a alone: still 0" 0 "$OVS_RC"

	kill -KILL "$pid"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "status of a dead daemon: exit" 4 "$OVS_RC"
	assertEquals "status of a dead daemon: stderr" "" "$OVS_ERR"
	assertContains "a is broken" "$OVS_OUT" "$a: broken"
	assertContains "why: the daemon died" "$OVS_OUT" "daemon dead"
	assertContains "what to do" "$OVS_OUT" "run 'ovsnap activate $a'"
	ovs_run "$OVSNAP" status "$a" "$b"
	assertEquals "broken wins over deactivated" 4 "$OVS_RC"

	ovs_run "$OVSNAP" list
	assertEquals "list with a dead daemon: exit" 0 "$OVS_RC"
	assertEquals "list shows a as broken" "broken" \
		"$(printf '%s\n' "$OVS_OUT" | awk -v s="$a" '$1 == s { print $3 }')"
	assertEquals "list shows b as off" "off" \
		"$(printf '%s\n' "$OVS_OUT" | awk -v s="$b" '$1 == s { print $3 }')"
	ovs_run "$OVSNAP" list --json
	assertEquals "list --json: exit" 0 "$OVS_RC"
	assertEquals "list --json: a is broken" \
		"\"source\": \"$a\" \"active\": true, \"snapshots\": 1, \"state\": \"broken\"" \
		"$(printf '%s\n' "$OVS_OUT" | grep -oE "\"source\": \"$a\"|\"active\": true, \"snapshots\": 1, \"state\": \"[a-z]+\"" | paste -sd' ')"

	# off and back on: the window since the newest snapshot is
	# unprotected until the next take
	ovs_run "$OVSNAP" deactivate "$a"
	assertEquals "deactivate a (dead daemon): $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "a deactivated: exit" 3 "$OVS_RC"
	ovs_run "$OVSNAP" activate "$a"
	assertEquals "activate a: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" status --json "$a"
	assertEquals "after the reactivation: exit" 4 "$OVS_RC"
	assertContains "unprotected window" "$(json_value problem)" "unprotected window"
	ovs_run "$OVSNAP" take "$a"
	assertEquals "take a: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" status --json "$a"
	assertEquals "a take ends the window: exit" 0 "$OVS_RC"
	assertEquals "layer of the new take" "2" "$(json_value layer)"
	ovs_run "$OVSNAP" deactivate "$a"
	assertEquals "deactivate a: $(ovs_ran)" 0 "$OVS_RC"
}

# A named SRC whose store cannot be used is reported, not an error: broken
# (exit 4) when root finds the store unsafe or missing, unknown (exit 1) to a
# user who may not read it; the same as status without SRC says.
test_status_of_a_volume_whose_store_cannot_be_read() {
	local a

	ovs_user || return
	ovs_mkfs xfs || return
	a=$OVS_MNT/a
	mkdir "$a"
	chmod 755 "$OVS_MNT"
	ovs_run "$OVSNAP" take "$a"
	assertEquals "take a: $(ovs_ran)" 0 "$OVS_RC" || return

	ovs_as_user "$OVSNAP" status "$a"
	assertEquals "as $OVS_USER: unknown, exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "as $OVS_USER: the state" "$a: unknown" "$(printf '%s\n' "$OVS_OUT" | head -1)"
	assertContains "as $OVS_USER: why" "$OVS_OUT" "permission denied"
	assertEquals "as $OVS_USER: stderr" "" "$OVS_ERR"

	chmod o+w "$OVS_MNT/.ovsnap"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "unsafe store: broken, exit 4: $(ovs_ran)" 4 "$OVS_RC"
	assertEquals "unsafe store: the state" "$a: broken" "$(printf '%s\n' "$OVS_OUT" | head -1)"
	assertContains "unsafe store: why" "$OVS_OUT" "is unsafe"
	ovs_run "$OVSNAP" status --json "$a"
	assertEquals "unsafe store, JSON: exit" 4 "$OVS_RC"
	assertEquals "unsafe store, JSON: state" broken "$(json_value state)"
	ovs_run "$OVSNAP" status
	assertEquals "unsafe store, all volumes: exit" 4 "$OVS_RC"
	chmod o-w "$OVS_MNT/.ovsnap"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "store safe again: exit: $(ovs_ran)" 0 "$OVS_RC"
}

test_status_usage_and_bad_sources() {
	ovs_mkfs xfs || return
	mkdir "$OVS_MNT/plain"
	ovs_run "$OVSNAP" status
	assertEquals "no volumes: exit" 0 "$OVS_RC"
	assertEquals "no volumes: stdout" "" "$OVS_OUT"
	ovs_run "$OVSNAP" status --json
	assertEquals "no volumes, JSON: exit" 0 "$OVS_RC"
	assertEquals "no volumes, JSON" '{"volumes": []}' "$OVS_OUT"
	ovs_run "$OVSNAP" status --bogus
	assertEquals "unknown option: usage error" 2 "$OVS_RC"
	assertEquals "unknown option: stdout" "" "$OVS_OUT"
	assertContains "unknown option: stderr" "$OVS_ERR" "ovsnap: status: --bogus: unknown option"
	ovs_run "$OVSNAP" status "$OVS_MNT/plain"
	assertEquals "not a volume: exit" 1 "$OVS_RC"
	assertEquals "not a volume: stdout" "" "$OVS_OUT"
	assertEquals "not a volume: stderr" \
		"ovsnap: status $OVS_MNT/plain: not a volume (no snapshot was ever taken of it)" "$OVS_ERR"
}

. "$SHUNIT2"
