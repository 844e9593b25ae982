#!/bin/bash
# Per-volume configuration and the timer's daemon (issue 14 items 5, 10):
# ovsnap.conf(5) made by the first take with the defaults, strict parsing
# with FILE:LINE, PRE_HOOK/POST_HOOK around each take (a failing pre-hook
# takes nothing), take --timer with the file's KEEP/SPACE_LIMIT/CLASS,
# ovsnap config [--json], and the daemon started through systemctl as
# ovsnapd@NAME.service (a fake systemctl here) or forked.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"
ovs_require_root
ovs_require_fs xfs
ovs_require_cmd python3 systemd-escape

# A fresh filesystem with an empty $SRC; $CONF is its settings file.
fresh() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir "$SRC"
	CONF=$OVSNAP_CONF_DIR/$(systemd-escape --path "$SRC").conf
}

# conf TEXT: write $CONF as an admin would.
conf() {
	mkdir -p "$OVSNAP_CONF_DIR"
	printf '%s\n' "$1" >"$CONF"
}

ids() {
	"$OVSNAP" list --json "$SRC" | python3 -c '
import json, sys
print(" ".join(str(x["id"]) for x in json.load(sys.stdin)["snapshots"]))'
}
classes() {
	"$OVSNAP" list --json "$SRC" | python3 -c '
import json, sys
print(" ".join(x["class"] for x in json.load(sys.stdin)["snapshots"]))'
}

# Nothing of a volume at $SRC: not registered, nothing mounted over it, no
# store folder (the store holds what it held before: $1, "" for nothing).
assert_no_volume() {
	ovs_run "$OVSNAP" list "$SRC"
	assertNotEquals "$2: $SRC is no volume: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "$2: nothing mounted over $SRC" "mountpoint -q '$SRC'"
	assertEquals "$2: no store folder left" "$1" "$(ls -A "$OVS_MNT/.ovsnap" 2>/dev/null)"
}

test_first_take_makes_the_file() {
	fresh || return
	assertFalse "no file before the first take" "[ -e '$CONF' ]"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take prints the id only" "1" "$OVS_OUT"
	assertTrue "the first take made $CONF" "[ -f '$CONF' ]"
	assertEquals "every setting is commented out" "" "$(grep -v '^#' "$CONF" | grep .)"
	assertContains "it names the volume" "$(head -1 "$CONF")" "$SRC"
	for key in KEEP SPACE_LIMIT CLASS PRE_HOOK POST_HOOK HOOK_TIMEOUT ALLOW_USERS ALLOW_GROUPS; do
		assertTrue "it shows $key" "grep -q '^#$key=' '$CONF'"
	done
	assertEquals "root's, 0644" "0 644" "$(stat -c '%u %a' "$CONF")"
	cp "$CONF" "$OVS_TMP/conf.first"
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "config: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "config: the defaults" "$OVS_OUT" \
		'KEEP="last=3,hourly=24,daily=7,weekly=4,monthly=12,yearly=2"  # default'
	assertContains "config: the class" "$OVS_OUT" 'CLASS="timeline"  # default'
	# What config prints is a file that reads back the same.
	printf '%s\n' "$OVS_OUT" >"$CONF"
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "config output as the file: $(ovs_ran)" 0 "$OVS_RC"
	cp "$OVS_TMP/conf.first" "$CONF"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "second take: $(ovs_ran)" 0 "$OVS_RC"
	assertTrue "a later take leaves the file alone" "cmp -s '$OVS_TMP/conf.first' '$CONF'"
	chmod 0666 "$CONF"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a file others may write: refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it says why" "$OVS_ERR" "$CONF: must be root's and writable by root only"
	assertEquals "no snapshot taken" "1 2" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
}

