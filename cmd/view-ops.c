/*
 * The FUSE requests of a snapshot view (libfuse3 low-level API).  Every
 * answer that involved SRC is validated as view.h explains; every request
 * that would change something fails with EROFS.
 *
 * Inodes are (parent, name) nodes (see "inodes" below).  Hard links of
 * the snapshot are separate FUSE inodes with the same st_ino and st_nlink,
 * which is what stat(2)-based tools (tar, rsync, cp -a, find) go by.
 */
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "view.h"
#include "fuse-uring.h"
#include "preserve.h"

#define VIEW(req) ((struct view *)fuse_req_userdata(req))

/* ---- inodes --------------------------------------------------------------- */

/*
 * A node is (parent node, name): no descriptor and no full path per node,
 * so a walk of a tree of millions of files costs a few dozen bytes per
 * inode the kernel keeps cached (sizeof(struct vnode) + the name, about
 * 48 + name bytes before malloc's rounding, plus one hash slot), and
 * RLIMIT_NOFILE never limits how many the kernel may keep.  The path is
 * rebuilt from the parents when a request needs it and resolved through
 * the layer stack then, with descriptors opened for that request only.
 *
 * A snapshot never renames anything, so (parent, name) names the same
 * object for the whole life of the view.  A node keeps its parent alive
 * (children counts one reference each), so parent and name never change
 * and may be read without node_lock while the node is referenced.
 */
struct vnode {
	struct vnode *hnext;
	struct vnode *parent;
	uint64_t nlookup;	/* the kernel's lookup references */
	uint32_t hash;
	uint32_t children;	/* nodes whose parent this is */
	/* FUSE passthrough (pt_lock): the kernel puts an inode either in
	 * passthrough mode, all its opens sharing one backing file, or in
	 * caching mode; an open of the other kind meanwhile fails with EIO. */
	uint32_t npt;		/* open handles in passthrough mode */
	uint32_t ncached;	/* open handles served by this process */
	int backing_id;		/* while npt > 0 */
	uint16_t namelen;
	char name[];
};

/* The node table grows by doubling (load factor at most 1), so a lookup
 * stays O(1) from ten nodes to tens of millions. */
static struct vnode **node_table;
static size_t node_buckets, node_count;
static pthread_mutex_t node_lock = PTHREAD_MUTEX_INITIALIZER;
/* npt, ncached and backing_id of every node; taken alone or inside
 * node_lock, never the other way round */
static pthread_mutex_t pt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vnode root_node;

static uint32_t node_hash(const struct vnode *parent, const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ULL ^ (uintptr_t)parent;

	h *= 1099511628211ULL;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 1099511628211ULL;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static struct vnode *node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &root_node : (struct vnode *)(uintptr_t)ino;
}

static fuse_ino_t node_id(struct vnode *n)
{
	return n == &root_node ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)n;
}

/* The path of n ("" for the root), rebuilt from its parents; malloc'd. */
static char *node_path(const struct vnode *n)
{
	const struct vnode *p;
	size_t len = 0, pos;
	char *buf;

	/* each component with its '/' before it, or the NUL for the last */
	for (p = n; p != &root_node; p = p->parent)
		len += p->namelen + 1;
	buf = malloc(len ? len : 1);
	if (!buf)
		return NULL;
	pos = len ? len - 1 : 0;
	buf[pos] = 0;
	for (p = n; p != &root_node; p = p->parent) {
		pos -= p->namelen;
		memcpy(buf + pos, p->name, p->namelen);
		if (pos)
			buf[--pos] = '/';
	}
	return buf;
}

/* Double the table (node_lock held); on ENOMEM the chains just grow. */
static void node_table_grow(void)
{
	size_t nb = node_buckets ? node_buckets * 2 : 1024;
	struct vnode **t = calloc(nb, sizeof(*t));

	if (!t)
		return;
	for (size_t i = 0; i < node_buckets; i++) {
		struct vnode *n, *next;

		for (n = node_table[i]; n; n = next) {
			next = n->hnext;
			n->hnext = t[n->hash & (nb - 1)];
			t[n->hash & (nb - 1)] = n;
		}
	}
	free(node_table);
	node_table = t;
	node_buckets = nb;
}

/* The node of name in parent with one more lookup reference. */
static struct vnode *node_get(struct vnode *parent, const char *name)
{
	size_t len = strlen(name);
	uint32_t h = node_hash(parent, name, len);
	struct vnode *n = NULL;

	if (len > UINT16_MAX)
		return NULL;
	pthread_mutex_lock(&node_lock);
	if (node_buckets)
		for (n = node_table[h & (node_buckets - 1)]; n; n = n->hnext)
			if (n->hash == h && n->parent == parent && n->namelen == len &&
			    memcmp(n->name, name, len) == 0)
				break;
	if (!n) {
		if (node_count >= node_buckets)
			node_table_grow();
		n = node_buckets ? calloc(1, sizeof(*n) + len + 1) : NULL;
		if (n) {
			n->parent = parent;
			n->hash = h;
			n->namelen = len;
			memcpy(n->name, name, len + 1);
			parent->children++;
			n->hnext = node_table[h & (node_buckets - 1)];
			node_table[h & (node_buckets - 1)] = n;
			node_count++;
		}
	}
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&node_lock);
	return n;
}

/*
 * req (a FORGET, or NULL where none is at hand) closes a backing file
 * still registered to a node that goes: one whose last open reply was not
 * taken (vfile_mode_end without a request).  Left open, it would keep the
 * layer file, and the space merge or drop frees, until the view goes.
 * A node goes when the kernel forgot it and it has no children left; its
 * parent may then go too.
 */
