/*
 * ovsnap hold / ovsnap release — set and clear the hold of snapshots (ZFS's
 * hold and release): nothing removes a held snapshot without --force, not
 * drop, merge, a retention policy or the rotation timer.  One file for
 * both: they differ only in the flag they write.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

static int opt_wait;

static struct poptOption hold_options[] = {
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/*
 * Resolve every reference before the first change, then write all the
 * holds in one atomic rewrite of the registry, under the volume lock (a
 * take or drop running meanwhile waits, or we do with --wait).
 */
static int set_holds(const char *cmd, int argc, const char **argv, bool hold)
{
	struct ovs_snap_change change = OVS_SNAP_CHANGE_INIT;
	struct ovs_volume *v = NULL;
	uint64_t *ids = NULL;
	const char **args;
	poptContext pc;
	int status, nargs, rc;

	pc = ovs_popt_parse(cmd, argc, argv, hold_options, "SRC SNAP...", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, cmd, 2, -1, &nargs, &status);
	if (!args)
		goto out;
	status = ovs_open_locked(cmd, args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	status = EXIT_FAIL;
	ids = calloc(nargs, sizeof(*ids));
	if (!ids) {
		ovs_error("%s: %s", cmd, strerror(ENOMEM));
		goto out;
	}
	for (int i = 1; i < nargs; i++) {
		const struct ovs_snapshot *s;

		rc = ovs_snapshot_resolve(v, args[i], &s);
		if (rc < 0) {
			ovs_error_lib(rc, "%s %s", cmd, ovs_volume_source(v));
			goto out;
		}
		ids[i - 1] = s->id;
	}
	change.hold = hold;
	rc = ovs_registry_change(v, ids, nargs - 1, &change);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, ovs_volume_source(v));
		goto out;
	}
	status = EXIT_OK;
out:
	free(ids);
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}

int cmd_hold(int argc, const char **argv)
{
	return set_holds("hold", argc, argv, true);
}

int cmd_release(int argc, const char **argv)
{
	return set_holds("release", argc, argv, false);
}
