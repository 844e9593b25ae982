/*
 * Userspace overlay resolver (see resolve.h for the semantics).
 *
 * A lookup walks the path one component at a time, carrying the list of
 * layer directories that make up the current merged directory, exactly as
 * overlayfs's ovl_lookup() builds a dentry's lower stack.  Directories are
 * held as O_PATH fds opened without following symlinks, so a layer (or
 * SRC, which may change under a view) can never lead the walk elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libovsnap.h"
#include "preserve.h"
#include "resolve.h"
#include "walk.h"

struct ovs_rstack {
	size_t depth;		/* layers including the lower one */
	int *fds;		/* depth fds, topmost first */
};

/* One layer's directory that takes part in a merged directory. */
struct layer_dir {
	int layer;
	int fd;
	bool owned;		/* fd is ours to close (not a stack root) */
};

int ovs_rstack_new(const int *layer_fds, size_t nlayers, int lowerfd,
		   struct ovs_rstack **out)
{
	struct ovs_rstack *s = calloc(1, sizeof(*s));
	size_t i;

	if (!s)
		return ovs_err(ENOMEM, "resolver: out of memory");
	s->fds = calloc(nlayers + 1, sizeof(int));
	if (!s->fds) {
		free(s);
		return ovs_err(ENOMEM, "resolver: out of memory");
	}
	for (i = 0; i < nlayers + (lowerfd >= 0); i++) {
		int fd = i < nlayers ? layer_fds[i] : lowerfd;

		s->fds[i] = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		if (s->fds[i] < 0) {
			int err = errno;

			s->depth = i;
			ovs_rstack_free(s);
			return ovs_err(err, "resolver: layer %zu: %s", i, strerror(err));
		}
	}
	s->depth = i;
	*out = s;
	return 0;
}

void ovs_rstack_free(struct ovs_rstack *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->depth; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s);
}

size_t ovs_rstack_depth(const struct ovs_rstack *s)
{
	return s->depth;
}

static void dirs_close(struct layer_dir *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (d[i].owned)
			close(d[i].fd);
}

static bool has_redirect(int dirfd, const char *name)
{
	char buf[1];
	ssize_t n = ovs_lgetxattrat(dirfd, name, OVL_XATTR_REDIRECT, buf, 0);

	return n >= 0;
}

/*
 * Resolve name inside the merged directory made of parents[0..np).  When
 * children is not NULL and the name is a visible directory, its layer
 * directories are opened into children (*nc of them).
 */
static int lookup_step(struct ovs_rstack *s, const struct layer_dir *parents, size_t np,
		       const char *name, struct ovs_rentry *e,
		       struct layer_dir *children, size_t *nc)
{
	size_t i;
	int rc = 0;

	memset(e, 0, sizeof(*e));
	e->kind = OVS_R_ABSENT;
	e->layer = e->lowest = -1;
	if (nc)
		*nc = 0;

