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
#include <sys/mount.h>
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

/*
 * A delegated umount: ovsnap-delegate opened TARGET once, as the user,
 * and hands it on fd OVSNAP_DELEGATED_TARGET_FD.  The mount that fd is
 * the root of is the one checked and unmounted, by its mount id, so no
 * path swapped in meanwhile (renameat2 RENAME_EXCHANGE, a symlink) turns
 * it into root's view.  Its mount-table path, or NULL; *idp its id.
 */
static char *delegated_target(long *idp)
{
	const char *e = getenv("OVSNAP_DELEGATED_TARGET_FD");
	struct libmnt_table *tb;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	char *target = NULL;
	int fd = e ? atoi(e) : -1, up;
	long id, upid;

	if (fd < 3)
		return NULL;
	id = ovs_fd_mnt_id(fd);
	up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	upid = up >= 0 ? ovs_fd_mnt_id(up) : -1;
	if (up >= 0)
		close(up);
	if (id < 0 || id == upid)
		return NULL;
	tb = mnt_new_table_from_file("/proc/self/mountinfo");
	it = mnt_new_iter(MNT_ITER_FORWARD);
	while (tb && it && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_id(fs) == id) {
			target = mnt_fs_get_target(fs) ? strdup(mnt_fs_get_target(fs)) : NULL;
			break;
		}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	*idp = id;
	return target;
}

/* Unmount the mount id whose root fd OVSNAP_DELEGATED_TARGET_FD is: from
 * its parent directory, the name checked to be that very mount just
 * before (as fusermount3 does), never following a symlink. */
static int umount_by_id(const char *target, long id)
{
	const char *e = getenv("OVSNAP_DELEGATED_TARGET_FD");
	const char *name = strrchr(target, '/');
	int fd = e ? atoi(e) : -1, up, nfd, rc;

	up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (up < 0 || !name || !name[1] || fchdir(up) < 0) {
		if (up >= 0)
			close(up);
		return -EINVAL;
	}
	close(up);
	name++;
	nfd = open(name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 || ovs_fd_mnt_id(nfd) != id) {
		if (nfd >= 0)
			close(nfd);
		rc = chdir("/");
		(void)rc;
		return -ESTALE;
	}
	close(nfd);
	close(fd);	/* an open fd on it keeps it busy */
	rc = umount2(name, UMOUNT_NOFOLLOW | (opt_lazy ? MNT_DETACH : 0)) < 0 ? -errno : 0;
	if (chdir("/") < 0)
		return rc ? rc : -errno;
	return rc;
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
	long mntid = -1;
	pid_t pid = 0;

	pc = ovs_popt_parse("umount", argc, argv, umount_options, "TARGET", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "umount", 1, 1, &nargs, &status);
	if (!args)
		goto out;
	status = EXIT_FAIL;
	if (delegated >= 0) {
		target = delegated_target(&mntid);
		if (!target) {
			ovs_error("umount: %s: not an ovsnap snapshot view", args[0]);
			goto out;
		}
	} else {
		target = canonical_target(args[0]);
	}
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

	if (delegated >= 0) {
		rc = umount_by_id(target, mntid);
		if (rc < 0) {
			char users[512] = "";

			if (rc == -EBUSY)
				ovs_mount_users_text(target, users, sizeof(users));
			ovs_error("umount: %s: %s%s%s%s", args[0],
				  rc == -ESTALE ? "moved while being unmounted" : strerror(-rc),
				  *users ? " (used by " : "", users, *users ? "; or give --lazy)" : "");
			goto out;
		}
		goto unmounted;
	}
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
unmounted:
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
