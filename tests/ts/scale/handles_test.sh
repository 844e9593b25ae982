#!/bin/bash
# Issue 13 item 1: the live path identifies objects by file handle and
# keeps only a bounded cache of open fds, so a tree far larger than the
# daemon's open file limit can be walked; an inode number reused for a new
# object gives a new node (another handle), never the old one.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_cmd prlimit python3 setpriv setfattr getfattr

tearDown() {
	ovs_teardown
}

daemon_status() {
	ovs_ctl status
}

status_field() {
	sed -n "s/.* $1=\([-0-9]*\).*/\1/p" <<<"$2"
}

fd_count() {
	ls "/proc/$1/fd" 2>/dev/null | wc -l
}

# $1 files in $2 (a fresh directory), made natively, 1000 per folder.
make_files() {
	"$ovs__python3" - "$1" "$2" <<'PY'
import os, sys
n, top = int(sys.argv[1]), sys.argv[2]
for i in range(n):
    d = os.path.join(top, "d%03d" % (i // 1000))
    if i % 1000 == 0:
        os.makedirs(d)
    with open(os.path.join(d, "f%05d" % i), "w") as f:
        f.write("file %d\n" % i)
PY
}

# 50,000 files walked through the live path with the daemon's limit at
# 1,024 fds: every stat and every sampled read works, and the daemon holds
# no more fds than its cache bound (a quarter of the limit) and what it
# held before the walk.  The nodes' memory is reported for ovsnapd(8).
test_walk_far_more_files_than_the_fd_limit() {
	local src pid status before bound nodes bytes max=0 n rss0 rss1 sampler made rc
	local nfiles=50000

	ovs_mkfs xfs 1G || return
	src=$OVS_MNT/src
	mkdir "$src"
	make_files "$nfiles" "$src" || fail "make $nfiles files"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	status=$(daemon_status)
	pid=$(status_field pid "$status")
	assertNotNull "the daemon's pid ($status)" "$pid" || return
	prlimit --pid "$pid" --nofile=1024:1024 || fail "prlimit"
	sync
	echo 2 >/proc/sys/vm/drop_caches
	before=$(fd_count "$pid")
	rss0=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
	# Sample the daemon's fds while the walk runs.
	(
		m=0
		while [ ! -e "$OVS_TMP/walked" ]; do
			c=$(fd_count "$pid")
			[ "$c" -gt "$m" ] && m=$c
			echo "$m" >"$OVS_TMP/maxfds"
			sleep 0.05
		done
	) &
	sampler=$!
	find "$src" -type f -printf '%s %i\n' >"$OVS_TMP/walk" 2>"$OVS_TMP/walk.err"; rc=$?
	assertEquals "find through the live path: $(head -3 "$OVS_TMP/walk.err")" 0 "$rc"
	n=$(wc -l <"$OVS_TMP/walk")
	assertEquals "every file stat'ed" "$nfiles" "$n"
	# A sample read back: one file in 97, all of them right.
	made=0
	for ((i = 0; i < nfiles; i += 97)); do
		f=$(printf '%s/d%03d/f%05d' "$src" $((i / 1000)) "$i")
		[ "$(cat "$f" 2>>"$OVS_TMP/read.err")" = "file $i" ] && made=$((made + 1))
	done
	assertEquals "sampled reads: $(head -3 "$OVS_TMP/read.err")" $(((nfiles + 96) / 97)) "$made"
	touch "$OVS_TMP/walked"
	wait "$sampler"
	max=$(cat "$OVS_TMP/maxfds")
	status=$(daemon_status)
	bound=$(status_field fdbound "$status")
	nodes=$(status_field nodes "$status")
	# Another process's drop_caches (or memory pressure) makes the
	# kernel forget inodes: walk again so that they are cached when
	# counted (the fds held are sampled during the first walk above).
	for ((i = 0; i < 3 && ${nodes:-0} <= 1024; i++)); do
		find "$src" -type f -printf '%s\n' >/dev/null 2>&1
		status=$(daemon_status)
		nodes=$(status_field nodes "$status")
	done
	assertEquals "the cache's bound is a quarter of the limit ($status)" 256 "$bound"
	assertTrue "the kernel cached more inodes than the fd limit: $nodes nodes" \
		"[ ${nodes:-0} -gt 1024 ]"
	# The constant: fds of requests in flight (a few per worker).
	assertTrue "the daemon held at most $before + $bound + 32 fds during the walk: $max" \
		"[ $max -le $((before + bound + 32)) ]"
	rss1=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
	bytes=$(status_field nodebytes "$status")
	echo "# $nodes nodes, $bytes bytes: $((bytes / (nodes > 0 ? nodes : 1))) bytes per node;" \
		"daemon RSS ${rss0} -> ${rss1} KiB; max fds $max (before the walk $before, bound $bound)"
	# ovsnapd(8) says about 150 bytes (names of six characters here).
	assertTrue "at most 256 bytes per node: $bytes bytes for $nodes nodes" \
		"[ $bytes -le $((nodes * 256)) ]"
	assertEquals "the daemon still serves" "file 0" "$(cat "$src/d000/f00000")"
}

# ext4 gives a new inode the lowest free number of its group, so the
# number of a file just deleted comes back at once.  A file changed (so
# preserved) and deleted through the live path, whose number a new file
# then gets: the new one is served as itself, and the snapshot shows the
# old one as it was, not the new one.
test_reused_inode_number_is_a_new_object() {
	local src old new i view

	ovs_mkfs ext4 || return
	src=$OVS_MNT/src
	mkdir -p "$src/d"
	echo old >"$src/d/a"
	echo keep >"$src/d/keep"
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	# The first create makes the layer's folder and whiteout inode: the
	# ones below reuse no number of theirs.
	touch "$src/d/warm" || fail "create warm"
	old=$(stat -c %i "$src/d/a")
	# The first change preserves a copy (ext4 has no reflink), so a's
	# own inode is free to go once it is deleted.
	echo changed >>"$src/d/a" || fail "change a"
	rm "$src/d/a" || fail "unlink through the live path"
	new=
	for ((i = 0; i < 20; i++)); do
		# The kernel forgets the deleted inode, the daemon its node.
		sync
		echo 2 >/proc/sys/vm/drop_caches
		echo "new $i" >"$src/d/n$i" || { fail "create n$i"; break; }
		new=$(stat -c %i "$src/d/n$i") || fail "stat n$i"
		[ "$new" = "$old" ] && break
	done
	assertEquals "a new file got the deleted file's inode number" "$old" "$new"
	assertEquals "with its own content" "new $i" "$(cat "$src/d/n$i" 2>&1)"
	echo more >>"$src/d/n$i" || fail "write to the new file"
	assertEquals "written" "new $i
more" "$(cat "$src/d/n$i" 2>&1)"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	view=$OVS_TMP/view
	ovs_overlay_mount "$view" "$(ovs_snapshot_layers "$src" | tail -1 | cut -d" " -f2-):$src" ||
		fail "overlay mount of the snapshot"
	assertEquals "the snapshot has the deleted file" "old" "$(cat "$view/d/a" 2>&1)"
	assertEquals "and only what SRC had at the take" "a keep" "$(ls "$view/d" | paste -sd' ')"
	umount "$view"
	assertEquals "SRC has the new file with what was written" "new $i
more" "$(cat "$src/d/n$i" 2>&1)"
}

# The stale node itself: a directory removed behind the daemon (through a
# bind mount of the filesystem, a bypass) while a process keeps it in the
# kernel as its cwd, and after the fd cache let go of its fd, so nothing
# holds the real inode.  A file created next through the live path gets
# its number: it must be a new node (a new handle), not the directory's
# old one, which the kernel would refuse with EIO for a regular file.
test_inode_number_reused_behind_the_daemon() {
	local src pid old new i holder under

	ovs_mkfs ext4 || return
	src=$OVS_MNT/src
	mkdir -p "$src/d/x" "$src/fill"
	touch $(seq -f "$src/fill/f%g" 1 300)
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	pid=$(status_field pid "$(daemon_status)")
	prlimit --pid "$pid" --nofile=256:256 || fail "prlimit"
	touch "$src/d/warm" || fail "create warm"
	old=$(stat -c %i "$src/d/x")
	(cd "$src/d/x" && exec sleep 60) &
	holder=$!
	ovs_wait_until 10 "[ \"\$(readlink /proc/$holder/cwd)\" = '$src/d/x' ]" ||
		fail "the holder's cwd is x"
	# Lookups of 300 other files push x's fd out of the cache (bound 64).
	stat "$src"/fill/* >/dev/null || fail "stat the filler files"
	under=$OVS_TMP/under
	ovs_mount_behind "$under"
	rmdir "$under/src/d/x" || fail "rmdir in the real directory"
	umount "$under"
	new=
	for ((i = 0; i < 20; i++)); do
		echo "new $i" >"$src/d/n$i" || { fail "create n$i"; break; }
		new=$(stat -c %i "$src/d/n$i") || fail "stat n$i"
		[ "$new" = "$old" ] && break
	done
	assertEquals "a new file got the removed directory's inode number" "$old" "$new"
	assertEquals "it is a regular file through the live path" "regular file" \
		"$(stat -c %F "$src/d/n$i" 2>&1)"
	assertEquals "with its own content" "new $i" "$(cat "$src/d/n$i" 2>&1)"
	# The next snapshot's first change preserves it by its node's name:
	# the old node's would be x's, which is gone (EIO).
	ovs_run "$OVSNAP" take "$src"
	assertEquals "a second take: $(ovs_ran)" 0 "$OVS_RC"
	echo more >>"$src/d/n$i" || fail "first write to the new file after a take"
	assertEquals "written" "new $i
more" "$(cat "$src/d/n$i" 2>&1)"
	assertEquals "the new snapshot kept it as it was" "new $i" \
		"$(cat "$(ovs_snapshot_layers "$src" | tail -1 | cut -d" " -f2-)/d/n$i" 2>&1)"
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	return 0
}

# A request served as a user (no capability) whose node's fd was
# evicted: open_by_handle_at needs CAP_DAC_READ_SEARCH, which the daemon
# raises for that call only.  The user's xattr changes and listing work,
# and a root-only directory stays closed to the user afterwards.
test_user_request_reopens_an_evicted_fd() {
	local src pid

	ovs_user || return
	ovs_mkfs xfs || return
	src=$OVS_MNT/src
	mkdir -p "$src/fill" "$src/secret"
	chmod 700 "$src/secret"
	echo data >"$src/mine"
	chown "$OVS_UID:$OVS_GID" "$src/mine"
	touch $(seq -f "$src/fill/f%g" 1 300)
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	pid=$(status_field pid "$(daemon_status)")
	prlimit --pid "$pid" --nofile=128:128 || fail "prlimit"
	stat "$src/mine" >/dev/null
	stat "$src"/fill/* >/dev/null || fail "stat the filler files"
	ovs_as_user setfattr -n user.k -v v "$src/mine"
	assertEquals "setxattr as the user: $(ovs_ran)" 0 "$OVS_RC"
	stat "$src"/fill/* >/dev/null
	ovs_as_user getfattr -d "$src/mine"
	assertEquals "listxattr as the user: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the user's xattr" "$OVS_OUT" 'user.k="v"'
	ovs_as_user ls "$src/secret"
	assertNotEquals "the root-only directory stays closed: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$src"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the xattr is on the real file" "v" \
		"$(getfattr --only-values -n user.k "$src/mine" 2>/dev/null)"
}

# SRC on a fresh FS with gone (its data "data") and 300 files in fill,
# taken; the daemon's fd limit at 128 (its cache: 32), so that a stat of
# fill's files evicts every other fd.  Sets src and pid (the daemon's).
removed_file_volume() {
	ovs_mkfs "$1" || return
	src=$OVS_MNT/src
	mkdir -p "$src/fill"
	echo data >"$src/gone"
	touch $(seq -f "$src/fill/f%g" 1 300)
	ovs_run "$OVSNAP" take "$src"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC" || return
	pid=$(status_field pid "$(daemon_status)")
	prlimit --pid "$pid" --nofile=128:128 || fail "prlimit"
}

# A file removed while open keeps its node's fd (a handle may not open
# an unlinked inode again): a chmod through the open descriptor (a
# SETATTR without a file handle) reaches it after the cache has moved on.
test_removed_open_file_keeps_its_fd() {
	local src pid

	removed_file_volume ext4 || return
	cat >"$OVS_TMP/removed.py" <<'PY'
import os, sys
src = sys.argv[1]
fd = os.open(src + "/gone", os.O_RDWR)
os.unlink(src + "/gone")
for name in os.listdir(src + "/fill"):
    os.stat(src + "/fill/" + name)
os.fchmod(fd, 0o600)
st = os.fstat(fd)
print("%o %d" % (st.st_mode & 0o7777, st.st_nlink))
os.write(fd, b"more")
os.close(fd)
PY
	ovs_run "$ovs__python3" "$OVS_TMP/removed.py" "$src"
	assertEquals "chmod of the removed open file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "its mode and link count" "600 0" "$OVS_OUT"
}

# The same with the node's fd evicted before the unlink: the daemon opens
# the removed file by its handle once the name is gone (outside its node
# lock; the file lives on, open), and keeps that fd for the node, which
# another walk of fill does not evict: two fds of the removed file then
# (the open file's and the node's), one had it not kept it.
test_removed_open_file_without_cached_fd() {
	local src pid

	removed_file_volume xfs || return
	cat >"$OVS_TMP/removed.py" <<'PY'
import os, sys
src, pid = sys.argv[1], sys.argv[2]
fd = os.open(src + "/gone", os.O_RDWR)
for name in os.listdir(src + "/fill"):
    os.stat(src + "/fill/" + name)
os.unlink(src + "/gone")
for name in os.listdir(src + "/fill"):
    os.stat(src + "/fill/" + name)
held = 0
for f in os.listdir("/proc/%s/fd" % pid):
    try:
        held += os.readlink("/proc/%s/fd/%s" % (pid, f)).endswith("/gone (deleted)")
    except OSError:
        pass
print("daemon holds %d" % held)
magic = "/proc/self/fd/%d" % fd
os.chmod(magic, 0o600)
os.utime(magic, (1000000000, 1000000000))
with open(magic) as f:
    data = f.read().strip()
st = os.stat(magic)
print("%o %d %d %s" % (st.st_mode & 0o7777, st.st_nlink, st.st_mtime, data))
os.close(fd)
PY
	ovs_run "$ovs__python3" "$OVS_TMP/removed.py" "$src" "$pid"
	assertEquals "chmod, utime and open of the removed file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the daemon's fds of it; its mode, link count, mtime and data" \
		"daemon holds 2
600 0 1000000000 data" "$OVS_OUT"
}

. "$SHUNIT2"