# One line, FILE:LINE, exit 1; a first take with a bad file sets nothing up.
test_strict_parsing() {
	local bad want

	fresh || return
	while IFS='|' read -r bad want; do
		conf "$(printf '# settings\nKEEP=last=2\n%b' "$bad")"
		ovs_run "$OVSNAP" config "$SRC"
		assertEquals "config [$bad]: exit 1: $(ovs_ran)" 1 "$OVS_RC"
		assertEquals "config [$bad]: nothing on stdout" "" "$OVS_OUT"
		assertEquals "config [$bad]: one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
		assertContains "config [$bad]: says where and why" "$OVS_ERR" "$CONF:$want"
	done <<'EOF_CASES'
FOO=1|3: unknown key 'FOO'
KEEP=daily=1|3: KEEP set twice (first on line 2)
CLASS=pre|3: CLASS: 'pre' is not manual or timeline
SPACE_LIMIT=lots|3: SPACE_LIMIT: 'lots' is not N% or a size
PRE_HOOK=echo hi|3: PRE_HOOK: blanks in a value (quote it)
PRE_HOOK="never closed|3: PRE_HOOK: unterminated "
ALLOW_USERS=root,nobody-ovsnap-test|3: ALLOW_USERS: no such user 'nobody-ovsnap-test'
\nALLOW_GROUPS=no-such-group-ovsnap|4: ALLOW_GROUPS: no such group
KEEP = 3|3: expected KEY=VALUE
EOF_CASES
	conf 'KEEP=fortnightly=2'
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "first take with a bad file: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it names the line" "$OVS_ERR" "$CONF:1: KEEP"
	assert_no_volume "" "first take with a bad file"
}

test_hooks() {
	local log=$OVS_TMP/hooks.log

	fresh || return
	# A failing pre-hook of the very first take: no volume at all.
	conf "PRE_HOOK='echo pre >>$log; exit 3'
POST_HOOK='echo \"post \$OVSNAP_SNAPSHOT\" >>$log'"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "failing pre-hook: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "it says so" "$OVS_ERR" "PRE_HOOK ($CONF) failed with exit status 3: no snapshot taken"
	assertEquals "the post-hook runs for a take the pre-hook failed? no" "pre" "$(cat "$log")"
	assert_no_volume "" "failing pre-hook of the first take"

	# Hooks around each take, the post-hook told the new snapshot.
	: >"$log"
	conf "PRE_HOOK='echo \"pre \$OVSNAP_SOURCE \$OVSNAP_CLASS\" >>$log; echo to-stdout'
POST_HOOK=\"echo post \\\$OVSNAP_SNAPSHOT >>$log\""
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with hooks: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "stdout is the id only" "1" "$OVS_OUT"
	assertContains "a hook's output goes to stderr" "$OVS_ERR" "to-stdout"
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "take --timer with hooks: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "pre, then post with the id" "pre $SRC manual
post 1
pre $SRC timeline
post 2" "$(cat "$log")"

	# The hooks run under the volume's lock: a command of the hook that
	# needs it fails (without --wait).
	conf "PRE_HOOK='\"\$OVSNAP\" hold \"\$OVSNAP_SOURCE\" 1'"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a pre-hook that needs the lock: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "the hook's command found the lock held" "$OVS_ERR" "volume $SRC is busy"
	assertContains "the take says the hook failed" "$OVS_ERR" "PRE_HOOK ($CONF) failed"
	# A failing pre-hook of a later take: nothing new.
	conf "PRE_HOOK=false"
	echo new >"$SRC/f"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "failing pre-hook: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "no snapshot added" "1 2" "$(ids)"
	ovs_run "$OVSNAP" status "$SRC"
	assertEquals "still protected: $(ovs_ran)" 0 "$OVS_RC"
	# A failing post-hook: the snapshot stays, the take says it failed.
	conf "POST_HOOK='exit 4'"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "failing post-hook: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "the id still printed" "3" "$OVS_OUT"
	assertContains "it says so" "$OVS_ERR" "POST_HOOK ($CONF) failed with exit status 4"
	assertEquals "the snapshot stays" "1 2 3" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
}

