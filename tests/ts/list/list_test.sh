#!/bin/bash
# ovsnap list, and the store and registry behind it, on real loop-mounted
# filesystems.  Volumes are made by ovs-mkvol, the library's own test
# helper, so that this runs without the snapshot mount.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs ext4

MKVOL=
for f in "$OVSNAP_TOOLS/ovs-mkvol" "$OVSNAP_TOOLS/tools/ovs-mkvol" \
	"$(dirname "$OVSNAP")/tests/ovs-mkvol"; do
	[ -x "$f" ] && { MKVOL=$f; break; }
done
[ -n "$MKVOL" ] || ovs_skip "ovs-mkvol not built (run make check)"

# Created times vary: check their form, then replace them.
ISO_UTC='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z'
ISO_LOCAL='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2}'

norm_utc() { sed -E "s/\"created\": \"$ISO_UTC\"/\"created\": \"T\"/g"; }
norm_table() { sed -E "s/$ISO_LOCAL/T/g; s/ +/ /g; s/^ //; s/ $//"; }

# Store paths could hold backslashes (from a source path that has them):
# JSON doubles them, the table shows them as they are.
json_esc() { printf '%s' "$1" | sed 's/\\/\\\\/g'; }
table_esc() { printf '%s' "$1"; }

# The only volume folder of the default store on $OVS_MNT.
store_of() {
	local d

	for d in "$OVS_MNT"/.ovsnap/*; do
		[ -d "$d" ] && printf '%s\n' "$d"
	done
}

test_no_volumes_prints_nothing() {
	ovs_run "$OVSNAP" list
	assertEquals "list exit" 0 "$OVS_RC"
	assertEquals "list stdout: no volumes, no table" "" "$OVS_OUT"
	assertEquals "list stderr" "" "$OVS_ERR"
	ovs_run "$OVSNAP" list --json
	assertEquals "list --json exit" 0 "$OVS_RC"
	assertEquals "list --json stdout" '{"volumes": []}' "$OVS_OUT"
}

test_volume_with_three_snapshots() {
	local src store uuid want js ts

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	chmod 0750 "$src"
	chown 12:34 "$src"
	touch -d '2020-01-02 03:04:05' "$src"
	ovs_run "$MKVOL" "$src" --snapshots 3 --name first
	assertEquals "ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC"
	store=$(store_of)
	assertNotNull "a volume folder in $OVS_MNT/.ovsnap" "$store"
	# '/' -> '-', other bytes than [A-Za-z0-9_.] -> %XX: never a '\',
	# ':' or ',' that overlayfs would read in lowerdir=
	assertEquals "folder named after SRC" \
		"$(printf '%s' "${src#/}" | sed 's/-/%2d/g; s|/|-|g')" "$(basename "$store")"
	assertEquals "store mode" "700 0" "$(stat -c '%a %u' "$OVS_MNT/.ovsnap")"
	assertEquals "volume folder mode" "700 0" "$(stat -c '%a %u' "$store")"
	assertEquals "upper root carries SRC's root metadata" \
		"$(stat -c '%a %u %g %Y' "$src")" "$(stat -c '%a %u %g %Y' "$store/layers/3/upper")"
	assertTrue "work dir" "[ -d '$store/layers/3/work' ]"
	assertEquals "index entry" "$store" \
		"$(readlink "$OVSNAP_STATE_DIR/volumes/$(basename "$store")")"

	ovs_run "$OVSNAP" list "$src"
	assertEquals "list SRC exit: $(ovs_ran)" 0 "$OVS_RC"
	want="ID NAME CREATED CLASS STATE SPACE MOUNTS DESCRIPTION USERDATA
1 first T manual frozen 0B - - -
2 - T manual frozen 0B - - -
3 - T manual active 0B - - -"
	assertEquals "list SRC table" "$want" "$(printf '%s\n' "$OVS_OUT" | norm_table)"
	assertFalse "no trailing blanks in the table" "printf '%s\n' \"\$OVS_OUT\" | grep -q ' \$'"
	assertEquals "list SRC stderr" "" "$OVS_ERR"

	js=$(json_esc "$store")
	ts=$(table_esc "$store")
	uuid=$(blkid -s UUID -o value "$OVS_DEV")
	ovs_run "$OVSNAP" list --json "$src"
	assertEquals "list --json SRC exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "created times are UTC with ns" 3 \
		"$(printf '%s\n' "$OVS_OUT" | grep -oE "\"created\": \"$ISO_UTC\"" | wc -l)"
	want="{\"source\": \"$src\", \"store\": \"$js\", \"fstype\": \"xfs\", \"fsuuid\": \"$uuid\", \"active\": false, \"snapshots\": ["
	want+="{\"id\": 1, \"name\": \"first\", \"created\": \"T\", \"upper\": \"$js/layers/1/upper\", \"state\": \"frozen\", \"hold\": false, \"class\": \"manual\", \"pre\": null, \"description\": null, \"userdata\": {}, \"space\": 0, \"mounts\": []}, "
	want+="{\"id\": 2, \"name\": null, \"created\": \"T\", \"upper\": \"$js/layers/2/upper\", \"state\": \"frozen\", \"hold\": false, \"class\": \"manual\", \"pre\": null, \"description\": null, \"userdata\": {}, \"space\": 0, \"mounts\": []}, "
	want+="{\"id\": 3, \"name\": null, \"created\": \"T\", \"upper\": \"$js/layers/3/upper\", \"state\": \"active\", \"hold\": false, \"class\": \"manual\", \"pre\": null, \"description\": null, \"userdata\": {}, \"space\": 0, \"mounts\": []}]}"
	assertEquals "list --json SRC" "$want" "$(printf '%s\n' "$OVS_OUT" | norm_utc)"

	ovs_run "$OVSNAP" list
	assertEquals "list exit" 0 "$OVS_RC"
	want="SOURCE STORE PROTECTION SNAPSHOTS
$src $ts off 3"
	assertEquals "list table" "$want" "$(printf '%s\n' "$OVS_OUT" | norm_table)"
	ovs_run "$OVSNAP" list --json
	assertEquals "list --json" \
		"{\"volumes\": [{\"source\": \"$src\", \"store\": \"$js\", \"active\": false, \"snapshots\": 3, \"state\": \"deactivated\"}]}" \
		"$OVS_OUT"

	ovs_run "$MKVOL" "$src"
	assertEquals "second create of the same SRC is a no-op for ovs-mkvol" 0 "$OVS_RC"
	"$OVSNAP" list >/dev/full 2>/dev/null
	assertNotEquals "list >/dev/full must fail" 0 $?
	ovs_run "$OVSNAP" list "$src" "$src"
	assertEquals "two SRCs: usage error" 2 "$OVS_RC"
}

# A source path with bytes the locale cannot show (here: UTF-8 é, and a
# lone Latin-1 byte) lists in the C and in a UTF-8 locale: libsmartcols
# without its encoding never returned on such bytes.
test_non_ascii_source_lists_in_every_locale() {
	local src out

	ovs_mkfs xfs || return
	src=$(printf '%s/caf\303\251-\351' "$OVS_MNT")
	mkdir "$src" || return
	ovs_run "$MKVOL" "$src" --snapshots 1 --name "first"
	assertEquals "ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC" || return
	out=$(LC_ALL=C timeout 20 "$OVSNAP" list 2>&1)
	assertEquals "list in the C locale: $out" 0 $?
	assertContains "C locale: every non-ASCII byte as \\xNN" "$out" \
		"$OVS_MNT/caf\xc3\xa9-\xe9"
	out=$(LC_ALL=C.UTF-8 timeout 20 "$OVSNAP" list "$src" 2>&1)
	assertEquals "list SRC in a UTF-8 locale: $out" 0 $?
	assertContains "UTF-8 locale: the snapshot is listed" "$out" "first"
	out=$(LC_ALL=C.UTF-8 timeout 20 "$OVSNAP" list 2>&1)
	assertEquals "list in a UTF-8 locale: $out" 0 $?
	assertContains "UTF-8 locale: é as it is, the lone byte as \\xe9" "$out" \
		"$(printf '%s/caf\303\251-' "$OVS_MNT")\\xe9"
}

test_hand_edited_registry_is_refused_with_its_line() {
	local src store before

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	"$MKVOL" "$src" --snapshots 2 || fail "ovs-mkvol"
	store=$(store_of)
	sed -i 's/^next-id 3$/next-id 3x/' "$store/registry"
	before=$(cat "$store/registry")
	ovs_run "$OVSNAP" list "$src"
	assertEquals "list exit" 1 "$OVS_RC"
	assertEquals "list stdout" "" "$OVS_OUT"
	assertEquals "list stderr" \
		"ovsnap: list $src: registry $store/registry line 6: bad number '3x' for next-id" \
		"$OVS_ERR"
	assertEquals "registry untouched" "$before" "$(cat "$store/registry")"

	ovs_run "$OVSNAP" list
	assertEquals "list of all volumes exits 1 with a broken one" 1 "$OVS_RC"
	assertEquals "the broken volume still shows" "SOURCE STORE PROTECTION SNAPSHOTS
$src $(table_esc "$store") ? ?" "$(printf '%s\n' "$OVS_OUT" | norm_table)"
	assertContains "warning names the line" "$OVS_ERR" "line 6: bad number"

	# a truncated registry
	printf 'ovsnap-registry 1\nsource %s\nfstype xfs\n' "$src" >"$store/registry"
	ovs_run "$OVSNAP" list "$src"
	assertEquals "truncated: exit" 1 "$OVS_RC"
	assertEquals "truncated: stderr" \
		"ovsnap: list $src: registry $store/registry line 4: truncated (no end line)" "$OVS_ERR"
}

test_store_missing_is_reported() {
	local src other

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	other=$OVS_MNT/elsewhere
	mkdir "$src"
	"$MKVOL" "$src" --store "$other" --snapshots 1 || fail "ovs-mkvol --store"
	rm -rf "$other"
	ovs_run "$OVSNAP" list
	assertEquals "list exit" 1 "$OVS_RC"
	assertContains "row still shown" "$OVS_OUT" "$src"
	assertEquals "warning" "ovsnap: list: $src: store missing" "$OVS_ERR"
	ovs_run "$OVSNAP" list --json
	assertContains "json error key" "$OVS_OUT" '"active": null, "snapshots": null, "error": "store missing"'
	ovs_run "$OVSNAP" list "$src"
	assertEquals "list SRC exit" 1 "$OVS_RC"
	assertContains "list SRC stderr" "$OVS_ERR" "ovsnap: list $src: store $other/"
}

test_unsupported_fs_is_refused() {
	local mnt=$OVS_TMP/tmpfs

	mkdir -p "$mnt"
	mount -t tmpfs tmpfs "$mnt" || { fail "mount tmpfs"; return; }
	mkdir "$mnt/src"
	ovs_run "$MKVOL" "$mnt/src"
	assertEquals "exit" 1 "$OVS_RC"
	assertEquals "stderr" \
		"ovs-mkvol: $mnt/src: SRC is on tmpfs, which cannot hold snapshots (supported: xfs, ext4, btrfs)" \
		"$OVS_ERR"
	assertEquals "nothing created on tmpfs" "src" "$(ls -A "$mnt")"
	assertEquals "nothing indexed" "" "$(ls -A "$OVSNAP_STATE_DIR")"
}

test_store_inside_src_is_refused() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$MKVOL" "$src" --store "$src/.x"
	assertEquals "exit" 1 "$OVS_RC"
	assertContains "stderr" "$OVS_ERR" \
		"store $src/.x is inside the source $src; overlayfs refuses nested layers"
	assertFalse "store not created" "[ -e $src/.x ]"
	assertFalse "default store not created" "[ -e $OVS_MNT/.ovsnap ]"

	mkdir "$OVS_MNT/.ovsnap"
	mkdir "$OVS_MNT/.ovsnap/sub"
	ovs_run "$MKVOL" "$OVS_MNT/.ovsnap/sub"
	assertEquals "source inside the store: exit" 1 "$OVS_RC"
	assertContains "source inside the store" "$OVS_ERR" "is inside the store"
}

test_fs_root_needs_a_store_elsewhere() {
	local root other

	ovs_mkfs xfs || return
	root=$OVS_MNT
	ovs_run "$MKVOL" "$root"
	assertEquals "exit" 1 "$OVS_RC"
	assertEquals "stderr" \
		"ovs-mkvol: $root: SRC is the root of its filesystem: the store cannot live inside it; use --store DIR on another filesystem (copy-ups will be full copies, not clones)" \
		"$OVS_ERR"
	assertEquals "nothing created" "" "$(ls -A "$root")"

	ovs_mkfs ext4 64M || return
	other=$OVS_MNT
	ovs_run "$MKVOL" "$root" --store "$other/store" --snapshots 1
	assertEquals "with --store on another fs: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list --json "$root"
	assertContains "store on the other fs" "$OVS_OUT" "\"store\": \"$other/store/"
	assertContains "fstype of SRC" "$OVS_OUT" '"fstype": "xfs"'
	assertEquals "no clones across filesystems" "clone 0" \
		"$(grep '^clone' "$other"/store/*/registry)"
}

