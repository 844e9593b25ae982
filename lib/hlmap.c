/*
 * The map of multiply-linked inodes (rule 6).  Linux cannot list an
 * inode's names, so the names under SRC of every non-directory with more
 * than one link are recorded once at setup and kept current through link,
 * unlink and rename.  The key is the file handle: it carries the inode's
 * generation, so a reused inode number never inherits stale names.
 *
 * Callers name objects by their chain of names (struct ovs_relpath); the
 * map records each name '/'-joined in a heap string of any length, only
 * to compare and hand back: whoever reaches a name splits it and walks it
 * one component at a time (DESIGN.md rule 18).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preserve-int.h"
#include "walk.h"

#define HANDLE_MAX	128	/* MAX_HANDLE_SZ */

struct hl_key {
	int type;
	unsigned len;
	unsigned char bytes[HANDLE_MAX];
};

struct hl_entry {
	struct hl_entry *next;
	struct hl_key key;
	char **names;
	size_t n, cap;
};

struct ovs_hlmap {
	pthread_mutex_t lock;
	struct hl_entry **buckets;
	size_t nbuckets, count;
};

static size_t key_hash(const struct hl_key *k)
{
	size_t h = 1469598103934665603ULL ^ (size_t)k->type;
	unsigned i;

	for (i = 0; i < k->len; i++)
		h = (h ^ k->bytes[i]) * 1099511628211ULL;
	return h;
}

static bool key_eq(const struct hl_key *a, const struct hl_key *b)
{
	return a->type == b->type && a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

/* Handle of dirfd/name without following a symlink. */
static int get_key(int dirfd, const char *name, struct hl_key *k)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + HANDLE_MAX];
	} h;
	int mnt;

	h.fh.handle_bytes = HANDLE_MAX;
	if (name_to_handle_at(dirfd, name, &h.fh, &mnt, 0) < 0)
		return -errno;
	memset(k, 0, sizeof(*k));
	k->type = h.fh.handle_type;
	k->len = h.fh.handle_bytes;
	memcpy(k->bytes, h.fh.f_handle, k->len);
	return 0;
}

static int key_of_path(int srcfd, const struct ovs_relpath *path, struct hl_key *k,
		       struct stat *st)
{
	int dfd, rc = 0;

	if (!path->n)
		return -EISDIR;
	dfd = ovs_src_walk(srcfd, path, path->n - 1, O_PATH | O_DIRECTORY);
	if (dfd < 0)
		return dfd;
	if (st && fstatat(dfd, ovs_relpath_base(path), st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc == 0)
		rc = get_key(dfd, ovs_relpath_base(path), k);
	close(dfd);
	return rc;
}

static struct hl_entry *lookup(struct ovs_hlmap *m, const struct hl_key *k)
{
	struct hl_entry *e;

