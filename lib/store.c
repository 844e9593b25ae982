/*
 * Trust nothing users can write (DESIGN.md rule 20).  ovsnap runs as root
 * and writes wherever the store says its layers are: a user who can change
 * the store, the state directory or any directory above them can put a
 * registry and a layer of their own there, or a symlink to any directory,
 * and have root write into it.  So those directories must be root's and
 * closed to other writers, and everything below a checked directory is
 * opened from its fd, never following a symlink or leaving it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "preserve.h"
#include "walk.h"

#define SAFE_MAX_LINKS 40	/* as the kernel's MAXSYMLINKS */

/*
 * Why st (the directory at path) is unsafe, or NULL.  A parent may be
 * writable by others when it is sticky (/tmp, /var/tmp): then nobody but
 * root can rename or remove the root-owned entry below it.  The directory
 * itself never: anybody could add a volume folder to a sticky store.
 * Group write is write by others (an ACL's named entries show in the
 * group bits, as its mask).
 */
static const char *unsafe_why(const struct stat *st, bool self, char *buf, size_t len)
{
	bool sticky = st->st_mode & S_ISVTX;

	if (st->st_uid != 0) {
		snprintf(buf, len, "owned by uid %u, not root", (unsigned)st->st_uid);
		return buf;
	}
	if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
		return NULL;
	if (!self && sticky)
		return NULL;
	snprintf(buf, len, "writable by %s (mode %04o%s)",
		 (st->st_mode & S_IWOTH) ? "others" : "its group",
		 (unsigned)(st->st_mode & 07777),
		 self && sticky ? "; sticky is not enough here" :
		 !self ? ", not sticky" : "");
	return buf;
}

/* The path of the directory reached, for messages: "at" changed by one
 * component as the walk did. */
static void walk_text(char *at, size_t len, const char *comp)
{
	size_t n = strlen(at);

	if (strcmp(comp, "..") == 0) {
		char *slash = strrchr(at, '/');

		if (slash && slash != at)
			*slash = '\0';
		else
			snprintf(at, len, "/");
		return;
	}
	snprintf(at + n, len - n, "%s%s", n > 1 ? "/" : "", comp);
}

int ovs_safe_dir_open(const char *path, const char *what, unsigned flags)
{
	char at[PATH_MAX] = "/", why[128], *todo, *p;
	struct stat st;
	int fd, links = 0, rc;

	if (path[0] != '/')
		return ovs_err(EINVAL, "%s: not an absolute path", what);
	todo = strdup(path);
	if (!todo)
		return ovs_err(ENOMEM, "out of memory");
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = ovs_err(errno, "%s: /: %m", what);
		goto out;
	}
	for (p = todo;;) {
		char *comp, *next;
		int nfd;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		/* a directory the walk goes on from */
		if (fstat(fd, &st) < 0) {
			rc = ovs_err(errno, "%s: %s: %m", what, at);
			goto out;
		}
		if (unsafe_why(&st, false, why, sizeof(why))) {
			rc = ovs_err(EPERM, "%s is unsafe: %s is %s", what, at, why);
			goto out;
		}
		comp = p;
		next = strchr(p, '/');
		if (next)
			*next++ = '\0';
		else
			next = p + strlen(p);
		p = next;
		if (strcmp(comp, ".") == 0)
			continue;
		nfd = openat(fd, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 || fstat(nfd, &st) < 0) {
			rc = ovs_err(errno, "%s: %s%s%s: %m", what, at,
				     strcmp(at, "/") ? "/" : "", comp);
			if (nfd >= 0)
				close(nfd);
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			/* The link sits in a directory checked above, so no
			 * user can change it; where it leads is checked as
			 * the walk goes on. */
			char target[PATH_MAX], *more;
			ssize_t n = readlinkat(nfd, "", target, sizeof(target) - 1);

			close(nfd);
			if (n < 0 || ++links > SAFE_MAX_LINKS) {
				rc = ovs_err(n < 0 ? errno : ELOOP, "%s: %s%s%s: %s", what,
					     at, strcmp(at, "/") ? "/" : "", comp,
					     strerror(n < 0 ? errno : ELOOP));
				goto out;
			}
			target[n] = '\0';
			if (asprintf(&more, "%s/%s", target, next) < 0) {
				rc = ovs_err(ENOMEM, "out of memory");
				goto out;
			}
			free(todo);
			todo = p = more;
			if (target[0] == '/') {
				close(fd);
				fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				snprintf(at, sizeof(at), "/");
				if (fd < 0) {
					rc = ovs_err(errno, "%s: /: %m", what);
					goto out;
				}
			}
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			close(nfd);
			rc = ovs_err(ENOTDIR, "%s: %s%s%s is not a directory", what,
				     at, strcmp(at, "/") ? "/" : "", comp);
			goto out;
		}
		close(fd);
		fd = nfd;
		walk_text(at, sizeof(at), comp);
	}
	if (fstat(fd, &st) < 0) {
		rc = ovs_err(errno, "%s: %s: %m", what, at);
		goto out;
	}
	if (unsafe_why(&st, !(flags & OVS_SAFE_PARENT), why, sizeof(why))) {
		rc = ovs_err(EPERM, "%s is unsafe: %s is %s", what, at, why);
		goto out;
	}
	rc = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc < 0)
		rc = ovs_err(errno, "%s: %m", what);
