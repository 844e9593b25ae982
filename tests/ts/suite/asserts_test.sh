#!/bin/bash
# The test scripts themselves (issue 16 item 1): no assertion may read `$?`
# after a `$(...)` or backquote in its own arguments.  The substitution
# runs first and `$?` is then its status (0), not the one of the command
# being checked, so such an assertion can never fail.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"

# status_after_substitution FILE...: "FILE:LINE: TEXT" of every assertion
# (continuation lines joined) with $? after a command substitution.
status_after_substitution() {
	awk '
		FNR == 1 { stmt = ""; start = 0 }
		{
			line = $0
			if (stmt == "" && line ~ /^[[:space:]]*#/) next
			if (stmt == "") start = FNR
			if (line ~ /\\$/) { stmt = stmt substr(line, 1, length(line) - 1) " "; next }
			stmt = stmt line
			if (stmt ~ /(^|[;&|[:space:]])(assert[A-Za-z]*|fail[A-Za-z]*)[[:space:]]/ &&
			    stmt ~ /(\$\(|`).*\$\?/)
				printf "%s:%d: %s\n", FILENAME, start, stmt
			stmt = ""
		}' "$@"
}

test_no_assertion_reads_the_status_of_its_own_substitution() {
	local found

	local f files=()

	# All but this script, whose sample below has the pattern on purpose.
	for f in "$OVSNAP_SRCDIR"/tests/helpers.sh "$OVSNAP_SRCDIR"/tests/ts/*/*.sh; do
		[ "$(basename "$f")" = asserts_test.sh ] || files+=("$f")
	done
	found=$(status_after_substitution "${files[@]}")
	assertEquals "assertions whose \$? is the one of a \$(...) in their message:
$found" "" "$found"
}

# The check itself finds the pattern, on one line and across continuation
# lines, and leaves the correct forms alone.
test_the_check_finds_the_pattern() {
	local f=$OVS_TMP/sample.sh found

	cat >"$f" <<'SAMPLE'
grep -q x y
assertTrue "one line: $(cat y)" $?
diff a b
assertEquals "continued: `head b`" \
	0 $?
ovs_run true
assertEquals "fine, OVS_RC was set before: $(ovs_ran)" 0 "$OVS_RC"
rc=$?
assertEquals "fine, no substitution" 0 $?
SAMPLE
	found=$(status_after_substitution "$f" | cut -d: -f2 | tr '\n' ' ')
	assertEquals "lines found in the sample" "2 4 " "$found"
}

. "$SHUNIT2"