	for (i = 0; i < np; i++) {
		const struct layer_dir *p = &parents[i];
		bool last = (size_t)p->layer == s->depth - 1;
		struct stat st;
		int opaque = 0;

		if (fstatat(p->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				continue;
			rc = ovs_err(errno, "resolve %s in layer %d: %m", name, p->layer);
			goto fail;
		}
		if (ovl_is_whiteout(&st)) {
			if (e->kind == OVS_R_ABSENT) {
				e->kind = OVS_R_WHITEOUT;
				e->layer = e->lowest = p->layer;
				e->st = st;
			}
			break;
		}
		if (e->kind == OVS_R_ABSENT) {
			e->kind = OVS_R_ENTRY;
			e->layer = e->lowest = p->layer;
			e->st = st;
		}
		/* Below a directory, a non-directory ends the merge unseen. */
		if (!S_ISDIR(st.st_mode))
			break;
		e->lowest = p->layer;
		if (has_redirect(p->fd, name))
			e->flags |= OVS_RENT_REDIRECT;
		if (!last) {
			opaque = ovl_is_opaque_at(p->fd, name);
			if (opaque < 0) {
				rc = opaque;
				goto fail;
			}
		}
		if (children) {
			int fd = openat(p->fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (fd < 0) {
				rc = ovs_err(errno, "resolve %s in layer %d: %m", name, p->layer);
				goto fail;
			}
			children[*nc].layer = p->layer;
			children[*nc].fd = fd;
			children[*nc].owned = true;
			(*nc)++;
		}
		if (opaque) {
			if (e->layer == p->layer)
				e->flags |= OVS_RENT_OPAQUE;
			break;
		}
	}
	return 0;
fail:
	if (children)
		dirs_close(children, *nc);
	if (nc)
		*nc = 0;
	return rc;
}

/*
 * Walk path to the merged directory it names, filling dirs with its layer
 * directories (the caller closes them with dirs_close).  e describes the
 * directory itself.
 */
static int walk(struct ovs_rstack *s, const char *path, struct layer_dir *dirs, size_t *nd,
		struct ovs_rentry *e, bool want_dirs)
{
	struct layer_dir *next;
	char comp[NAME_MAX + 1];
	const char *p = path;
	size_t n, nn;
	int rc;

	next = calloc(s->depth, sizeof(*next));
	if (!next)
		return ovs_err(ENOMEM, "resolver: out of memory");
	for (n = 0; n < s->depth; n++) {
		dirs[n].layer = n;
		dirs[n].fd = s->fds[n];
		dirs[n].owned = false;
	}
	memset(e, 0, sizeof(*e));
	e->kind = OVS_R_ENTRY;
	e->layer = 0;
	e->lowest = s->depth - 1;
	if (fstat(s->fds[0], &e->st) < 0) {
		rc = ovs_err(errno, "resolver: stat of the top layer: %m");
		goto out;
	}

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		bool final = !slash;

		if (len == 0 || len > NAME_MAX) {
			rc = ovs_err(EINVAL, "resolver: bad path %s", path);
			goto out;
		}
		memcpy(comp, p, len);
		comp[len] = 0;
		rc = lookup_step(s, dirs, n, comp, e, (!final || want_dirs) ? next : NULL, &nn);
		dirs_close(dirs, n);
		n = 0;
		if (rc < 0)
			goto out;
		if (e->kind != OVS_R_ENTRY) {
			if (!final)
				e->kind = OVS_R_ABSENT, e->layer = e->lowest = -1;
			goto out;
		}
		if (!S_ISDIR(e->st.st_mode) && !final) {
			rc = -ENOTDIR;
			goto out;
		}
		memcpy(dirs, next, nn * sizeof(*next));
		n = nn;
		p = final ? p + len : slash + 1;
	}
	rc = 0;
out:
	if (rc < 0 || e->kind != OVS_R_ENTRY || !want_dirs) {
		dirs_close(dirs, n);
		n = 0;
	}
	*nd = n;
	free(next);
	return rc;
}

int ovs_resolve_lookup(struct ovs_rstack *s, const char *path, struct ovs_rentry *e)
{
	struct layer_dir *dirs = calloc(s->depth, sizeof(*dirs));
	size_t nd;
	int rc;

	if (!dirs)
		return ovs_err(ENOMEM, "resolver: out of memory");
	rc = walk(s, path, dirs, &nd, e, false);
	free(dirs);
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the names of one layer directory to *names. */
static int read_names(int pathfd, char ***names, size_t *n, size_t *cap)
{
	struct dirent *d;
	DIR *dir;
	int fd;

	fd = openat(pathfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ovs_err(errno, "resolver: open directory: %m");
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return ovs_err(errno, "resolver: open directory: %m");
	}
	while ((errno = 0, d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 64;
			char **nv = realloc(*names, ncap * sizeof(*nv));

			if (!nv)
				goto nomem;
			*names = nv;
			*cap = ncap;
		}
		(*names)[*n] = strdup(d->d_name);
		if (!(*names)[*n])
			goto nomem;
		(*n)++;
	}
	if (errno) {
		int err = errno;

		closedir(dir);
		return ovs_err(err, "resolver: read directory: %s", strerror(err));
	}
	closedir(dir);
	return 0;
nomem:
	closedir(dir);
	return ovs_err(ENOMEM, "resolver: out of memory");
}

struct ovs_rdir {
	size_t n;
	struct layer_dir *dirs;
};

int ovs_resolve_opendir(struct ovs_rstack *s, const char *path, struct ovs_rdir **out)
{
	struct ovs_rdir *d = calloc(1, sizeof(*d));
	struct ovs_rentry e;
	int rc;

	if (d)
		d->dirs = calloc(s->depth, sizeof(*d->dirs));
	if (!d || !d->dirs) {
		free(d);
		return ovs_err(ENOMEM, "resolver: out of memory");
	}
	rc = walk(s, path, d->dirs, &d->n, &e, true);
	if (rc == 0 && e.kind != OVS_R_ENTRY)
		rc = -ENOENT;
	else if (rc == 0 && !S_ISDIR(e.st.st_mode))
		rc = -ENOTDIR;
	if (rc < 0) {
		ovs_rdir_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int ovs_resolve_child(struct ovs_rstack *s, const struct ovs_rdir *d, const char *name,
		      struct ovs_rentry *e)
{
	if (!*name || strlen(name) > NAME_MAX || strchr(name, '/'))
		return ovs_err(EINVAL, "resolver: bad name %s", name);
	return lookup_step(s, d->dirs, d->n, name, e, NULL, NULL);
}

void ovs_rdir_free(struct ovs_rdir *d)
{
	if (!d)
		return;
	dirs_close(d->dirs, d->n);
	free(d->dirs);
	free(d);
}

int ovs_resolve_readdir(struct ovs_rstack *s, const char *path,
			struct ovs_rdirent **ents, size_t *n)
{
	struct layer_dir *dirs = calloc(s->depth, sizeof(*dirs));
	struct ovs_rdirent *out = NULL;
	const char *prev = NULL;
	char **names = NULL;
	size_t nd = 0, nnames = 0, cap = 0, nout = 0, i;
	struct ovs_rentry e;
	int rc;

	*ents = NULL;
	*n = 0;
	if (!dirs)
		return ovs_err(ENOMEM, "resolver: out of memory");
	rc = walk(s, path, dirs, &nd, &e, true);
	if (rc < 0)
		goto out;
	if (e.kind != OVS_R_ENTRY) {
		rc = ovs_err(ENOENT, "resolver: %s: no such directory", path);
		goto out;
	}
	if (!S_ISDIR(e.st.st_mode)) {
		rc = ovs_err(ENOTDIR, "resolver: %s: not a directory", path);
		goto out;
	}
	/* The union of the names, then each one resolved as a lookup would:
	 * the first layer that has a name decides, as in ovl_fill_merge(). */
	for (i = 0; i < nd; i++) {
		rc = read_names(dirs[i].fd, &names, &nnames, &cap);
		if (rc < 0)
			goto out;
	}
	qsort(names, nnames, sizeof(*names), cmp_names);
	out = calloc(nnames ? nnames : 1, sizeof(*out));
	if (!out) {
		rc = ovs_err(ENOMEM, "resolver: out of memory");
		goto out;
	}
	for (i = 0; i < nnames; i++) {
		/* names[i - 1] may have moved to out: compare with a copy. */
		if (i > 0 && prev && !strcmp(names[i], prev))
			continue;
		prev = names[i];
		rc = lookup_step(s, dirs, nd, names[i], &e, NULL, NULL);
		if (rc < 0)
			goto out;
		if (e.kind != OVS_R_ENTRY)
			continue;
		out[nout].name = names[i];
		out[nout].e = e;
		names[i] = NULL;
		nout++;
	}
	*ents = out;
	*n = nout;
	out = NULL;
	rc = 0;
out:
	dirs_close(dirs, nd);
	for (i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	if (out)
		ovs_resolve_dirents_free(out, nout);
	free(dirs);
	return rc;
}

void ovs_resolve_dirents_free(struct ovs_rdirent *ents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
}

/* In pieces where path is PATH_MAX or longer (ovs_open_beneath): restore
 * reaches a snapshot's folders as deep as users made them (rule 18). */
int ovs_rstack_openat(struct ovs_rstack *s, size_t layer, const char *path, int flags)
{
	int fd;

	if (layer >= s->depth)
		return ovs_err(EINVAL, "resolver: no layer %zu", layer);
	fd = ovs_open_beneath(s->fds[layer], path,
			      (flags ? flags : O_PATH | O_DIRECTORY) | O_CLOEXEC | O_NOFOLLOW,
			      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	if (fd < 0)
		return ovs_err(-fd, "resolver: open %s in layer %zu: %s", *path ? path : ".",
			       layer, strerror(-fd));
	return fd;
}
