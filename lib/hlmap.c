/*
 * The map of multiply-linked inodes (rule 6).  Linux cannot list an
 * inode's names, so the names under SRC of every non-directory with more
 * than one link are recorded once at setup and kept current through link,
 * unlink and rename.  The key is the file handle: it carries the inode's
 * generation, so a reused inode number never inherits stale names.
 *
 * A name is kept as a chain too, never as a path (DESIGN.md rule 18): it
 * hangs from a node of a small tree of the directories that lead to
 * linked files (struct hl_dir, one per directory, shared by every name
 * below it), so renaming a directory relabels one node and a name's chain
 * is read by walking up its parents.  A node's children are found through
 * one hash table of the whole tree keyed by (parent node, name), so a
 * directory with thousands of subdirectories (pnpm's node_modules/.pnpm, a
 * cp -al backup) costs no more to search than a small one.  Likewise an
 * index of every recorded name, keyed by (directory node, name), leads
 * unlink and rename straight to the entry that has the name, instead of
 * searching every entry of the map.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
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

/* A directory on the way from SRC's root to recorded names. */
struct hl_dir {
	struct hl_dir *parent;	/* NULL: SRC's root */
	char *name;		/* its name in parent (NULL for the root) */
	struct hl_dir *hnext;	/* chain in the map's table of directories */
	size_t refs;		/* names and directories hanging from it */
};

struct hl_name {
	struct hl_dir *dir;
	const char *name;	/* the name kept by its hl_ref */
};

/* A name's place in the map's index of names, which also keeps the name
 * (one allocation per name, not two: the map holds every name of every
 * linked inode of SRC).  Names that share a bucket are told apart by the
 * ref's name, then by the directory of the entry's name that points to
 * it: a ref is its name's, and only its name's. */
struct hl_ref {
	struct hl_ref *next;
	struct hl_entry *e;
	char name[];
};

/* Allocated with only the len bytes of its handle (see lookup_or_add()): a
 * handle is 8 to 40 bytes on the filesystems ovsnap serves, not the 128
 * room of HANDLE_MAX, and the map holds one entry per linked inode of SRC
 * (issue 13 item 3). */
struct hl_entry {
	struct hl_entry *next;
	struct hl_name *names;
	uint32_t n, cap;	/* an inode has at most 2^32 - 1 links */
	struct hl_key key;	/* last: cut after its len bytes */
};

struct ovs_hlmap {
	pthread_mutex_t lock;
	struct hl_entry **buckets;
	size_t nbuckets, count;
	struct hl_dir root;
	/* every directory but the root, keyed by (parent, name) */
	struct hl_dir **dirs;
	size_t ndirbuckets, ndirs;
	/* every name, keyed by (directory node, name): its entry */
	struct hl_ref **refs;
	size_t nrefbuckets, nrefs;
	/* an update could not be recorded: the names are no longer known */
	bool invalid;
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

static struct hl_entry *lookup_or_add(struct ovs_hlmap *m, const struct hl_key *k,
				      bool *added)
{
	struct hl_entry *e = lookup(m, k);
	size_t h;

	if (added)
		*added = !e;
	if (e)
		return e;
	if (m->count >= m->nbuckets && grow(m) < 0)
		return NULL;
	e = calloc(1, offsetof(struct hl_entry, key.bytes) + k->len);
	if (!e)
		return NULL;
	memcpy(&e->key, k, offsetof(struct hl_key, bytes) + k->len);
	h = key_hash(k) % m->nbuckets;
	e->next = m->buckets[h];
	m->buckets[h] = e;
	m->count++;
	return e;
}

/* ---- the directory tree --------------------------------------------------- */

static size_t dir_hash(const struct hl_dir *parent, const char *name)
{
	size_t h = 1469598103934665603ULL ^ (size_t)(uintptr_t)parent;
	const unsigned char *p = (const unsigned char *)name;

	for (; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h ^ (h >> 29);
}

static struct hl_dir **dir_slot(struct ovs_hlmap *m, const struct hl_dir *parent,
				const char *name)
{
	return &m->dirs[dir_hash(parent, name) % m->ndirbuckets];
}

/* Twice the buckets; on no memory the chains just grow longer. */
static void dirs_grow(struct ovs_hlmap *m)
{
	size_t nb = m->ndirbuckets * 2, i;
	struct hl_dir **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (i = 0; i < m->ndirbuckets; i++) {
		struct hl_dir *d = m->dirs[i], *next;

		for (; d; d = next) {
			size_t h = dir_hash(d->parent, d->name) % nb;

			next = d->hnext;
			d->hnext = b[h];
			b[h] = d;
		}
	}
	free(m->dirs);
	m->dirs = b;
	m->ndirbuckets = nb;
}

/* Put d (parent and name set) in the table. */
static void dir_hook(struct ovs_hlmap *m, struct hl_dir *d)
{
	struct hl_dir **slot;

	if (m->ndirs >= m->ndirbuckets)
		dirs_grow(m);
	slot = dir_slot(m, d->parent, d->name);
	d->hnext = *slot;
	*slot = d;
	m->ndirs++;
}

static void dir_unhook(struct ovs_hlmap *m, struct hl_dir *d)
{
	struct hl_dir **pp = dir_slot(m, d->parent, d->name);

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == d) {
			*pp = d->hnext;
			m->ndirs--;
			break;
		}
	}
}