# take --timer: the class and KEEP of the file; a manual snapshot is
# never pruned by the timer's rule.
test_timer_keep() {
	local i

	fresh || return
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "manual take: $(ovs_ran)" 0 "$OVS_RC"
	conf 'KEEP="last=2"'
	for i in 2 3 4 5; do
		echo "$i" >"$SRC/f"
		ovs_run "$OVSNAP" take --timer --wait --quiet "$SRC"
		assertEquals "take --timer $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	assertEquals "the manual one and the last 2 timeline ones" "1 4 5" "$(ids)"
	assertEquals "classes" "manual timeline timeline" "$(classes)"
	conf 'KEEP="last=1"
CLASS=manual'
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "CLASS=manual: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "CLASS=manual: its rule judges manual snapshots" "4 5 6" "$(ids)"
	ovs_run "$OVSNAP" take --timer --keep last=1 "$SRC"
	assertEquals "--timer --keep: usage error: $(ovs_ran)" 2 "$OVS_RC"
	assertContains "it says why" "$OVS_ERR" "--timer takes its rules from ovsnap.conf(5)"

	# The rotation unit's legacy OVSNAP_KEEP goes into the file it makes.
	SRC=$OVS_MNT/src2
	mkdir "$SRC"
	CONF=$OVSNAP_CONF_DIR/$(systemd-escape --path "$SRC").conf
	ovs_run env OVSNAP_KEEP=last=1 "$OVSNAP" take --timer "$SRC"
	assertEquals "legacy timer take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "KEEP carried into the file" 'KEEP="last=1"' "$(grep '^KEEP' "$CONF")"
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "timer take: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the file's KEEP applies" "2" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
	ovs_run "$OVSNAP" deactivate "$OVS_MNT/src"
}

# SPACE_LIMIT: the oldest timeline snapshots go until the layers fit;
# layers 2 to 5 each hold a 4 MiB rewritten file of their own.
test_timer_space_limit() {
	local i

	fresh || return
	echo 1 >"$SRC/f"
	ovs_run "$OVSNAP" take "$SRC"
	conf 'KEEP=last=100
SPACE_LIMIT=9M'
	for i in 2 3 4 5 6; do
		if [ "$i" = 2 ]; then
			dd if=/dev/urandom of="$SRC/f" bs=1M count=4 status=none
		else
			dd if=/dev/urandom of="$SRC/f" bs=1M count=4 conv=notrunc status=none
		fi || fail "write f"
		sync
		ovs_run "$OVSNAP" take --timer "$SRC"
		assertEquals "take --timer $i: $(ovs_ran)" 0 "$OVS_RC"
	done
	assertEquals "oldest first, stopping at the limit; the manual one stays" "1 4 5 6" "$(ids)"
	conf 'KEEP=last=1,space=1G
SPACE_LIMIT=9M'
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "two space limits: refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it says where" "$OVS_ERR" "$CONF:2: SPACE_LIMIT and a space= rule in KEEP (line 1)"
	assertEquals "no snapshot taken" "1 4 5 6" "$(ids)"
	ovs_run "$OVSNAP" deactivate "$SRC"
}

