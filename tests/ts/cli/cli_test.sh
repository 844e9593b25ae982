#!/bin/bash
# The CLI frame: --help from the command table, --version, usage errors,
# a protected stdout, per-command help ending with the man page, and the
# help's Usage line agreeing with the man page's SYNOPSIS.
. "${OVSNAP_SRCDIR:-$(dirname "$0")/../../..}/tests/helpers.sh"

COMMANDS="take list mount umount merge drop hold release modify run fsck activate deactivate forget diff"
MANDIR=$OVSNAP_SRCDIR/man

test_help_lists_every_command() {
	local c

	ovs_run "$OVSNAP" --help
	assertEquals "ovsnap --help exit status" 0 "$OVS_RC"
	assertNull "ovsnap --help prints nothing on stderr" "$OVS_ERR"
	for c in $COMMANDS; do
		assertTrue "ovsnap --help lists '$c'" \
			"printf '%s\n' \"\$OVS_OUT\" | grep -qE '^  $c +[a-z]'"
	done
	return 0
}

test_version() {
	ovs_run "$OVSNAP" --version
	assertEquals "--version exit status" 0 "$OVS_RC"
	assertTrue "--version prints 'ovsnap <version>', got '$OVS_OUT'" \
		"printf '%s' \"\$OVS_OUT\" | grep -qxE 'ovsnap [0-9]+\.[0-9]+(\.[0-9]+)?([-~.+][0-9A-Za-z.]+)?'"
	assertNull "--version prints nothing on stderr" "$OVS_ERR"
	return 0
}

# One line naming the culprit, then the hint, and the usage exit status:
# 2, or 16 for fsck, which follows fsck(8).
check_usage_error() {
	local what=$1 culprit=$2 status=${3:-2}

	assertEquals "$what: exit status ($(ovs_ran))" "$status" "$OVS_RC"
	assertNull "$what: nothing on stdout" "$OVS_OUT"
	assertEquals "$what: two lines on stderr: $OVS_ERR" 2 "$(printf '%s\n' "$OVS_ERR" | wc -l)"
	assertTrue "$what: first line names '$culprit': $OVS_ERR" \
		"printf '%s\n' \"\$OVS_ERR\" | head -1 | grep -qF -- '$culprit'"
	assertTrue "$what: second line is the hint: $OVS_ERR" \
		"printf '%s\n' \"\$OVS_ERR\" | tail -1 | grep -q \"^Try 'ovsnap \""
	return 0
}

test_unknown_command() {
	ovs_run "$OVSNAP" frobnicate
	check_usage_error "unknown command" frobnicate
	assertTrue "the hint names ovsnap --help" \
		"printf '%s\n' \"\$OVS_ERR\" | grep -qF \"Try 'ovsnap --help'\""
	return 0
}

test_unknown_option() {
	ovs_run "$OVSNAP" --frobnicate
	check_usage_error "unknown global option" --frobnicate
	assertTrue "the hint names ovsnap --help" \
		"printf '%s\n' \"\$OVS_ERR\" | grep -qF \"Try 'ovsnap --help'\""
	return 0
}

test_unknown_command_option() {
	local c

	for c in $COMMANDS; do
		ovs_run "$OVSNAP" "$c" --frobnicate
		if [ "$c" = fsck ]; then
			check_usage_error "ovsnap $c --frobnicate" --frobnicate 16
		else
			check_usage_error "ovsnap $c --frobnicate" --frobnicate
		fi
	done
	return 0
}