test_bad_paths_are_refused() {
	local f

	ovs_mkfs xfs || return
	f=$OVS_MNT/file
	touch "$f"
	ovs_run "$MKVOL" relative/path
	assertEquals "relative: exit" 1 "$OVS_RC"
	assertEquals "relative: stderr" "ovs-mkvol: relative/path: not an absolute path" "$OVS_ERR"
	ovs_run "$MKVOL" "$f"
	assertEquals "file: exit" 1 "$OVS_RC"
	assertEquals "file: stderr" "ovs-mkvol: $f: not a directory" "$OVS_ERR"
	ovs_run "$MKVOL" "$OVS_MNT/missing"
	assertEquals "missing: exit" 1 "$OVS_RC"
	assertEquals "missing: stderr" "ovs-mkvol: $OVS_MNT/missing: No such file or directory" "$OVS_ERR"
	assertFalse "nothing created" "[ -e $OVS_MNT/.ovsnap ]"

	# relative paths are made absolute (issue 11 item 20)
	ovs_run "$OVSNAP" list relative/path
	assertEquals "list relative: exit" 1 "$OVS_RC"
	assertEquals "list relative: stderr" "ovsnap: list $PWD/relative/path: No such file or directory" "$OVS_ERR"
	ovs_run "$OVSNAP" list "$f"
	assertEquals "list file: stderr" "ovsnap: list $f: not a directory" "$OVS_ERR"
	mkdir "$OVS_MNT/plain"
	ovs_run "$OVSNAP" list "$OVS_MNT/plain"
	assertEquals "list non-volume: exit" 1 "$OVS_RC"
	assertEquals "list non-volume: stderr" "ovsnap: list $OVS_MNT/plain: not an ovsnap volume" "$OVS_ERR"
}

