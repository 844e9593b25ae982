#!/bin/bash
# Every promise tagged in the man pages (.\" promise: NAME) has its test
# test_promise_NAME under tests/: tests/promises.sh prints the generated
# list and fails otherwise.  The checker itself is checked on a copy with
# an untested promise and with a test of no promise.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"

PROMISES=$OVSNAP_SRCDIR/tests/promises.sh

test_every_promise_has_a_test() {
	ovs_run bash "$PROMISES" "$OVSNAP_SRCDIR"
	# The generated list, in the test log.
	printf '%s\n' "$OVS_OUT"
	assertEquals "every promise has a test: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "no complaint" "" "$OVS_ERR"
	assertNotContains "nothing missing" "$OVS_OUT" "MISSING"
	assertContains "the take refusing a busy SRC is listed with its test" "$OVS_OUT" \
		"take-refuses-busy-src -> tests/ts/promises/take_setup_promises_test.sh:test_promise_take_refuses_busy_src"
	assertTrue "both pages have promises" \
		"printf '%s\n' \"\$OVS_OUT\" | grep -q '^ovsnap-take.8: ' && printf '%s\n' \"\$OVS_OUT\" | grep -q '^ovsnapd.8: '"
}

# A copy of the man pages and tests with one change.
copy_tree() {
	local d=$OVS_TMP/tree
	rm -rf "$d" && mkdir -p "$d" && cp -r "$OVSNAP_SRCDIR/man" "$OVSNAP_SRCDIR/tests" "$d/" ||
		fail "copy the tree"
	TREE=$d
}

test_checker_fails_on_an_untested_promise() {
	copy_tree
	printf '.\\" promise: no-such-promise-yet\nA sentence.\n' >>"$TREE/man/ovsnapd.8"
	ovs_run bash "$PROMISES" "$TREE"
	assertEquals "an untested promise fails the list: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "and is shown missing" "$OVS_OUT" \
		"ovsnapd.8: no-such-promise-yet -> MISSING (test_promise_no_such_promise_yet)"
}

test_checker_fails_on_a_test_of_no_promise() {
	copy_tree
	printf 'test_promise_nothing_said() {\n\t:\n}\n' >"$TREE/tests/ts/promises/stray_test.sh"
	ovs_run bash "$PROMISES" "$TREE"
	assertEquals "a test of no promise fails the list: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "and is named" "$OVS_ERR" "test_promise_nothing_said tests no tagged promise"
}

test_checker_fails_on_a_promise_tagged_twice() {
	copy_tree
	printf '.\\" promise: take-prints-id\n' >>"$TREE/man/ovsnapd.8"
	ovs_run bash "$PROMISES" "$TREE"
	assertEquals "a promise tagged twice fails the list: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "and is named" "$OVS_ERR" "take-prints-id is tagged more than once"
}

. "$SHUNIT2"
