#!/bin/bash
# Delegation to users (issue 14 item 7): users and groups named in a
# volume's ALLOW_USERS/ALLOW_GROUPS run list, diff, take, mount and umount
# through the setuid-root ovsnap-delegate; everyone else gets "permission
# denied"; no one reads the store; views are nosuid,nodev, on a directory
# of the caller's, unmounted by their owner only, and grant what the real
# filesystem grants (DESIGN.md rule 19); the caller's environment steers
# nothing.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd useradd userdel groupadd groupdel setpriv systemd-escape findmnt

# Two throw-away users with names of their own (removed in oneTimeTearDown,
# also after a failure): $ALICE is named in the settings, $BOB is not.
ALICE=ovsdg-a$$
BOB=ovsdg-b$$
GROUP=ovsdg-g$$

oneTimeSetUp() {
	ovs_onetime_setup
	groupadd "$GROUP" || return 1
	useradd --no-create-home --shell /bin/sh "$ALICE" || return 1
	useradd --no-create-home --shell /bin/sh -G "$GROUP" "$BOB" || return 1
	# The helper as an admin installs it: root's, 4755, next to the
	# programs it runs, on a filesystem without nosuid.  The .env file
	# (root's, in root's directory) points it at this test's directories.
	BIN=$OVS_TMP/bin
	mkdir -m 0755 "$BIN"
	cp "$OVSNAP" "$(dirname "$OVSNAP")/ovsnapd" "$(dirname "$OVSNAP")/ovsnap-viewd" \
		"$(dirname "$OVSNAP")/ovsnap-delegate" "$BIN"/ || return 1
	chmod 4755 "$BIN/ovsnap-delegate"
	printf 'OVSNAP_STATE_DIR=%s\nOVSNAP_RUN_DIR=%s\nOVSNAP_CONF_DIR=%s\nOVSNAP_DAEMON_START=fork\n' \
		"$OVSNAP_STATE_DIR" "$OVSNAP_RUN_DIR" "$OVSNAP_CONF_DIR" >"$BIN/ovsnap-delegate.env"
	HOMES=$OVS_TMP/homes
	mkdir -m 0755 "$HOMES"
	export OVSNAP_DELEGATE=$BIN/ovsnap-delegate
}

oneTimeTearDown() {
	ovs_onetime_teardown
	userdel "$ALICE" 2>/dev/null
	userdel "$BOB" 2>/dev/null
	groupdel "$GROUP" 2>/dev/null
	# ovs_cleanup unmounts what is left; nothing of the users remains
	! id "$ALICE" >/dev/null 2>&1 && ! id "$BOB" >/dev/null 2>&1 ||
		echo "delegation_test: could not remove $ALICE or $BOB" >&2
}

# as USER CMD...: run CMD as USER with its own groups and no capabilities
# (ovs_run sets $OVS_RC, $OVS_OUT, $OVS_ERR); the bounding set stays, as
# for a user who logged in, so the setuid helper can become root.
as() {
	local user=$1
	shift
	ovs_run setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
		--inh-caps=-all -- "$@"
}