test_mount_inside_src_is_refused() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir -p "$src/sub"
	mount -t tmpfs tmpfs "$src/sub" || { fail "mount tmpfs"; return; }
	ovs_run "$MKVOL" "$src"
	umount "$src/sub"
	assertEquals "exit" 1 "$OVS_RC"
	assertContains "stderr" "$OVS_ERR" "SRC holds the mount point $src/sub"
}

# The registry records the filesystem, its UUID and whether FICLONE works.
test_identity_and_clone_per_filesystem() {
	local type want_clone reg

	for type in xfs ext4 btrfs; do
		case $type in
		ext4) want_clone=0 ;;
		*) want_clone=1 ;;
		esac
		ovs_mkfs "$type" || return
		mkdir "$OVS_MNT/src"
		ovs_run "$MKVOL" "$OVS_MNT/src" --snapshots 1
		assertEquals "$type: ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC"
		reg=$(cat "$OVS_MNT"/.ovsnap/*/registry)
		assertContains "$type: fstype" "$reg" "fstype $type"
		assertContains "$type: fsuuid" "$reg" "fsuuid $(blkid -s UUID -o value "$OVS_DEV")"
		assertContains "$type: clone" "$reg" "clone $want_clone"
	done
}

# list -Hp, like zfs list -Hp: no heading, one tab between fields, no
# padding, sizes in bytes, times as in --json; cut -f takes it apart.
test_parsable_no_headings() {
	local src store out

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$MKVOL" "$src" --snapshots 3 --name first
	assertEquals "ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC"
	store=$(store_of)

	ovs_run "$OVSNAP" list -Hp "$src"
	assertEquals "list -Hp SRC exit: $(ovs_ran)" 0 "$OVS_RC"
	out=$OVS_OUT
	assertEquals "3 lines, no heading" 3 "$(printf '%s\n' "$out" | wc -l)"
	assertEquals "9 tab-separated fields a line" "9 9 9" \
		"$(printf '%s\n' "$out" | awk -F'\t' '{ print NF }' | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "ids" "1 2 3" "$(printf '%s\n' "$out" | cut -f1 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "names" "first  " "$(printf '%s\n' "$out" | cut -f2 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "created: UTC with ns, as --json" 3 \
		"$(printf '%s\n' "$out" | cut -f3 | grep -cxE "$ISO_UTC")"
	assertEquals "states" "frozen frozen active" \
		"$(printf '%s\n' "$out" | cut -f5 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "space in bytes" "0 0 0" "$(printf '%s\n' "$out" | cut -f6 | tr '\n' ' ' | sed 's/ $//')"
	assertFalse "no padding: no blank in -Hp" "printf '%s\n' \"\$out\" | grep -q ' '"

	ovs_run "$OVSNAP" list --parsable "$src"
	assertEquals "list --parsable: heading first" \
		"$(printf 'ID\tNAME\tCREATED\tCLASS\tSTATE\tSPACE\tMOUNTS\tDESCRIPTION\tUSERDATA')" \
		"$(printf '%s\n' "$OVS_OUT" | head -1)"
	ovs_run "$OVSNAP" list --no-headings "$src"
	assertEquals "list --no-headings: 3 lines" 3 "$(printf '%s\n' "$OVS_OUT" | wc -l)"
	assertEquals "list --no-headings: first line is snapshot 1" "1 first" \
		"$(printf '%s\n' "$OVS_OUT" | head -1 | awk '{ print $1, $2 }')"

	ovs_run "$OVSNAP" list -Hp
	assertEquals "list -Hp exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "list -Hp: the volume" "$(printf '%s\t%s\toff\t3' "$src" "$store")" "$OVS_OUT"

	ovs_run "$OVSNAP" list --json -p "$src"
	assertEquals "--json with -p: usage error" 2 "$OVS_RC"
	assertNull "--json with -p: nothing on stdout" "$OVS_OUT"
}

# A volume without snapshots still lists its heading.
test_heading_without_snapshots() {
	local src

	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir "$src"
	ovs_run "$MKVOL" "$src" --snapshots 0
	assertEquals "ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list "$src"
	assertEquals "list SRC exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "list SRC: the heading" \
		"ID NAME CREATED CLASS STATE SPACE MOUNTS DESCRIPTION USERDATA" "$OVS_OUT"
	ovs_run "$OVSNAP" list -p "$src"
	assertEquals "list -p SRC: the heading, tab-separated" \
		"$(printf 'ID\tNAME\tCREATED\tCLASS\tSTATE\tSPACE\tMOUNTS\tDESCRIPTION\tUSERDATA')" "$OVS_OUT"
	ovs_run "$OVSNAP" list -Hp "$src"
	assertEquals "list -Hp SRC: nothing" "" "$OVS_OUT"
}

test_help_matches_the_man_page() {
	local usage man

	usage=$("$OVSNAP" list --help | sed -n 's/^Usage: ovsnap list //p')
	assertEquals "help usage args" "[SRC]" "$usage"
	man=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH D/p' "$OVSNAP_SRCDIR/man/ovsnap-list.8" |
		sed 's/\\f[BIRP]//g')
	assertContains "man SYNOPSIS names [SRC]" "$man" "[SRC]"
	assertContains "help ends with the man page" "$("$OVSNAP" list --help)" "See ovsnap-list(8)."
}

. "$SHUNIT2"
