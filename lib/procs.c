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
