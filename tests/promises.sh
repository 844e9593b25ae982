#!/bin/bash
# promises.sh [SRCDIR]: the list of what the man pages promise and the test
# that checks each promise, generated from the sources, never kept by hand.
#
# A promise is a roff comment right at the sentence that makes it:
#	.\" promise: take-refuses-busy-src
# and its test is the shell function test_promise_take_refuses_busy_src()
# in any script under tests/.  Prints "PROMISE -> SCRIPT:FUNCTION" per
# promise, oldest page first, and exits 1 when a promise has no test, a
# promise is tagged twice, or a test_promise_* function names no promise
# (a renamed or deleted promise must not leave a test that checks nothing
# the pages say).
srcdir=${1:-${OVSNAP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}
bad=0

# "PAGE PROMISE" for every tag of every page.
tags=$(grep -H -o -E '^\.\\" promise: [a-z0-9-]+' "$srcdir"/man/*.[1-8] |
	sed -E 's|^.*/([^/:]+):\.\\" promise: |\1 |')
# "FUNCTION SCRIPT" for every promise test.
tests=$(cd "$srcdir" && grep -r -o -E '^test_promise_[a-z0-9_]+\(\)' --include='*.sh' tests |
	sed -E 's|^([^:]+):(test_promise_[a-z0-9_]+)\(\)$|\2 \1|')

if [ -z "$tags" ]; then
	echo "promises.sh: no promise tags in $srcdir/man" >&2
	exit 1
fi

while read -r page promise; do
	fn=test_promise_${promise//-/_}
	where=$(printf '%s\n' "$tests" | awk -v f="$fn" '$1 == f { print $2 ":" $1 }' | paste -sd, -)
	if [ -z "$where" ]; then
		echo "$page: $promise -> MISSING ($fn)"
		bad=1
	else
		echo "$page: $promise -> $where"
	fi
done <<<"$tags"

dups=$(printf '%s\n' "$tags" | awk '{ print $2 }' | sort | uniq -d)
for promise in $dups; do
	echo "promises.sh: promise $promise is tagged more than once" >&2
	bad=1
done
while read -r fn script; do
	[ -n "$fn" ] || continue
	promise=${fn#test_promise_}
	promise=${promise//_/-}
	printf '%s\n' "$tags" | awk '{ print $2 }' | grep -qxF -- "$promise" && continue
	echo "promises.sh: $script:$fn tests no tagged promise ($promise)" >&2
	bad=1
done <<<"$tests"
dupfns=$(printf '%s\n' "$tests" | awk 'NF { print $1 }' | sort | uniq -d)
for fn in $dupfns; do
	echo "promises.sh: $fn is defined more than once" >&2
	bad=1
done
exit "$bad"
