/*
 * ovsnap merge — merge adjacent snapshots into the oldest of them, keeping
 * its view.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "merge.h"

static int opt_wait, opt_dry_run, opt_force, opt_json;

static struct poptOption merge_options[] = {
	{ "dry-run", 'n', POPT_ARG_NONE, &opt_dry_run, 0,
	  "print which snapshots would be merged away, change nothing", NULL },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "merge away held snapshots too", NULL },
	{ "json", 'J', POPT_ARG_NONE, &opt_json, 0,
	  "print what was (with --dry-run: would be) merged as a JSON object", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* {"source": SRC, "dry_run": B, "into": REF, "merged": [REF...]} where REF
 * is {"id": N, "name": "NAME"|null}; refs are copied before the merge. */
static void print_json(struct ovs_volume *v, const struct ovs_snapshot *snaps, size_t n)
{
	fputs("{\"source\": ", stdout);
	ovs_json_string(ovs_volume_source(v));
	printf(", \"dry_run\": %s, \"into\": ", opt_dry_run ? "true" : "false");
	ovs_json_snapshot_ref(snaps[0].id, snaps[0].name);
	fputs(", \"merged\": [", stdout);
	for (size_t i = 1; i < n; i++) {
		if (i > 1)
			fputs(", ", stdout);
		ovs_json_snapshot_ref(snaps[i].id, snaps[i].name);
	}
	fputs("]}\n", stdout);
}

int cmd_merge(int argc, const char **argv)
{
	const struct ovs_snapshot *a, *b;
	struct ovs_progress prog = { .what = "merge" };
	struct ovs_volume *v = NULL;
	struct ovs_snapshot *snaps = NULL;
	uint64_t ida, idb;
	const char **args;
	poptContext pc;
	int status, nargs, rc;
	size_t i, ia = 0, ib = 0;

	pc = ovs_popt_parse("merge", argc, argv, merge_options, "SRC A B", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "merge", 3, 3, &nargs, &status);
	if (!args)
		goto out;
	status = ovs_open_locked("merge", args[0], opt_wait, &v);
	if (status != EXIT_OK)
		goto out;
	rc = ovs_snapshot_resolve(v, args[1], &a);
	if (rc == 0)
		rc = ovs_snapshot_resolve(v, args[2], &b);
	if (rc < 0) {
		ovs_error_lib(rc, "merge %s", ovs_volume_source(v));
		status = EXIT_FAIL;
		goto out;
	}
	ida = a->id;
	idb = b->id;
	for (i = 0; i < ovs_snapshot_count(v); i++) {
		if (ovs_snapshot_at(v, i)->id == ida)
			ia = i;
		if (ovs_snapshot_at(v, i)->id == idb)
			ib = i;
	}
	if (ia == ib) {
		ovs_error("merge %s: A and B are the same snapshot (%" PRIu64 "): nothing to merge",
			  ovs_volume_source(v), ida);
		status = EXIT_USAGE;
		goto out;
	}
	if (ia > ib) {
		ovs_error("merge %s: A (%" PRIu64 ") must be older than B (%" PRIu64 ")",
			  ovs_volume_source(v), ida, idb);
		status = EXIT_USAGE;
		goto out;
	}
	/* A hold stops every removal, not only drop's (ovsnap-take(8)
	 * --hold): the snapshots after A up to B disappear. */
	for (i = ia + 1; i <= ib && !opt_force; i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);

		if (s->hold) {
			char label[OVS_NAME_MAX + 64];

			ovs_snapshot_label(s, label, sizeof(label));
			ovs_error("merge %s: %s is held and would be merged away: use "
				  "--force to merge it", ovs_volume_source(v), label);
			status = EXIT_FAIL;
			goto out;
		}
	}
	/* A and what goes into it, as they are before the merge */
	snaps = calloc(ib - ia + 1, sizeof(*snaps));
	if (!snaps) {
		ovs_error("merge: %s", strerror(ENOMEM));
		status = EXIT_FAIL;
		goto out;
	}
	for (i = ia; i <= ib; i++)
		snaps[i - ia] = *ovs_snapshot_at(v, i);
	if (opt_dry_run && opt_json) {
		print_json(v, snaps, ib - ia + 1);
		status = EXIT_OK;
		goto out;
	}
	if (opt_dry_run) {
		for (i = ia + 1; i <= ib; i++) {
			const struct ovs_snapshot *s = ovs_snapshot_at(v, i);

			printf("would merge %" PRIu64 "%s%s into %" PRIu64 "\n", s->id,
			       s->name[0] ? " " : "", s->name, ida);
		}
		status = EXIT_OK;
		goto out;
	}
	if (ovs_volume_active(v) && ib == ovs_snapshot_count(v) - 1) {
		/* Into or out of the active layer: the daemon merges under
		 * its barrier and then preserves into A. */
		if (!ovs_daemon_running(v)) {
			ovs_error("merge %s: snapshot %" PRIu64 " is the active one and the "
				  "snapshot mount is not running (the daemon died?): run "
				  "'ovsnap activate %s' first", ovs_volume_source(v), idb,
				  ovs_volume_source(v));
			status = EXIT_FAIL;
			goto out;
		}
		rc = ovs_daemon_merge_active(v, ida, idb);
	} else {
		rc = ovs_merge_snapshots(v, ida, idb, ovs_progress_show, &prog);
		ovs_progress_end(&prog);
	}
	if (rc < 0) {
		ovs_error_lib(rc, "merge %s", ovs_volume_source(v));
		status = EXIT_FAIL;
		goto out;
	}
	if (opt_json)
		print_json(v, snaps, ib - ia + 1);
	status = EXIT_OK;
out:
	free(snaps);
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}