test_config_json() {
	fresh || return
	ovs_run "$OVSNAP" config --json "$SRC"
	assertEquals "config --json without a file: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "the defaults" "False timeline None []" "$(printf '%s' "$OVS_OUT" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print(c["exists"], c["class"], c["pre_hook"], c["allow_users"])')"
	ovs_user
	conf "KEEP=daily=7
SPACE_LIMIT=20%
CLASS=timeline
PRE_HOOK='echo \"a b\" | tr a b'
ALLOW_USERS=\"root, $OVS_USER\"
ALLOW_GROUPS=root"
	ovs_run "$OVSNAP" config --json "$SRC"
	assertEquals "config --json: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "every setting" "$SRC|$CONF|True|daily=7|20%|timeline|echo \"a b\" | tr a b|None|root,$OVS_USER|root" \
		"$(printf '%s' "$OVS_OUT" | python3 -c '
import json, sys
c = json.load(sys.stdin)
print("|".join(str(c[k]) if not isinstance(c[k], list) else ",".join(c[k]) for k in
      ("source", "file", "exists", "keep", "space_limit", "class", "pre_hook", "post_hook",
       "allow_users", "allow_groups")))')"
	ovs_run "$OVSNAP" config "$SRC"
	assertContains "text: the user list" "$OVS_OUT" "ALLOW_USERS=\"root,$OVS_USER\""
	assertContains "text: the hook, escaped" "$OVS_OUT" 'PRE_HOOK="echo \"a b\" | tr a b"'
	ovs_run "$OVSNAP" config "$OVS_TMP/nonexistent"
	assertEquals "config of no directory: $(ovs_ran)" 1 "$OVS_RC"
}

# Rule 18: a SRC whose escape is too long for a unit name (each byte of
# "é" escapes to 4) still has a settings file (the escape cut short and a
# hash); take, config and forget work, and the daemon is forked.
test_long_path() {
	local name file

	ovs_mkfs xfs || return
	# 248 bytes escaped: over a unit name's 239, within the store
	# folder's NAME_MAX
	name=é
	while [ "$(systemd-escape --path "$OVS_MNT/$name" | tr -d '\n' | wc -c)" -lt 248 ]; do
		name+=a
	done
	SRC=$OVS_MNT/$name
	mkdir "$SRC"
	ovs_run env OVSNAP_DAEMON_START=systemd OVSNAP_SYSTEMCTL=false "$OVSNAP" take "$SRC"
	assertEquals "take of a long SRC (no systemctl tried): $(ovs_ran)" 0 "$OVS_RC"
	file=$(ls "$OVSNAP_CONF_DIR")
	assertEquals "one settings file" 1 "$(printf '%s\n' "$file" | grep -c .)"
	assertTrue "named by the escape cut short and a hash: $file" \
		"printf '%s' '$file' | grep -Eq -- '-\\\\xc3\\\\xa9a+~h[0-9a-f]{16}\.conf\$'"
	assertTrue "no longer than a unit name and .conf: ${#file}" "[ ${#file} -le 244 ]"
	CONF=$OVSNAP_CONF_DIR/$file
	conf 'KEEP="last=1"
PRE_HOOK="echo long-pre"'
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "config: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "config names the file" "# $CONF" "$(printf '%s\n' "$OVS_OUT" | head -1)"
	assertContains "config reads it" "$OVS_OUT" 'KEEP="last=1"'
	echo 2 >"$SRC/f"
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "take --timer: $(ovs_ran)" 0 "$OVS_RC"
	assertContains "the file's hook ran" "$OVS_ERR" "long-pre"
	assertEquals "the file's KEEP applied (to the timer's class)" "1 2" "$(ids)"
	ovs_run "$OVSNAP" forget --yes --force "$SRC"
	assertEquals "forget: $(ovs_ran)" 0 "$OVS_RC"
	assertFalse "forget removed the file" "[ -e '$CONF' ]"
}

# The setup lock is not held through the hooks: a first take's hook can
# set another volume up (it waited forever for the lock before).
test_hook_sets_up_another_volume() {
	local other

	fresh || return
	other=$OVS_MNT/other
	mkdir "$other"
	conf "PRE_HOOK='\"\$OVSNAP\" take --quiet \"$other\" >&2'"
	ovs_run timeout 20 "$OVSNAP" take "$SRC"
	assertEquals "a first take whose hook sets up another SRC: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list "$other"
	assertEquals "the hook's volume is there: $(ovs_ran)" 0 "$OVS_RC"
	"$OVSNAP" deactivate "$other" >/dev/null 2>&1
	"$OVSNAP" deactivate "$SRC" >/dev/null 2>&1
}

# A hook runs in its own process group, killed after HOOK_TIMEOUT.
test_hook_timeout() {
	local t0 t1 pid i

	fresh || return
	conf 'PRE_HOOK="sleep 30.0071 & sleep 30.0072"
HOOK_TIMEOUT=1'
	ovs_run "$OVSNAP" config "$SRC"
	assertContains "config shows it" "$OVS_OUT" 'HOOK_TIMEOUT="1"'
	t0=$(date +%s)
	ovs_run "$OVSNAP" take "$SRC"
	t1=$(date +%s)
	assertEquals "a pre-hook past its time: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "it says so" "$OVS_ERR" \
		"PRE_HOOK ($CONF) ran longer than HOOK_TIMEOUT=1 seconds: killed; no snapshot taken"
	assertTrue "within seconds ($((t1 - t0)) s)" "[ $((t1 - t0)) -lt 10 ]"
	assert_no_volume "" "a pre-hook past its time"
	assertEquals "no hook process left" "" "$(pgrep -f 'sleep 30\.007')"
	pkill -f 'sleep 30\.007' 2>/dev/null

	# A take killed while its hook runs: the whole hook goes with it.
	conf '# no hooks'
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a take without hooks: $(ovs_ran)" 0 "$OVS_RC"
	conf "PRE_HOOK='touch $OVS_TMP/hook-runs; sleep 30.0073 & sleep 30.0074'"
	"$OVSNAP" take "$SRC" >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 100); do
		[ -e "$OVS_TMP/hook-runs" ] && break
		sleep 0.1
	done
	assertTrue "the hook started" "[ -e '$OVS_TMP/hook-runs' ]"
	sleep 0.2
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	for i in $(seq 50); do
		pgrep -f 'sleep 30\.007' >/dev/null || break
		sleep 0.1
	done
	assertEquals "a killed take leaves no hook process" "" "$(pgrep -af 'sleep 30\.007')"
	pkill -f 'sleep 30\.007' 2>/dev/null
	assertEquals "and no snapshot" "1" "$(ids)"
	"$OVSNAP" deactivate "$SRC" >/dev/null 2>&1
	conf 'HOOK_TIMEOUT=soon'
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "a bad HOOK_TIMEOUT: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it says why" "$OVS_ERR" "$CONF:1: HOOK_TIMEOUT: 'soon' is not a number of seconds"
}

