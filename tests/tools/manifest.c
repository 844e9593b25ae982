/*
 * Manifest of a directory tree for the consistency oracle (DESIGN.md
 * section 6).  One line per entry, sorted by path (byte order):
 *
 *   PATH type=T mode=MMMM uid=U gid=G [size=N] [mtime=S.NNNNNNNNN]
 *        [hash=H] [target=T] [rdev=MAJ:MIN] [xattr:NAME=HEX]... [hardlink=P]
 *
 * PATH is "." for the root and relative below it.  Bytes outside printable
 * ASCII, blanks, '\' and '=' are written as \xHH, so every line splits on
 * blanks.  atime and ctime are never shown (reading changes the one, every
 * copy the other); neither is st_nlink (links from outside the tree change
 * it) nor the size of directories (it depends on the filesystem).  hash is
 * a 64-bit FNV-1a of the content, enough to tell versions of a file apart
 * in a test.  The xattrs shown are user.*, security.* and the POSIX ACLs;
 * trusted.* belongs to the layer format, not to the user's data.  hardlink
 * names the smallest path among the entries of the tree that share one
 * inode, shown only when there are two or more.
 *
 * The walk does not cross mount points: a directory that is the root of
 * another mount is left out, with its content.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "manifest.h"

struct entry {
	char *path;		/* relative, "." for the root */
	char *line;		/* everything after the path, without hardlink */
	dev_t dev;
	ino_t ino;
	bool multi;		/* non-directory with st_nlink > 1 */
	const char *group;	/* smallest path sharing the inode, or NULL */
};

struct walk {
	const char *root;
	const struct manifest_opts *opts;
	dev_t root_dev;
	struct entry *v;
	size_t n, cap;
	int errors;
};

/* A growable string. */
struct buf {
	char *s;
	size_t len, cap;
};

static void die_oom(void)
{
	fputs("manifest: out of memory\n", stderr);
	exit(99);
}

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2 + 64;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			die_oom();
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

static void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_add(b, tmp, n < (int)sizeof(tmp) ? n : (int)sizeof(tmp) - 1);
}

static void buf_escaped(struct buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c <= ' ' || c >= 0x7f || c == '\\' || c == '=')
			buf_printf(b, "\\x%02x", c);
		else
			buf_add(b, (const char *)&c, 1);
	}
}

static void buf_hex(struct buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "%02x", (unsigned char)s[i]);
}

static char *join(const char *a, const char *b)
{
	char *p;

	if (strcmp(a, ".") == 0)
		return strdup(b);
	if (asprintf(&p, "%s/%s", a, b) < 0)
		die_oom();
	return p;
}

static char type_letter(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG: return 'f';
	case S_IFDIR: return 'd';
	case S_IFLNK: return 'l';
	case S_IFIFO: return 'p';
	case S_IFCHR: return 'c';
	case S_IFBLK: return 'b';
	case S_IFSOCK: return 's';
	}
	return '?';
}