static void node_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct vnode *n = node_of(ino), **pp;

	if (n == &root_node)
		return;
	pthread_mutex_lock(&node_lock);
	n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
	while (n != &root_node && n->nlookup == 0 && n->children == 0) {
		struct vnode *parent = n->parent;

		for (pp = &node_table[n->hash & (node_buckets - 1)]; *pp; pp = &(*pp)->hnext)
			if (*pp == n) {
				*pp = n->hnext;
				break;
			}
		node_count--;
#ifdef HAVE_FUSE_PASSTHROUGH
		pthread_mutex_lock(&pt_lock);
		if (n->backing_id > 0 && n->npt == 0 && req)
			fuse_passthrough_close(req, n->backing_id);
		pthread_mutex_unlock(&pt_lock);
#else
		(void)req;
#endif
		free(n);
		parent->children--;
		n = parent;
	}
	pthread_mutex_unlock(&node_lock);
}

static char *child_path(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", name) < 0)
		return NULL;
	return p;
}

/* ---- resolution with validation ------------------------------------------ */

/*
 * Resolve path and stat it as the view shows it.  Answers that came from
 * SRC (including "no such file") are checked after the fact and redone
 * from a refreshed layer list when the live daemon covered the path
 * meanwhile.  The stack used is returned referenced in *sp (when sp).
 *
 * An answer needs checking only when it may have involved SRC: not when
 * it came from a layer, and not when the path was already covered in U_n
 * before it was resolved (view.h).  The latter matters for
 * "no such name" answers made by the layers: a name whited out in U_n, or
 * below a directory that is opaque or a non-directory there (and plain in
 * an older layer), is absent without SRC being looked at, and stays
 * covered for ever, so checking it like an SRC answer failed after every
 * refresh.  So when the check finds the path covered under an unchanged
 * generation, the path is resolved once more on the same stack, and that
 * answer is final: at most two resolutions per generation, and answers
 * from layers cost no coverage walk at all.
 */
static int resolve_valid(struct view *vw, const char *path, struct view_obj *o,
			 struct stat *st, struct view_stack **sp)
{
	for (;;) {
		struct view_stack *s;
		int rc = view_stack_get(vw, &s);

		if (rc < 0)
			return rc;
		rc = view_resolve(s, path, o);
		if ((rc == 0 && o->layer == VIEW_SRC) || rc == -ENOENT) {
			int check = view_src_answer_check(vw, s, path, &s->gen);

			if (check == -EAGAIN) {
				struct view_gen now;

				if (view_gen_read(vw, &now) < 0 || !view_gen_equal(&now, &s->gen)) {
					view_stack_put(s);
					view_refresh(vw);
					continue;
				}
				/* covered now, so for as long as s is current */
				rc = view_resolve(s, path, o);
				if (rc == 0 && o->layer == VIEW_SRC) {
					/* the resolver contradicts coverage: say so
					 * rather than retry for ever */
					fprintf(stderr, "ovsnap-viewd: %s: covered in the newest "
						"layer but resolved from SRC\n", path);
					rc = -EIO;
				}
			} else if (check < 0) {
				rc = check;
			}
		}
		if (rc == 0 && st)
			view_fill_stat(s, path, o, st);
		if (sp && rc == 0)
			*sp = s;
		else
			view_stack_put(s);
		return rc;
	}
}

/* ---- lookups by directory ------------------------------------------------- */

/*
 * A LOOKUP would walk its parent's path through every layer again (a
 * stat per component per layer, a descriptor per directory on the way)
 * to answer for one name.  Instead the last few directories looked in
 * keep their layer directories open (ovs_resolve_opendir), keyed by the
 * stack they were resolved on (a stack is replaced whenever the registry
 * changes) and their path, and a name is looked up in them alone.
 *
 * Only the first answer comes from them.  For every layer but the
 * newest, a cached directory is right for ever (frozen layers never
 * change).  U_n may gain the directory, or entries in it, after it was
 * cached, and SRC changes: an answer that could be wrong for that reason
 * came from SRC or says "no such name", and it is validated exactly as
 * resolve_valid validates one (generation, then the path's coverage in
 * U_n, which a preservation below the directory sets first).  When that
 * validation fails, the lookup is redone by resolve_valid from the root.
 */
#define DIRCACHE_SLOTS 8

struct dircache_ent {
	struct view_stack *s;	/* referenced: its address names it */
	char *path;
	struct ovs_rdir *d;
	unsigned refs;		/* users, + 1 while in the table (dircache_lock) */
	uint64_t used;
};
static struct dircache_ent *dircache[DIRCACHE_SLOTS];
static uint64_t dircache_clock;
static pthread_mutex_t dircache_lock = PTHREAD_MUTEX_INITIALIZER;

static void dircache_free(struct dircache_ent *c)
{
	if (!c)
		return;
	ovs_rdir_free(c->d);
	view_stack_put(c->s);
	free(c->path);
	free(c);
}

static void dircache_release(struct dircache_ent *c)
{
	bool last;

	pthread_mutex_lock(&dircache_lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&dircache_lock);
	if (last)
		dircache_free(c);
}

/* The cached directory at dir on s, or a new one; NULL when it cannot be
 * resolved that way (the caller walks from the root instead). */
static struct dircache_ent *dircache_get(struct view_stack *s, const char *dir)
{
	struct dircache_ent *c = NULL, *old = NULL;
	size_t slot = 0;

