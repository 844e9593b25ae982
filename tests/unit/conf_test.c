/*
 * Unit tests of per-volume configuration files (lib/conf.c): systemd's
 * path escaping, quoting, every key, and the one-line FILE:LINE errors of
 * strict parsing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "ovsnap-private.h"

#include "check.h"

static void check_escape(const char *path, const char *want)
{
	char buf[256];
	int rc = ovs_unit_escape_path(path, buf, sizeof(buf));

	CHECK(rc == 0 && strcmp(buf, want) == 0, "escape %s: got %s, want %s", path,
	      rc == 0 ? buf : ovs_last_error(), want);
}

/* text parses; returns the config (cleared by the caller). */
static int parse(const char *text, struct ovs_conf *c)
{
	memset(c, 0, sizeof(*c));
	return ovs_conf_parse("t.conf", text, c);
}

static void check_error(const char *text, const char *want)
{
	struct ovs_conf c;
	int rc = parse(text, &c);

	CHECK(rc == -EINVAL && strstr(ovs_last_error(), want),
	      "parse [%s]: rc %d, message '%s', want '%s'", text, rc,
	      rc ? ovs_last_error() : "", want);
	ovs_conf_clear(&c);
}

/* text parses, and ovs_conf_check_names() finds want (NULL: no error). */
static void check_names(const char *text, const char *want)
{
	struct ovs_conf c;
	int rc = parse(text, &c);

	CHECK(rc == 0, "parse [%s]: rc %d (%s)", text, rc, rc ? ovs_last_error() : "");
	if (rc == 0) {
		rc = ovs_conf_check_names(&c);
		if (want)
			CHECK(rc < 0 && strstr(ovs_last_error(), want),
			      "names of [%s]: rc %d, message '%s', want '%s'", text, rc,
			      rc ? ovs_last_error() : "", want);
		else
			CHECK(rc == 0, "names of [%s]: rc %d (%s)", text, rc,
			      rc ? ovs_last_error() : "");
	}
	ovs_conf_clear(&c);
}

int main(void)
{
	struct ovs_conf c;
	char *spec;
	int rc;

	check_escape("/", "-");
	check_escape("/srv/data", "srv-data");
	check_escape("/srv//data/", "srv-data");
	check_escape("/srv/my-data", "srv-my\\x2ddata");
	check_escape("/srv/.hidden/a b", "srv-.hidden-a\\x20b");
	check_escape("/.x", "\\x2ex");
	check_escape("/var/tmp/ovsnap-test.AbC/mnt/src", "var-tmp-ovsnap\\x2dtest.AbC-mnt-src");

	rc = parse("# comment\n\n  KEEP=last=2,daily=3\nSPACE_LIMIT=\"20%\"  # why\n"
		   "CLASS='manual'\nPRE_HOOK=\"echo \\\"x\\\" \\$HOME\"\n"
		   "POST_HOOK='sync; echo $1'\nALLOW_USERS=root\nALLOW_GROUPS=\"root, root\"\n",
		   &c);
	CHECK(rc == 0, "full file: %s", rc ? ovs_last_error() : "");
	if (rc == 0) {
		CHECK(strcmp(c.keep, "last=2,daily=3") == 0, "KEEP %s", c.keep);
		CHECK(strcmp(c.space_limit, "20%") == 0, "SPACE_LIMIT %s", c.space_limit);
		CHECK(ovs_conf_class(&c) == OVS_CLASS_MANUAL, "CLASS");
		CHECK(strcmp(c.pre_hook, "echo \"x\" $HOME") == 0, "PRE_HOOK [%s]", c.pre_hook);
		CHECK(strcmp(c.post_hook, "sync; echo $1") == 0, "POST_HOOK [%s]", c.post_hook);
		CHECK(c.allow_users && strcmp(c.allow_users[0], "root") == 0 && !c.allow_users[1],
		      "ALLOW_USERS");
		CHECK(c.allow_groups && c.allow_groups[1] && !c.allow_groups[2], "ALLOW_GROUPS");
		spec = ovs_conf_timer_spec(&c, ovs_conf_keep(&c));
		CHECK(spec && strcmp(spec, "last=2,daily=3,space=20%") == 0, "spec %s", spec);
		free(spec);
	}
	ovs_conf_clear(&c);

	rc = parse("KEEP=\n#CLASS=manual\n", &c);
	CHECK(rc == 0 && !c.keep && strcmp(ovs_conf_keep(&c), OVS_CONF_DEFAULT_KEEP) == 0 &&
	      ovs_conf_class(&c) == OVS_CLASS_TIMELINE, "defaults");
	ovs_conf_clear(&c);

	check_error("KEEP=last=1\nFOO=1\n", "t.conf:2: unknown key 'FOO'");
	check_error("keep=last=1\n", "t.conf:1: unknown key 'keep'");
	check_error("KEEP = last=1\n", "t.conf:1: expected KEY=VALUE");
	check_error("just words\n", "t.conf:1: expected KEY=VALUE");
	check_error("\nKEEP=last=1\nKEEP=daily=1\n", "t.conf:3: KEEP set twice (first on line 2)");
	check_error("KEEP=fortnightly=3\n", "t.conf:1: KEEP");
	check_error("SPACE_LIMIT=lots\n", "t.conf:1: SPACE_LIMIT: 'lots'");
	check_error("CLASS=pre\n", "t.conf:1: CLASS: 'pre' is not manual or timeline");
	check_error("PRE_HOOK=\"unterminated\n", "t.conf:1: PRE_HOOK: unterminated");
	check_error("PRE_HOOK=echo hi\n", "t.conf:1: PRE_HOOK: blanks in a value");
	check_error("PRE_HOOK=a;b\n", "t.conf:1: PRE_HOOK: a shell character");
	check_error("PRE_HOOK=\"$(id)\"\n", "t.conf:1: PRE_HOOK: '$'");
	/* Unknown names parse (a deleted user must not stop every take);
	 * ovs_conf_check_names() reports them. */
	check_names("ALLOW_USERS=root,no-such-user-ovsnap\n",
		    "t.conf:1: ALLOW_USERS: no such user 'no-such-user-ovsnap'");
	check_names("ALLOW_GROUPS=no-such-group-ovsnap\n", "no such group 'no-such-group-ovsnap'");
	check_names("ALLOW_USERS=root\nALLOW_GROUPS=root\n", NULL);
	check_error("KEEP=last=1,space=10G\nSPACE_LIMIT=20%\n",
		    "t.conf:2: SPACE_LIMIT and a space= rule in KEEP (line 1)");
	return failures ? 1 : 0;
}
