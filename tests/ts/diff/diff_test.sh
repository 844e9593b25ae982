#!/bin/bash
# ovsnap diff (issue 15 item 1): what changed between two snapshots and
# since a snapshot, read from the layers in the store, with the volume
# active (changes through the snapshot mount) and deactivated; states are
# compared, not events; the work never walks SRC; bad input gets one line.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd setfattr python3 strace setpriv perl flock

MANIFEST=$OVSNAP_TOOLS/tools/ovs-manifest
WORKLOAD=$OVSNAP_TOOLS/tools/ovs-workload
MKVOL=$OVSNAP_TOOLS/ovs-mkvol

# A fresh XFS image with a small tree, protected, snapshot 1 taken.
setUp() {
	local f i

	ovs_mkfs "${OVS_DIFF_FS:-xfs}" 1G || return 1
	SRC=$OVS_MNT/src
	mkdir -p "$SRC/redo" "$SRC/tree/a/b"
	for f in back content gone hl1 modefile mode_back ownfile ren t xafile esc; do
		echo "$f" >"$SRC/$f"
	done
	echo old >"$SRC/redo/old"
	echo deep >"$SRC/tree/a/b/f"
	ln "$SRC/hl1" "$SRC/hl2"
	ln -s back "$SRC/sym"
	# a user's trusted.overlay.* xattr: escaped in a layer copy (rule 14)
	setfattr -n trusted.overlay.user -v mine "$SRC/esc" || fail "setfattr trusted.overlay.user"
	touch -d '2020-01-02 03:04:05.123456789' "$SRC/back" "$SRC/esc"
	# 20,000 files that no diff may read
	for i in 0 1 2 3; do
		mkdir "$SRC/bulk$i"
		(cd "$SRC/bulk$i" && seq -f "f%g" 5000 | xargs touch) || fail "bulk$i"
	done
	take 1
}

tearDown() {
	ovs_teardown
}

take() {
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" "$1" "$OVS_OUT"
}

# The changes after snapshot 1, through the snapshot mount.
change_batch1() {
	echo new >"$SRC/new"
	mkdir "$SRC/newdir" && echo x >"$SRC/newdir/x"
	rm "$SRC/gone"
	echo changed >"$SRC/content"
	chmod 0600 "$SRC/modefile"
	chown 1234:1234 "$SRC/ownfile"
	setfattr -n user.k -v v "$SRC/xafile"
	rm "$SRC/t" && mkdir "$SRC/t"
	# changed and changed back: content and mtime, mode, an escaped xattr
	echo other >"$SRC/back"
	echo back >"$SRC/back"
	touch -d '2020-01-02 03:04:05.123456789' "$SRC/back"
	chmod 0600 "$SRC/mode_back" "$SRC/esc"
	chmod 0644 "$SRC/mode_back" "$SRC/esc"
	mv "$SRC/ren" "$SRC/ren2"
	rm -r "$SRC/tree"
	rm -r "$SRC/redo" && mkdir "$SRC/redo" && echo n >"$SRC/redo/new"
	echo more >>"$SRC/hl1"
	ln -sfn content "$SRC/sym"
}

BATCH1='M	content
-	gone
M	hl1
M	hl2
M	modefile
+	new
+	newdir
+	newdir/x
M	ownfile
+	redo/new
-	redo/old
-	ren
+	ren2
M	sym
T	t
-	tree
-	tree/a
-	tree/a/b
-	tree/a/b/f
M	xafile'

# The changes after snapshot 2.
change_batch2() {
	echo again >>"$SRC/new"
	echo a >"$SRC/after2"
	rm "$SRC/ren2"
}

BATCH2='+	after2
M	new
-	ren2'

# BATCH1 followed by BATCH2, as seen from snapshot 1.
BOTH="+	after2
$(printf '%s\n' "$BATCH1" | grep -v ren2)"

diff_is() {	# diff_is WHAT EXPECTED ARGS...
	local what=$1 want=$2
	shift 2
	ovs_run "$OVSNAP" diff "$SRC" "$@"
	assertEquals "$what: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "$what: stderr" "" "$OVS_ERR"
	assertEquals "$what: changes" "$want" "$OVS_OUT"
}