# Rule 20: the settings directory and its parents are held to the store's
# rule, and the file is not followed through a symlink.
test_settings_dir_trust() {
	fresh || return
	conf 'PRE_HOOK="echo should-not-run"'
	chmod 0777 "$OVSNAP_CONF_DIR"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a settings dir others may write: refused: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "it says why" "$OVS_ERR" \
		"settings directory $OVSNAP_CONF_DIR is unsafe: $OVSNAP_CONF_DIR is writable by others"
	assertNotContains "the hook did not run" "$OVS_ERR" "should-not-run"
	assert_no_volume "" "settings dir others may write"
	chmod 1777 "$OVSNAP_CONF_DIR"
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "sticky is not enough for the directory itself: $(ovs_ran)" 1 "$OVS_RC"
	chmod 0755 "$OVSNAP_CONF_DIR"
	mkdir -p "$OVS_TMP/conf-parent/sub"
	chmod 0775 "$OVS_TMP/conf-parent"
	ovs_run env OVSNAP_CONF_DIR="$OVS_TMP/conf-parent/sub" "$OVSNAP" config "$SRC"
	assertEquals "a parent its group may write: refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it names the parent" "$OVS_ERR" "$OVS_TMP/conf-parent is writable by its group"
	mv "$CONF" "$OVS_TMP/real.conf"
	ln -s "$OVS_TMP/real.conf" "$CONF"
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "a symlink as the file: refused: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it says so" "$OVS_ERR" "$CONF: a symbolic link: refused"
	assert_no_volume "" "symlinked settings file"
}

# A name in ALLOW_USERS/ALLOW_GROUPS that is no user (deleted since, an
# NSS outage): config reports it, a take warns and goes on.
test_unknown_allowed_names() {
	fresh || return
	conf 'ALLOW_USERS=root,nobody-ovsnap-test
ALLOW_GROUPS=no-such-group-ovsnap'
	ovs_run "$OVSNAP" take "$SRC"
	assertEquals "take with an unknown user: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "a warning naming it" "$OVS_ERR" \
		"warning: $CONF:1: ALLOW_USERS: no such user 'nobody-ovsnap-test'"
	ovs_run "$OVSNAP" take --timer "$SRC"
	assertEquals "the timer's take too: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" config "$SRC"
	assertEquals "config reports it: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
}

