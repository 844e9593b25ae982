/*
 * ovsnap merge — merge adjacent snapshots into the oldest of them, keeping
 * its view.  Also the pieces drop shares: opening a volume for a change
 * (lock, registry, recovery of an interrupted merge or drop) and the
 * progress line.
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

static int opt_wait;

static struct poptOption merge_options[] = {
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Shown only once a merge has run for a second, on a terminal. */
void ovs_progress_show(void *arg, uint64_t done, uint64_t total)
{
	struct ovs_progress *p = arg;

	if (ovs_opt_quiet || !isatty(STDERR_FILENO))
		return;
	if (!p->start_ns)
		p->start_ns = mono_ns();
	if (!p->shown && mono_ns() - p->start_ns < 1000000000)
		return;
	p->shown = true;
	if (total)
		fprintf(stderr, "\r%s: %" PRIu64 "/%" PRIu64 " entries (%d%%)", p->what, done,
			total, (int)(done * 100 / total));
	else
		fprintf(stderr, "\r%s: %" PRIu64 " entries", p->what, done);
}

void ovs_progress_end(struct ovs_progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
	p->start_ns = 0;
}

int ovs_open_locked(const char *cmd, const char *arg, bool wait, struct ovs_volume **out)
{
	struct ovs_volume *v;
	char *src;
	int rc;

	src = ovs_resolve_source(cmd, arg);
	if (!src)
		return EXIT_FAIL;
	rc = ovs_volume_open(src, &v);
	if (rc < 0) {
		if (rc == -ENOENT)
			ovs_error("%s %s: not a volume (no snapshot was ever taken of it)", cmd, src);
		else
			ovs_error_lib(rc, "%s %s", cmd, src);
		free(src);
		return EXIT_FAIL;
	}
	rc = ovs_volume_lock(v, wait, cmd);
	if (rc == 0)
		rc = ovs_registry_load(v);
	if (rc == 0) {
		rc = ovs_recover(v);
		if (rc > 0 && !ovs_opt_quiet)
			fprintf(stderr, "%s: %s %s: finished an interrupted merge or drop\n",
				ovs_progname, cmd, src);
	}
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		ovs_volume_unref(v);
		free(src);
		return EXIT_FAIL;
	}
	free(src);
	*out = v;
	return EXIT_OK;
}

int cmd_merge(int argc, const char **argv)
{
	const struct ovs_snapshot *a, *b;
	struct ovs_progress prog = { .what = "merge" };
	struct ovs_volume *v = NULL;
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
	rc = ovs_merge_snapshots(v, ida, idb, ovs_progress_show, &prog);
	ovs_progress_end(&prog);
	if (rc < 0) {
		ovs_error_lib(rc, "merge %s", ovs_volume_source(v));
		status = EXIT_FAIL;
		goto out;
	}
	status = EXIT_OK;
out:
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}