/* One reference less on d: a directory nothing hangs from goes, and its
 * parent loses one in turn.  The root stays. */
static void dir_put(struct ovs_hlmap *m, struct hl_dir *d)
{
	while (d && d->parent && --d->refs == 0) {
		struct hl_dir *parent = d->parent;

		dir_unhook(m, d);
		free(d->name);
		free(d);
		d = parent;
	}
}

static struct hl_dir *dir_child(struct ovs_hlmap *m, const struct hl_dir *d, const char *name)
{
	struct hl_dir *k;

	for (k = *dir_slot(m, d, name); k; k = k->hnext)
		if (k->parent == d && !strcmp(k->name, name))
			return k;
	return NULL;
}

/* The node of the directory names[0..depth): with create, made as needed
 * and with a reference for the caller; NULL when absent (or no memory). */
static struct hl_dir *dir_get(struct ovs_hlmap *m, const char *const *names, size_t depth,
			      bool create)
{
	struct hl_dir *d = &m->root, *k;
	size_t i;

	for (i = 0; i < depth; i++, d = k) {
		k = dir_child(m, d, names[i]);
		if (k)
			continue;
		if (!create)
			return NULL;
		k = calloc(1, sizeof(*k));
		if (!k || !(k->name = strdup(names[i]))) {
			free(k);
			goto fail;
		}
		k->parent = d;
		dir_hook(m, k);
		d->refs++;	/* k hangs from d */
	}
	if (create)
		d->refs++;
	return d;
fail:
	/* d, if made on the way, holds nothing yet. */
	if (d->parent && d->refs == 0) {
		d->refs = 1;
		dir_put(m, d);
	}
	return NULL;
}

/* Is d, or a directory above it, anc? */
static bool dir_within(const struct hl_dir *d, const struct hl_dir *anc)
{
	for (; d; d = d->parent)
		if (d == anc)
			return true;
	return false;
}

/* Where the map would record path. */
struct hl_where {
	struct hl_dir *dir;	/* path's directory; NULL: nothing recorded there */
	const char *base;	/* path's last name */
	struct hl_dir *self;	/* path's own node: names are recorded below it */
};

static struct hl_where where_of(struct ovs_hlmap *m, const struct ovs_relpath *path)
{
	struct hl_where w = { 0 };

	if (!path->n)
		return w;
	w.dir = dir_get(m, path->names, path->n - 1, false);
	w.base = path->names[path->n - 1];
	if (w.dir)
		w.self = dir_child(m, w.dir, w.base);
	return w;
}

static bool name_is(const struct hl_name *nm, const struct hl_where *w)
{
	return w->dir && nm->dir == w->dir && !strcmp(nm->name, w->base);
}

/* nm is path, or below it. */
static bool name_within(const struct hl_name *nm, const struct hl_where *w)
{
	return name_is(nm, w) || (w->self && dir_within(nm->dir, w->self));
}