	pthread_mutex_lock(&dircache_lock);
	for (size_t i = 0; i < DIRCACHE_SLOTS; i++)
		if (dircache[i] && dircache[i]->s == s && strcmp(dircache[i]->path, dir) == 0) {
			c = dircache[i];
			c->refs++;
			c->used = ++dircache_clock;
			break;
		}
	pthread_mutex_unlock(&dircache_lock);
	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(dir)) || ovs_resolve_opendir(s->rs, dir, &c->d) < 0) {
		if (c)
			free(c->path);
		free(c);
		return NULL;
	}
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
	c->s = s;
	c->refs = 2;
	pthread_mutex_lock(&dircache_lock);
	/* an empty slot, else one of an older stack, else the least used */
	for (size_t i = 0; i < DIRCACHE_SLOTS; i++) {
		if (!dircache[i]) {
			slot = i;
			break;
		}
		if ((dircache[i]->s != s) != (dircache[slot]->s != s)) {
			if (dircache[i]->s != s)
				slot = i;
		} else if (dircache[i]->used < dircache[slot]->used) {
			slot = i;
		}
	}
	old = dircache[slot];
	if (old && --old->refs > 0)
		old = NULL;	/* its last user frees it */
	c->used = ++dircache_clock;
	dircache[slot] = c;
	pthread_mutex_unlock(&dircache_lock);
	dircache_free(old);
	return c;
}

/* Drop every cached directory (at unmount). */
static void dircache_clear(void)
{
	for (size_t i = 0; i < DIRCACHE_SLOTS; i++) {
		struct dircache_ent *c;

		pthread_mutex_lock(&dircache_lock);
		c = dircache[i];
		dircache[i] = NULL;
		pthread_mutex_unlock(&dircache_lock);
		if (c)
			dircache_release(c);
	}
}

/*
 * resolve_valid(dir/name), its first answer from the cached directory:
 * see above.  path is dir/name.
 */
static int lookup_valid(struct view *vw, const char *dir, const char *name, const char *path,
			struct view_obj *o, struct stat *st)
{
	struct dircache_ent *c;
	struct view_stack *s;
	int rc = view_stack_get(vw, &s);

	if (rc < 0)
		return rc;
	c = dircache_get(s, dir);
	if (!c) {
		view_stack_put(s);
		return resolve_valid(vw, path, o, st, NULL);
	}
	rc = view_resolve_child(s, c->d, name, o);
	dircache_release(c);
	if ((rc == 0 && o->layer == VIEW_SRC) || rc == -ENOENT) {
		if (view_src_answer_check(vw, s, path, &s->gen) != 0)
			rc = -EAGAIN;
	} else if (rc < 0) {
		rc = -EAGAIN;	/* errors: as the walk from the root finds them */
	}
	if (rc == -EAGAIN) {
		view_stack_put(s);
		return resolve_valid(vw, path, o, st, NULL);
	}
	if (rc == 0 && st)
		view_fill_stat(s, path, o, st);
	view_stack_put(s);
	return rc;
}

/* ---- lookups and attributes ---------------------------------------------- */

static void vop_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct view *vw = VIEW(req);
	struct fuse_entry_param e = { 0 };
	struct view_obj o;
	struct vnode *n;
	char *dir = node_path(node_of(parent));
	char *path = dir ? child_path(dir, name) : NULL;
	int rc;

	if (!path) {
		free(dir);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = lookup_valid(vw, dir, name, path, &o, &e.attr);
	free(dir);
	if (rc == -ENOENT) {
		/* a negative entry is as final as a positive one */
		e.ino = 0;
		e.entry_timeout = vw->timeout;
		fuse_reply_entry(req, &e);
		free(path);
		return;
	}
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		free(path);
		return;
	}
	free(path);
	n = node_get(node_of(parent), name);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e.ino = node_id(n);
	e.attr_timeout = vw->timeout;
	e.entry_timeout = vw->timeout;
	if (fuse_reply_entry(req, &e) != 0)
		node_forget(NULL, e.ino, 1);
}

static void vop_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(req, ino, nlookup);
	fuse_reply_none(req);
}

static void vop_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		node_forget(req, f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void vop_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct view *vw = VIEW(req);
	struct view_obj o;
	struct stat st;
	char *path = node_path(node_of(ino));
	int rc = path ? resolve_valid(vw, path, &o, &st, NULL) : -ENOMEM;

	free(path);
	if (rc < 0)
		fuse_reply_err(req, rc == -ENOENT ? ESTALE : -rc);
	else
		fuse_reply_attr(req, &st, vw->timeout);
}

static void vop_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct view *vw = VIEW(req);
	char *path = node_path(node_of(ino));
	char buf[PATH_MAX + 1];

	if (!path) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (;;) {
		struct view_stack *s;
		struct view_obj o;
		const char *lname;
		ssize_t n;
		int dfd, owned, chk, rc = resolve_valid(vw, path, &o, NULL, &s);

		if (rc < 0) {
			fuse_reply_err(req, -rc);
			free(path);
			return;
		}
		rc = view_path_at(view_obj_dirfd(s, &o), path, &dfd, &lname, &owned);
		n = rc < 0 ? (errno = -rc, -1) : readlinkat(dfd, lname, buf, sizeof(buf) - 1);
		rc = n < 0 ? errno : 0;
		view_path_done(owned);
		if (o.layer == VIEW_SRC && (chk = view_src_answer_check(vw, s, path, &s->gen))) {
			view_stack_put(s);
			if (chk != -EAGAIN) {
				fuse_reply_err(req, -chk);
				free(path);
				return;
			}
			view_refresh(vw);
			continue;
		}
		view_stack_put(s);
		if (rc) {
			fuse_reply_err(req, rc);
		} else {
			buf[n] = 0;
			fuse_reply_readlink(req, buf);
		}
		free(path);
		return;
	}
}