	for (e = m->buckets[key_hash(k) % m->nbuckets]; e; e = e->next)
		if (key_eq(&e->key, k))
			return e;
	return NULL;
}

static int grow(struct ovs_hlmap *m)
{
	size_t nb = m->nbuckets * 2, i;
	struct hl_entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (i = 0; i < m->nbuckets; i++) {
		struct hl_entry *e = m->buckets[i], *next;

		for (; e; e = next) {
			size_t h = key_hash(&e->key) % nb;

			next = e->next;
			e->next = b[h];
			b[h] = e;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = nb;
	return 0;
}

static struct hl_entry *lookup_or_add(struct ovs_hlmap *m, const struct hl_key *k)
{
	struct hl_entry *e = lookup(m, k);
	size_t h;

	if (e)
		return e;
	if (m->count >= m->nbuckets && grow(m) < 0)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->key = *k;
	h = key_hash(k) % m->nbuckets;
	e->next = m->buckets[h];
	m->buckets[h] = e;
	m->count++;
	return e;
}

static void drop_entry(struct ovs_hlmap *m, struct hl_entry *victim)
{
	struct hl_entry **pp = &m->buckets[key_hash(&victim->key) % m->nbuckets];
	size_t i;

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == victim) {
			*pp = victim->next;
			break;
		}
	}
	for (i = 0; i < victim->n; i++)
		free(victim->names[i]);
	free(victim->names);
	free(victim);
	m->count--;
}

static bool has_name(const struct hl_entry *e, const char *name)
{
	size_t i;

	for (i = 0; i < e->n; i++)
		if (!strcmp(e->names[i], name))
			return true;
	return false;
}

static int add_name(struct hl_entry *e, const char *name)
{
	if (has_name(e, name))
		return 0;
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 2;
		char **n = realloc(e->names, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		e->names = n;
		e->cap = cap;
	}
	e->names[e->n] = strdup(name);
	if (!e->names[e->n])
		return -ENOMEM;
	e->n++;
	return 0;
}

static void remove_name_at(struct hl_entry *e, size_t i)
{
	free(e->names[i]);
	e->names[i] = e->names[--e->n];
}

static int map_new(struct ovs_hlmap **out)
{
	struct ovs_hlmap *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->nbuckets = 64;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	if (!m->buckets) {
		free(m);
		return -ENOMEM;
	}
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

void ovs_hlmap_free(struct ovs_hlmap *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->nbuckets; i++) {
		struct hl_entry *e = m->buckets[i], *next;

		for (; e; e = next) {
			size_t j;

			next = e->next;
			for (j = 0; j < e->n; j++)
				free(e->names[j]);
			free(e->names);
			free(e);
		}
	}
	free(m->buckets);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* ---- the scan ------------------------------------------------------------- */

struct scan {
	struct ovs_hlmap *m;
	dev_t dev;
	/* nlink of each entry, to count links from outside SRC at the end */
	struct hl_nlink { struct hl_entry *e; nlink_t nlink; } *nl;
	size_t nnl, capnl;
};

static int note_nlink(struct scan *s, struct hl_entry *e, nlink_t nlink)
{
	size_t i;

	for (i = s->nnl; i-- > 0; )	/* links are often close together */
		if (s->nl[i].e == e)
			return 0;
	if (s->nnl == s->capnl) {
		size_t cap = s->capnl ? s->capnl * 2 : 64;
		struct hl_nlink *n = realloc(s->nl, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->nl = n;
		s->capnl = cap;
	}
	s->nl[s->nnl].e = e;
	s->nl[s->nnl++].nlink = nlink;
	return 0;
}

static int scan_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
		      struct ovs_walk_dir *child)
{
	struct scan *s = arg;
	struct stat st;
	int rc;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "stat %s: %m", path);
	if (st.st_dev != s->dev)
		return 0;	/* a mount point: not ours (rule 15) */
	if (S_ISDIR(st.st_mode)) {
		child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
				   O_NOATIME);
		if (child->fd < 0)
			return ovs_err(errno, "open %s: %m", path);
		return OVS_WALK_DESCEND;
	}
	if (st.st_nlink > 1) {
		struct hl_key k;
		struct hl_entry *e;

		rc = get_key(d->fd, name, &k);
		if (rc < 0)
			return ovs_err(-rc, "file handle of %s: %s", path, strerror(-rc));
		e = lookup_or_add(s->m, &k);
		if (!e || add_name(e, path) < 0 || note_nlink(s, e, st.st_nlink) < 0)
			return ovs_err(ENOMEM, "hard link map: out of memory");
	}
	return 0;
}

static const struct ovs_walk_ops scan_ops = { .entry = scan_entry };

static int scan_tree(struct scan *s, int dirfd)
{
	struct ovs_walk_dir root = { .aux = -1 };

	root.fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);
	if (root.fd < 0)
		return ovs_err(errno, "read .: %m");
	return ovs_walk(&root, "", &scan_ops, s);
}