static int hash_file(struct walk *w, int dirfd, const char *name, const char *rel,
		     uint64_t *hash)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	char data[65536];
	ssize_t n;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC);
	if (fd < 0 && errno == EPERM)
		fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "manifest: open %s/%s: %s\n", w->root, rel, strerror(errno));
		return -1;
	}
	while ((n = read(fd, data, sizeof(data))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			h ^= (unsigned char)data[i];
			h *= 0x100000001b3ULL;
		}
	if (n < 0) {
		fprintf(stderr, "manifest: read %s/%s: %s\n", w->root, rel, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	*hash = h;
	return 0;
}

static bool xattr_shown(const char *name)
{
	return strncmp(name, "user.", 5) == 0 || strncmp(name, "security.", 9) == 0 ||
	       strcmp(name, "system.posix_acl_access") == 0 ||
	       strcmp(name, "system.posix_acl_default") == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append " xattr:NAME=HEX" for each shown xattr, sorted by name.  The path
 * calls (l*xattr) reach symlinks' xattrs too. */
static int add_xattrs(struct walk *w, int dirfd, const char *name, const char *rel,
		      struct buf *b)
{
	char *full = join(w->root, rel), *list = NULL, **names = NULL, *val = NULL;
	ssize_t len, vlen;
	size_t n = 0;
	int rc = -1;

	if (strcmp(rel, ".") == 0) {
		free(full);
		full = strdup(w->root);
	} else {
		/* From the directory's fd: in constant time at any depth,
		 * and deeper than a path reaches (DESIGN.md rule 18). */
		free(full);
		if (asprintf(&full, "/proc/self/fd/%d/%s", dirfd, name) < 0)
			die_oom();
	}
	len = llistxattr(full, NULL, 0);
	if (len < 0 && (errno == ENOTSUP || errno == EOPNOTSUPP)) {
		rc = 0;
		goto out;
	}
	if (len < 0)
		goto fail;
	list = malloc(len + 1);
	if (!list)
		die_oom();
	len = llistxattr(full, list, len);
	if (len < 0)
		goto fail;
	names = calloc(len + 1, sizeof(*names));
	if (!names)
		die_oom();
	for (char *p = list; p < list + len; p += strlen(p) + 1)
		if (xattr_shown(p))
			names[n++] = p;
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		vlen = lgetxattr(full, names[i], NULL, 0);
		if (vlen < 0 && errno == ENODATA)
			continue;
		if (vlen < 0)
			goto fail;
		free(val);
		val = malloc(vlen + 1);
		if (!val)
			die_oom();
		vlen = lgetxattr(full, names[i], val, vlen);
		if (vlen < 0)
			goto fail;
		buf_add(b, " xattr:", 7);
		buf_escaped(b, names[i], strlen(names[i]));
		buf_add(b, "=", 1);
		buf_hex(b, val, vlen);
	}
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "manifest: xattrs of %s: %s\n", full, strerror(errno));
out:
	free(val);
	free(names);
	free(list);
	free(full);
	return rc;
}

static void add_entry(struct walk *w, char *rel, char *line, const struct stat *st)
{
	struct entry *e;

	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 256;
		w->v = realloc(w->v, w->cap * sizeof(*w->v));
		if (!w->v)
			die_oom();
	}
	e = &w->v[w->n++];
	e->path = rel;
	e->line = line;
	e->dev = st->st_dev;
	e->ino = st->st_ino;
	e->multi = !S_ISDIR(st->st_mode) && st->st_nlink > 1;
	e->group = NULL;
}

/* Describe the entry name in dirfd (rel is its path in the tree). */
static int describe(struct walk *w, int dirfd, const char *name, const char *rel,
		    const struct stat *st)
{
	struct buf b = { 0 };
	char target[PATH_MAX + 1];
	uint64_t hash;
	ssize_t n;

	buf_printf(&b, " type=%c mode=%04o uid=%u gid=%u", type_letter(st->st_mode),
		   (unsigned)(st->st_mode & 07777), (unsigned)st->st_uid, (unsigned)st->st_gid);
	if (S_ISREG(st->st_mode))
		buf_printf(&b, " size=%lld", (long long)st->st_size);
	if (!S_ISDIR(st->st_mode) || !w->opts->no_dir_mtime)
		buf_printf(&b, " mtime=%lld.%09ld", (long long)st->st_mtim.tv_sec,
			   st->st_mtim.tv_nsec);
	if (S_ISREG(st->st_mode)) {
		if (hash_file(w, dirfd, name, rel, &hash) < 0)
			return -1;
		buf_printf(&b, " hash=%016" PRIx64, hash);
	}
	if (S_ISLNK(st->st_mode)) {
		n = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (n < 0) {
			fprintf(stderr, "manifest: readlink %s/%s: %s\n", w->root, rel,
				strerror(errno));
			return -1;
		}
		buf_add(&b, " target=", 8);
		buf_escaped(&b, target, n);
	}
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
		buf_printf(&b, " rdev=%u:%u", major(st->st_rdev), minor(st->st_rdev));
	if (add_xattrs(w, dirfd, name, rel, &b) < 0)
		return -1;
	add_entry(w, strdup(rel), b.s, st);
	return 0;
}

static bool excluded(struct walk *w, const char *dir, const char *name)
{
	if (strcmp(dir, ".") != 0)
		return false;
	for (int i = 0; i < w->opts->nexclude; i++)
		if (strcmp(w->opts->exclude[i], name) == 0)
			return true;
	return false;
}