static void vop_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(VIEW(req)->srcfd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- files ------------------------------------------------------------------ */

struct vfile {
	pthread_mutex_t lock;
	bool passthrough;	/* reads go to a layer file in the kernel */
	int fd;
	int old_fd;		/* SRC's fd after the switch (a read may still use it) */
	bool from_src;		/* still backed by SRC: every read is validated */
	struct view_gen gen;	/* layer list under which fd was last known right */
	char *path;		/* the node's, rebuilt at open */
};

/* Open path's object as the view resolves it now; *from_src says whether
 * the fd is SRC's file.  The open itself is validated like any answer. */
static int open_current(struct view *vw, const char *path, int flags, bool *from_src,
			struct view_gen *gen)
{
	for (;;) {
		struct view_stack *s;
		struct view_obj o;
		int fd, rc = resolve_valid(vw, path, &o, NULL, &s);

		if (rc < 0)
			return rc;
		fd = view_open_obj(s, path, &o, flags);
		if (o.layer == VIEW_SRC && (rc = view_src_answer_check(vw, s, path, &s->gen))) {
			if (fd >= 0)
				close(fd);
			view_stack_put(s);
			if (rc != -EAGAIN)
				return rc;
			view_refresh(vw);
			continue;
		}
		*from_src = o.layer == VIEW_SRC;
		*gen = s->gen;
		view_stack_put(s);
		return fd;
	}
}

/*
 * FUSE passthrough (libfuse 3.17.1+, kernel 6.9+; DESIGN.md section 3):
 * a file found in a layer holds the snapshot's content, which never
 * changes, so the kernel may read it itself, without a request to this
 * process.  A file still backed by SRC must not: each of its reads is
 * validated here (it may be preserved and changed meanwhile).
 *
 * What the kernel requires (fs/fuse/iomode.c): while any open of an
 * inode is in passthrough mode, every new open of it must be too, with
 * the same backing file (else EIO); a passthrough open while the inode
 * has an open in caching mode fails with EIO as well; keep_cache with
 * passthrough is EIO.  So per node: the first open decides.  A layer
 * file opened while the node has no open gets a backing file; later
 * opens share it, also one that resolves to SRC or to another layer copy
 * now (a merge moved it): the backing file has the snapshot's content
 * all the same.  A node with opens served here keeps being served here.
 * The kernel leaves an inode's mode before it sends RELEASE, so these
 * counts never fall below the kernel's.
 */
bool view_passthrough_wanted = true;
bool view_uring_wanted = true;
bool view_passthrough;		/* the kernel granted FUSE_CAP_PASSTHROUGH */
#ifdef HAVE_FUSE_PASSTHROUGH
static bool pt_refused;		/* a backing file was refused: EPERM */
static const char *pt_off_reason;	/* set when view_passthrough_setup failed */
#endif

/*
 * The kernel opens a backing file for every passthrough open with the
 * user's flags, so its reads would touch the layer file's access time (a
 * snapshot's own metadata) where this process reads with O_NOATIME.  So
 * backing files are opened through a private, detached, read-only and
 * noatime clone of the volume folder's mount: the kernel never updates
 * atime through it.
 */
#ifdef HAVE_FUSE_PASSTHROUGH
static int pt_mntfd = -1;
#endif

void view_passthrough_setup(struct view *vw)
{
#if defined(HAVE_FUSE_PASSTHROUGH) && defined(SYS_open_tree) && defined(SYS_mount_setattr)
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOATIME,
		.attr_clr = MOUNT_ATTR__ATIME,
	};
	int fd;

	if (!view_passthrough_wanted)
		return;
	fd = (int)syscall(SYS_open_tree, vw->storefd, "",
			  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (fd < 0 || syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		pt_off_reason = "off (no read-only clone of the volume's mount)";
		view_passthrough_wanted = false;
		if (fd >= 0)
			close(fd);
		return;
	}
	pt_mntfd = fd;
#else
	(void)vw;
#endif
}

#ifdef HAVE_FUSE_PASSTHROUGH
/* fd's file, opened again through pt_mntfd: a backing file id, or 0. */
static int backing_open(fuse_req_t req, int fd)
{
	struct {
		struct file_handle h;
		unsigned char bytes[MAX_HANDLE_SZ];
	} fh;
	int mntid, bfd, id;

	fh.h.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &fh.h, &mntid, AT_EMPTY_PATH) < 0)
		return 0;
	bfd = open_by_handle_at(pt_mntfd, &fh.h, O_RDONLY | O_CLOEXEC);
	if (bfd < 0)
		return 0;
	errno = 0;
	id = fuse_passthrough_open(req, bfd);
	/* Anything but a passing shortage is for good (libfuse has logged
	 * it): do not ask again for every open. */
	if (id <= 0)
		id = errno == ENOMEM || errno == ENFILE || errno == EMFILE ? 0 : -EPERM;
	close(bfd);
	return id;
}
#endif