test_full_stdout_is_an_error() {
	local err

	err=$("$OVSNAP" --version 2>&1 >/dev/full)
	assertNotEquals "ovsnap --version >/dev/full must fail" 0 $?
	assertTrue "--version >/dev/full says 'write error': $err" \
		"printf '%s' \"\$err\" | grep -q 'write error'"

	err=$("$OVSNAP" --help 2>&1 >/dev/full)
	assertNotEquals "ovsnap --help >/dev/full must fail" 0 $?
	assertTrue "--help >/dev/full says 'write error': $err" \
		"printf '%s' \"\$err\" | grep -q 'write error'"

	err=$("$OVSNAP" take --help 2>&1 >/dev/full)
	assertNotEquals "ovsnap take --help >/dev/full must fail" 0 $?
	assertTrue "take --help >/dev/full says 'write error': $err" \
		"printf '%s' \"\$err\" | grep -q 'write error'"
	return 0
}

# ovsnap list with something to print: a registered volume in our own
# state directory (list prints nothing at all when there are no volumes).
test_list_to_full_stdout() {
	local mkvol err

	for mkvol in "$OVSNAP_TOOLS/ovs-mkvol" "$OVSNAP_TOOLS/tools/ovs-mkvol"; do
		[ -x "$mkvol" ] && break
	done
	if [ "$(id -u)" -ne 0 ] || [ ! -x "$mkvol" ]; then
		ovs_skip_test "needs root and ovs-mkvol"
		return 0
	fi
	ovs_mkfs xfs || return
	mkdir "$OVS_MNT/src"
	ovs_run "$mkvol" "$OVS_MNT/src" --snapshots 1
	assertEquals "ovs-mkvol: $(ovs_ran)" 0 "$OVS_RC"
	ovs_run "$OVSNAP" list
	assertEquals "ovsnap list: $(ovs_ran)" 0 "$OVS_RC"
	assertNotNull "ovsnap list shows the volume" "$OVS_OUT"

	err=$("$OVSNAP" list 2>&1 >/dev/full)
	assertNotEquals "ovsnap list >/dev/full must fail" 0 $?
	assertTrue "list >/dev/full says 'write error': $err" \
		"printf '%s' \"\$err\" | grep -q 'write error'"
	err=$("$OVSNAP" list "$OVS_MNT/src" 2>&1 >/dev/full)
	assertNotEquals "ovsnap list SRC >/dev/full must fail" 0 $?
	assertTrue "list SRC >/dev/full says 'write error': $err" \
		"printf '%s' \"\$err\" | grep -q 'write error'"
	return 0
}

test_command_help_ends_with_man_page() {
	local c last

	for c in $COMMANDS; do
		ovs_run "$OVSNAP" "$c" --help
		assertEquals "ovsnap $c --help exit status: $OVS_ERR" 0 "$OVS_RC"
		last=$(printf '%s\n' "$OVS_OUT" | tail -1)
		assertEquals "last line of ovsnap $c --help" "See ovsnap-$c(8)." "$last"
		assertTrue "ovsnap $c --help starts with Usage:" \
			"printf '%s\n' \"\$OVS_OUT\" | head -1 | grep -q '^Usage: ovsnap $c'"
		ovs_run "$OVSNAP" help "$c"
		assertEquals "ovsnap help $c exit status" 0 "$OVS_RC"
		assertEquals "ovsnap help $c ends like --help" "See ovsnap-$c(8)." \
			"$(printf '%s\n' "$OVS_OUT" | tail -1)"
	done
	return 0
}

# The positional arguments of a synopsis or Usage line: drop the program
# and command, option groups ("[--json]", "[OPTION...]", "[-n NAME]") and
# roff font escapes, squeeze blanks.  "ovsnap mount [OPTION...] SRC SNAP
# TARGET" -> "SRC SNAP TARGET".
positional_args() {
	sed -E -e 's/\\f[BIRP]//g; s/\\-/-/g; s/\\&//g' \
		-e 's/^Usage: *//' \
		-e 's/^ovsnap +[a-z]+//' \
		-e 's/\[OPTIONS?\](\.\.\.)?//g; s/\[OPTION\.\.\.\]//g' \
		-e ':a' -e 's/\[-[^][]*\]//g; ta' \
		-e 's/(^| )--?[A-Za-z][-A-Za-z]*( +[A-Z]+)?( |$)/ /g' \
		-e 's/  +/ /g; s/^ //; s/ $//'
}