/* Another filesystem mounted on this directory?  statx knows for certain
 * (STATX_ATTR_MOUNT_ROOT); a different st_dev is the fallback. */
static bool is_mount_root(struct walk *w, int dirfd, const char *name, const struct stat *st)
{
	struct statx stx;

	if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
	return st->st_dev != w->root_dev;
}

static int walk_dir(struct walk *w, int dirfd, const char *rel)
{
	struct dirent *d;
	struct stat st;
	DIR *dir;
	int fd, rc = 0;

	fd = dup(dirfd);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		fprintf(stderr, "manifest: opendir %s/%s: %s\n", w->root, rel, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(dir);	/* the dup shares dirfd's offset */
	while ((errno = 0, d = readdir(dir))) {
		char *child;

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (excluded(w, rel, d->d_name))
			continue;
		child = join(rel, d->d_name);
		if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
			/* overlayfs reads a directory that merges with no lower
			 * one as it is, whiteouts included: listed, yet absent. */
		} else if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			fprintf(stderr, "manifest: stat %s/%s: %s\n", w->root, child,
				strerror(errno));
			rc = -1;
		} else if (S_ISDIR(st.st_mode) && is_mount_root(w, dirfd, d->d_name, &st)) {
			/* not ours: another filesystem */
		} else if (describe(w, dirfd, d->d_name, child, &st) < 0) {
			rc = -1;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, d->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				fprintf(stderr, "manifest: open %s/%s: %s\n", w->root, child,
					strerror(errno));
				rc = -1;
			} else {
				if (walk_dir(w, sub, child) < 0)
					rc = -1;
				close(sub);
			}
		}
		free(child);
	}
	if (errno) {
		fprintf(stderr, "manifest: readdir %s/%s: %s\n", w->root, rel, strerror(errno));
		rc = -1;
	}
	closedir(dir);
	return rc;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

static int cmp_inode(const void *a, const void *b)
{
	const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Name each group of entries sharing an inode after its smallest path. */
static void group_hard_links(struct walk *w)
{
	struct entry **multi;
	size_t n = 0, i, j;

	multi = calloc(w->n + 1, sizeof(*multi));
	if (!multi)
		die_oom();
	for (i = 0; i < w->n; i++)
		if (w->v[i].multi)
			multi[n++] = &w->v[i];
	qsort(multi, n, sizeof(*multi), cmp_inode);
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && multi[j]->dev == multi[i]->dev &&
				multi[j]->ino == multi[i]->ino; j++)
			;
		if (j - i < 2)
			continue;
		for (size_t k = i; k < j; k++)
			multi[k]->group = multi[i]->path;
	}
	free(multi);
}

int manifest_write(const char *root, const struct manifest_opts *opts, FILE *out)
{
	struct walk w = { .root = root, .opts = opts };
	struct stat st;
	int fd, rc;

	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "manifest: %s: %s\n", root, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	w.root_dev = st.st_dev;
	rc = describe(&w, fd, ".", ".", &st);
	if (walk_dir(&w, fd, ".") < 0)
		rc = -1;
	close(fd);
	/* The per-entry lines are final before the paths move around. */
	group_hard_links(&w);
	for (size_t i = 0; i < w.n; i++)
		if (w.v[i].group)
			w.v[i].group = strdup(w.v[i].group);
	qsort(w.v, w.n, sizeof(*w.v), cmp_path);
	for (size_t i = 0; i < w.n; i++) {
		struct buf p = { 0 };

		buf_escaped(&p, w.v[i].path, strlen(w.v[i].path));
		fputs(p.s, out);
		fputs(w.v[i].line, out);
		if (w.v[i].group) {
			struct buf g = { 0 };

			buf_escaped(&g, w.v[i].group, strlen(w.v[i].group));
			fprintf(out, " hardlink=%s", g.s);
			free(g.s);
			free((char *)w.v[i].group);
		}
		fputc('\n', out);
		free(p.s);
		free(w.v[i].path);
		free(w.v[i].line);
	}
	free(w.v);
	return rc;
}