# A volume at $SRC with two snapshots (a.txt changed between them), a
# file only root may read, and settings that allow $ALICE; $HOME_A and
# $HOME_B are directories of the two users.
fresh() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir "$SRC"
	echo one >"$SRC/a.txt"
	echo secret >"$SRC/secret"
	chmod 0600 "$SRC/secret"
	"$OVSNAP" take -q "$SRC" >/dev/null || { fail "take 1"; return 1; }
	echo two >"$SRC/a.txt"
	"$OVSNAP" take -q "$SRC" >/dev/null || { fail "take 2"; return 1; }
	CONF=$OVSNAP_CONF_DIR/$(systemd-escape --path "$SRC").conf
	printf 'ALLOW_USERS=%s\n' "$ALICE" >"$CONF"
	rm -rf "$HOMES"/*
	HOME_A=$HOMES/a
	HOME_B=$HOMES/b
	mkdir "$HOME_A" "$HOME_B"
	chown "$ALICE" "$HOME_A"
	chown "$BOB" "$HOME_B"
}

# denied WHAT: the last run failed with one line saying "permission denied".
denied() {
	assertEquals "$1: exit: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "$1: says permission denied: $(ovs_ran)" "$OVS_ERR" "permission denied"
	assertEquals "$1: one line: $(ovs_ran)" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
}

test_delegated_user_lists_takes_and_diffs() {
	fresh || return
	as "$ALICE" "$OVSNAP" list "$SRC"
	assertEquals "list: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "list shows both snapshots" 2 "$(printf '%s\n' "$OVS_OUT" | grep -c '^ *[12] ')"
	as "$ALICE" "$OVSNAP" diff "$SRC" 1 2
	assertEquals "diff: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "diff names the changed file" "$OVS_OUT" "a.txt"
	as "$ALICE" "$OVSNAP" take --description "by alice" "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take prints the id" 3 "$OVS_OUT"
	assertContains "the snapshot is there for root too" "$("$OVSNAP" list "$SRC")" "by alice"
	# options that prune, pin or set up stay root's
	as "$ALICE" "$OVSNAP" take --keep last=1 "$SRC"
	denied "take --keep"
	assertEquals "take --keep dropped nothing" 3 "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	# a value that looks like an option stays a value
	as "$ALICE" "$OVSNAP" take -d --keep=last=1 "$SRC"
	assertEquals "take -d --keep=...: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "it took a snapshot and dropped nothing" 4 "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	assertContains "described as given" "$("$OVSNAP" list "$SRC")" "--keep=last=1"
	# the store stays root's: delegation made nothing of it readable
	as "$ALICE" ls "$OVS_MNT/.ovsnap"
	assertNotEquals "alice cannot list the store: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the store is still 0700" 700 "$(stat -c %a "$OVS_MNT/.ovsnap")"
}

test_group_is_delegated() {
	fresh || return
	printf 'ALLOW_GROUPS=%s\n' "$GROUP" >"$CONF"
	as "$BOB" "$OVSNAP" list "$SRC"
	assertEquals "a member of ALLOW_GROUPS lists: $(ovs_ran)" 0 "$OVS_RC"
	as "$ALICE" "$OVSNAP" list "$SRC"
	denied "alice, no longer named"
}

test_delegated_user_mounts_and_umounts_its_view() {
	fresh || return
	mkdir "$HOME_A/view"
	chown "$ALICE" "$HOME_A/view"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$HOME_A/view"
	assertEquals "mount: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "the view is mounted" "mountpoint -q '$HOME_A/view'"
	local opts
	opts=$(findmnt -n -o OPTIONS --mountpoint "$HOME_A/view")
	assertContains "nosuid: $opts" ",$opts," ",nosuid,"
	assertContains "nodev: $opts" ",$opts," ",nodev,"
	as "$ALICE" cat "$HOME_A/view/a.txt"
	assertEquals "alice reads snapshot 1 through it" "one" "$OVS_OUT"
	# rule 19: the view grants what the real filesystem grants
	as "$ALICE" cat "$HOME_A/view/secret"
	assertNotEquals "alice cannot read root's 0600 file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "root can" "secret" "$(cat "$HOME_A/view/secret")"
	as "$ALICE" "$OVSNAP" list "$SRC"
	# the owner alone unmounts it
	as "$BOB" "$OVSNAP" umount "$HOME_A/view"
	denied "bob's umount of alice's view"
	assertTrue "still mounted" "mountpoint -q '$HOME_A/view'"
	as "$ALICE" "$OVSNAP" umount "$HOME_A/view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "unmounted" "mountpoint -q '$HOME_A/view'"
	assertEquals "no owner record left" "" "$(ls "$OVSNAP_RUN_DIR" | grep '\.owner$')"
}

test_mount_refusals() {
	fresh || return
	mkdir "$HOME_B/view" "$HOME_A/mine" "$OVS_TMP/rootdir"
	chown "$BOB" "$HOME_B/view"
	chown "$ALICE" "$HOME_A/mine"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$HOME_B/view"
	denied "mount over bob's directory"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/rootdir"
	denied "mount over root's directory"
	# a symlink of hers to a directory of hers: refused, not followed
	ln -s "$HOME_A/mine" "$HOME_A/link"
	chown -h "$ALICE" "$HOME_A/link"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$HOME_A/link"
	assertEquals "mount over a symlink: exit: $(ovs_ran)" 1 "$OVS_RC"
	as "$ALICE" "$OVSNAP" mount -o suid "$SRC" 1 "$HOME_A/mine"
	denied "mount -o suid"
	as "$ALICE" "$OVSNAP" mount --kernel "$SRC" 1 "$HOME_A/mine"
	denied "mount --kernel"
	# The path swapped for another directory after the helper checked
	# it: the CLI (as the helper runs it) compares the directory it was
	# handed with what the path names now, and refuses.
	mkdir "$HOME_A/other"
	chown "$ALICE" "$HOME_A/other"
	ovs_run env OVSNAP_DELEGATED_UID="$(id -u "$ALICE")" OVSNAP_DELEGATED_TARGET_FD=3 \
		"$OVSNAP" mount "$SRC" 1 "$HOME_A/mine" 3<"$HOME_A/other"
	denied "mount on a path that no longer names the checked directory"
	assertEquals "nothing was mounted" "" "$(findmnt -rn -o TARGET | grep "^$HOMES\|^$OVS_TMP/rootdir")"
	# root's view: no user unmounts it
	"$OVSNAP" mount "$SRC" 1 "$OVS_TMP/rootdir" || fail "root's mount"
	as "$ALICE" "$OVSNAP" umount "$OVS_TMP/rootdir"
	denied "alice's umount of root's view"
	assertTrue "root's view is still mounted" "mountpoint -q '$OVS_TMP/rootdir'"
	"$OVSNAP" umount "$OVS_TMP/rootdir"
}

# A name that is no user or group (deleted since, an NSS outage) grants
# nothing and takes nothing from the names that exist.
test_unknown_names_grant_nothing() {
	fresh || return
	printf 'ALLOW_USERS=nobody-ovsnap-test,%s\nALLOW_GROUPS=no-such-group-ovsnap\n' \
		"$ALICE" >"$CONF"
	as "$ALICE" "$OVSNAP" list "$SRC"
	assertEquals "alice, named beside an unknown user: $(ovs_ran)" 0 "$OVS_RC"
	as "$ALICE" "$OVSNAP" take "$SRC"
	assertEquals "alice takes: $(ovs_ran)" 0 "$OVS_RC"
	as "$BOB" "$OVSNAP" list "$SRC"
	denied "bob, not named"
	printf 'ALLOW_USERS=nobody-ovsnap-test\n' >"$CONF"
	as "$ALICE" "$OVSNAP" list "$SRC"
	denied "alice, only an unknown user named"
}

test_undelegated_user_is_denied() {
	fresh || return
	mkdir "$HOME_B/view"
	chown "$BOB" "$HOME_B/view"
	as "$BOB" "$OVSNAP" list "$SRC"
	denied "bob: list"
	as "$BOB" "$OVSNAP" diff "$SRC" 1 2
	denied "bob: diff"
	as "$BOB" "$OVSNAP" take "$SRC"
	denied "bob: take"
	as "$BOB" "$OVSNAP" mount "$SRC" 1 "$HOME_B/view"
	denied "bob: mount"
	assertFalse "nothing mounted for bob" "mountpoint -q '$HOME_B/view'"
	as "$BOB" "$OVSNAP" list --json "$SRC"
	denied "bob: list --json"
	# a view root mounted in bob's own directory is still not his
	"$OVSNAP" mount "$SRC" 1 "$HOME_B/view" || fail "root's mount in bob's directory"
	as "$BOB" "$OVSNAP" umount "$HOME_B/view"
	denied "bob: umount"
	assertTrue "root's view is still there" "mountpoint -q '$HOME_B/view'"
	"$OVSNAP" umount "$HOME_B/view"
	assertEquals "no snapshot was taken" 2 "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	as "$BOB" ls "$OVS_MNT/.ovsnap"
	assertNotEquals "bob cannot list the store: $(ovs_ran)" 0 "$OVS_RC"
	# a command delegation does not cover
	as "$ALICE" "$OVSNAP" drop "$SRC" 1
	assertEquals "drop stays root's: $(ovs_ran)" 1 "$OVS_RC"
}

test_environment_does_not_steer_the_helper() {
	fresh || return
	# Settings that would allow bob, root's own (so they pass the owner
	# check), in a directory bob names through the environment.
	local evil=$OVS_TMP/evil-conf
	mkdir -p "$evil"
	printf 'ALLOW_USERS=%s\n' "$BOB" >"$evil/$(basename "$CONF")"
	as "$BOB" env OVSNAP_CONF_DIR="$evil" OVSNAP_STATE_DIR=/nonexistent \
		"$OVSNAP" list "$SRC"
	denied "bob with OVSNAP_CONF_DIR of his choosing"
	# alice's state and run directories of her own are not used either
	as "$ALICE" env OVSNAP_STATE_DIR=/nonexistent OVSNAP_RUN_DIR=/nonexistent \
		OVSNAP_VIEWD=/bin/false "$OVSNAP" list "$SRC"
	assertEquals "alice's list with a bogus environment: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "still the real registry" "$OVS_OUT" " 2 "
}

test_settings_writable_by_others_grant_nothing() {
	fresh || return
	chmod 0777 "$OVSNAP_CONF_DIR"
	as "$ALICE" "$OVSNAP" list "$SRC"
	denied "alice, settings directory writable by all"
	assertContains "it names the directory" "$OVS_ERR" "$OVSNAP_CONF_DIR"
	chmod 0755 "$OVSNAP_CONF_DIR"
	chmod 0666 "$CONF"
	as "$ALICE" "$OVSNAP" list "$SRC"
	denied "alice, settings file writable by all"
	chmod 0644 "$CONF"
}

test_helper_not_setuid_says_so() {
	fresh || return
	as "$ALICE" env OVSNAP_DELEGATE="$(dirname "$OVSNAP")/ovsnap-delegate" \
		"$OVSNAP" take "$SRC"
	assertEquals "exit: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "says the helper is not setuid: $(ovs_ran)" "$OVS_ERR" \
		"is not installed setuid root"
	assertEquals "one line" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	# list is no root's command: without the helper it runs with her own
	# rights, which do not reach the store
	as "$ALICE" env OVSNAP_DELEGATE="$(dirname "$OVSNAP")/ovsnap-delegate" \
		"$OVSNAP" list "$SRC"
	assertEquals "list without the helper: exit: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "list without the helper: $(ovs_ran)" "$OVS_ERR" "Permission denied"
	as "$ALICE" "$(dirname "$OVSNAP")/ovsnap-delegate" list "$SRC"
	assertEquals "the helper itself: exit" 1 "$OVS_RC"
	assertContains "the helper itself says so: $(ovs_ran)" "$OVS_ERR" "not installed setuid root"
}

# Rule 19 for diff: no name below a directory alice may not read and
# search (mode bits or ACL), in the snapshot or live.
test_diff_hides_what_the_caller_cannot_list() {
	fresh || return
	mkdir -m 0700 "$SRC/rootonly" "$SRC/acl" "$SRC/old"
	echo s >"$SRC/rootonly/SECRET-NAME"
	mkdir -m 0755 "$SRC/pub"
	echo p >"$SRC/pub/PUBLIC-NAME"
	echo o >"$SRC/old/OLD-NAME"
	setfacl -m "u:$ALICE:rx" "$SRC/acl" || fail "setfacl"
	echo a >"$SRC/acl/ACL-NAME"
	"$OVSNAP" take -q "$SRC" >/dev/null || fail "take 3"
	chmod 0755 "$SRC/old"
	echo n >"$SRC/old/NEW-NAME"
	as "$ALICE" "$OVSNAP" diff "$SRC" 2
	assertEquals "diff: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "a readable directory's file is shown" "$OVS_OUT" "pub/PUBLIC-NAME"
	assertContains "the 0700 directory itself is shown" "$OVS_OUT" "rootonly"
	assertNotContains "its file is not" "$OVS_OUT" "SECRET-NAME"
	assertContains "an ACL granting r-x shows its file" "$OVS_OUT" "acl/ACL-NAME"
	as "$ALICE" "$OVSNAP" diff "$SRC" 3
	assertNotContains "0700 in the snapshot, 0755 live: hidden: $(ovs_ran)" "$OVS_OUT" "NEW-NAME"
	as "$ALICE" "$OVSNAP" diff --json "$SRC" 2
	assertNotContains "nor in JSON" "$OVS_OUT" "SECRET-NAME"
	assertContains "root sees it" "$("$OVSNAP" diff "$SRC" 2)" "SECRET-NAME"
	# a group's directory: for the groups the caller has, as the kernel
	# gave them (not as /etc/group lists them)
	mkdir -m 0750 "$SRC/grp"
	chgrp "$GROUP" "$SRC/grp"
	echo g >"$SRC/grp/GROUP-NAME"
	printf 'ALLOW_USERS=%s,%s\n' "$ALICE" "$BOB" >"$CONF"
	as "$BOB" "$OVSNAP" diff "$SRC" 2
	assertContains "bob, in the group, sees its file: $(ovs_ran)" "$OVS_OUT" "grp/GROUP-NAME"
	as "$ALICE" "$OVSNAP" diff "$SRC" 2
	assertNotContains "alice, not in it, does not" "$OVS_OUT" "GROUP-NAME"
	ovs_run setpriv --reuid="$BOB" --regid="$(id -g "$BOB")" --clear-groups \
		--inh-caps=-all -- "$OVSNAP" diff "$SRC" 2
	assertEquals "bob without his groups: $(ovs_ran)" 0 "$OVS_RC"
	assertNotContains "bob without his groups does not see it" "$OVS_OUT" "GROUP-NAME"
}

# A delegated diff whose stdout blocks (a full pipe no one reads) holds
# no lock: root's take --no-wait goes through meanwhile.
test_blocked_diff_output_holds_no_lock() {
	fresh || return
	local i fifo=$OVS_TMP/fifo ok=1 pid
	mkdir "$SRC/many"
	for i in $(seq 3000); do : >"$SRC/many/a-long-file-name-to-fill-the-pipe-quickly-$i"; done
	mkfifo -m 0666 "$fifo"
	exec 7<>"$fifo"
	setpriv --reuid="$ALICE" --regid="$(id -g "$ALICE")" --init-groups --inh-caps=-all -- \
		"$OVSNAP" diff "$SRC" 2 >"$fifo" 2>/dev/null &
	pid=$!
	for i in $(seq 50); do
		sleep 0.2
		"$OVSNAP" take -q --no-wait "$SRC" >/dev/null 2>&1 && { ok=0; break; }
	done
	assertEquals "root's take --no-wait went through while the diff's reader stalled" 0 "$ok"
	kill "$pid" 2>/dev/null
	exec 7>&-
	wait "$pid" 2>/dev/null
	# the root side gets EPIPE and exits: nothing keeps the volume
	for i in $(seq 50); do
		"$OVSNAP" take -q --no-wait "$SRC" >/dev/null 2>&1 && break
		sleep 0.1
	done
}

# Root's work runs out of alice's session, limits and cwd: a hangup or
# SIGTERM of alice's ovsnap during PRE_HOOK still runs POST_HOOK; hooks
# see stdin /dev/null, cwd /, no OVSNAP_DELEGATED_*, root's limits.
test_hooks_are_out_of_the_callers_reach() {
	fresh || return
	local info=$OVS_TMP/hookinfo post=$OVS_TMP/post-ran i pid
	cat >>"$CONF" <<HOOK
PRE_HOOK='{ pwd; readlink /proc/self/fd/0; ulimit -f; env | grep -c OVSNAP_DELEGATED; } >$info; sleep 3'
POST_HOOK='touch $post'
HOOK
	cd "$HOME_A" || return
	setpriv --reuid="$ALICE" --regid="$(id -g "$ALICE")" --init-groups --inh-caps=-all -- \
		prlimit --fsize=100000:100000 -- "$OVSNAP" take "$SRC" >/dev/null 2>&1 &
	pid=$!
	cd /
	sleep 1.5
	kill -HUP "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	for i in $(seq 100); do
		[ -e "$post" ] && break
		sleep 0.1
	done
	assertTrue "POST_HOOK ran though alice's ovsnap was killed" "[ -e '$post' ]"
	assertEquals "hook environment (cwd, stdin, OVSNAP_DELEGATED_*)" \
		"$(printf '/\n/dev/null\n0')" "$(sed 3d "$info")"
	# Raising a hard limit takes CAP_SYS_RESOURCE, which some
	# containers withhold even from root: then the helper raises the
	# soft limits to the hard ones only (issue 14).
	if prlimit --fsize=100000:100000 sh -c 'ulimit -f unlimited' 2>/dev/null; then
		assertEquals "alice's ulimit -f does not reach the hook" unlimited "$(sed -n 3p "$info")"
	fi
	assertEquals "the snapshot was taken" 3 "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
}

# with_fd3 PATH CMD...: CMD, as the helper runs it for alice, with PATH
# opened O_PATH on fd 3 (held by CMD alone: an fd kept open in this shell
# would keep the mount busy).
with_fd3() {
	OVSNAP_DELEGATED_UID=$(id -u "$ALICE") OVSNAP_DELEGATED_TARGET_FD=3 python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_PATH | os.O_NOFOLLOW)
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.set_inheritable(3, True)
os.execv(sys.argv[2], sys.argv[2:])' "$@"
}

# umount unmounts the mount alice's path named when the helper opened
# it: the CLI is handed that fd; a path swapped since changes nothing.
test_umount_follows_the_opened_mount_not_the_path() {
	fresh || return
	mkdir -p "$HOME_A/view" "$OVS_TMP/rootdir"
	chown "$ALICE" "$HOME_A/view"
	"$OVSNAP" mount "$SRC" 1 "$OVS_TMP/rootdir" || fail "root's mount"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$HOME_A/view"
	assertEquals "alice's mount: $(ovs_ran)" 0 "$OVS_RC"
	ln -s "$OVS_TMP/rootdir" "$HOME_A/link"
	chown -h "$ALICE" "$HOME_A/link"
	as "$ALICE" "$OVSNAP" umount "$HOME_A/link"
	denied "umount of a symlink to root's view"
	# the helper opened root's view (a path swapped in): refused
	ovs_run with_fd3 "$OVS_TMP/rootdir" "$OVSNAP" umount "$HOME_A/view"
	denied "umount of root's view opened through alice's path"
	assertTrue "root's view is still mounted" "mountpoint -q '$OVS_TMP/rootdir'"
	# the helper opened alice's view, the path names root's since
	ovs_run with_fd3 "$HOME_A/view" "$OVSNAP" umount "$OVS_TMP/rootdir"
	assertEquals "umount of alice's opened view: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "alice's view is gone" "mountpoint -q '$HOME_A/view'"
	assertTrue "root's view is still mounted" "mountpoint -q '$OVS_TMP/rootdir'"
	"$OVSNAP" umount "$OVS_TMP/rootdir"
}

# Alice is given volume A, at a path through a folder of hers (w), and
# not volume B.  She swaps w for a symlink to B's parent over and over
# while taking snapshots of A: the helper checked A as alice, and the CLI
# (root) resolved the path again, and the library once more to open the
# volume, so takes went to B, described as hers; and A's daemon, finding
# another mount at its path, took its own for detached: A broken until
# an activate.  The CLI now acts only on the directory the helper checked
# (its device and inode) and refuses the rest in one line, a registered
# source is opened as given, and a mount still in the table is no
# detached one.
test_delegated_src_is_the_directory_checked() {
	local a b pid i conf n

	fresh || return
	mkdir -p "$OVS_MNT/home/a/w/proj" "$OVS_MNT/proj"
	chown "$ALICE" "$OVS_MNT/home/a" "$OVS_MNT/home/a/w"
	a=$OVS_MNT/home/a/w/proj
	b=$OVS_MNT/proj
	"$OVSNAP" take -q "$a" >/dev/null || fail "take of A"
	"$OVSNAP" take -q "$b" >/dev/null || fail "take of B"
	conf=$OVSNAP_CONF_DIR/$(systemd-escape --path "$a").conf
	printf 'ALLOW_USERS=%s\n' "$ALICE" >"$conf"
	ln -s "$OVS_MNT" "$OVS_MNT/home/a/wl"
	chown -h "$ALICE" "$OVS_MNT/home/a/wl"

	# the CLI told that A was checked, given B's path: refused
	ovs_run env OVSNAP_DELEGATED_UID="$(id -u "$ALICE")" \
		OVSNAP_DELEGATED_SRC_ID="$(stat -c '%d:%i' "$a")" "$OVSNAP" take "$b"
	denied "take of B after a check of A"
	ovs_run env OVSNAP_DELEGATED_UID="$(id -u "$ALICE")" "$OVSNAP" take "$b"
	denied "take with nothing checked"

	as "$ALICE" "$OVSNAP" take -q "$b"
	denied "take of B"
	setpriv --reuid="$ALICE" --regid="$(id -g "$ALICE")" --init-groups --inh-caps=-all -- \
		"$OVSNAP_TOOLS/tools/ovs-fsop" exchange-loop 30 "$OVS_MNT/home/a/w" \
		"$OVS_MNT/home/a/wl" &
	pid=$!
	for i in $(seq 60); do
		as "$ALICE" "$OVSNAP" take -q -d "by-alice-$i" "$OVS_MNT/home/a/w/proj"
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	n=$("$OVSNAP" list -Hp "$b" | wc -l)
	assertEquals "B has only root's snapshot: $("$OVSNAP" list "$b" 2>&1 | tail -3)" 1 "$n"
	# the swaps stopped, w in place: alice's take is of A
	[ -L "$OVS_MNT/home/a/w" ] && "$OVSNAP_TOOLS/tools/ovs-fsop" exchange \
		"$OVS_MNT/home/a/w" "$OVS_MNT/home/a/wl"
	ovs_run "$OVSNAP" status "$a"
	assertEquals "A's snapshot mount is whole: $(ovs_ran)" 0 "$OVS_RC"
	as "$ALICE" "$OVSNAP" take -q -d by-alice "$a"
	assertEquals "alice's take of A: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "it is A's" "$("$OVSNAP" list "$a")" "by-alice"
}

# Mount targets: disk filesystems and tmpfs only, outside every volume.
test_mount_targets_refused_by_place() {
	fresh || return
	as "$ALICE" sh -c 'exec "$0" mount "$1" 1 /proc/$$' "$OVSNAP" "$SRC"
	denied "mount over alice's own /proc/PID"
	mkdir -p "$SRC/adir" "$OVS_TMP/rootdir"
	chown "$ALICE" "$SRC/adir"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$SRC/adir"
	denied "mount inside an active SRC (ovsnapd's FUSE mount)"
	"$OVSNAP" take -q "$SRC" >/dev/null || fail "take 3"
	"$OVSNAP" mount "$SRC" 3 "$OVS_TMP/rootdir" || fail "root's mount"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$OVS_TMP/rootdir/adir"
	denied "mount inside root's view"
	"$OVSNAP" umount "$OVS_TMP/rootdir"
	"$OVSNAP" deactivate "$SRC" || fail "deactivate"
	as "$ALICE" "$OVSNAP" mount "$SRC" 1 "$SRC/adir"
	denied "mount inside an inactive SRC"
	assertEquals "nothing was mounted" "" "$(findmnt -rn -o TARGET | grep "^$SRC/\|^$OVS_TMP/rootdir/")"
}

# Settings that do not load: every user gets "permission denied" alone,
# nothing of the file's text (root's) is quoted.
test_settings_errors_are_not_shown_to_users() {
	fresh || return
	printf 'ALLOW_USERS=%s\nNO_SUCH_KEY_SECRET_TEXT=1\n' "$ALICE" >"$CONF"
	ovs_run "$OVSNAP" config "$SRC"
	assertContains "root's ovsnap config says why: $(ovs_ran)" "$OVS_ERR" "NO_SUCH_KEY_SECRET_TEXT"
	as "$BOB" "$OVSNAP" list "$SRC"
	denied "bob, settings that do not load"
	assertNotContains "bob sees none of their text" "$OVS_ERR" "SECRET_TEXT"
	as "$ALICE" "$OVSNAP" list "$SRC"
	denied "alice, settings that do not load"
	assertNotContains "alice neither" "$OVS_ERR" "SECRET_TEXT"
}

. "$SHUNIT2"