# Each synopsis line of a man page: ".B ovsnap CMD" plus what follows up
# to the next .br, .SH or .B line, joined on one line.
man_synopses() {
	awk '
	/^\.SH/ { insyn = ($2 == "SYNOPSIS"); if (line != "") print line; line = ""; next }
	!insyn { next }
	/^\.(br|PP|sp)/ { if (line != "") print line; line = ""; next }
	/^\.B ovsnap / { if (line != "") print line; sub(/^\.B /, ""); line = $0; next }
	{ sub(/^\.[BIR]+ /, ""); line = line " " $0 }
	END { if (line != "") print line }
	' "$1" | sed -E 's/\\f[BIRP]//g; s/\\-/-/g; s/  +/ /g'
}

# The man page documenting CMD: ovsnap-CMD.8, or a page whose SYNOPSIS
# shows "ovsnap CMD" (deactivate lives in ovsnap-activate.8).
man_page_of() {
	local c=$1 f

	if [ -f "$MANDIR/ovsnap-$c.8" ] && ! grep -q '^\.so ' "$MANDIR/ovsnap-$c.8"; then
		echo "$MANDIR/ovsnap-$c.8"
		return
	fi
	for f in "$MANDIR"/ovsnap-*.8; do
		[ -f "$f" ] || continue
		man_synopses "$f" | grep -qE "^ovsnap $c( |$)" && { echo "$f"; return; }
	done
}

test_help_usage_matches_man_synopsis() {
	local c page usage want got compared=0

	for c in $COMMANDS; do
		page=$(man_page_of "$c")
		# Man pages are written command by command: compare those that
		# exist (and are more than a placeholder).
		[ -n "$page" ] && grep -q '^\.SH SYNOPSIS' "$page" || continue
		usage=$("$OVSNAP" "$c" --help | head -1)
		want=$(printf '%s\n' "$usage" | positional_args)
		got=$(man_synopses "$page" | grep -E "^ovsnap $c( |$)" | positional_args)
		assertTrue "ovsnap $c: help says '$usage' (args '$want'), $(basename "$page") SYNOPSIS has none with args '$want': $(printf '%s; ' "$got")" \
			"printf '%s\n' \"\$got\" | grep -qxF -- \"\$want\""
		compared=$((compared + 1))
	done
	echo "compared the synopsis of $compared commands with their man pages"
	assertTrue "at least one man page was compared" "[ $compared -gt 0 ]"
	return 0
}

# Every page a --help names exists.
test_help_names_existing_man_pages() {
	local c missing=

	for c in $COMMANDS; do
		[ -f "$MANDIR/ovsnap-$c.8" ] || missing+=" ovsnap-$c.8"
	done
	assertNull "man pages named by 'See ovsnap-CMD(8)' but missing from man/:$missing" "$missing"
	return 0
}

# Every page in man/ opens with "man -l" from the source tree and renders
# without a warning: no ".so man8/..." link (that only resolves from an
# installed man tree), no bad macro or font escape.
test_man_pages_render_without_warnings() {
	local f err n=0

	for f in "$MANDIR"/*.[1-8]; do
		[ -f "$f" ] || continue
		assertFalse "$(basename "$f") is a .so link, which fails with man -l from the sources" \
			"grep -q '^\.so ' '$f'"
		# --warnings=w: every troff warning, as groff -ww.
		err=$(MANROFFSEQ= MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings=w -l "$f" 2>&1 >/dev/null)
		assertNull "man -l $(basename "$f") warns: $err" "$err"
		n=$((n + 1))
	done
	echo "rendered $n man pages"
	assertTrue "man/ holds pages" "[ $n -gt 10 ]"
	return 0
}

# The options "ovsnap CMD --help" lists, one a line: "-n", "--name".
help_options() {
	"$OVSNAP" "$1" --help 2>/dev/null | awk '
	/^ +-/ { for (i = 1; i <= NF && $i ~ /^-/; i++) {
		o = $i; sub(/,$/, "", o); sub(/=.*/, "", o); print o } }' | sort -u
}