static void vfile_mode(fuse_req_t req, struct vnode *n, struct vfile *f,
		       struct fuse_file_info *fi)
{
	pthread_mutex_lock(&pt_lock);
#ifdef HAVE_FUSE_PASSTHROUGH
	if (view_passthrough && !pt_refused && n->backing_id == 0 && n->ncached == 0 &&
	    !f->from_src) {
		int id = backing_open(req, f->fd);

		if (id > 0) {
			n->backing_id = id;
		} else if (id == -EPERM) {
			/* no CAP_SYS_ADMIN, or another lasting refusal:
			 * libfuse said which once; the files already handed
			 * over keep their backing files */
			pt_refused = true;
			fprintf(stderr, "ovsnap-viewd: passthrough of frozen-layer files: "
				"off (the kernel refused a backing file: CAP_SYS_ADMIN is needed)\n");
		}
	}
	/* While the node has passthrough opens, every open must be one. */
	if (n->npt > 0 || (n->backing_id > 0 && n->ncached == 0)) {
		n->npt++;
		f->passthrough = true;
		fi->backing_id = n->backing_id;
		fi->keep_cache = 0;
		pthread_mutex_unlock(&pt_lock);
		return;
	}
#else
	(void)req;
	(void)fi;
#endif
	n->ncached++;
	pthread_mutex_unlock(&pt_lock);
}

/*
 * The handle is gone: released (req is the RELEASE, not answered yet), or
 * its open reply was not taken (req NULL: libfuse freed it with the
 * reply).  Without a request the backing file stays registered to the
 * node, for its next open or the next release to close.
 */
static void vfile_mode_end(fuse_req_t req, struct vnode *n, struct vfile *f)
{
	pthread_mutex_lock(&pt_lock);
	if (!f->passthrough) {
		n->ncached--;
	} else if (--n->npt == 0 && req) {
#ifdef HAVE_FUSE_PASSTHROUGH
		fuse_passthrough_close(req, n->backing_id);
#endif
		n->backing_id = 0;
	}
	pthread_mutex_unlock(&pt_lock);
}

static void vop_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct view *vw = VIEW(req);
	struct view_gen gen;
	struct vfile *f;
	bool from_src;
	char *path;
	int fd;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	path = node_path(node_of(ino));
	fd = path ? open_current(vw, path, O_RDONLY, &from_src, &gen) : -ENOMEM;
	if (fd < 0) {
		free(path);
		fuse_reply_err(req, -fd);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		close(fd);
		free(path);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&f->lock, NULL);
	f->fd = fd;
	f->old_fd = -1;
	f->from_src = from_src;
	f->gen = gen;
	f->path = path;
	fi->fh = (uintptr_t)f;
	/* the content of a snapshot never changes */
	fi->keep_cache = 1;
	vfile_mode(req, node_of(ino), f, fi);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		vfile_mode_end(NULL, node_of(ino), f);
		close(fd);
		free(f->path);
		free(f);
	}
}

/*
 * Re-resolve the handle's path under the current layer list: once the
 * live daemon has covered it (in U_n, or in a layer that was U_n when it
 * did), the handle switches to the layer copy for good.  Otherwise the
 * SRC fd is confirmed for the current generation.
 */
static int recheck_handle(struct view *vw, struct vfile *f)
{
	struct view_gen gen;
	bool from_src;
	int fd;

	fd = open_current(vw, f->path, O_RDONLY, &from_src, &gen);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&f->lock);
	if (f->from_src && !from_src) {
		/* a concurrent read may still use the old fd: keep it open
		 * until release (it is never trusted again) */
		f->old_fd = f->fd;
		f->fd = fd;
		f->from_src = false;
		fd = -1;
	}
	f->gen = gen;
	pthread_mutex_unlock(&f->lock);
	if (fd >= 0)
		close(fd);
	return 0;
}

static void vop_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct view *vw = VIEW(req);
	struct vfile *f = (struct vfile *)(uintptr_t)fi->fh;
	char *buf = NULL;

	for (;;) {
		struct view_stack *s;
		bool from_src;
		ssize_t n;
		int fd, rc, chk;

		struct view_gen fgen;

		pthread_mutex_lock(&f->lock);
		fd = f->fd;
		from_src = f->from_src;
		fgen = f->gen;
		pthread_mutex_unlock(&f->lock);
		if (!from_src) {
			/* a layer copy never changes: let libfuse splice it */
			struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

			free(buf);
			bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			bv.buf[0].fd = fd;
			bv.buf[0].pos = off;
			fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
			return;
		}
		rc = view_stack_get(vw, &s);
		if (rc < 0) {
			free(buf);
			fuse_reply_err(req, -rc);
			return;
		}
		if (!view_gen_equal(&fgen, &s->gen)) {
			/* layers were added, merged or dropped since the fd was
			 * known right: the path may be covered in a layer that
			 * is no longer the newest */
			view_stack_put(s);
			rc = recheck_handle(vw, f);
			if (rc < 0) {
				free(buf);
				fuse_reply_err(req, -rc);
				return;
			}
			continue;
		}
		if (!buf && !(buf = malloc(size ? size : 1))) {
			view_stack_put(s);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		n = pread(fd, buf, size, off);
		rc = n < 0 ? errno : 0;
		chk = view_src_answer_check(vw, s, f->path, &s->gen);
		if (chk != -EAGAIN) {
			view_stack_put(s);
			if (chk < 0)
				rc = -chk;
			if (rc)
				fuse_reply_err(req, rc);
			else
				fuse_reply_buf(req, buf, n);
			free(buf);
			return;
		}
		view_stack_put(s);
		view_refresh(vw);
		rc = recheck_handle(vw, f);
		if (rc < 0) {
			free(buf);
			fuse_reply_err(req, -rc);
			return;
		}
	}
}

static void vop_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vfile *f = (struct vfile *)(uintptr_t)fi->fh;

	vfile_mode_end(req, node_of(ino), f);
	close(f->fd);
	if (f->old_fd >= 0)
		close(f->old_fd);
	pthread_mutex_destroy(&f->lock);
	free(f->path);
	free(f);
	fuse_reply_err(req, 0);
}

