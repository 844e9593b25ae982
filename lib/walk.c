/*
 * The iterative directory walker of walk.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libovsnap.h"
#include "walk.h"

struct level {
	struct ovs_walk_dir d;
	DIR *dir;
	size_t pathlen;		/* length of this directory's path */
	char *name;		/* its name, owned */
	char **names;		/* sorted walks: the entries, read in full */
	size_t nnames, next;
	/* Unsorted: entries of this read of the directory that entry()
	 * left in it, and whether it removed any. */
	size_t kept;
	bool removed;
	/* Parked (closed while the walk is deeper down, reopened through
	 * ".." on the way back): where to go on reading, and what to find. */
	bool parked;
	long pos;
	int fl, auxfl;		/* the fds' open flags */
	dev_t dev, auxdev;
	ino_t ino, auxino;
};

/* At most this many levels keep their fds open: a walk holds a bounded
 * number of fds at any depth. */
#define OPEN_LEVELS 64

struct pathbuf {
	char *s;
	size_t len, cap;
};

/* Set pb to its first len bytes plus "/name" (or name at the top). */
static int path_set(struct pathbuf *pb, size_t len, const char *name)
{
	size_t nlen = strlen(name), need = len + 1 + nlen + 1;

	if (need > pb->cap) {
		size_t cap = pb->cap ? pb->cap : 256;
		char *s;

		while (cap < need)
			cap *= 2;
		s = realloc(pb->s, cap);
		if (!s)
			return -ENOMEM;
		pb->s = s;
		pb->cap = cap;
	}
	pb->len = len;
	if (len && nlen)
		pb->s[pb->len++] = '/';
	memcpy(pb->s + pb->len, name, nlen);
	pb->len += nlen;
	pb->s[pb->len] = '\0';
	return 0;
}

/* Close the directory of lv, remembering how to reopen it from its child
 * level c; its aux too if c has one to reopen it from. */
static int level_park(struct level *lv, const struct level *c)
{
	struct stat st;

	lv->pos = telldir(lv->dir);
	lv->fl = fcntl(lv->d.fd, F_GETFL);
	if (lv->pos < 0 || lv->fl < 0 || fstat(lv->d.fd, &st) < 0)
		return -errno;
	lv->dev = st.st_dev;
	lv->ino = st.st_ino;
	if (lv->d.aux >= 0 && c->d.aux >= 0) {
		lv->auxfl = fcntl(lv->d.aux, F_GETFL);
		if (lv->auxfl < 0 || fstat(lv->d.aux, &st) < 0)
			return -errno;
		lv->auxdev = st.st_dev;
		lv->auxino = st.st_ino;
		close(lv->d.aux);
		lv->d.aux = -2;		/* to reopen */
	}
	closedir(lv->dir);
	lv->dir = NULL;
	lv->d.fd = -1;
	lv->parked = true;
	return 0;
}

/* The parent of childfd, opened as it was (flags) and checked to be the
 * directory it was (dev, ino). */
static int open_parent_of(int childfd, int flags, dev_t dev, ino_t ino)
{
	struct stat st;
	int fd = openat(childfd, "..", (flags & ~(O_CREAT | O_TRUNC | O_PATH)) | O_DIRECTORY |
			O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		return -ESTALE;		/* moved meanwhile */
	}
	return fd;
}

/* Reopen parked lv from its child level c (still open). */
static int level_unpark(struct level *lv, const struct level *c)
{
	int fd = open_parent_of(c->d.fd, lv->fl, lv->dev, lv->ino);

	if (fd < 0)
		return fd;
	lv->dir = fdopendir(fd);
	if (!lv->dir) {
		close(fd);
		return -errno;
	}
	lv->d.fd = fd;
	seekdir(lv->dir, lv->pos);
	if (lv->d.aux == -2) {
		lv->d.aux = open_parent_of(c->d.aux, lv->auxfl, lv->auxdev, lv->auxino);
		if (lv->d.aux < 0) {
			int rc = lv->d.aux;

			lv->d.aux = -1;
			return rc;
		}
	}
	lv->parked = false;
	return 0;
}