# "CMD OPTION" for every option the bash completion offers CMD: its
# per-command table plus the common options.
bash_completion_options() {
	bash -c '. "$1" || exit 1
	for c in $_ovsnap_commands; do
		[ "$c" = help ] && continue
		for o in ${_ovsnap_opts[$c]} $_ovsnap_common_opts; do
			echo "$c $o"
		done
	done' _ "$OVSNAP_SRCDIR/completions/bash/ovsnap"
}

# "CMD OPTION" for every option a branch of the zsh completion's
# "case $words[1]" offers (the option names of its _arguments specs,
# descriptions in [...] and :message:action parts left out), plus those
# of $_ovsnap_common.
zsh_completion_options() {
	awk '
	function opts(cmds, line,   n, c, i, o) {
		gsub(/\[[^]]*\]/, "", line)
		gsub(/:[^\047]*/, "", line)
		n = split(cmds, c, "|")
		while (match(line, /(^|[^A-Za-z0-9_\\])-[-A-Za-z?\\]+/)) {
			o = substr(line, RSTART, RLENGTH)
			sub(/^[^-]/, "", o); gsub(/\\/, "", o)
			for (i = 1; i <= n; i++) print c[i], o
			line = substr(line, RSTART + RLENGTH)
		}
	}
	/^_ovsnap_common=\(/ { common = 1; next }
	common && /^\)/ { common = 0; next }
	common { commonline = commonline " " $0; next }
	/^\t\t[a-z|]+\)$/ { cmd = $1; sub(/\)$/, "", cmd); next }
	/^\t\t\t;;$/ { if (cmd != "help") opts(cmd, commonline); cmd = ""; next }
	cmd != "" && cmd != "help" { opts(cmd, $0) }
	' "$OVSNAP_SRCDIR/completions/zsh/_ovsnap" | sort -u
}

# Completion offers only options the command takes (mount once offered
# --ro --suid --dev --exec, which it refuses), and every one it takes:
# bash its long options, zsh short and long.
test_completion_offers_existing_options() {
	local shell c o offered accepted bad= missing= n=0 nl=$'\n'

	for shell in bash zsh; do
		offered=$(${shell}_completion_options)
		assertNotNull "the $shell completion offers options" "$offered"
		for c in $(printf '%s\n' "$offered" | cut -d' ' -f1 | sort -u); do
			accepted=$(help_options "$c")
			assertNotNull "ovsnap $c --help lists options" "$accepted"
			for o in $(printf '%s\n' "$offered" | awk -v c="$c" '$1 == c { print $2 }'); do
				[[ $nl$accepted$nl == *"$nl$o$nl"* ]] || bad+=" $shell:$c:$o"
				n=$((n + 1))
			done
			for o in $accepted; do
				[ "$shell" = bash ] && [ "${o#--}" = "$o" ] && continue
				[[ $nl$offered$nl == *"$nl$c $o$nl"* ]] || missing+=" $shell:$c:$o"
			done
		done
	done
	echo "checked $n offered options"
	assertNull "completion offers options the command refuses:$bad" "$bad"
	assertNull "completion does not offer options the command takes:$missing" "$missing"
	return 0
}

# What the bash completion function answers for a command line; a stand-in
# _init_completion so that the bash-completion package is not needed.
bash_complete() {
	bash -c '_init_completion() {
		words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
		cur=${words[cword]}; prev=${words[cword - 1]}
	}
	_filedir() { :; }
	. "$1" || exit 1
	shift
	COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
	_ovsnap
	echo "${COMPREPLY[*]}"' _ "$OVSNAP_SRCDIR/completions/bash/ovsnap" "$@"
}