out:
	if (fd >= 0)
		close(fd);
	free(todo);
	return rc;
}

int ovs_safe_dir_at(int dirfd, const char *name, const char *what)
{
	char why[128];
	struct stat st;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ovs_err(errno, "%s: %m", what);
	if (fstat(fd, &st) < 0) {
		int err = errno;

		close(fd);
		return ovs_err(err, "%s: %m", what);
	}
	if (unsafe_why(&st, true, why, sizeof(why))) {
		close(fd);
		return ovs_err(EPERM, "%s is unsafe: it is %s", what, why);
	}
	return fd;
}

int ovs_store_open_beneath(int dirfd, const char *rel, int flags, mode_t mode)
{
	(void)mode;
	/* O_TMPFILE holds O_DIRECTORY's bit: test all of it */
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		return -EINVAL;
	return ovs_open_beneath(dirfd, rel, flags | O_CLOEXEC,
				RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
				RESOLVE_NO_XDEV);
}

/* ---- the layers of a volume -------------------------------------------------- */

static int open_layer_dir(const struct ovs_volume *v, uint64_t id, const char *what,
			  int flags)
{
	char rel[64];
	int fd;

	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	snprintf(rel, sizeof(rel), "%s/%llu/%s", OVS_LAYERS_DIR, (unsigned long long)id, what);
	fd = ovs_store_open_beneath(v->dirfd, rel, flags | O_DIRECTORY, 0);
	if (fd == -ELOOP || fd == -EXDEV)
		return ovs_err(-fd, "%s/%s: goes through a symbolic link or a mount point; "
			       "refused: the store is opened without following either "
			       "(was it tampered with?)", v->store, rel);
	if (fd < 0)
		return ovs_err(-fd, "%s/%s: %s", v->store, rel, strerror(-fd));
	return fd;
}

int ovs_snapshot_open_upper(const struct ovs_volume *v, uint64_t id, int flags)
{
	return open_layer_dir(v, id, "upper", flags);
}

int ovs_snapshot_open_work(const struct ovs_volume *v, uint64_t id, int flags)
{
	return open_layer_dir(v, id, "work", flags);
}

int ovs_snapshot_layer_open(const struct ovs_volume *v, uint64_t id, int srcfd,
			    unsigned flags, struct ovs_layer **out)
{
	int upperfd, workfd;

	upperfd = ovs_snapshot_open_upper(v, id, O_RDONLY);
	if (upperfd < 0)
		return upperfd;
	workfd = ovs_snapshot_open_work(v, id, O_RDONLY);
	if (workfd < 0) {
		close(upperfd);
		return workfd;
	}
	return ovs_layer_open_fds(upperfd, workfd, srcfd, flags, out);
}

int ovs_run_dir_check(unsigned flags)
{
	char *what;
	int fd;

	if (asprintf(&what, "run directory %s", ovs_run_dir()) < 0)
		return ovs_err(ENOMEM, "out of memory");
	fd = ovs_safe_dir_open(ovs_run_dir(), what, flags);
	free(what);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}