int ovs_hlmap_build(int srcfd, struct ovs_hlmap **out, size_t *outside)
{
	struct scan s = { 0 };
	struct stat st;
	size_t i, n_out = 0;
	int rc;

	if (fstat(srcfd, &st) < 0)
		return ovs_err(errno, "stat source: %m");
	rc = map_new(&s.m);
	if (rc < 0)
		return ovs_err(-rc, "hard link map: out of memory");
	s.dev = st.st_dev;
	rc = scan_tree(&s, srcfd);
	if (rc < 0) {
		ovs_hlmap_free(s.m);
		free(s.nl);
		return rc;
	}
	for (i = 0; i < s.nnl; i++)
		if (s.nl[i].nlink > s.nl[i].e->n)
			n_out += s.nl[i].nlink - s.nl[i].e->n;
	free(s.nl);
	if (outside)
		*outside = n_out;
	*out = s.m;
	return 0;
}

/* ---- keeping it current ------------------------------------------------------ */

#define DESCRIBE(path, buf) ovs_relpath_describe((path), (buf), sizeof(buf))

int ovs_hlmap_link(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *existing,
		   const struct ovs_relpath *newpath)
{
	char what[OVS_RELPATH_DESCRIBE_MAX], *ex = NULL, *np = NULL;
	struct hl_key k;
	struct hl_entry *e;
	int rc = key_of_path(srcfd, newpath, &k, NULL);

	if (rc < 0)
		return ovs_err(-rc, "file handle of %s: %s", DESCRIBE(newpath, what),
			       strerror(-rc));
	ex = ovs_relpath_join(existing);
	np = ovs_relpath_join(newpath);
	rc = ex && np ? 0 : -ENOMEM;
	if (rc == 0) {
		pthread_mutex_lock(&m->lock);
		e = lookup_or_add(m, &k);
		rc = !e || add_name(e, ex) < 0 || add_name(e, np) < 0 ? -ENOMEM : 0;
		pthread_mutex_unlock(&m->lock);
	}
	free(ex);
	free(np);
	return rc < 0 ? ovs_err(ENOMEM, "hard link map: out of memory") : 0;
}

/* The name is gone, so its handle cannot be asked: find it by name. */
static void unlink_name(struct ovs_hlmap *m, const char *path, const struct stat *st_before)
{
	size_t b, i;

	for (b = 0; b < m->nbuckets; b++) {
		struct hl_entry *e, *next;

		for (e = m->buckets[b]; e; e = next) {
			next = e->next;
			for (i = 0; i < e->n; i++) {
				if (strcmp(e->names[i], path))
					continue;
				remove_name_at(e, i);
				/* One name left and no more links: a plain file. */
				if (e->n == 0 || (e->n == 1 && st_before &&
						  st_before->st_nlink <= 2))
					drop_entry(m, e);
				return;
			}
		}
	}
}

int ovs_hlmap_unlink(struct ovs_hlmap *m, const struct ovs_relpath *path,
		     const struct stat *st_before)
{
	char *p;

	if (st_before && (S_ISDIR(st_before->st_mode) || st_before->st_nlink <= 1))
		return 0;
	p = ovs_relpath_join(path);
	if (!p)
		return ovs_err(ENOMEM, "hard link map: out of memory");
	pthread_mutex_lock(&m->lock);
	unlink_name(m, p, st_before);
	pthread_mutex_unlock(&m->lock);
	free(p);
	return 0;
}

static bool under(const char *name, const char *dir, size_t dlen)
{
	return !strncmp(name, dir, dlen) && (name[dlen] == '\0' || name[dlen] == '/');
}

