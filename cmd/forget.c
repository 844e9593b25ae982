/*
 * ovsnap forget — retire a volume: switch its snapshot mount off, delete
 * its snapshots and its store, and remove it from the index, so that it
 * no longer shows in `ovsnap list`.  Asks first on a terminal; elsewhere
 * it needs --yes.  Refused while views of its snapshots are mounted.
 *
 * Crash-safe: the store records the intent "forget" before the first
 * removal (every other command refuses the volume from then on) and the
 * index entry goes last, so running forget again finishes what a killed
 * one left (lib/volume.c says which states it recognises).  A marker in
 * the state directory, from the intent until after the index entry, tells
 * a folder a forget removed from one that cannot be reached: the second
 * is refused without --force.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "conf.h"
#include "merge.h"
#include "ovsnap-private.h"
#include "views.h"

static int opt_yes, opt_force, opt_wait;

static struct poptOption forget_options[] = {
	{ "yes", 'y', POPT_ARG_NONE, &opt_yes, 0,
	  "do not ask for a confirmation (needed when not on a terminal)", NULL },
	{ "force", 'f', POPT_ARG_NONE, &opt_force, 0,
	  "delete held snapshots too; forget a volume whose store cannot be found", NULL },
	{ "wait", 'w', POPT_ARG_NONE, &opt_wait, 0,
	  "wait for another command on the volume instead of failing", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* Test hook: OVSNAP_TEST_FORGET_KILL_AFTER=N kills this process with
 * SIGKILL after the Nth durable step, as a crash would. */
static long kill_after = -1, steps_done;

static void step(void)
{
	if (kill_after > 0 && ++steps_done >= kill_after)
		kill(getpid(), SIGKILL);
}

/* EXIT_OK once the user said yes on a terminal (or --yes); missing: the
 * store cannot be found, only the index entry goes. */