/* ---- the index of names ------------------------------------------------------ */

static struct hl_ref **ref_slot(struct ovs_hlmap *m, const struct hl_dir *dir, const char *name)
{
	return &m->refs[dir_hash(dir, name) % m->nrefbuckets];
}

/* Twice the buckets; on no memory the chains just grow longer. */
static void refs_grow(struct ovs_hlmap *m)
{
	size_t nb = m->nrefbuckets * 2, b, i;
	struct hl_ref **t = calloc(nb, sizeof(*t));

	if (!t)
		return;
	/* Rehashed from the entries, whose names have their directories:
	 * each name's own ref (the one that keeps it) moves to the name's
	 * new bucket.  Linear in the names, however many an inode has. */
	for (b = 0; b < m->nbuckets; b++) {
		struct hl_entry *e;

		for (e = m->buckets[b]; e; e = e->next) {
			for (i = 0; i < e->n; i++) {
				const struct hl_name *nm = &e->names[i];
				struct hl_ref *r, **pp;
				size_t h = dir_hash(nm->dir, nm->name) % nb;

				for (pp = ref_slot(m, nm->dir, nm->name); (r = *pp); pp = &r->next)
					if (r->name == nm->name)
						break;
				if (!r)
					continue;
				*pp = r->next;
				r->next = t[h];
				t[h] = r;
			}
		}
	}
	free(m->refs);
	m->refs = t;
	m->nrefbuckets = nb;
}

/* Index e's name in dir: the copy of name the ref keeps, or NULL (no
 * memory). */
static const char *ref_add(struct ovs_hlmap *m, struct hl_entry *e, const struct hl_dir *dir,
			   const char *name)
{
	size_t len = strlen(name) + 1;
	struct hl_ref *r = malloc(sizeof(*r) + len), **slot;

	if (!r)
		return NULL;
	memcpy(r->name, name, len);
	if (m->nrefs >= m->nrefbuckets)
		refs_grow(m);
	slot = ref_slot(m, dir, name);
	r->e = e;
	r->next = *slot;
	*slot = r;
	m->nrefs++;
	return r->name;
}

/* Drop the ref that keeps name (a copy ref_add() returned) of dir, and so
 * the name. */
static void ref_del(struct ovs_hlmap *m, const struct hl_dir *dir, const char *name)
{
	struct hl_ref **pp, *r;

	for (pp = ref_slot(m, dir, name); (r = *pp); pp = &r->next) {
		if (r->name == name) {
			*pp = r->next;
			free(r);
			m->nrefs--;
			return;
		}
	}
}

/* The entry that has the name at w, and the name's index in it. */
static struct hl_entry *find_name(struct ovs_hlmap *m, const struct hl_where *w, size_t *at)
{
	struct hl_ref *r;
	size_t i;

	if (!w->dir)
		return NULL;
	for (r = *ref_slot(m, w->dir, w->base); r; r = r->next) {
		if (strcmp(r->name, w->base))
			continue;
		/* The ref's own name: the same name in another directory
		 * may share the bucket. */
		for (i = 0; i < r->e->n; i++) {
			if (r->e->names[i].name == r->name) {
				if (r->e->names[i].dir != w->dir)
					break;
				*at = i;
				return r->e;
			}
		}
	}
	return NULL;
}

/* ---- entries ------------------------------------------------------------------ */

static void remove_name_at(struct ovs_hlmap *m, struct hl_entry *e, size_t i)
{
	ref_del(m, e->names[i].dir, e->names[i].name);
	dir_put(m, e->names[i].dir);
	e->names[i] = e->names[--e->n];
}

static void drop_entry(struct ovs_hlmap *m, struct hl_entry *victim)
{
	struct hl_entry **pp = &m->buckets[key_hash(&victim->key) % m->nbuckets];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == victim) {
			*pp = victim->next;
			break;
		}
	}
	while (victim->n)
		remove_name_at(m, victim, victim->n - 1);
	free(victim->names);
	free(victim);
	m->count--;
}

/* Through the index, not e's names: a file with tens of thousands of
 * links would make the scan that records them quadratic. */