/* ---- directories ------------------------------------------------------------ */

struct vdir {
	struct view_dirent *ents;
	size_t n;
	ino_t self_ino, parent_ino;
};

/*
 * The whole merged listing is taken at opendir and validated once: a
 * directory handle then shows one consistent snapshot listing however the
 * live directory changes while it is being read.
 */
static void vop_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct view *vw = VIEW(req);
	char *path = node_path(node_of(ino));
	struct vdir *d = path ? calloc(1, sizeof(*d)) : NULL;

	if (!d) {
		free(path);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (;;) {
		struct view_stack *s;
		struct view_obj o;
		struct stat st;
		bool from_src = false, touched;
		struct view_gen g;
		uint64_t sig;
		int rc;

		rc = view_stack_get(vw, &s);
		if (rc < 0) {
			free(d);
			free(path);
			fuse_reply_err(req, -rc);
			return;
		}
		sig = view_newest_signature(s, path);
		rc = view_resolve(s, path, &o);
		if (rc == 0 && !S_ISDIR(o.st.st_mode))
			rc = -ENOTDIR;
		if (rc == 0) {
			view_fill_stat(s, path, &o, &st);
			d->self_ino = st.st_ino;
			rc = view_list(s, path, &d->ents, &d->n, &from_src);
		}
		/* the listing involved SRC unless it came from layers only */
		touched = rc == -ENOENT || (rc == 0 && (o.layer == VIEW_SRC || o.merges_src));
		if (!touched || (view_gen_read(vw, &g) == 0 && view_gen_equal(&g, &s->gen) &&
				 view_newest_signature(s, path) == sig)) {
			view_stack_put(s);
			if (rc < 0) {
				free(d);
				free(path);
				fuse_reply_err(req, -rc);
				return;
			}
			break;
		}
		view_stack_put(s);
		view_list_free(d->ents, d->n);
		d->ents = NULL;
		d->n = 0;
		view_refresh(vw);
	}
	d->parent_ino = d->self_ino;
	if (*path) {
		char *parent = strdup(path), *slash;
		struct view_obj po;
		struct stat pst;

		if (parent) {
			slash = strrchr(parent, '/');
			if (slash)
				*slash = 0;
			else
				parent[0] = 0;
			if (resolve_valid(vw, parent, &po, &pst, NULL) == 0)
				d->parent_ino = pst.st_ino;
			free(parent);
		}
	}
	free(path);
	fi->fh = (uintptr_t)d;
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		view_list_free(d->ents, d->n);
		free(d);
	}
}

static void vop_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	struct vdir *d = (struct vdir *)(uintptr_t)fi->fh;
	char *buf = malloc(size), *p = buf;
	size_t left = size;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 1 = after ".", 2 = after "..", 2 + i + 1 after entry i */
	for (off_t i = off; i < (off_t)d->n + 2; i++) {
		struct stat st = { 0 };
		const char *name;
		size_t len;

		if (i == 0) {
			name = ".";
			st.st_ino = d->self_ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = d->parent_ino;
			st.st_mode = S_IFDIR;
		} else {
			name = d->ents[i - 2].name;
			st.st_ino = d->ents[i - 2].ino;
			st.st_mode = DTTOIF(d->ents[i - 2].type);
		}
		len = fuse_add_direntry(req, p, left, name, &st, i + 1);
		if (len > left)
			break;
		p += len;
		left -= len;
	}
	fuse_reply_buf(req, buf, size - left);
	free(buf);
}

/*
 * READDIRPLUS from the listing taken at opendir: every entry with the
 * attributes a LOOKUP would have answered, so a walk of the view costs no
 * LOOKUP per entry.  The attributes were validated together with the
 * listing (a preservation of any entry in SRC adds it to U_n's directory
 * at the path, which moves the signature checked at opendir), and a
 * snapshot never changes afterwards, so they may be handed out later.
 * Each entry handed to the kernel is one lookup reference on its node,
 * as the kernel links (or forgets) every entry of the reply.
 */
static void vop_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			     struct fuse_file_info *fi)
{
	struct view *vw = VIEW(req);
	struct vdir *d = (struct vdir *)(uintptr_t)fi->fh;
	struct vnode *dir = node_of(ino);
	char *buf = malloc(size), *p = buf;
	size_t left = size, ngot = 0;
	fuse_ino_t *got;

	got = calloc(d->n + 1, sizeof(*got));
	if (!buf || !got) {
		free(buf);
		free(got);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t i = off; i < (off_t)d->n + 2; i++) {
		struct fuse_entry_param e = { 0 };
		struct vnode *n = NULL;
		const char *name;
		size_t len;

		if (i < 2) {
			/* no lookup reference: the kernel skips "." and ".." */
			name = i == 0 ? "." : "..";
			e.attr.st_ino = i == 0 ? d->self_ino : d->parent_ino;
			e.attr.st_mode = S_IFDIR;
		} else {
			const struct view_dirent *de = &d->ents[i - 2];

			name = de->name;
			n = node_get(dir, de->name);
			if (!n) {
				if (p == buf) {
					free(buf);
					free(got);
					fuse_reply_err(req, ENOMEM);
					return;
				}
				break;
			}
			e.ino = node_id(n);
			e.attr = de->st;
			e.attr_timeout = vw->timeout;
			e.entry_timeout = vw->timeout;
		}
		len = fuse_add_direntry_plus(req, p, left, name, &e, i + 1);
		if (len > left) {
			if (n)
				node_forget(NULL, node_id(n), 1);
			break;
		}
		if (n)
			got[ngot++] = node_id(n);
		p += len;
		left -= len;
	}
	if (fuse_reply_buf(req, buf, size - left) != 0)
		for (size_t k = 0; k < ngot; k++)
			node_forget(NULL, got[k], 1);
	free(buf);
	free(got);
}

