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

static bool under(const char *dir, size_t dlen, const char *path)
{
	return strncmp(path, dir, dlen) == 0 && (path[dlen] == '/' || path[dlen] == 0);
}

/* Does any link in /proc/<pid>/<sub> (a link, or a folder of links) point
 * under dir? */
static bool links_under(int piddir, const char *sub, bool folder,
			const char *dir, size_t dlen)
{
	char target[PATH_MAX];
	struct dirent *de;
	bool found = false;
	ssize_t n;
	DIR *d;
	int fd;

	if (!folder) {
		n = readlinkat(piddir, sub, target, sizeof(target) - 1);
		if (n <= 0)
			return false;
		target[n] = 0;
		return under(dir, dlen, target);
	}
	fd = openat(piddir, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		found = under(dir, dlen, target);
	}
	closedir(d);
	return found;
}

int ovs_path_users(const char *dir, pid_t **pids_out, size_t *n_out)
{
	size_t dlen = strlen(dir), n = 0, cap = 0;
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
		bool uses;

		if (*end || pid <= 0 || pid == self)
			continue;
		piddir = openat(dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0)
			continue;
		uses = links_under(piddir, "cwd", false, dir, dlen) ||
		       links_under(piddir, "root", false, dir, dlen) ||
		       links_under(piddir, "exe", false, dir, dlen) ||
		       links_under(piddir, "fd", true, dir, dlen) ||
		       links_under(piddir, "map_files", true, dir, dlen);
		close(piddir);
		if (!uses)
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

/* ---- users of a filesystem, by device ------------------------------------- */

/* Is the object behind the link at piddir/sub on dev?  DONT_SYNC: a FUSE
 * file system gets no request (its daemon may be hung or gone). */
static bool link_on_dev(int piddir, const char *sub, dev_t dev)
{
	struct statx stx;

	if (statx(piddir, sub, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
		return false;
	return makedev(stx.stx_dev_major, stx.stx_dev_minor) == dev;
}

static bool folder_on_dev(int piddir, const char *sub, dev_t dev)
{
	struct dirent *de;
	bool found = false;
	char path[PATH_MAX];
	DIR *d;
	int fd;

	fd = openat(piddir, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", sub, de->d_name);
		found = link_on_dev(piddir, path, dev);
	}
	closedir(d);
	return found;
}

int ovs_dev_users(dev_t dev, pid_t **pids_out, size_t *n_out)
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
		bool uses;

		if (*end || pid <= 0 || pid == self)
			continue;
		piddir = openat(dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0)
			continue;
		uses = link_on_dev(piddir, "cwd", dev) || link_on_dev(piddir, "root", dev) ||
		       link_on_dev(piddir, "exe", dev) || folder_on_dev(piddir, "fd", dev) ||
		       folder_on_dev(piddir, "map_files", dev);
		close(piddir);
		if (!uses)
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