/* Caller holds m->lock. */
static int rename_locked(struct ovs_hlmap *m, const char *from, const char *to)
{
	size_t flen = strlen(from), tlen = strlen(to), b, i;

	/* Renaming one name of an inode over another name of it changes
	 * nothing (POSIX). */
	for (b = 0; b < m->nbuckets; b++) {
		struct hl_entry *e;

		for (e = m->buckets[b]; e; e = e->next)
			if (has_name(e, from) && has_name(e, to))
				return 0;
	}
	/* The replaced target (a file, or an empty directory) loses its name. */
	for (b = 0; b < m->nbuckets; b++) {
		struct hl_entry *e, *next;

		for (e = m->buckets[b]; e; e = next) {
			next = e->next;
			for (i = 0; i < e->n; )
				if (under(e->names[i], to, tlen))
					remove_name_at(e, i);
				else
					i++;
			if (e->n == 0)
				drop_entry(m, e);
		}
	}
	for (b = 0; b < m->nbuckets; b++) {
		struct hl_entry *e;

		for (e = m->buckets[b]; e; e = e->next) {
			for (i = 0; i < e->n; i++) {
				char *n;

				if (!under(e->names[i], from, flen))
					continue;
				n = malloc(tlen + strlen(e->names[i] + flen) + 1);
				if (!n)
					return ovs_err(ENOMEM, "hard link map: out of memory");
				strcpy(n, to);
				strcat(n, e->names[i] + flen);
				free(e->names[i]);
				e->names[i] = n;
			}
		}
	}
	return 0;
}

int ovs_hlmap_rename(struct ovs_hlmap *m, const struct ovs_relpath *from,
		     const struct ovs_relpath *to)
{
	char *f = ovs_relpath_join(from), *t = ovs_relpath_join(to);
	int rc;

	if (!f || !t) {
		rc = ovs_err(ENOMEM, "hard link map: out of memory");
	} else {
		pthread_mutex_lock(&m->lock);
		rc = rename_locked(m, f, t);
		pthread_mutex_unlock(&m->lock);
	}
	free(f);
	free(t);
	return rc;
}

int ovs_hlmap_exchange(struct ovs_hlmap *m, const struct ovs_relpath *a,
		       const struct ovs_relpath *b)
{
	char *x = ovs_relpath_join(a), *y = ovs_relpath_join(b);
	int rc;

	if (!x || !y) {
		rc = ovs_err(ENOMEM, "hard link map: out of memory");
	} else {
		/* "/" starts no recorded name: a free name to swap through. */
		pthread_mutex_lock(&m->lock);
		rc = rename_locked(m, x, "/");
		if (rc == 0)
			rc = rename_locked(m, y, x);
		if (rc == 0)
			rc = rename_locked(m, "/", y);
		pthread_mutex_unlock(&m->lock);
	}
	free(x);
	free(y);
	return rc;
}

int ovs_hlmap_names(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *rp,
		    char ***names, size_t *n)
{
	char what[OVS_RELPATH_DESCRIBE_MAX], **out = NULL, *path;
	struct hl_entry *e = NULL;
	struct hl_key k;
	struct stat st;
	size_t i, cnt = 1;
	int rc;

	rc = key_of_path(srcfd, rp, &k, &st);
	if (rc < 0)
		return ovs_err(-rc, "file handle of %s: %s", DESCRIBE(rp, what), strerror(-rc));
	path = ovs_relpath_join(rp);
	if (!path)
		return ovs_err(ENOMEM, "hard link map: out of memory");
	pthread_mutex_lock(&m->lock);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
		e = lookup(m, &k);
	if (e)
		cnt += e->n;
	out = calloc(cnt, sizeof(*out));
	if (!out)
		goto nomem;
	/* path first, then the others */
	out[0] = path;
	path = NULL;
	cnt = 1;
	for (i = 0; e && i < e->n; i++) {
		if (!strcmp(e->names[i], out[0]))
			continue;
		out[cnt] = strdup(e->names[i]);
		if (!out[cnt])
			goto nomem;
		cnt++;
	}
	pthread_mutex_unlock(&m->lock);
	*names = out;
	*n = cnt;
	return 0;
nomem:
	pthread_mutex_unlock(&m->lock);
	free(path);
	ovs_hlmap_names_free(out, cnt);
	return ovs_err(ENOMEM, "hard link map: out of memory");
}

void ovs_hlmap_names_free(char **names, size_t n)
{
	size_t i;

	if (!names)
		return;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