static void vop_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct vdir *d = (struct vdir *)(uintptr_t)fi->fh;

	view_list_free(d->ents, d->n);
	free(d);
	fuse_reply_err(req, 0);
}

/* ---- extended attributes ------------------------------------------------------ */

/*
 * What the view shows of a layer copy's xattrs: escaped user xattrs
 * (trusted.overlay.overlay.X) as trusted.overlay.X, other
 * trusted.overlay.* (ovsnap's and overlayfs' own) not at all, to anyone.
 * SRC's objects show their xattrs as they are.  Either way trusted.*
 * names are listed only to callers the filesystem would list them to
 * (caller_may_list_trusted).
 */
static bool shown_xattr(const char *stored, bool in_layer, char *shown, size_t len)
{
	if (!in_layer || strncmp(stored, OVL_XATTR_PREFIX, strlen(OVL_XATTR_PREFIX)) != 0) {
		snprintf(shown, len, "%s", stored);
		return true;
	}
	if (strncmp(stored, OVL_XATTR_ESCAPE, strlen(OVL_XATTR_ESCAPE)) != 0)
		return false;
	snprintf(shown, len, "%s%s", OVL_XATTR_PREFIX, stored + strlen(OVL_XATTR_ESCAPE));
	return true;
}

/*
 * Whether the caller of req may see trusted.* names: the filesystems
 * list them only to a caller with CAP_SYS_ADMIN in the initial user
 * namespace (xfs_xattr_put_listent, ext4_xattr_trusted_list, btrfs).  The
 * caller's thread is the request's pid; one that cannot be looked at
 * (gone, or in another pid namespace) is treated as unprivileged.
 */
static bool caller_may_list_trusted(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	unsigned long long caps = 0;
	char path[64], line[256];
	struct stat ns, own;
	bool found = false;
	FILE *f;

	if (!ctx || ctx->pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)ctx->pid);
	if (stat(path, &ns) < 0 || stat("/proc/self/ns/user", &own) < 0 ||
	    ns.st_ino != own.st_ino || ns.st_dev != own.st_dev)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)ctx->pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0)
			found = sscanf(line + 7, "%llx", &caps) == 1;
	fclose(f);
	return found && (caps & (1ULL << CAP_SYS_ADMIN));
}

static void getxattr_at(fuse_req_t req, const char *path, const char *name, size_t size)
{
	struct view *vw = VIEW(req);
	char stored[XATTR_NAME_MAX + 32];
	char *buf = NULL;

	for (;;) {
		struct view_stack *s;
		struct view_obj o;
		const char *oname;
		ssize_t n;
		int dfd, owned, rc = resolve_valid(vw, path, &o, NULL, &s);

		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		if (o.layer != VIEW_SRC &&
		    strncmp(name, OVL_XATTR_PREFIX, strlen(OVL_XATTR_PREFIX)) == 0)
			snprintf(stored, sizeof(stored), "%s%s", OVL_XATTR_ESCAPE,
				 name + strlen(OVL_XATTR_PREFIX));
		else
			snprintf(stored, sizeof(stored), "%s", name);
		free(buf);
		buf = size ? malloc(size) : NULL;
		if (size && !buf) {
			view_stack_put(s);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		rc = view_path_at(view_obj_dirfd(s, &o), path, &dfd, &oname, &owned);
		n = rc < 0 ? rc : ovs_lgetxattrat(dfd, oname, stored, buf, size);
		view_path_done(owned);
		if (o.layer == VIEW_SRC && (rc = view_src_answer_check(vw, s, path, &s->gen))) {
			view_stack_put(s);
			if (rc != -EAGAIN) {
				free(buf);
				fuse_reply_err(req, -rc);
				return;
			}
			view_refresh(vw);
			continue;
		}
		view_stack_put(s);
		if (n < 0)
			fuse_reply_err(req, n == -ENODATA || n == -EOPNOTSUPP ? ENODATA : (int)-n);
		else if (size == 0)
			fuse_reply_xattr(req, n);
		else
			fuse_reply_buf(req, buf, n);
		free(buf);
		return;
	}
}

static void vop_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *path = node_path(node_of(ino));

	if (!path) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	getxattr_at(req, path, name, size);
	free(path);
}