static bool has_name(struct ovs_hlmap *m, const struct hl_entry *e, const struct hl_where *w)
{
	size_t i;

	return find_name(m, w, &i) == e;
}

static int add_name(struct ovs_hlmap *m, struct hl_entry *e, const struct ovs_relpath *path)
{
	struct hl_where w = { 0 };
	const char *copy;

	if (!path->n)
		return -EINVAL;
	/* One walk down the chain: the directory's node, held for the name. */
	w.dir = dir_get(m, path->names, path->n - 1, true);
	if (!w.dir)
		return -ENOMEM;
	w.base = path->names[path->n - 1];
	if (has_name(m, e, &w)) {
		dir_put(m, w.dir);
		return 0;
	}
	if (e->n == e->cap) {
		uint32_t cap = e->cap ? e->cap * 2 : 2;
		struct hl_name *n;

		if (cap <= e->cap)
			cap = UINT32_MAX;
		n = e->n == UINT32_MAX ? NULL : realloc(e->names, cap * sizeof(*n));
		if (!n)
			goto nomem;
		e->names = n;
		e->cap = cap;
	}
	copy = ref_add(m, e, w.dir, w.base);
	if (!copy)
		goto nomem;
	e->names[e->n].dir = w.dir;
	e->names[e->n].name = copy;
	e->n++;
	return 0;
nomem:
	dir_put(m, w.dir);
	return -ENOMEM;
}

/* A copy of the n names of v in one block (the vector, then the names),
 * which the caller keeps after the map's lock is dropped. */
static int chain_copy(const char *const *v, size_t n, struct ovs_relpath *out)
{
	size_t bytes = 0, i;
	const char **c;
	char *p;

	for (i = 0; i < n; i++)
		bytes += strlen(v[i]) + 1;
	c = malloc(n * sizeof(*c) + bytes + 1);
	if (!c)
		return -ENOMEM;
	p = (char *)(c + n);
	for (i = 0; i < n; i++) {
		c[i] = strcpy(p, v[i]);
		p += strlen(p) + 1;
	}
	out->names = c;
	out->n = n;
	out->srcdirfd = -1;
	out->st = NULL;
	return 0;
}

/* The chain of names of nm, read up its directories. */
static int chain_of(const struct hl_name *nm, struct ovs_relpath *out)
{
	const struct hl_dir *d;
	const char **v;
	size_t n = 1, i;
	int rc;

	for (d = nm->dir; d->parent; d = d->parent)
		n++;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	i = n;
	v[--i] = nm->name;
	for (d = nm->dir; d->parent; d = d->parent)
		v[--i] = d->name;
	rc = chain_copy(v, n, out);
	free(v);
	return rc;
}

