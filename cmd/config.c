/*
 * ovsnap config — show the settings that apply to a volume: its
 * ovsnap.conf(5) file, defaults filled in.  The text form is itself a
 * valid file; --json is for scripts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "conf.h"

static int opt_json;

static struct poptOption config_options[] = {
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print the settings as a JSON object", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* KEY="VALUE" with the escapes the parser reads back, and a note when
 * the value is the default. */
static void print_setting(const char *key, const char *value, bool set)
{
	printf("%s=\"", key);
	for (const char *p = value ? value : ""; *p; p++) {
		if (strchr("\"\\$`", *p))
			putchar('\\');
		putchar(*p);
	}
	printf("\"%s\n", set ? "" : "  # default");
}

static char *join_names(char **names)
{
	size_t len = 1;
	char *out;

	for (char **p = names; p && *p; p++)
		len += strlen(*p) + 1;
	out = calloc(1, len);
	for (char **p = names; out && p && *p; p++) {
		if (p != names)
			strcat(out, ",");
		strcat(out, *p);
	}
	return out;
}

static void json_opt_string(const char *key, const char *value, bool last)
{
	printf("\"%s\": ", key);
	if (value)
		ovs_json_string(value);
	else
		fputs("null", stdout);
	fputs(last ? "" : ", ", stdout);
}

static void json_names(const char *key, char **names, bool last)
{
	printf("\"%s\": [", key);
	for (char **p = names; p && *p; p++) {
		if (p != names)
			fputs(", ", stdout);
		ovs_json_string(*p);
	}
	printf("]%s", last ? "" : ", ");
}

static void print_json(const char *src, const struct ovs_conf *c)
{
	fputs("{\"source\": ", stdout);
	ovs_json_string(src);
	fputs(", \"file\": ", stdout);
	ovs_json_string(c->path);
	printf(", \"exists\": %s, ", c->exists ? "true" : "false");
	json_opt_string("keep", ovs_conf_keep(c), false);
	json_opt_string("space_limit", c->space_limit, false);
	json_opt_string("class", ovs_snap_class_name(ovs_conf_class(c)), false);
	json_opt_string("pre_hook", c->pre_hook, false);
	json_opt_string("post_hook", c->post_hook, false);
	printf("\"hook_timeout\": %u, ", ovs_conf_hook_timeout(c));
	json_names("allow_users", c->allow_users, false);
	json_names("allow_groups", c->allow_groups, true);
	fputs("}\n", stdout);
}

static void print_text(const struct ovs_conf *c)
{
	char *users = join_names(c->allow_users), *groups = join_names(c->allow_groups);

	printf("# %s%s\n", c->path, c->exists ? "" : " (none yet: every setting is the default)");
	print_setting("KEEP", ovs_conf_keep(c), c->keep);
	print_setting("SPACE_LIMIT", c->space_limit, c->space_limit);
	print_setting("CLASS", ovs_snap_class_name(ovs_conf_class(c)), c->has_class);
	print_setting("PRE_HOOK", c->pre_hook, c->pre_hook);
	print_setting("POST_HOOK", c->post_hook, c->post_hook);
	{
		char secs[16];

		snprintf(secs, sizeof(secs), "%u", ovs_conf_hook_timeout(c));
		print_setting("HOOK_TIMEOUT", secs, c->has_hook_timeout);
	}
	print_setting("ALLOW_USERS", users, c->allow_users);
	print_setting("ALLOW_GROUPS", groups, c->allow_groups);
	free(users);
	free(groups);
}

int cmd_config(int argc, const char **argv)
{
	struct ovs_conf conf;
	const char **args;
	poptContext pc;
	char *src = NULL;
	int status, n, rc;

	pc = ovs_popt_parse("config", argc, argv, config_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "config", 1, 1, &n, &status);
	if (!args)
		goto out;
	status = EXIT_FAIL;
	src = ovs_resolve_source("config", args[0]);
	if (!src)
		goto out;
	rc = ovs_conf_load(src, &conf);
	/* a name that is no user or group is reported here (a take only
	 * warns: a deleted user must not stop the timer) */
	if (rc == 0)
		rc = ovs_conf_check_names(&conf);
	if (rc < 0) {
		ovs_error_lib(rc, "config %s", src);
		ovs_conf_clear(&conf);
		goto out;
	}
	if (opt_json)
		print_json(src, &conf);
	else
		print_text(&conf);
	ovs_conf_clear(&conf);
	status = EXIT_OK;
out:
	free(src);
	poptFreeContext(pc);
	return status;
}