static int confirm(const char *src, size_t nsnaps, const char *store, bool missing)
{
	char line[64];

	if (opt_yes)
		return EXIT_OK;
	if (missing)
		fprintf(stderr, "Forget %s: its store %s cannot be found; remove the volume "
			"from the index, and its settings? [y/N] ", src, store);
	else
		fprintf(stderr, "Forget %s: deactivate it and delete its %zu snapshot%s and "
			"store %s? [y/N] ", src, nsnaps, nsnaps == 1 ? "" : "s", store);
	fflush(stderr);
	if (!fgets(line, sizeof(line), stdin) ||
	    (strcmp(line, "y\n") != 0 && strcmp(line, "yes\n") != 0)) {
		ovs_error("forget %s: not confirmed: nothing changed", src);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Views of the volume's snapshots keep their layers in use. */
static int check_no_views(const char *src, struct ovs_volume *v)
{
	struct ovs_view_mount *views;
	size_t n;
	int rc;

	rc = ovs_volume_views(v, &views, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		return EXIT_FAIL;
	}
	if (n)
		ovs_error("forget %s: snapshot %" PRIu64 " is mounted at %s%s: "
			  "unmount it first (ovsnap umount %s)", src, views[0].id, views[0].target,
			  n > 1 ? " (and other views)" : "", views[0].target);
	ovs_views_free(views, n);
	return n ? EXIT_FAIL : EXIT_OK;
}

static int check_no_holds(const char *src, struct ovs_volume *v)
{
	char label[OVS_NAME_MAX + 64];

	if (opt_force)
		return EXIT_OK;
	for (size_t i = 0; i < ovs_snapshot_count(v); i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);

		if (!s->hold)
			continue;
		ovs_snapshot_label(s, label, sizeof(label));
		ovs_error("forget %s: %s is held: release it (ovsnap release %s %" PRIu64
			  ") or give --force", src, label, src, s->id);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/*
 * The store folder is gone and the index entry left: a forget removed
 * the folder and was killed before the entry (its marker says so), or
 * the store cannot be reached now (on a filesystem that is not mounted,
 * a disk unplugged, a --store directory gone).  The second is refused
 * without --force: its snapshots, held ones among them, may still be
 * there and would be left behind unseen, also where a forget had begun
 * removing them (and was killed) before the store went out of reach.
 */
static int folder_gone(const char *src, struct ovs_volume *v, bool *resumed, bool *missing)
{
	int rc = ovs_volume_forget_marked(v);

	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		return EXIT_FAIL;
	}
	*resumed = rc == OVS_FORGET_REMOVED;
	*missing = !*resumed;
	if (*missing && !opt_force) {
		ovs_error("forget %s: its store %s cannot be found, and %s (is the filesystem "
			  "that holds it mounted?); give --force to forget the volume without it",
			  src, ovs_volume_store(v),
			  rc == OVS_FORGET_BEGUN ? "the forget begun earlier had not removed it" :
			  "no forget of it was under way");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/*
 * Lock v and tell whether it is being forgotten already.  A volume that
 * is not gets its interrupted merge or drop finished first, as every
 * command does; one that is may have lost its registry on the way.
 * *missing: the store cannot be found (folder_gone).
 */
static int lock_volume(const char *src, struct ovs_volume *v, bool *resumed, bool *loaded,
		       bool *missing)
{
	char text[256];
	int rc;

	*resumed = *loaded = *missing = false;
	if (ovs_volume_dirfd(v) < 0)
		return folder_gone(src, v, resumed, missing);
	rc = ovs_volume_lock(v, opt_wait, "forget");
	if (rc == 0)
		rc = ovs_intent_read(v, text, sizeof(text));
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		return EXIT_FAIL;
	}
	/* A crash inside forget_store may leave the folder without its
	 * intent and registry (so with a problem): the marker still says
	 * what it is. */
	*resumed = strcmp(text, "forget") == 0 ||
		   (ovs_volume_problem(v) && ovs_volume_forget_marked(v) == OVS_FORGET_REMOVED);
	if (!*resumed && ovs_volume_problem(v)) {
		if (strstr(ovs_volume_problem(v), "ovsnap fsck"))
			ovs_error("forget %s: %s", src, ovs_volume_problem(v));
		else
			ovs_error("forget %s: %s (see 'ovsnap fsck %s')", src,
				  ovs_volume_problem(v), src);
		return EXIT_FAIL;
	}
	rc = ovs_registry_load(v);
	if (rc < 0 && *resumed)
		return EXIT_OK;	/* the registry went before the crash */
	if (rc == 0 && !*resumed)
		rc = ovs_recover(v);
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		return EXIT_FAIL;
	}
	*loaded = true;
	return EXIT_OK;
}

/*
 * SRC as the volume was registered.  A directory deleted since is still
 * a volume to forget (retiring it is what is left to do): its path is
 * the canonical parent and the name given.
 */
static char *forget_source(const char *arg)
{
	char *dup, *base, *parent, *cwd = NULL, *abs = NULL;
	struct stat st;
	size_t n;

	if (stat(arg, &st) == 0 || errno != ENOENT)
		return ovs_resolve_source("forget", arg);
	if (arg[0] == '/')
		dup = strdup(arg);
	else if ((cwd = getcwd(NULL, 0)) == NULL || asprintf(&dup, "%s/%s", cwd, arg) < 0)
		dup = NULL;
	free(cwd);
	if (!dup) {
		ovs_error("forget %s: %s", arg, strerror(errno));
		return NULL;
	}
	for (n = strlen(dup); n > 1 && dup[n - 1] == '/'; n--)
		dup[n - 1] = '\0';
	base = strrchr(dup, '/');
	*base++ = '\0';
	parent = realpath(*dup ? dup : "/", NULL);
	if (!parent || !*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 ||
	    asprintf(&abs, "%s/%s", strcmp(parent, "/") ? parent : "", base) < 0) {
		ovs_error("forget %s: %s", arg, strerror(parent ? EINVAL : errno));
		abs = NULL;
	}
	free(parent);
	free(dup);
	return abs;
}

static int forget_one(const char *arg)
{
	struct ovs_volume *v = NULL;
	bool resumed, loaded, missing;
	size_t nsnaps;
	char *src;
	int rc, status;

	src = forget_source(arg);
	if (!src)
		return EXIT_FAIL;
	if (!opt_yes && !isatty(STDIN_FILENO)) {
		ovs_error("forget %s: not on a terminal: give --yes to forget the volume", src);
		free(src);
		return EXIT_USAGE;
	}
	rc = ovs_volume_open_remains(src, &v);
	if (rc < 0) {
		if (rc == -ENOENT)
			ovs_error("forget %s: not a volume", src);
		else
			ovs_error_lib(rc, "forget %s", src);
		free(src);
		return EXIT_FAIL;
	}
	status = lock_volume(src, v, &resumed, &loaded, &missing);
	if (status != EXIT_OK)
		goto out;
	status = check_no_views(src, v);
	/* Holds stop a forget from starting; one under way (its layers
	 * partly gone) is finished whatever they say. */
	if (status == EXIT_OK && loaded && !resumed)
		status = check_no_holds(src, v);
	nsnaps = loaded ? ovs_snapshot_count(v) : 0;
	if (status == EXIT_OK)
		status = confirm(src, nsnaps, ovs_volume_store(v), missing);
	if (status != EXIT_OK)
		goto out;
	if (resumed && !ovs_opt_quiet)
		fprintf(stderr, "%s: forget %s: finishing an interrupted forget\n", ovs_progname, src);
	/* The daemon first: nothing may write to the layers as they go.
	 * Deactivated, the volume is consistent even if we stop here. */
	if (loaded) {
		status = ovs_deactivate_locked(v);
		if (status != EXIT_OK)
			goto out;
	} else if (ovs_daemon_running(v)) {
		rc = ovs_daemon_stop(v, false);
		if (rc != 0) {
			ovs_error_lib(rc < 0 ? rc : -EBUSY, "forget %s", src);
			status = EXIT_FAIL;
			goto out;
		}
	}
	status = EXIT_FAIL;
	rc = ovs_volume_forget_layers(v, step);
	if (rc == 0)
		rc = ovs_volume_forget_store(v);
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		goto out;
	}
	step();
	/* The volume's ovsnap.conf(5) file: before the index entry, so
	 * that a forget killed in between still finds the volume and
	 * removes it on the next run. */
	rc = ovs_conf_remove(ovs_volume_source(v));
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		goto out;
	}
	rc = ovs_volume_unindex(v);
	if (rc < 0) {
		ovs_error_lib(rc, "forget %s", src);
		goto out;
	}
	/* Forgotten.  A marker left behind (a kill here, or this failing)
	 * names a store no volume has any more: a new volume of SRC
	 * removes it before it is indexed. */
	if (ovs_volume_forget_unmark(v) < 0)
		fprintf(stderr, "%s: forget %s: warning: %s\n", ovs_progname, src,
			ovs_last_error());
	if (missing) {
		ovs_log(v, "forget store=%s (not found: nothing deleted)", ovs_volume_store(v));
		if (!ovs_opt_quiet)
			printf("forgot %s (store %s not found: nothing deleted)\n", src,
			       ovs_volume_store(v));
	} else {
		ovs_log(v, "forget snapshots=%zu store=%s", nsnaps, ovs_volume_store(v));
		if (!ovs_opt_quiet)
			printf("forgot %s (%zu snapshot%s)\n", src, nsnaps,
			       nsnaps == 1 ? "" : "s");
	}
	status = EXIT_OK;
out:
	ovs_volume_unlock(v);
	ovs_volume_unref(v);
	free(src);
	return status;
}

int cmd_forget(int argc, const char **argv)
{
	const char **args, *s;
	poptContext pc;
	int status, n;

	s = getenv("OVSNAP_TEST_FORGET_KILL_AFTER");
	if (s && *s)
		kill_after = strtol(s, NULL, 10);
	pc = ovs_popt_parse("forget", argc, argv, forget_options, "SRC", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "forget", 1, 1, &n, &status);
	if (args)
		status = forget_one(args[0]);
	poptFreeContext(pc);
	return status;
}