# The two batches against snapshots 1 and 2 and the live tree, with the
# volume active, then deactivated; then the oracle on the same filesystem
# (each test function costs a filesystem and its teardown, ~10 s).
test_changes_between_snapshots_and_live_active_and_not_and_oracle() {
	diff_is "no change yet" "" 1
	change_batch1
	diff_is "1 against live" "$BATCH1" 1
	take 2
	check_json
	change_batch2
	diff_is "1 2" "$BATCH1" 1 2
	diff_is "2 against live" "$BATCH2" 2
	diff_is "1 against live, both batches" "$BOTH" 1
	diff_is "a snapshot with itself" "" 2 2
	diff_is "references: @oldest @-0, -1 live" "$BATCH1" @oldest @-0
	diff_is "references: -1 is snapshot 1" "$BOTH" -1

	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	diff_is "deactivated: 1 2" "$BATCH1" 1 2
	diff_is "deactivated: 2 against live" "$BATCH2" 2
	diff_is "deactivated: 1 against live" "$BOTH" 1

	ovs_run "$OVSNAP" activate "$SRC"
	assertEquals "activate: $(ovs_ran)" 0 "$OVS_RC"
	check_oracle 3
}

# --json of snapshot 1 against 2 after change_batch1.
check_json() {
	ovs_run "$OVSNAP" diff --json "$SRC" 1 2
	assertEquals "diff --json: $(ovs_ran)" 0 "$OVS_RC"
	printf '%s\n' "$OVS_OUT" >"$OVS_TMP/diff.json"
	ovs_run python3 - "$OVS_TMP/diff.json" "$SRC" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"source", "from", "to", "changes"}, d.keys()
assert d["source"] == sys.argv[2] and d["from"] == 1 and d["to"] == 2, d
c = {x["path"]: x for x in d["changes"]}
assert len(c) == 20, len(c)
want = {
    "content": {"path": "content", "change": "modified", "type": "file",
                "fields": ["content", "mtime"]},
    "modefile": {"path": "modefile", "change": "modified", "type": "file",
                 "fields": ["mode"]},
    "ownfile": {"path": "ownfile", "change": "modified", "type": "file",
                "fields": ["owner"]},
    "xafile": {"path": "xafile", "change": "modified", "type": "file",
               "fields": ["xattrs"]},
    "sym": {"path": "sym", "change": "modified", "type": "symlink",
            "fields": ["content", "mtime"]},
    "t": {"path": "t", "change": "type", "from_type": "file", "to_type": "directory"},
    "newdir": {"path": "newdir", "change": "added", "type": "directory"},
    "gone": {"path": "gone", "change": "removed", "type": "file"},
}
for p, w in want.items():
    assert c[p] == w, (c[p], w)
EOF
	assertEquals "JSON shape: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" diff -J "$SRC" 2
	assertEquals "diff -J against live, no change" \
		"{\"source\": \"$SRC\", \"from\": 2, \"to\": \"live\", \"changes\": []}" "$OVS_OUT"
}