static void level_close(struct level *lv)
{
	for (size_t i = 0; i < lv->nnames; i++)
		free(lv->names[i]);
	free(lv->names);
	if (lv->dir)
		closedir(lv->dir);
	else if (lv->d.fd >= 0)
		close(lv->d.fd);
	if (lv->d.aux >= 0)
		close(lv->d.aux);
	free(lv->name);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A sorted walk reads the directory in full first. */
static int level_read_all(struct level *lv)
{
	size_t cap = 0;
	struct dirent *de;

	while ((errno = 0, de = readdir(lv->dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (lv->nnames == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **nv = realloc(lv->names, ncap * sizeof(*nv));

			if (!nv)
				return -ENOMEM;
			lv->names = nv;
			cap = ncap;
		}
		if (!(lv->names[lv->nnames] = strdup(de->d_name)))
			return -ENOMEM;
		lv->nnames++;
	}
	if (errno)
		return -errno;
	if (lv->nnames)
		qsort(lv->names, lv->nnames, sizeof(*lv->names), cmp_names);
	return 0;
}

/*
 * An unsorted read of lv from which entry() removed entries has ended: 1
 * if the directory holds more entries than entry() kept (one was skipped:
 * read it again from the start), 0 if not, -errno.  Nothing but entry()
 * changes the directory meanwhile (the walks that remove are offline).
 */
static int level_missed_any(struct level *lv)
{
	struct dirent *de;
	size_t left = 0;

	rewinddir(lv->dir);
	while ((errno = 0, de = readdir(lv->dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			left++;
	if (errno)
		return -errno;
	rewinddir(lv->dir);
	if (left <= lv->kept)
		return 0;
	lv->kept = 0;
	lv->removed = false;
	return 1;
}

/* The next entry name of lv but "." and "..", NULL at the end (errno set
 * on an error). */
static const char *level_next(struct level *lv, bool sorted)
{
	struct dirent *de;

	if (sorted) {
		errno = 0;
		return lv->next < lv->nnames ? lv->names[lv->next++] : NULL;
	}
	while ((errno = 0, de = readdir(lv->dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			return de->d_name;
	return NULL;
}

static int level_open(struct level *lv, const struct ovs_walk_dir *d, const char *name,
		      size_t pathlen, bool sorted)
{
	lv->d = *d;
	lv->pathlen = pathlen;
	lv->dir = NULL;
	lv->names = NULL;
	lv->nnames = lv->next = 0;
	lv->kept = 0;
	lv->removed = false;
	lv->parked = false;
	lv->name = strdup(name);
	if (!lv->name)
		return -ENOMEM;
	lv->d.name = lv->name;
	lv->dir = fdopendir(d->fd);
	if (!lv->dir)
		return -errno;
	return sorted ? level_read_all(lv) : 0;
}

int ovs_walk(struct ovs_walk_dir *root, const char *path, const struct ovs_walk_ops *ops,
	     void *arg)
{
	struct level *st = NULL;
	struct pathbuf pb = { 0 };
	size_t n = 0, cap = 0;
	int rc;

	cap = 16;
	st = calloc(cap, sizeof(*st));
	rc = st ? path_set(&pb, 0, path) : -ENOMEM;
	if (rc < 0) {
		free(st);
		close(root->fd);
		if (root->aux >= 0)
			close(root->aux);
		return ovs_err(ENOMEM, "walk: out of memory");
	}
	rc = level_open(&st[0], root, "", pb.len, ops->sorted);
	n = 1;
	if (rc < 0) {
		rc = ovs_err(-rc, "read %s: %s", *path ? path : ".", strerror(-rc));
		goto out;
	}
	while (n) {
		struct level *lv = &st[n - 1];
		struct ovs_walk_dir child;
		const char *name = level_next(lv, ops->sorted);

		if (!name && !errno && !ops->sorted && lv->removed) {
			rc = level_missed_any(lv);
			if (rc > 0)
				continue;
			errno = -rc;
		}
		if (!name) {
			if (errno) {
				rc = -errno;
				path_set(&pb, lv->pathlen, "");
				rc = ops->read_error ? ops->read_error(arg, &lv->d, pb.s, rc)
						     : ovs_err(-rc, "read %s: %s",
							       *pb.s ? pb.s : ".",
							       strerror(-rc));
				if (rc < 0)
					goto out;
			}
			if (n > 1 && st[n - 2].parked) {
				rc = level_unpark(&st[n - 2], lv);
				if (rc < 0) {
					rc = ovs_err(-rc, "walk: back up from %s: %s",
						     pb.s, strerror(-rc));
					goto out;
				}
			}
			path_set(&pb, lv->pathlen, "");
			rc = ops->leave ? ops->leave(arg, &lv->d, n > 1 ? &st[n - 2].d : NULL,
						     pb.s)
					: 0;
			level_close(lv);
			n--;
			if (rc < 0)
				goto out;
			continue;
		}
		if (path_set(&pb, lv->pathlen, name) < 0) {
			rc = ovs_err(ENOMEM, "walk: out of memory");
			goto out;
		}
		child.fd = -1;
		child.aux = -1;
		child.flags = 0;
		child.name = name;
		memset(child.times, 0, sizeof(child.times));
		rc = ops->entry(arg, &lv->d, name, pb.s, &child);
		if (rc < 0)
			goto out;
		if (rc == OVS_WALK_REMOVED)
			lv->removed = true;
		else
			lv->kept++;
		if (rc != OVS_WALK_DESCEND)
			continue;
		if (n == cap) {
			struct level *bigger = realloc(st, 2 * cap * sizeof(*st));

			if (!bigger) {
				close(child.fd);
				if (child.aux >= 0)
					close(child.aux);
				rc = ovs_err(ENOMEM, "walk: out of memory");
				goto out;
			}
			st = bigger;
			cap *= 2;
			lv = &st[n - 1];
		}
		if (n >= OPEN_LEVELS && !st[n - OPEN_LEVELS].parked) {
			rc = level_park(&st[n - OPEN_LEVELS], &st[n - OPEN_LEVELS + 1]);
			if (rc < 0) {
				close(child.fd);
				if (child.aux >= 0)
					close(child.aux);
				rc = ovs_err(-rc, "walk: park %s: %s", pb.s, strerror(-rc));
				goto out;
			}
		}
		rc = level_open(&st[n], &child, name, pb.len, ops->sorted);
		n++;
		if (rc < 0) {
			rc = ovs_err(-rc, "read %s: %s", pb.s, strerror(-rc));
			goto out;
		}
	}
	rc = 0;
out:
	while (n)
		level_close(&st[--n]);
	free(st);
	free(pb.s);
	return rc;
}

static int openat2_piece(int dirfd, const char *path, int flags, unsigned long long resolve)
{
	struct open_how how = { .flags = flags, .resolve = resolve };
	int fd;

	/* EAGAIN: a rename or mount somewhere raced the RESOLVE_BENEATH
	 * walk; the kernel asks to try again */
	do
		fd = syscall(SYS_openat2, dirfd, *path ? path : ".", &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd < 0 ? -errno : fd;
}

int ovs_open_beneath(int dirfd, const char *path, int flags, unsigned long long resolve)
{
	int cur = dirfd, fd;

	while (strlen(path) >= PATH_MAX) {
		const char *cut = memrchr(path, '/', PATH_MAX - 1);
		char *piece;

		/* No slash in the first PATH_MAX - 1 bytes: a name longer
		 * than NAME_MAX, which no filesystem holds. */
		if (!cut || cut == path) {
			fd = -ENAMETOOLONG;
			goto out;
		}
		piece = strndup(path, cut - path);
		if (!piece) {
			fd = -ENOMEM;
			goto out;
		}
		fd = openat2_piece(cur, piece, O_PATH | O_DIRECTORY | O_CLOEXEC, resolve);
		free(piece);
		if (fd < 0)
			goto out;
		if (cur != dirfd)
			close(cur);
		cur = fd;
		path = cut + 1;
	}
	fd = openat2_piece(cur, path, flags, resolve);
out:
	if (cur != dirfd)
		close(cur);
	return fd;
}