# mount's view options are values of -o, completed after the last comma.
test_bash_completion_mount_options() {
	assertEquals "ovsnap mount --<TAB>" "--options --kernel --quiet --help --usage" \
		"$(bash_complete ovsnap mount --)"
	assertEquals "ovsnap mount -o nosuid,noe<TAB>" "nosuid,noexec" \
		"$(bash_complete ovsnap mount -o nosuid,noe)"
	assertEquals "ovsnap mount --options s<TAB>" "suid strictatime" \
		"$(bash_complete ovsnap mount --options s)"
	return 0
}

# -h is --help on every command, as on ovsnap itself, and -? (popt's own
# spelling) still works; a command that needs root shows its help to
# anyone.
test_short_help_on_every_command() {
	local c help

	for c in $COMMANDS status; do
		help=$("$OVSNAP" "$c" --help)
		ovs_run "$OVSNAP" "$c" -h
		assertEquals "ovsnap $c -h exit status: $OVS_ERR" 0 "$OVS_RC"
		assertNull "ovsnap $c -h: nothing on stderr" "$OVS_ERR"
		assertEquals "ovsnap $c -h prints the --help" "$help" "$OVS_OUT"
		assertTrue "ovsnap $c --help shows '-h, --help'" \
			"printf '%s\n' \"\$help\" | grep -qE '^ +-h, --help '"
	done
	ovs_run "$OVSNAP" take -?
	assertEquals "ovsnap take -? exit status: $OVS_ERR" 0 "$OVS_RC"
	assertEquals "ovsnap take -? prints the --help" "$("$OVSNAP" take --help)" "$OVS_OUT"
	ovs_run "$OVSNAP" help -h
	assertEquals "ovsnap help -h exit status" 0 "$OVS_RC"
	assertEquals "ovsnap help -h prints ovsnap --help" "$("$OVSNAP" --help)" "$OVS_OUT"

	if [ "$(id -u)" -ne 0 ]; then
		ovs_skip_test "the check as another user needs root"
		return 0
	fi
	ovs_user || return
	ovs_as_user "$OVSNAP" take -h
	assertEquals "ovsnap take -h as a user: $OVS_ERR" 0 "$OVS_RC"
	assertEquals "ovsnap take -h as a user prints the help" \
		"$("$OVSNAP" take --help)" "$OVS_OUT"
	return 0
}

# The completion in a bash without the bash-completion package (no
# _init_completion, _filedir, _command_offset) and with a stand-in
# ovsnap on PATH whose list --json has user data: subcommands, options,
# and the values after --keep, --class and --userdata.
test_bash_completion_values_without_bash_completion() {
	local bin=$OVS_TMP/fakebin

	mkdir -p "$bin"
	cat >"$bin/ovsnap" <<'FAKE'
#!/bin/sh
echo '{"source": "/srv/x", "snapshots": [{"id": 1, "name": "a", "userdata": {"ticket": "OPS-1", "owner": "me"}}, {"id": 2, "name": null, "userdata": {}}]}'
FAKE
	chmod +x "$bin/ovsnap"
	plain_complete() {
		PATH=$bin:$PATH bash --norc -c '. "$1" || exit 1
		shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_ovsnap
		echo "${COMPREPLY[*]}"' _ "$OVSNAP_SRCDIR/completions/bash/ovsnap" "$@"
	}
	assertEquals "ovsnap fo<TAB>" "forget" "$(plain_complete ovsnap fo)"
	assertEquals "ovsnap forget --<TAB>" "--yes --force --wait --quiet --help --usage" \
		"$(plain_complete ovsnap forget --)"
	assertEquals "ovsnap take --keep da<TAB>" "daily=" "$(plain_complete ovsnap take --keep da)"
	assertEquals "ovsnap take --keep last=3,we<TAB>" "last=3,weekly=" \
		"$(plain_complete ovsnap take --keep last=3,we)"
	assertEquals "ovsnap drop --class <TAB>" "timeline manual pre post" \
		"$(plain_complete ovsnap drop --class '')"
	assertEquals "ovsnap modify --class <TAB>" "manual timeline" \
		"$(plain_complete ovsnap modify /srv/x 1 --class '')"
	assertEquals "ovsnap modify SRC --userdata <TAB>" "owner= ticket=" \
		"$(plain_complete ovsnap modify /srv/x --userdata '')"
	assertEquals "ovsnap modify SRC -u t<TAB>" "ticket=" \
		"$(plain_complete ovsnap modify /srv/x -u t)"
	assertEquals "ovsnap drop SRC <TAB>" "1 2 a @latest @oldest" \
		"$(plain_complete ovsnap drop /srv/x '')"
	return 0
}