# A fake systemctl: records its arguments, then does what systemd would
# for ovsnapd@NAME.service: runs the daemon with $NOTIFY_SOCKET and
# returns once it says READY=1 (or fails when it exits first).
make_fake_systemctl() {
	FAKE=$OVS_TMP/systemctl
	cat >"$FAKE" <<'EOF_FAKE'
#!/usr/bin/env python3
import os, re, socket, subprocess, sys
tmp = os.environ["OVS_TMP"]
with open(os.path.join(tmp, "systemctl.args"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
m = re.fullmatch(r"ovsnapd@(.*)\.service", sys.argv[-1])
if sys.argv[1] != "start" or not m:
    sys.exit(1)
src = subprocess.run(["systemd-escape", "--unescape", "--path", m.group(1)],
                     capture_output=True, text=True, check=True).stdout.strip()
path = os.path.join(tmp, "notify.sock")
if os.path.exists(path):
    os.unlink(path)
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
sock.settimeout(1)
env = dict(os.environ, NOTIFY_SOCKET=path)
log = open(os.path.join(tmp, "fake-unit.log"), "a")
daemon = subprocess.Popen([os.environ["OVSNAPD"], src], env=env, stdin=subprocess.DEVNULL,
                          stdout=log, stderr=log, start_new_session=True)
for _ in range(60):
    try:
        msg = sock.recv(4096).decode()
    except socket.timeout:
        if daemon.poll() is not None:
            sys.exit(1)
        continue
    with open(os.path.join(tmp, "notify.msgs"), "a") as f:
        f.write(msg + "\n")
    if "READY=1" in msg.split("\n"):
        sys.exit(0)
sys.exit(1)
EOF_FAKE
	chmod +x "$FAKE"
}

test_daemon_start_through_systemd() {
	local unit store pid

	fresh || return
	make_fake_systemctl
	unit=ovsnapd@$(systemd-escape --path "$SRC").service
	ovs_run env OVSNAP_DAEMON_START=systemd OVSNAP_SYSTEMCTL="$FAKE" "$OVSNAP" take "$SRC"
	assertEquals "take through systemctl: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "systemctl started the volume's unit" "start $unit" "$(cat "$OVS_TMP/systemctl.args")"
	assertContains "the daemon notified READY=1" "$(cat "$OVS_TMP/notify.msgs" 2>/dev/null)" "READY=1"
	assertContains "and its status" "$(cat "$OVS_TMP/notify.msgs" 2>/dev/null)" "STATUS=serving $SRC"
	ovs_run "$OVSNAP" status "$SRC"
	assertEquals "protected: $(ovs_ran)" 0 "$OVS_RC"
	echo x >"$SRC/f"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	# activate goes the same way
	ovs_run env OVSNAP_DAEMON_START=systemd OVSNAP_SYSTEMCTL="$FAKE" "$OVSNAP" activate "$SRC"
	assertEquals "activate through systemctl: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "twice now" 2 "$(grep -cxF "start $unit" "$OVS_TMP/systemctl.args")"
	ovs_run "$OVSNAP" deactivate "$SRC"

	# A unit that fails: one line naming it, and no volume left.
	SRC=$OVS_MNT/src2
	mkdir "$SRC"
	store=$(ls -A "$OVS_MNT/.ovsnap")
	ovs_run env OVSNAP_DAEMON_START=systemd OVSNAP_SYSTEMCTL=false "$OVSNAP" take "$SRC"
	assertEquals "failing systemctl: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertEquals "one line: $OVS_ERR" 1 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertContains "it names the unit" "$OVS_ERR" \
		"'false start ovsnapd@$(systemd-escape --path "$SRC").service' failed (exit status 1)"
	assert_no_volume "$store" "failing systemctl"

	# The fork path, also when systemd runs: no systemctl call.
	: >"$OVS_TMP/systemctl.args"
	ovs_run env OVSNAP_DAEMON_START=fork OVSNAP_SYSTEMCTL="$FAKE" \
		NOTIFY_SOCKET="$OVS_TMP/some-service.sock" "$OVSNAP" take "$SRC"
	assertEquals "take with a forked daemon: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "systemctl not called" "" "$(cat "$OVS_TMP/systemctl.args")"
	pid=$(pgrep -f -- "ovsnapd --ready-fd 3 $SRC\$")
	assertNotNull "the forked daemon" "$pid"
	assertEquals "it has no NOTIFY_SOCKET of the service that ran ovsnap" "" \
		"$(tr '\0' '\n' <"/proc/$pid/environ" | grep '^NOTIFY_SOCKET=')"
	ovs_run "$OVSNAP" status "$SRC"
	assertEquals "protected: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" deactivate "$SRC"
	ovs_run env OVSNAP_DAEMON_START=sometimes "$OVSNAP" activate "$SRC"
	assertEquals "a bad OVSNAP_DAEMON_START: exit 1: $(ovs_ran)" 1 "$OVS_RC"
	assertContains "it says so" "$OVS_ERR" "OVSNAP_DAEMON_START=sometimes: fork or systemd"
}

. "$SHUNIT2"
