#!/bin/bash
# make check-mutants: the suite must fail against a deliberately broken
# daemon (issue 16).  Each mutant is a one-line change of
# cmd/daemon-ops.c behind -DOVS_MUTANT_<NAME>, built in its own build
# directory (mutants/<name> under the build tree); the relevant test
# functions then run against it and must fail.  Exit 0 only when every
# mutant is caught.  Slow (a configure and a build per mutant), so not
# part of make check.
#
# Usage: tests/mutants.sh SRCDIR BUILDDIR [MUTANT...]
set -u

src=$(cd "$1" && pwd)
top=$(cd "$2" && pwd)
shift 2

# NAME|SCRIPT|TEST FUNCTIONS: what must catch each mutant.
mutants=(
	"RENAME_EXDEV|tests/ts/take/take_test.sh|test_rename_file_keeps_old_name test_rename_directory_then_change_under_new_name test_rename_exchange_files"
	"CHMOD_UNPRESERVED|tests/ts/take/take_test.sh|test_chmod_chown_utimes_file test_chmod_chown_utimes_directory"
	"WRITE_NOOP|tests/ts/take/take_test.sh|test_modify_file test_hard_link_modified_through_one_name"
	"UNLINK_UNMARKED|tests/ts/daemon/concurrent_changes_test.sh|test_changes_of_another_name_wait_for_its_preserve_xfs"
	"WORKERS_NEVER_EXIT|tests/ts/daemon/daemon_test.sh|test_idle_workers_exit_after_a_burst"
	"LINK_UNMARKED|tests/ts/daemon/concurrent_changes_test.sh|test_changes_of_another_name_wait_for_its_preserve_xfs"
	"NAMES_COVERED_ANY_EPOCH|tests/ts/livepath/create_covered_test.sh|test_covered_folders_keep_snapshots_xfs"
)

caught=0 missed=0 report=()
for m in "${mutants[@]}"; do
	IFS='|' read -r name script tests <<<"$m"
	if [ "$#" -gt 0 ] && ! printf '%s\n' "$@" | grep -qix "$name"; then
		continue
	fi
	dir=$top/mutants/$name
	echo "== mutant $name: build in $dir"
	mkdir -p "$dir"
	if ! (cd "$dir" && { [ -f Makefile ] || "$src/configure" -q CPPFLAGS="-DOVS_MUTANT_$name"; } &&
		make -j2 >build.log 2>&1 && make -j2 check TESTS= >>build.log 2>&1); then
		echo "mutant $name: build failed (see $dir/build.log)"
		missed=$((missed + 1))
		report+=("$name: NOT BUILT")
		continue
	fi
	mkdir -p "$dir/$(dirname "$script")"
	echo "== mutant $name: $script $tests"
	(cd "$dir" && OVSNAP=$dir/ovsnap OVSNAPD=$dir/ovsnapd OVSNAP_TOOLS=$dir/tests \
		OVSNAP_SRCDIR=$src OVS_RESULTS=$dir/mutant.results \
		bash "$src/$script" -- $tests) >"$dir/mutant.log" 2>&1
	rc=$?
	fails=$(grep -c '^FAIL ' "$dir/mutant.results" 2>/dev/null)
	if [ "$rc" -ne 0 ] && [ "${fails:-0}" -gt 0 ]; then
		caught=$((caught + 1))
		report+=("$name: caught ($fails of $(wc -w <<<"$tests") test functions fail)")
		grep -a 'ASSERT:' "$dir/mutant.log" | sed 's/\x1b\[[0-9;]*m//g' | head -3 | cut -c1-200 | sed 's/^/    /'
	else
		missed=$((missed + 1))
		report+=("$name: NOT CAUGHT (exit $rc; see $dir/mutant.log)")
	fi
done
printf '%s\n' "${report[@]}"
echo "$caught mutants caught, $missed not"
[ "$missed" -eq 0 ] && [ "$caught" -gt 0 ]