static int map_new(struct ovs_hlmap **out)
{
	struct ovs_hlmap *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->nbuckets = 64;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	m->ndirbuckets = 64;
	m->dirs = calloc(m->ndirbuckets, sizeof(*m->dirs));
	m->nrefbuckets = 64;
	m->refs = calloc(m->nrefbuckets, sizeof(*m->refs));
	if (!m->buckets || !m->dirs || !m->refs) {
		free(m->buckets);
		free(m->dirs);
		free(m->refs);
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
	for (i = 0; i < m->nbuckets; i++)
		while (m->buckets[i])
			drop_entry(m, m->buckets[i]);
	free(m->buckets);
	free(m->dirs);	/* empty now: every node went with its last name */
	free(m->refs);	/* likewise every ref */
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

/* Called once per entry, when the scan meets its first name. */
static int note_nlink(struct scan *s, struct hl_entry *e, nlink_t nlink)
{
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
		struct ovs_relpath rp;
		struct hl_key k;
		struct hl_entry *e;
		bool added;
		void *mem;

		rc = get_key(d->fd, name, &k);
		if (rc < 0)
			return ovs_err(-rc, "file handle of %s: %s", path, strerror(-rc));
		rc = ovs_relpath_split(path, &rp, &mem);
		if (rc < 0)
			return rc;
		e = lookup_or_add(s->m, &k, &added);
		rc = !e || add_name(s->m, e, &rp) < 0 ||
		     (added && note_nlink(s, e, st.st_nlink) < 0);
		free(mem);
		if (rc)
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

/* An update failed part-way: from now on the map cannot be trusted to
 * know every name of a linked file (rule 6), so it says so instead of
 * answering with fewer names. */
static void invalidate(struct ovs_hlmap *m)
{
	pthread_mutex_lock(&m->lock);
	m->invalid = true;
	pthread_mutex_unlock(&m->lock);
}

#define DESCRIBE(path, buf) ovs_relpath_describe((path), (buf), sizeof(buf))

int ovs_hlmap_link(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *existing,
		   const struct ovs_relpath *newpath)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct hl_key k;
	struct hl_entry *e;
	int rc = key_of_path(srcfd, newpath, &k, NULL);

	if (rc < 0) {
		invalidate(m);
		return ovs_err(-rc, "file handle of %s: %s", DESCRIBE(newpath, what),
			       strerror(-rc));
	}
	pthread_mutex_lock(&m->lock);
	e = lookup_or_add(m, &k, NULL);
	rc = !e || add_name(m, e, existing) < 0 || add_name(m, e, newpath) < 0 ? -ENOMEM : 0;
	if (rc < 0)
		m->invalid = true;
	pthread_mutex_unlock(&m->lock);
	return rc < 0 ? ovs_err(ENOMEM, "hard link map: out of memory") : 0;
}

/* The name is gone, so its handle cannot be asked: find it by name. */
int ovs_hlmap_unlink(struct ovs_hlmap *m, const struct ovs_relpath *path,
		     const struct stat *st_before)
{
	struct hl_entry *e;
	struct hl_where w;
	size_t i;

	if (st_before && (S_ISDIR(st_before->st_mode) || st_before->st_nlink <= 1))
		return 0;
	pthread_mutex_lock(&m->lock);
	w = where_of(m, path);
	e = find_name(m, &w, &i);
	if (e) {
		remove_name_at(m, e, i);
		/* One name left and no more links: a plain file. */
		if (e->n == 0 || (e->n == 1 && st_before && st_before->st_nlink <= 2))
			drop_entry(m, e);
	}
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* Caller holds m->lock. */
static int rename_locked(struct ovs_hlmap *m, const struct ovs_relpath *from,
			 const struct ovs_relpath *to)
{
	struct hl_where wf = where_of(m, from), wt = where_of(m, to);
	struct hl_entry *e;
	const char *base;
	struct hl_dir *tdir;
	size_t b, i;
	int rc = 0;

	if (!from->n || !to->n)
		return 0;
	/* Renaming one name of an inode over another name of it changes
	 * nothing (POSIX). */
	e = find_name(m, &wf, &i);
	if (e && has_name(m, e, &wt))
		return 0;
	/* The replaced target (a file, or an empty directory) loses its name. */
	while ((e = find_name(m, &wt, &i))) {
		remove_name_at(m, e, i);
		if (e->n == 0)
			drop_entry(m, e);
		wt = where_of(m, to);	/* its directory may have gone */
	}
	/* Names below it: none for an empty directory, so the whole map is
	 * searched only in a case rename(2) does not make. */
	for (b = 0; wt.self && b < m->nbuckets; b++) {
		struct hl_entry *next;

		for (e = m->buckets[b]; e; e = next) {
			next = e->next;
			for (i = 0; i < e->n; )
				if (name_within(&e->names[i], &wt))
					remove_name_at(m, e, i);
				else
					i++;
			if (e->n == 0)
				drop_entry(m, e);
		}
	}
	/* That may have freed directory nodes: look again. */
	wf = where_of(m, from);
	if (!wf.dir)
		return 0;	/* nothing recorded at from or below it */
	base = to->names[to->n - 1];
	/* to's directory, held while names move into it. */
	tdir = dir_get(m, to->names, to->n - 1, true);
	if (!tdir)
		return ovs_err(ENOMEM, "hard link map: out of memory");
	/* A linked file renamed: its name moves. */
	while ((e = find_name(m, &wf, &i))) {
		struct hl_name *nm = &e->names[i];
		const char *copy = ref_add(m, e, tdir, base);

		if (!copy) {
			rc = ovs_err(ENOMEM, "hard link map: out of memory");
			goto out;
		}
		ref_del(m, nm->dir, nm->name);
		nm->name = copy;
		tdir->refs++;
		dir_put(m, nm->dir);
		nm->dir = tdir;
		wf = where_of(m, from);	/* its directory may have gone */
	}
	/* A directory renamed: its node moves, and every name below it
	 * with it. */
	if (wf.self) {
		struct hl_dir *d = wf.self, *old = d->parent;
		char *copy = strdup(base);

		if (!copy) {
			rc = ovs_err(ENOMEM, "hard link map: out of memory");
			goto out;
		}
		dir_unhook(m, d);
		free(d->name);
		d->name = copy;
		d->parent = tdir;
		dir_hook(m, d);
		tdir->refs++;
		dir_put(m, old);
	}
out:
	dir_put(m, tdir);
	return rc;
}

int ovs_hlmap_rename(struct ovs_hlmap *m, const struct ovs_relpath *from,
		     const struct ovs_relpath *to)
{
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = rename_locked(m, from, to);
	if (rc < 0)
		m->invalid = true;
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ovs_hlmap_exchange(struct ovs_hlmap *m, const struct ovs_relpath *a,
		       const struct ovs_relpath *b)
{
	/* "/" is no name in SRC: a free place to swap through. */
	static const char *const slash[] = { "/" };
	const struct ovs_relpath tmp = { slash, 1, -1, NULL };
	int rc;

	pthread_mutex_lock(&m->lock);
	rc = rename_locked(m, a, &tmp);
	if (rc == 0)
		rc = rename_locked(m, b, a);
	if (rc == 0)
		rc = rename_locked(m, &tmp, b);
	if (rc < 0)
		m->invalid = true;	/* names may be left parked under "/" */
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ovs_hlmap_names_max(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *path,
			size_t max, struct ovs_relpath **names, size_t *n)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct ovs_relpath *out = NULL;
	struct hl_entry *e = NULL;
	struct hl_where w;
	struct hl_key k;
	struct stat st;
	size_t i, cnt = 1;
	int rc;

	if (!max)
		return ovs_err(EINVAL, "names of %s: none asked for", DESCRIBE(path, what));
	rc = key_of_path(srcfd, path, &k, &st);
	if (rc < 0)
		return ovs_err(-rc, "file handle of %s: %s", DESCRIBE(path, what), strerror(-rc));
	pthread_mutex_lock(&m->lock);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
		if (m->invalid) {
			pthread_mutex_unlock(&m->lock);
			return ovs_err(EIO, "names of %s: the hard link map lost track of "
				       "links after an earlier failure", DESCRIBE(path, what));
		}
		e = lookup(m, &k);
	}
	if (e)
		cnt += e->n;
	if (cnt > max)
		cnt = max;
	out = calloc(cnt, sizeof(*out));
	cnt = 0;
	/* path first, then the others */
	if (!out || chain_copy(path->names, path->n, &out[0]) < 0)
		goto nomem;
	out[0].srcdirfd = path->srcdirfd;
	cnt = 1;
	w = where_of(m, path);
	for (i = 0; e && i < e->n && cnt < max; i++) {
		if (name_is(&e->names[i], &w))
			continue;
		if (chain_of(&e->names[i], &out[cnt]) < 0)
			goto nomem;
		cnt++;
	}
	pthread_mutex_unlock(&m->lock);
	*names = out;
	*n = cnt;
	return 0;
nomem:
	pthread_mutex_unlock(&m->lock);
	ovs_hlmap_names_free(out, cnt);
	return ovs_err(ENOMEM, "hard link map: out of memory");
}

int ovs_hlmap_names(struct ovs_hlmap *m, int srcfd, const struct ovs_relpath *path,
		    struct ovs_relpath **names, size_t *n)
{
	return ovs_hlmap_names_max(m, srcfd, path, SIZE_MAX, names, n);
}

void ovs_hlmap_names_free(struct ovs_relpath *names, size_t n)
{
	size_t i;

	if (!names)
		return;
	for (i = 0; i < n; i++)
		free((void *)names[i].names);
	free(names);
}