static void listxattr_at(fuse_req_t req, const char *path, size_t size)
{
	struct view *vw = VIEW(req);
	bool trusted_ok = caller_may_list_trusted(req);

	for (;;) {
		struct view_stack *s;
		struct view_obj o;
		char *raw = NULL, *out = NULL;
		size_t outlen = 0;
		const char *oname;
		ssize_t n;
		int dfd, owned, rc = resolve_valid(vw, path, &o, NULL, &s);

		if (rc < 0) {
			fuse_reply_err(req, -rc);
			return;
		}
		rc = view_path_at(view_obj_dirfd(s, &o), path, &dfd, &oname, &owned);
		n = rc < 0 ? rc : ovs_llistxattrat(dfd, oname, NULL, 0);
		if (n > 0) {
			raw = malloc(n + 1);
			out = malloc(n + 1);
			if (!raw || !out)
				n = -ENOMEM;
			else
				n = ovs_llistxattrat(dfd, oname, raw, n);
		}
		view_path_done(owned);
		if (o.layer == VIEW_SRC && (rc = view_src_answer_check(vw, s, path, &s->gen))) {
			free(raw);
			free(out);
			view_stack_put(s);
			if (rc != -EAGAIN) {
				fuse_reply_err(req, -rc);
				return;
			}
			view_refresh(vw);
			continue;
		}
		for (ssize_t i = 0; n > 0 && i < n; i += strlen(raw + i) + 1) {
			char shown[XATTR_NAME_MAX + 32];

			if (shown_xattr(raw + i, o.layer != VIEW_SRC, shown, sizeof(shown)) &&
			    (trusted_ok || strncmp(shown, "trusted.", 8) != 0)) {
				strcpy(out + outlen, shown);
				outlen += strlen(shown) + 1;
			}
		}
		view_stack_put(s);
		if (n < 0 && n != -ENODATA && n != -EOPNOTSUPP)
			fuse_reply_err(req, (int)-n);
		else if (size == 0)
			fuse_reply_xattr(req, outlen);
		else if (outlen > size)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, out, outlen);
		free(raw);
		free(out);
		return;
	}
}

static void vop_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *path = node_path(node_of(ino));

	if (!path) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	listxattr_at(req, path, size);
	free(path);
}

/* ---- everything that would change the snapshot ------------------------------ */

static void erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void vop_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi) { erofs(req); }
static void vop_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       dev_t rdev) { erofs(req); }
static void vop_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{ erofs(req); }
static void vop_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { erofs(req); }
static void vop_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { erofs(req); }
static void vop_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
			 const char *name) { erofs(req); }
static void vop_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			fuse_ino_t newparent, const char *newname, unsigned int flags)
{ erofs(req); }
static void vop_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		      const char *newname) { erofs(req); }
static void vop_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		       off_t off, struct fuse_file_info *fi) { erofs(req); }
static void vop_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			  const char *value, size_t size, int flags) { erofs(req); }
static void vop_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{ erofs(req); }
static void vop_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi) { erofs(req); }
static void vop_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			   off_t length, struct fuse_file_info *fi) { erofs(req); }

static void vop_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* Permission checks by the kernel (default_permissions) with the
	 * snapshot's POSIX ACLs, read through getxattr, not mode bits alone:
	 * a view grants exactly what the filesystem granted (DESIGN rule 19). */
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
	else
		fprintf(stderr, "ovsnap-viewd: warning: this kernel cannot check POSIX ACLs "
			"on FUSE mounts: the view checks mode bits only\n");
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	/* every chunk of a listing with its attributes: with the "auto"
	 * heuristic the kernel would fall back to plain READDIR after the
	 * first chunk when the walker's stats were all answered from the
	 * cache, and then LOOKUP the rest one by one */
	if (conn->capable & FUSE_CAP_READDIRPLUS) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	}
	/* the kernel must not cache writes it will never be allowed */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
#ifdef HAVE_FUSE_PASSTHROUGH
	/* Reads of files in frozen layers go to the kernel (vfile_mode). */
	if (view_passthrough_wanted && (conn->capable & FUSE_CAP_PASSTHROUGH)) {
		conn->want |= FUSE_CAP_PASSTHROUGH;
		/* the layer files are on a local filesystem, not stacked */
		conn->max_backing_stack_depth = 1;
		view_passthrough = true;
	}
	/* the clone of the store's mount serves backing files only */
	if (!view_passthrough && pt_mntfd >= 0) {
		close(pt_mntfd);
		pt_mntfd = -1;
	}
#endif
	/* One ring thread per CPU instead of the /dev/fuse loop where the
	 * kernel offers it (issue 12 item 3, bench/uring-bench.sh). */
	fprintf(stderr, "ovsnap-viewd: FUSE over io_uring: %s\n",
		fuse_uring_choose(conn, view_uring_wanted ? NULL : "off (--no-io-uring)"));
	fprintf(stderr, "ovsnap-viewd: passthrough of frozen-layer files: %s\n",
		view_passthrough ? "on" :
#ifdef HAVE_FUSE_PASSTHROUGH
		pt_off_reason ? pt_off_reason :
		!view_passthrough_wanted ? "off (--no-passthrough)" :
		"off (the kernel did not grant it: kernel 6.9+ and CAP_SYS_ADMIN needed)"
#else
		"off (built against libfuse < 3.17.1)"
#endif
		);
}

/* The session ends: the cached directories go before the stacks do. */
static void vop_destroy(void *userdata)
{
	(void)userdata;
	dircache_clear();
}

const struct fuse_lowlevel_ops view_ops = {
	.init = vop_init,
	.destroy = vop_destroy,
	.lookup = vop_lookup,
	.forget = vop_forget,
	.forget_multi = vop_forget_multi,
	.getattr = vop_getattr,
	.readlink = vop_readlink,
	.statfs = vop_statfs,
	.open = vop_open,
	.read = vop_read,
	.release = vop_release,
	.opendir = vop_opendir,
	.readdir = vop_readdir,
	.readdirplus = vop_readdirplus,
	.releasedir = vop_releasedir,
	.getxattr = vop_getxattr,
	.listxattr = vop_listxattr,
	.setattr = vop_setattr,
	.mknod = vop_mknod,
	.mkdir = vop_mkdir,
	.unlink = vop_unlink,
	.rmdir = vop_rmdir,
	.symlink = vop_symlink,
	.rename = vop_rename,
	.link = vop_link,
	.write = vop_write,
	.setxattr = vop_setxattr,
	.removexattr = vop_removexattr,
	.create = vop_create,
	.fallocate = vop_fallocate,
};
