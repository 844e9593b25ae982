/*
 * ovsnap umount — unmount a snapshot view.  Refuses anything that is not
 * one (the mount table must show the view's marker at TARGET), so a typo
 * can never unmount the snapshot mount over SRC or anything else.
 */
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "views.h"

static int opt_lazy;

static struct poptOption umount_options[] = {
	{ "lazy", 'l', POPT_ARG_NONE, &opt_lazy, 0,
	  "detach the view now, finish when it is no longer busy", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* How long to wait for ovsnap-viewd to exit after its unmount. */
#define VIEWD_EXIT_TIMEOUT_MS 10000

/* TARGET as the mount table names it.  A view whose process died answers
 * ENOTCONN to every lookup: resolve its parent instead. */
static char *canonical_target(const char *arg)
{
	char *real = realpath(arg, NULL), *dup, *slash, *parent;

	if (real || errno != ENOTCONN)
		return real;
	dup = strdup(arg);
	slash = dup ? strrchr(dup, '/') : NULL;
	real = NULL;
	if (slash && slash[1]) {
		*slash = 0;
		parent = realpath(slash == dup ? "/" : dup, NULL);
		if (parent && asprintf(&real, "%s/%s", strcmp(parent, "/") ? parent : "",
				       slash + 1) < 0)
			real = NULL;
		free(parent);
	} else if (slash == NULL && dup) {
		parent = realpath(".", NULL);
		if (parent && asprintf(&real, "%s/%s", parent, dup) < 0)
			real = NULL;
		free(parent);
	}
	free(dup);
	if (!real)
		errno = ENOTCONN;
	return real;
}

static void wait_gone(pid_t pid)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };

	for (int waited = 0; pid > 0 && waited < VIEWD_EXIT_TIMEOUT_MS; waited += 10) {
		char path[64], stat[256] = "", *paren;
		FILE *f;

		/* gone, or a zombie (its files are closed; its parent, not
		 * us, reaps it) */
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		f = fopen(path, "r");
		if (!f)
			return;
		if (!fgets(stat, sizeof(stat), f))
			stat[0] = 0;
		fclose(f);
		paren = strrchr(stat, ')');
		if (!paren || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X')
			return;
		nanosleep(&tick, NULL);
	}
}

/* Whether the view's owner record (written by a delegated mount) names
 * uid: a user unmounts only the views it mounted. */
static bool view_owned_by(const char *ownerfile, long uid)
{
	char buf[32] = "";
	FILE *f = *ownerfile ? fopen(ownerfile, "re") : NULL;
	bool mine;

	if (!f)
		return false;
	mine = fgets(buf, sizeof(buf), f) && strtol(buf, NULL, 10) == uid && uid > 0;
	fclose(f);
	return mine;
}

int cmd_umount(int argc, const char **argv)
{
	struct ovs_view_mount vm = { 0 };
	struct libmnt_context *cxt = NULL;
	char pidfile[PATH_MAX] = "", ownerfile[PATH_MAX] = "", *target = NULL;
	long delegated = ovs_delegated_uid();
	const char **args;
	poptContext pc;
	int nargs, status, rc;
	pid_t pid = 0;

	pc = ovs_popt_parse("umount", argc, argv, umount_options, "TARGET", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "umount", 1, 1, &nargs, &status);
	if (!args)
		goto out;
	status = EXIT_FAIL;
	target = canonical_target(args[0]);
	if (!target) {
		ovs_error("umount: %s: %s", args[0], strerror(errno));
		goto out;
	}
	rc = ovs_view_at(target, &vm);
	if (rc < 0) {
		ovs_error_lib(rc, "umount %s", args[0]);
		goto out;
	}
	if (rc == 0) {
		ovs_error("umount: %s: not an ovsnap snapshot view", args[0]);
		goto out;
	}
	if (ovs_view_run_file(target, "owner", ownerfile, sizeof(ownerfile)) < 0)
		*ownerfile = 0;
	if (delegated >= 0 && !view_owned_by(ownerfile, delegated)) {
		ovs_error("umount: %s: permission denied (not a view you mounted)", args[0]);
		goto out;
	}
	if (!vm.kernel && ovs_view_run_file(target, "pid", pidfile, sizeof(pidfile)) == 0)
		pid = ovs_view_daemon(target, NULL);

	cxt = mnt_new_context();
	if (!cxt) {
		ovs_error("umount: %s", strerror(ENOMEM));
		goto out;
	}
	/* the mount table is all there is to update: no helpers, no mtab */
	mnt_context_disable_helpers(cxt, 1);
	mnt_context_disable_mtab(cxt, 1);
	mnt_context_set_target(cxt, target);
	if (opt_lazy)
		mnt_context_enable_lazy(cxt, 1);
	rc = mnt_context_umount(cxt);
	if (rc != 0) {
		char msg[256] = "";

		char users[512] = "";

		mnt_context_get_excode(cxt, rc, msg, sizeof(msg));
		if (mnt_context_get_syscall_errno(cxt) == EBUSY)
			ovs_mount_users_text(target, users, sizeof(users));
		ovs_error("umount: %s: %s%s%s%s", args[0], *msg ? msg : "cannot unmount",
			  *users ? " (used by " : "", users, *users ? "; or give --lazy)" : "");
		goto out;
	}
	/* The view's process holds files in the layers and SRC until it has
	 * seen the unmount; wait for it, so the filesystem below can be
	 * unmounted as soon as this returns. */
	if (!opt_lazy)
		wait_gone(pid);
	if (*pidfile)
		unlink(pidfile);
	if (*ownerfile)
		unlink(ownerfile);
	status = EXIT_OK;
out:
	if (cxt)
		mnt_free_context(cxt);
	free(vm.source);
	free(vm.target);
	free(target);
	poptFreeContext(pc);
	return status;
}