# A volume for the tests below that need one: $SRC with snapshots 1..4
# (3 and 4 of class timeline), active.
make_volume() {
	ovs_mkfs xfs || return 1
	SRC=$OVS_MNT/src
	mkdir "$SRC"
	for i in 1 2 3 4; do
		echo "$i" >"$SRC/f"
		if [ "$i" -le 2 ]; then
			ovs_run "$OVSNAP" take "$SRC"
		else
			ovs_run "$OVSNAP" take --class timeline "$SRC"
		fi
		assertEquals "take $i: $(ovs_ran)" 0 "$OVS_RC" || return 1
	done
}

# list -Hp is for scripts: tab-separated exact values, no heading, cut -f
# finds every column; drop and merge --json (with and without --dry-run)
# parse as JSON with what they did.
test_list_Hp_and_drop_merge_json_parse() {
	[ "$(id -u)" = 0 ] || { ovs_skip_test "needs root (a loop-mounted volume)"; return 0; }
	make_volume || return
	ovs_run "$OVSNAP" list -Hp "$SRC"
	assertEquals "list -Hp: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "list -Hp: ids by cut -f1" "1 2 3 4" \
		"$(printf '%s\n' "$OVS_OUT" | cut -f1 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "list -Hp: classes by cut -f4" "manual manual timeline timeline" \
		"$(printf '%s\n' "$OVS_OUT" | cut -f4 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "list -Hp: states by cut -f5" "frozen frozen frozen active" \
		"$(printf '%s\n' "$OVS_OUT" | cut -f5 | tr '\n' ' ' | sed 's/ $//')"
	assertEquals "list -Hp: every line has the same number of fields" 1 \
		"$(printf '%s\n' "$OVS_OUT" | awk -F'\t' '{ print NF }' | sort -u | wc -l)"

	ovs_run "$OVSNAP" merge --json --dry-run "$SRC" 1 3
	assertEquals "merge --json --dry-run: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "merge --json --dry-run parses" "True 1 [2, 3]" "$(printf '%s' "$OVS_OUT" |
		python3 -c 'import json, sys; j = json.load(sys.stdin)
print(j["dry_run"], j["into"]["id"], [m["id"] for m in j["merged"]])')"
	assertEquals "merge --dry-run changed nothing" 4 "$("$OVSNAP" list -Hp "$SRC" | wc -l)"
	ovs_run "$OVSNAP" drop --json --dry-run --keep last=1 "$SRC"
	assertEquals "drop --json --dry-run --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "drop --json --dry-run --keep parses" \
		"True last=1 timeline [(1, 'keep'), (2, 'keep'), (3, 'drop'), (4, 'keep')]" \
		"$(printf '%s' "$OVS_OUT" | python3 -c 'import json, sys; j = json.load(sys.stdin)
print(j["dry_run"], j["policy"], j["class"], [(s["id"], s["action"]) for s in j["snapshots"]])')"
	ovs_run "$OVSNAP" drop -J --keep last=1 "$SRC"
	assertEquals "drop --json --keep: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "drop --json --keep: what was dropped" "False [3]" \
		"$(printf '%s' "$OVS_OUT" | python3 -c 'import json, sys; j = json.load(sys.stdin)
print(j["dry_run"], [s["id"] for s in j["snapshots"] if s["action"] == "drop"])')"
	ovs_run "$OVSNAP" merge -J "$SRC" 1 2
	assertEquals "merge --json: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "merge --json parses" "False 1 [2]" "$(printf '%s' "$OVS_OUT" |
		python3 -c 'import json, sys; j = json.load(sys.stdin)
print(j["dry_run"], j["into"]["id"], [m["id"] for m in j["merged"]])')"
	ovs_run "$OVSNAP" drop --json "$SRC" 1
	assertEquals "drop --json SNAP: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "drop --json SNAP parses" "None [(1, 'drop')]" "$(printf '%s' "$OVS_OUT" |
		python3 -c 'import json, sys; j = json.load(sys.stdin)
print(j["policy"], [(s["id"], s["action"]) for s in j["snapshots"]])')"
	assertEquals "left: snapshot 4 only" "4" "$("$OVSNAP" list -Hp "$SRC" | cut -f1)"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	return 0
}

# The letters that changed meaning still work for one release, each with
# a one-line note: take -n (now -N), take -H (now --hold), mount -k (now
# -K).
test_deprecated_letters_still_work_with_a_note() {
	local view=$OVS_TMP/view

	[ "$(id -u)" = 0 ] || { ovs_skip_test "needs root (a loop-mounted volume)"; return 0; }
	make_volume || return
	ovs_run "$OVSNAP" take -n old -H "$SRC"
	assertEquals "take -n -H: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "take -n -H: the notes" \
		"ovsnap: take: -n is deprecated, use -N (--name) (-n goes in the next release)
ovsnap: take: -H is deprecated, use --hold (-H goes in the next release)" "$OVS_ERR"
	assertEquals "take -n named it, -H held it" "old	active,held" \
		"$("$OVSNAP" list -Hp "$SRC" | awk -F'\t' '$1 == 5 { print $2 "\t" $5 }')"
	ovs_run "$OVSNAP" take -N new "$SRC"
	assertEquals "take -N: no note: $(ovs_ran)" "" "$OVS_ERR"
	ovs_run "$OVSNAP" deactivate "$SRC"
	assertEquals "deactivate: $(ovs_ran)" 0 "$OVS_RC"
	mkdir "$view"
	ovs_run "$OVSNAP" mount -k "$SRC" old "$view"
	assertEquals "mount -k: exit: $(ovs_ran)" 0 "$OVS_RC"
	assertEquals "mount -k: the note" \
		"ovsnap: mount: -k is deprecated, use -K (--kernel) (-k goes in the next release)" \
		"$OVS_ERR"
	assertEquals "mount -k made a kernel overlay view" "overlay" \
		"$(findmnt -n -o FSTYPE -M "$view")"
	ovs_run "$OVSNAP" umount "$view"
	assertEquals "umount: $(ovs_ran)" 0 "$OVS_RC"
	return 0
}

test_positional_args_normalisation() {
	assertEquals "SRC SNAP TARGET" \
		"$(echo 'ovsnap mount [\fIOPTION\fR...] \fISRC\fR \fISNAP\fR \fITARGET\fR' | positional_args)"
	assertEquals "[SRC]" "$(echo 'ovsnap list [\fB\-\-json\fR] [\fISRC\fR]' | positional_args)"
	assertEquals "[SRC]" "$(echo 'Usage: ovsnap list [SRC]' | positional_args)"
	assertEquals "SRC SNAP..." \
		"$(echo 'ovsnap drop [\fB\-n\fR \fINAME\fR] [\fB\-\-keep\fR=\fIN\fR] \fISRC\fR \fISNAP\fR...' | positional_args)"
	assertEquals "" "$(echo 'ovsnap activate \-\-all' | positional_args)"
	return 0
}

. "$SHUNIT2"
