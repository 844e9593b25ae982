/*
 * ovsnap modify — change what the registry records about snapshots: the
 * description, user data and cleanup class (snapper's modify).  The
 * layers are not touched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static char *opt_description, *opt_class;
static const char **opt_userdata;
static int opt_wait;

static struct poptOption modify_options[] = {
	{ "description", 'd', POPT_ARG_STRING, &opt_description, 0,
	  "set the description (\"\" removes it)", "TEXT" },
	{ "userdata", 'u', POPT_ARG_ARGV, &opt_userdata, 0,
	  "set KEY to VALUE (KEY= removes it; repeatable)", "KEY=VALUE" },
	{ "class", 'c', POPT_ARG_STRING, &opt_class, 0,
	  "set the cleanup class: manual or timeline", "CLASS" },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

int cmd_modify(int argc, const char **argv)
{
	struct ovs_snap_change change = OVS_SNAP_CHANGE_INIT;
	struct ovs_userdata *userdata = NULL;
	struct ovs_volume *v = NULL;
	uint64_t *ids = NULL;
	const char **args;
	poptContext pc;
	int status, nargs, rc;

	pc = ovs_popt_parse("modify", argc, argv, modify_options, "SRC SNAP...", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "modify", 2, -1, &nargs, &status);
	if (!args)
		goto out;
	/* Bad input is refused before the volume is even opened. */
	status = ovs_snap_change_from_options("modify", opt_description, opt_userdata,
					      &change, &userdata);
	if (status != EXIT_OK)
		goto out;
	if (opt_class) {
		enum ovs_snap_class cls;

		if (ovs_snap_class_parse(opt_class, &cls) < 0 ||
		    (cls != OVS_CLASS_MANUAL && cls != OVS_CLASS_TIMELINE)) {
			ovs_error("modify: bad --class '%s': manual or timeline", opt_class);
			status = EXIT_USAGE;
			goto out;
		}
		change.cls = cls;
	}
	if (!change.description && !change.nuserdata && change.cls == -1) {
		ovs_error("modify: nothing to change: give --description, --userdata or --class");
		fprintf(stderr, "Try '%s modify --help' for more information.\n", ovs_progname);
		status = EXIT_USAGE;
		goto out;
	}
	status = ovs_open_locked("modify", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = EXIT_FAIL;
	ids = calloc(nargs, sizeof(*ids));
	if (!ids) {
		ovs_error("modify: %s", strerror(ENOMEM));
		goto out;
	}
	for (int i = 1; i < nargs; i++) {
		const struct ovs_snapshot *s;

		rc = ovs_snapshot_resolve(v, args[i], &s);
		if (rc < 0) {
			ovs_error_lib(rc, "modify %s", ovs_volume_source(v));
			goto out;
		}
		ids[i - 1] = s->id;
	}
	rc = ovs_registry_change(v, ids, nargs - 1, &change);
	if (rc < 0) {
		ovs_error_lib(rc, "modify %s", ovs_volume_source(v));
		goto out;
	}
	status = EXIT_OK;
out:
	free(ids);
	free(userdata);
	ovs_free_argv(opt_userdata);
	opt_userdata = NULL;
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}
