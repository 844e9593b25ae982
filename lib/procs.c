/*
 * Which processes use a directory: open files, working or root directory,
 * executable and mapped files under it.  A first activation refuses while
 * there are any, because what they hold open would bypass the snapshot
 * mount (DESIGN.md rule 10).  Like fuser(1), this reads /proc; the links
 * there are what the kernel offers, there is no library for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libovsnap.h"

/* Does the link name in the /proc directory fd lead to what the caller
 * looks for? */
typedef bool (*link_pred)(int fd, const char *name, const void *arg);

/* The link piddir/sub, or with folder every link in the folder piddir/sub
 * (fd, map_files): does any satisfy uses? */
static bool any_link(int piddir, const char *sub, bool folder, link_pred uses,
		     const void *arg)
{
	struct dirent *de;
	bool found = false;
	DIR *d;
	int fd;

	if (!folder)
		return uses(piddir, sub, arg);
	fd = openat(piddir, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (!found && (de = readdir(d)))
		if (de->d_name[0] != '.')
			found = uses(dirfd(d), de->d_name, arg);
	closedir(d);
	return found;
}

/*
 * The one walk of /proc: every process but this one whose working or root
 * directory, executable, open files or mapped files satisfy uses.
 */
static int proc_users(link_pred uses, const void *arg, pid_t **pids_out, size_t *n_out)
{
	size_t n = 0, cap = 0;
	pid_t self = getpid(), *pids = NULL;
	struct dirent *de;
	DIR *proc;

	proc = opendir("/proc");
	if (!proc)
		return ovs_err(errno, "cannot read /proc: %s", strerror(errno));
	while ((de = readdir(proc))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		int piddir;
		bool found;

		if (*end || pid <= 0 || pid == self)
			continue;
		piddir = openat(dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0)
			continue;
		found = any_link(piddir, "cwd", false, uses, arg) ||
			any_link(piddir, "root", false, uses, arg) ||
			any_link(piddir, "exe", false, uses, arg) ||
			any_link(piddir, "fd", true, uses, arg) ||
			any_link(piddir, "map_files", true, uses, arg);
		close(piddir);
		if (!found)
			continue;
		if (n == cap) {
			pid_t *p = realloc(pids, (cap = cap ? cap * 2 : 8) * sizeof(*p));

			if (!p) {
				free(pids);
				closedir(proc);
				return ovs_err(ENOMEM, "out of memory");
			}
			pids = p;
		}
		pids[n++] = (pid_t)pid;
	}
	closedir(proc);
	*pids_out = pids;
	*n_out = n;
	return 0;
}

/* ---- users of a directory, by path ---------------------------------------- */

/* Does the link's text name dir or a path under it? */
static bool link_under(int fd, const char *name, const void *arg)
{
	const char *dir = arg;
	size_t dlen = strlen(dir);
	char target[PATH_MAX];
	ssize_t n = readlinkat(fd, name, target, sizeof(target) - 1);

	if (n <= 0)
		return false;
	target[n] = 0;
	/* "/" (or "/dir/"): every path below starts with the slash itself */
	while (dlen > 0 && dir[dlen - 1] == '/')
		dlen--;
	return strncmp(target, dir, dlen) == 0 && (target[dlen] == '/' || target[dlen] == 0);
}

int ovs_path_users(const char *dir, pid_t **pids_out, size_t *n_out)
{
	return proc_users(link_under, dir, pids_out, n_out);
}

/* ---- users of a filesystem, by device ------------------------------------- */

/* Is the object behind the link on the device?  DONT_SYNC: a FUSE file
 * system gets no request (its daemon may be hung or gone). */
static bool link_on_dev(int fd, const char *name, const void *arg)
{
	const dev_t *dev = arg;
	struct statx stx;

	if (statx(fd, name, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
		return false;
	return makedev(stx.stx_dev_major, stx.stx_dev_minor) == *dev;
}

int ovs_dev_users(dev_t dev, pid_t **pids_out, size_t *n_out)
{
	return proc_users(link_on_dev, &dev, pids_out, n_out);
}