# 20,000 files in SRC, three changes: the diff reads the layers, never
# SRC's big directories (no getdents64 on them).  Then bad input (one
# test function: each costs a filesystem and its teardown).
test_cost_follows_the_layers_and_bad_input() {
	local n

	take 2
	echo x >"$SRC/bulk1/f17"
	echo y >"$SRC/bulk2/new"
	rm "$SRC/bulk3/f4999"
	ovs_run strace -f -y -o "$OVS_TMP/strace.log" -e trace=getdents64 \
		"$OVSNAP" diff "$SRC" 2
	assertEquals "diff under strace: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "three changes" "M	bulk1/f17
+	bulk2/new
-	bulk3/f4999" "$OVS_OUT"
	n=$(grep 'getdents64(.*bulk' "$OVS_TMP/strace.log" | grep -vc '/layers/')
	assertEquals "getdents64 calls on SRC's big directories: $(grep bulk "$OVS_TMP/strace.log" |
		grep -v /layers/ | head -3)" 0 "$n"
	assertTrue "strace saw the layers read" "grep -q getdents64 '$OVS_TMP/strace.log'"

	# Rule 18: a tree deeper than PATH_MAX (40 directories of 200-byte
	# names, ~8 KB), made through the snapshot mount.
	take 3
	perl -e 'chdir $ARGV[0] or die "$ARGV[0]: $!"; my $n = "d" x 200;
		for (1..40) { mkdir $n or die "mkdir: $!"; chdir $n or die "chdir: $!"; }
		open(F, ">leaf") or die "leaf: $!"; close F;' "$SRC/" || fail "deep tree"
	ovs_run "$OVSNAP" diff "$SRC" 3
	assertEquals "deep tree: exit: $(ovs_ran | cut -c1-300)" 0 "$OVS_RC"
	assertEquals "deep tree: 40 directories and a file added" 41 \
		"$(printf '%s\n' "$OVS_OUT" | grep -c '^+	')"
	assertEquals "deep tree: the deepest path in full" \
		"$((40 * 201 + 4 + 1))" "$(printf '%s\n' "$OVS_OUT" | tail -1 | cut -f2 | wc -c)"

	# 499 snapshots, the most a volume holds: three fds per layer are
	# more than a soft limit of 1024 (made by ovs-mkvol, the library's
	# own helper: no daemon, so no change to find).
	mkdir "$OVS_MNT/many"
	"$MKVOL" "$OVS_MNT/many" --snapshots 499 >/dev/null || fail "ovs-mkvol 499 snapshots"
	ovs_run bash -c 'ulimit -S -n 1024 && "$1" diff "$2" 1 250' _ "$OVSNAP" "$OVS_MNT/many"
	assertEquals "499 snapshots, soft fd limit 1024: $(ovs_ran)" 0 "$OVS_RC"

	# One line per change whatever the name: a newline, a tab and a
	# backslash as \ooo.
	take 4
	touch "$SRC/"$'new\nline' "$SRC/"$'tab\there' "$SRC/back\\slash"
	diff_is "odd names" '+	back\134slash
+	new\012line
+	tab\011here' 4
	check_bad_input
}

# Bad input, on a volume with snapshots 1 to 3: one line, non-zero exit.
check_bad_input() {
	ovs_run "$OVSNAP" diff "$SRC" 2 1
	assertEquals "newer first: exit" 1 "$OVS_RC"
	assertEquals "newer first: stderr" \
		"ovsnap: diff $SRC 2 1: snapshot 2 is newer than snapshot 1 (give the older one first)" \
		"$OVS_ERR"
	assertEquals "newer first: stdout" "" "$OVS_OUT"
	ovs_run "$OVSNAP" diff "$SRC" 7
	assertEquals "unknown id: exit" 1 "$OVS_RC"
	assertEquals "unknown id: stderr" "ovsnap: diff $SRC 7: $SRC has no snapshot 7" "$OVS_ERR"
	ovs_run "$OVSNAP" diff --json "$SRC" 1 nosuch
	assertEquals "unknown name: exit" 1 "$OVS_RC"
	assertEquals "unknown name: stderr" \
		"ovsnap: diff $SRC nosuch: $SRC has no snapshot named nosuch" "$OVS_ERR"
	assertEquals "unknown name: nothing on stdout, also with --json" "" "$OVS_OUT"
	ovs_run "$OVSNAP" diff "$SRC" @-5
	assertEquals "@-5 of three: exit" 1 "$OVS_RC"
	assertEquals "@-5 of three: one line" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	ovs_run "$OVSNAP" diff "$SRC"
	assertEquals "missing argument: usage exit" 2 "$OVS_RC"
	ovs_run "$OVSNAP" diff "$SRC" 1 2 3
	assertEquals "too many arguments: usage exit" 2 "$OVS_RC"
	mkdir "$OVS_MNT/plain"
	ovs_run "$OVSNAP" diff "$OVS_MNT/plain" 1
	assertEquals "not a volume: exit" 1 "$OVS_RC"
	assertEquals "not a volume: stderr" \
		"ovsnap: diff $OVS_MNT/plain: not a volume (no snapshot was ever taken of it)" "$OVS_ERR"
	ovs_user
	ovs_as_user "$OVSNAP" diff "$SRC" 1
	assertEquals "not root: exit" 1 "$OVS_RC"
	# (the build's ovsnap-delegate is not setuid: see delegation_test)
	assertContains "not root: stderr" "$OVS_ERR" "ovsnap: diff: must be run as root"
	assertEquals "not root: one line" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	"$OVSNAP" diff --json "$SRC" 1 >/dev/full 2>/dev/null
	assertNotEquals "diff >/dev/full must fail" 0 $?

	# Another command holds the volume lock: busy at once, or --wait.
	local store holder waiter rc
	store=$(echo "$OVS_MNT"/.ovsnap/*-src/)
	touch "$OVS_TMP/hold"
	flock "$store/lock" bash -c 'touch "$1/locked"; while [ -e "$1/hold" ]; do sleep 0.05; done' \
		_ "$OVS_TMP" &
	holder=$!
	ovs_wait_until 30 '[ -e "$OVS_TMP/locked" ]'
	ovs_run "$OVSNAP" diff "$SRC" 1
	assertEquals "busy: exit: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "busy: message" "$OVS_ERR" "is busy"
	"$OVSNAP" diff --wait "$SRC" 4 >"$OVS_TMP/wait.out" 2>"$OVS_TMP/wait.err" &
	waiter=$!
	# asleep in flock(2) on the volume lock, and nothing printed yet
	ovs_wait_until 30 "grep -q flock /proc/$waiter/stack 2>/dev/null"
	assertTrue "diff --wait waits in flock while the lock is held: $(cat /proc/$waiter/stack 2>&1)" \
		"grep -q flock /proc/$waiter/stack"
	assertEquals "diff --wait printed nothing while waiting" "" "$(cat "$OVS_TMP/wait.out")"
	rm "$OVS_TMP/hold"
	wait "$holder"
	wait "$waiter"
	rc=$?
	assertEquals "--wait: exit: $(cat "$OVS_TMP/wait.err")" 0 "$rc"
	assertEquals "--wait: the changes" 3 "$(wc -l <"$OVS_TMP/wait.out")"
}

# ovsnap diff's output (DIFF_DIR/A-B.diff, for a volume whose workload
# ran in SRC/w) against the difference of the manifests MANIFEST_DIR/A
# and B (tests/tools/ovs-manifest), for each pair A:B.
ORACLE_PY='
import re, sys

def unesc_manifest(p):
    return re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), p)

def unesc_diff(p):
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), p)

def load(name):
    out = {}
    for line in open(name, "rb").read().splitlines():
        path, _, rest = line.partition(b" ")
        words = rest.split(b" ")
        f = dict(x.split(b"=", 1) for x in words if b"=" in x and not x.startswith(b"xattr:"))
        f[b"xattrs"] = b" ".join(sorted(x for x in words if x.startswith(b"xattr:")))
        f.pop(b"hardlink", None)	# link groups are not compared
        if f[b"type"] == b"d":
            f.pop(b"mtime", None)	# a directory whose only change is its mtime is left out
        out[unesc_manifest(path)] = f
    return out

def check(a, b, out):
    want = set()
    for p in set(a) | set(b):
        if p not in a:
            want.add((b"+", p))
        elif p not in b:
            want.add((b"-", p))
        elif a[p][b"type"] != b[p][b"type"]:
            want.add((b"T", p))
        elif a[p] != b[p]:
            want.add((b"M", p))
    got = []
    for line in open(out, "rb").read().splitlines():
        if not line:
            continue
        mark, path = line.split(b"\t", 1)
        path = unesc_diff(path)
        if path == b".":
            continue		# the root of SRC, above the workload
        assert path == b"w" or path.startswith(b"w/"), line
        got.append((mark, b"." if path == b"w" else path[2:]))
    bad = sorted(set(got) ^ want)
    for m, p in bad[:20]:
        print(("missing " if (m, p) in want else "extra ") + (m + b" " + p).decode(errors="replace"))
    if len(got) != len(set(got)):
        print("a path twice")
    return not bad and len(got) == len(set(got)), len(got)

# argv: MANIFEST_DIR DIFF_DIR A:B...  (B may be "live")
mf, dd, ok, counts = sys.argv[1], sys.argv[2], True, []
for pair in sys.argv[3:]:
    a, b = pair.split(":")
    good, n = check(load(f"{mf}/{a}.manifest"), load(f"{mf}/{b}.manifest"), f"{dd}/{a}-{b}.diff")
    if not good:
        print(f"diff {a} {b}: the above differs from the manifests")
        ok = False
    counts.append(f"{a}-{b}:{n}")
print("changes per diff:", " ".join(counts))
sys.exit(0 if ok else 1)
'

# check_oracle ID: the consistency oracle, on an active volume whose next
# snapshot is ID.  A seeded random workload in SRC/w through the snapshot
# mount with takes, the manifest of the live tree recorded at each take;
# then the diff of every pair of those snapshots, and of each one against
# the live tree, is exactly the difference of their manifests.  Reproduce
# a failure with OVS_DIFF_SEED=N.
check_oracle() {
	local seed=${OVS_DIFF_SEED:-$((RANDOM % 1000 + 1))} mf=$OVS_TMP/manifests w ids i j rc t0 pairs=()

	w=$SRC/w
	mkdir -p "$w" "$mf"
	ovs_run "$WORKLOAD" --seed "$((seed + 1000))" --ops 300 "$w"
	assertEquals "initial tree (seed $seed): $(ovs_ran)" 0 "$OVS_RC" || return
	"$MANIFEST" "$w" >"$mf/.pending" || fail "manifest of $w"
	take "$1"
	mv "$mf/.pending" "$mf/$1.manifest"
	t0=$(date +%s)
	"$WORKLOAD" --seed "$seed" --ops "${OVS_DIFF_OPS:-600}" --takes 4 \
		--take-cmd "'$OVSNAP' take '$SRC'" --manifest-dir "$mf" "$w" \
		>"$OVS_TMP/takes.log" 2>"$OVS_TMP/ops.log" </dev/null
	rc=$?
	assertEquals "workload (seed $seed): $(tail -3 "$OVS_TMP/ops.log")" 0 "$rc" || return
	"$MANIFEST" "$w" >"$mf/live.manifest" || fail "manifest of the live $w"
	echo "workload: $(($(date +%s) - t0)) s"; t0=$(date +%s)
	ids=($(cd "$mf" && ls -- *.manifest | grep -v live | sed 's/\.manifest$//' | sort -n))
	assertEquals "snapshots with manifests (seed $seed)" 5 "${#ids[@]}"
	mkdir -p "$OVS_TMP/diffs"
	for ((i = 0; i < ${#ids[@]}; i++)); do
		for j in "${ids[@]:i}" live; do
			if [ "$j" = live ]; then
				ovs_run "$OVSNAP" diff "$SRC" "${ids[i]}"
			else
				ovs_run "$OVSNAP" diff "$SRC" "${ids[i]}" "$j"
			fi
			assertEquals "diff ${ids[i]} $j (seed $seed): $(ovs_ran | head -3)" 0 "$OVS_RC"
			printf '%s\n' "$OVS_OUT" >"$OVS_TMP/diffs/${ids[i]}-$j.diff"
			pairs+=("${ids[i]}:$j")
		done
	done
	echo "diffs: $(($(date +%s) - t0)) s"
	# one python3 for all: it takes seconds to start
	ovs_run python3 -c "$ORACLE_PY" "$mf" "$OVS_TMP/diffs" "${pairs[@]}"
	assertEquals "each diff equals the difference of the manifests (seed $seed):
$OVS_OUT $OVS_ERR" 0 "$OVS_RC"
	echo "seed $seed: ${OVS_OUT##*$'\n'}"
}

. "$SHUNIT2"
