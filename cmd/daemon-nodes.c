/*
 * The daemon's inode table and the caller's identity.
 *
 * Like libfuse's passthrough_hp, a node is one real object keyed by
 * (st_dev, st_ino); the node's address is its FUSE inode number.  Unlike
 * it, a node keeps the object's file handle, not an fd: its O_PATH fd
 * lives in a bounded cache (daemon-fdcache.c), so a tree far larger than
 * the open file limit can be walked.  Without the fd holding the inode,
 * its number can be reused once the object is deleted: a lookup that
 * finds the number with another handle drops the old node from the table
 * and makes a new one.  Unlike it, a node also remembers one current name
 * (parent node + name), because the preservation engine names an object by
 * its chain of names from SRC's root (struct ovs_relpath): node_relpath()
 * lends the engine pointers to the names along the parent links, never a
 * path joined in one buffer (DESIGN.md rule 18), and the parent node's fd
 * (referenced until node_relpath_free) so that the engine reaches the
 * object's directory without walking.
 * Only the daemon changes the live tree, so keeping the names current
 * through lookup, create, rename, link and unlink is enough.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon.h"

#define NODES_MIN_BUCKETS 1024

/* What an allocation costs: its usable size and glibc's chunk header. */
static size_t alloc_bytes(void *p)
{
	return p ? malloc_usable_size(p) + sizeof(size_t) : 0;
}

static size_t bucket_of(dev_t dev, ino_t ino, size_t nbuckets)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	return (h ^ (h >> 29)) & (nbuckets - 1);
}

static void hash_insert(struct dnode *n)
{
	size_t b = bucket_of(n->dev, n->ino, D.nbuckets);

	n->hnext = D.buckets[b];
	D.buckets[b] = n;
}

static void hash_grow(void)
{
	size_t old = D.nbuckets, nb = old * 2;
	struct dnode **ob = D.buckets, **nbk = calloc(nb, sizeof(*nbk));

	if (!nbk)
		return;		/* longer chains, still correct */
	D.buckets = nbk;
	D.nbuckets = nb;
	for (size_t i = 0; i < old; i++) {
		struct dnode *n = ob[i], *next;

		for (; n; n = next) {
			next = n->hnext;
			hash_insert(n);
		}
	}
	free(ob);
}

/* A new node into the table (nodes_lock held).  Chains stay one node long
 * on average at most: a walk looks every new number up twice
 * (node_knows_ino, node_get), and each node on a chain is a cache miss. */
static void table_add(struct dnode *n)
{
	hash_insert(n);
	if (++D.nnodes > D.nbuckets)
		hash_grow();
}

static void hash_remove(struct dnode *n)
{
	struct dnode **pp = &D.buckets[bucket_of(n->dev, n->ino, D.nbuckets)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			return;
		}
	}
}

static struct dnode *hash_find(dev_t dev, ino_t ino)
{
	struct dnode *n = D.buckets[bucket_of(dev, ino, D.nbuckets)];

	for (; n; n = n->hnext)
		if (n->ino == ino && n->dev == dev)
			return n;
	return NULL;
}

/* A file handle as name_to_handle_at makes it. */
struct handle_buf {
	struct file_handle fh;
	unsigned char bytes[MAX_HANDLE_SZ];
};

/* The handle of the object of fd (O_PATH) into h; false when it has none
 * the node can use: handles off, another filesystem (a handle opens on
 * SRC's only), or one too long for the node's byte of length. */
static bool handle_of_fd(int fd, const struct stat *st, struct handle_buf *h)
{
	int mount_id;

	if (!D.handles || st->st_dev != D.src_dev)
		return false;
	h->fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) < 0)
		return false;
	return h->fh.handle_bytes > 0 && h->fh.handle_bytes <= 255;
}

/* A node of st's object with handle h (NULL: none); no fd yet. */
static struct dnode *node_alloc(const struct stat *st, const struct handle_buf *h)
{
	size_t bytes = h ? h->fh.handle_bytes : 0;
	struct dnode *n = calloc(1, sizeof(*n) + bytes);

	if (!n)
		return NULL;
	D.node_bytes += alloc_bytes(n);
	n->pinned_fd = -1;
	n->fd_slot = -1;
	n->dev = st->st_dev;
	n->ino = st->st_ino;
	n->type = st->st_mode & S_IFMT;
	if (h) {
		n->fh_bytes = (unsigned char)bytes;
		n->fh_type = h->fh.handle_type;
		memcpy(n->fh, h->fh.f_handle, bytes);
	}
	return n;
}

/* Whether node n (found by st_dev/st_ino) is the object with handle h.
 * Without a handle on either side it is: a node without one keeps its fd
 * pinned, and so its inode number. */
static bool same_object(const struct dnode *n, const struct handle_buf *h)
{
	/* Its object left SRC for a layer (NODE_MOVED): if it is found in
	 * SRC again (a rollback's rename), it needs a node that reaches it. */
	if (n->gone == NODE_MOVED)
		return false;
	if (!h || !n->fh_bytes)
		return true;
	return n->fh_bytes == h->fh.handle_bytes && n->fh_type == h->fh.handle_type &&
	       memcmp(n->fh, h->fh.f_handle, n->fh_bytes) == 0;
}

/*
 * Whether SRC's filesystem gives handles that open again: checked on the
 * root, not assumed from the filesystem type.  OVSNAPD_TEST_NO_HANDLES=1
 * (tests) acts as if it did not.
 */
static bool handles_usable(int rootfd, const struct stat *root)
{
	const char *test = getenv("OVSNAPD_TEST_NO_HANDLES");
	struct handle_buf h;
	struct stat st;
	int mount_id, fd;

	if (test && strcmp(test, "1") == 0) {
		dlog(LOG_INFO, "file handles: off (OVSNAPD_TEST_NO_HANDLES): one fd "
		     "per cached inode");
		return false;
	}
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(rootfd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0) {
		dlog(LOG_INFO, "file handles: SRC's filesystem has none (%m): one fd per "
		     "cached inode, as many as the open file limit allows");
		return false;
	}
	fd = open_by_handle_at(rootfd, &h.fh, O_PATH | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != root->st_dev ||
	    st.st_ino != root->st_ino) {
		dlog(LOG_INFO, "file handles: SRC's filesystem's do not open again (%s): "
		     "one fd per cached inode, as many as the open file limit allows",
		     fd < 0 ? strerror(errno) : "another object");
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	return true;
}

int nodes_init(int rootfd)
{
	struct stat st;
	struct dnode *root;
	int fd;

	D.nbuckets = NODES_MIN_BUCKETS;
	D.buckets = calloc(D.nbuckets, sizeof(*D.buckets));
	if (!D.buckets)
		return -ENOMEM;
	fd = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	D.handles = handles_usable(rootfd, &st);
	if (!D.handles)
		nofile_warn_if_low();
	fdcache_init();
	/* The root has no handle: its fd is pinned. */
	root = node_alloc(&st, NULL);
	if (!root)
		return -ENOMEM;
	fdcache_offer(root, fd);
	root->nlookup = 1;	/* never forgotten */
	root->name = strdup("");
	if (!root->name)
		return -ENOMEM;
	hash_insert(root);
	D.nnodes = 1;
	D.root = root;
	return 0;
}

struct dnode *node_of(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return D.root;
	return (struct dnode *)(uintptr_t)ino;
}

fuse_ino_t node_ino(struct dnode *n)
{
	if (n == D.root)
		return FUSE_ROOT_ID;
	return (fuse_ino_t)(uintptr_t)n;
}

/* Free n and, in turn, ancestors nothing refers to any more.  Caller
 * holds nodes_lock. */
static void node_maybe_free(struct dnode *n)
{
	while (n && n != D.root && n->nlookup == 0 && n->children == 0 && n->nopen == 0) {
		struct dnode *parent = n->parent;

		hash_remove(n);
		D.nnodes--;
		fdcache_forget(n);
		D.node_bytes -= alloc_bytes(n) + alloc_bytes(n->name);
		free(n->name);
		free(n);
		if (!parent)
			break;
		parent->children--;
		n = parent;
	}
}

/* Caller holds nodes_lock. */
static int set_name_locked(struct dnode *n, struct dnode *parent, const char *name)
{
	char *copy = NULL;
	struct dnode *old_parent = n->parent;

	if (name) {
		copy = strdup(name);
		if (!copy) {
			/* The object's name changed in SRC all the same:
			 * what the node says is wrong from now on. */
			n->name_lost = true;
			return -ENOMEM;
		}
	}
	n->name_lost = false;
	if (parent)
		parent->children++;
	n->parent = parent;
	D.node_bytes += alloc_bytes(copy);
	D.node_bytes -= alloc_bytes(n->name);
	free(n->name);
	n->name = copy;
	if (old_parent) {
		old_parent->children--;
		node_maybe_free(old_parent);
	}
	return 0;
}

/*
 * A lookup is not serialised with renames.  If a name changed while it ran
 * (ns_seq moved), check that name still leads to the object before taking
 * it as the object's name; -EAGAIN asks the caller to look up again.  A
 * change that finishes later finds the node by identity and fixes it.
 */
static int name_still_valid(const struct stat *st, struct dnode *parent, const char *name)
{
	struct stat now;
	int pfd = node_fd_get(parent), rc;

	if (pfd < 0)
		return -pfd;
	rc = fstatat(pfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	     now.st_dev == st->st_dev && now.st_ino == st->st_ino ? 0 : EAGAIN;
	node_fd_put(parent);
	return rc;
}

/*
 * Node n's inode number belongs to another object now (n's was deleted
 * behind the fd cache's back, or after it left the tree): n leaves the
 * table and its name, and lives on only for the kernel's references, as
 * an object no longer in the tree.  Caller holds nodes_lock, and a
 * reference on any node it still uses (dropping n's parent may free it).
 */
static void node_stale_locked(struct dnode *n)
{
	dbg("inode %llu reused by a new object: node %p dropped from the table",
	    (unsigned long long)n->ino, (void *)n);
	hash_remove(n);
	n->hnext = NULL;
	set_name_locked(n, NULL, NULL);
}

/* Node n was found again by a lookup of parent/name: one more kernel
 * reference, and the name if n had lost its last one.  Caller holds
 * nodes_lock; 0 or an errno (EAGAIN: look up again). */
static int node_found_locked(struct dnode *n, const struct stat *st, struct dnode *parent,
			     const char *name, uint64_t seq)
{
	int err;

	/* Any current name will do for a hard-linked file; only a node
	 * that lost its last known name takes this one. */
	if (!n->name && st->st_nlink > 0) {
		if (seq != D.ns_seq && (err = name_still_valid(st, parent, name)))
			return err;
		set_name_locked(n, parent, name);
	}
	n->nlookup++;
	return 0;
}

struct dnode *node_get(int fd, const struct stat *st, struct dnode *parent,
		       const char *name, uint64_t seq)
{
	struct handle_buf hb;
	struct handle_buf *h = handle_of_fd(fd, st, &hb) ? &hb : NULL;
	struct dnode *n;
	int err;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(st->st_dev, st->st_ino);
	if (n && !same_object(n, h)) {
		node_stale_locked(n);
		n = NULL;
	}
	if (n) {
		err = node_found_locked(n, st, parent, name, seq);
		if (!err)
			fdcache_offer(n, fd);
		pthread_mutex_unlock(&D.nodes_lock);
		if (err) {
			close(fd);
			errno = err;
			return NULL;
		}
		return n;
	}
	if (seq != D.ns_seq && (err = name_still_valid(st, parent, name))) {
		pthread_mutex_unlock(&D.nodes_lock);
		close(fd);
		errno = err;
		return NULL;
	}
	n = node_alloc(st, h);
	if (!n) {
		pthread_mutex_unlock(&D.nodes_lock);
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	n->nlookup = 1;
	if (set_name_locked(n, parent, name) < 0) {
		D.node_bytes -= alloc_bytes(n);
		pthread_mutex_unlock(&D.nodes_lock);
		close(fd);
		free(n);
		errno = ENOMEM;
		return NULL;
	}
	fdcache_offer(n, fd);
	table_add(n);
	pthread_mutex_unlock(&D.nodes_lock);
	return n;
}

/* An object found by handle again within fewer such finds than the fd
 * cache holds: open it to cache it (nodes lock held). */
static bool known_again_soon(const struct dnode *n, int bound)
{
	return n->known_at && (uint16_t)(D.known_seq - n->known_at) < bound;
}

/* Whether node n is the one k saw: the same object, by its handle (a
 * node without one: any, see node_get_known). */
static bool node_is_known(const struct dnode *n, const struct node_known *k)
{
	if (n->gone == NODE_MOVED)
		return false;
	if (!k->bytes)
		return !n->fh_bytes;
	return n->fh_bytes == k->bytes && n->fh_type == k->type &&
	       memcmp(n->fh, k->fh, k->bytes) == 0;
}

/*
 * A lookup of a name whose object the daemon knew before it stat'ed the
 * name (node_knows_ino) needs no fd of its own.  The node k saw had the
 * object's handle then, so that object was alive when the node was made,
 * before st was taken.
 * When the daemon holds an fd of that object now, not even the handle is
 * needed: the fd was either open when st was taken, and then no other
 * object could carry the number, or opened since from the handle, which
 * succeeds only while the object lives, so it lived when st was taken
 * too; either way st describes it.
 * Without an fd, the name's handle (name_to_handle_at of the name, after
 * st) must be the node's: it carries the inode's generation, so the name
 * then led to the node's object, alive before st was taken and after,
 * and so also when: no other object had its number then.
 * One or two system calls, where opening the name, its stat, its handle
 * and the close of an fd the cache evicts for it take four.  But an
 * object found so twice within fewer such finds than the fd cache holds
 * is opened and cached instead (node_knows_ino() does not know it, or
 * NULL here: the caller opens it, node_get): a folder listed again and
 * again then costs a stat per object, as an LRU cache of that size would
 * give, while a tree larger than the cache, walked again, costs two calls
 * per object and evicts nothing.
 * A node without a handle (its fd pinned: SRC's root, a removed object,
 * a filesystem without handles) is found only by its inode number, as
 * before handles: one that replaced another of the same number between
 * the stat and here, behind the mount, would take its attributes.
 */
struct dnode *node_get_known(const struct stat *st, struct dnode *parent, const char *name,
			     uint64_t seq, int pfd, const struct node_known *k)
{
	struct handle_buf got;
	struct dnode *n;
	int err = 0, mount_id, bound = fdcache_bound();

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(st->st_dev, st->st_ino);
	if (n && node_is_known(n, k) && fdcache_holds(n)) {
		err = node_found_locked(n, st, parent, name, seq);
		pthread_mutex_unlock(&D.nodes_lock);
		errno = err;
		return err ? NULL : n;
	}
	if (!n || !k->bytes || !node_is_known(n, k) || known_again_soon(n, bound)) {
		pthread_mutex_unlock(&D.nodes_lock);
		errno = 0;
		return NULL;
	}
	pthread_mutex_unlock(&D.nodes_lock);

	got.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(pfd, name, &got.fh, &mount_id, 0) < 0 ||
	    got.fh.handle_bytes != k->bytes || got.fh.handle_type != k->type ||
	    memcmp(got.fh.f_handle, k->fh, k->bytes) != 0) {
		errno = 0;
		return NULL;
	}
	/* the node may have gone meanwhile: only one of this object */
	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(st->st_dev, st->st_ino);
	if (n && node_is_known(n, k)) {
		err = node_found_locked(n, st, parent, name, seq);
		if (!err) {
			if (!++D.known_seq)
				D.known_seq = 1;
			n->known_at = D.known_seq;
		}
	} else {
		n = NULL;
	}
	pthread_mutex_unlock(&D.nodes_lock);
	errno = err;
	return err ? NULL : n;
}

bool node_knows_ino(ino_t ino, struct node_known *k)
{
	struct dnode *n;
	bool knows = false;
	int bound = fdcache_bound();

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(D.src_dev, ino);
	/* found again soon: not known, so that the caller opens it at once */
	if (n && (fdcache_holds(n) || (n->fh_bytes && !known_again_soon(n, bound)))) {
		k->bytes = n->fh_bytes;
		k->type = n->fh_type;
		memcpy(k->fh, n->fh, n->fh_bytes);
		knows = true;
	}
	pthread_mutex_unlock(&D.nodes_lock);
	return knows;
}

uint64_t nodes_seq(void)
{
	uint64_t seq;

	pthread_mutex_lock(&D.nodes_lock);
	seq = D.ns_seq;
	pthread_mutex_unlock(&D.nodes_lock);
	return seq;
}

static void node_forget_locked(struct dnode *n, uint64_t nlookup);

void node_unlist(struct dnode *n)
{
	pthread_mutex_lock(&D.nodes_lock);
	n->known_at = 0;
	node_forget_locked(n, 1);
	pthread_mutex_unlock(&D.nodes_lock);
}

void node_forget(struct dnode *n, uint64_t nlookup)
{
	pthread_mutex_lock(&D.nodes_lock);
	node_forget_locked(n, nlookup);
	pthread_mutex_unlock(&D.nodes_lock);
}

static void node_forget_locked(struct dnode *n, uint64_t nlookup)
{
	if (n->nlookup < nlookup) {
		dlog(LOG_ERR, "forget of %llu references, node has %llu",
		     (unsigned long long)nlookup, (unsigned long long)n->nlookup);
		nlookup = n->nlookup;
	}
	n->nlookup -= nlookup;
	node_maybe_free(n);
}

fuse_ino_t node_find_ino(dev_t dev, ino_t ino)
{
	struct dnode *n;
	fuse_ino_t nodeid = 0;

	/* The number under the lock: the node itself may be forgotten
	 * and freed as soon as it is released. */
	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	if (n)
		nodeid = node_ino(n);
	pthread_mutex_unlock(&D.nodes_lock);
	return nodeid;
}

/* Whether the node of dev/ino has nodes hanging from it (children) or
 * open handles, now. */
static bool node_has(dev_t dev, ino_t ino, bool children)
{
	struct dnode *n;
	bool has;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	has = n && (children ? n->children : n->nopen) > 0;
	pthread_mutex_unlock(&D.nodes_lock);
	return has;
}

bool node_has_children(dev_t dev, ino_t ino)
{
	return node_has(dev, ino, true);
}

/* Caller holds nodes_lock.  with_fd: lend srcdirfd (node_fd_get). */
static int relpath_locked(struct dnode *n, const char *name, struct ovs_relpath *rp,
			  bool with_fd)
{
	struct dnode *dir = NULL;
	const char **v;
	struct dnode *p;
	size_t depth = 0, i;

	rp->names = NULL;
	rp->n = 0;
	rp->srcdirfd = -1;
	rp->st = NULL;
	for (p = n; p != D.root; p = p->parent) {
		/* a stale name must not steer a preserve to the wrong place */
		if (p->name_lost)
			return -EIO;
		if (!p->name || !p->parent)
			return -ENOENT;
		depth++;
	}
	/* Pointers to the nodes' own names, filled from the end: no name
	 * is copied, none is joined to another. */
	i = depth + (name != NULL);
	v = malloc((i ? i : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (name)
		dir = n;
	else if (n != D.root)
		dir = n->parent;
	if (dir && with_fd) {
		int fd = node_fd_get(dir);

		if (fd < 0) {
			free(v);
			return fd;
		}
		rp->srcdirfd = fd;
	}
	rp->n = i;
	if (name)
		v[--i] = name;
	for (p = n; p != D.root; p = p->parent)
		v[--i] = p->name;
	rp->names = v;
	return 0;
}

int node_relpath(struct dnode *n, const char *name, struct ovs_relpath *rp)
{
	int rc;

	pthread_mutex_lock(&D.nodes_lock);
	rc = relpath_locked(n, name, rp, true);
	pthread_mutex_unlock(&D.nodes_lock);
	return rc;
}

int node_relpath_dir(struct dnode *n, struct ovs_relpath *rp, struct node_dir *dir)
{
	int rc;

	*dir = (struct node_dir){ .covered = 0 };
	pthread_mutex_lock(&D.nodes_lock);
	rc = relpath_locked(n, NULL, rp, true);
	if (rc == 0 && rp->n) {
		dir->covered = __atomic_load_n(&n->parent->covered, __ATOMIC_ACQUIRE);
		dir->dev = n->parent->dev;
		dir->ino = n->parent->ino;
		dir->known = true;
	}
	pthread_mutex_unlock(&D.nodes_lock);
	return rc;
}

void node_covered_set(struct dnode *n, uint64_t epoch, bool names)
{
	uint64_t want = covered_word(epoch, names);
	uint64_t was = __atomic_load_n(&n->covered, __ATOMIC_ACQUIRE);

	while (was < want &&
	       !__atomic_compare_exchange_n(&n->covered, &was, want, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE))
		;
}

void node_dir_covered_set(struct dnode *n, const struct node_dir *dir, uint64_t epoch)
{
	pthread_mutex_lock(&D.nodes_lock);
	if (dir->known && n->parent && n->parent->dev == dir->dev && n->parent->ino == dir->ino)
		node_covered_set(n->parent, epoch, true);
	pthread_mutex_unlock(&D.nodes_lock);
}

const char *node_describe(struct dnode *n, char *buf, size_t len)
{
	struct ovs_relpath rp;
	const char *s = "(no name)";

	pthread_mutex_lock(&D.nodes_lock);
	if (relpath_locked(n, NULL, &rp, false) == 0) {
		s = ovs_relpath_describe(&rp, buf, len);
		node_relpath_free(&rp);
	}
	pthread_mutex_unlock(&D.nodes_lock);
	return s;
}

void node_relpath_free(struct ovs_relpath *rp)
{
	node_fd_put_fd(rp->srcdirfd);
	free((void *)rp->names);
	rp->names = NULL;
	rp->n = 0;
	rp->srcdirfd = -1;
}

/* Every change of a name bumps ns_seq (under nodes_lock), so that a lookup
 * that raced with a rename can tell its answer may be stale. */
static void names_changed(void)
{
	D.ns_seq++;
}

void node_update_moved(dev_t dev, ino_t ino, struct dnode *oldp, const char *oldn,
		       struct dnode *newp, const char *newn)
{
	struct dnode *n;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	if (n && n->parent == oldp && n->name && strcmp(n->name, oldn) == 0)
		set_name_locked(n, newp, newn);
	names_changed();
	pthread_mutex_unlock(&D.nodes_lock);
}

/*
 * The node of the directory that holds path's last name, walking down
 * from the root one name at a time and adding nodes the kernel has not looked up (nlookup 0:
 * they live as long as a child refers to them).  A name must hang from
 * its real parent directory so that later renames of any ancestor keep
 * it right.  Caller holds nodes_lock.
 */
static struct dnode *dir_node_of_locked(const struct ovs_relpath *path)
{
	struct dnode *dir = D.root, *n;
	size_t i;

	if (!path->n)
		return NULL;
	for (i = 0; i + 1 < path->n; i++) {
		const char *comp = path->names[i];
		struct handle_buf hb, *h;
		struct stat st;
		int fd, dfd;

		dfd = node_fd_get(dir);
		if (dfd < 0)
			goto fail;
		fd = openat(dfd, comp, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
		node_fd_put(dir);
		if (fd < 0)
			goto fail;
		if (fstat(fd, &st) < 0) {
			close(fd);
			goto fail;
		}
		h = handle_of_fd(fd, &st, &hb) ? &hb : NULL;
		n = hash_find(st.st_dev, st.st_ino);
		if (n && !same_object(n, h)) {
			dir->children++;	/* n's old parent may be dir */
			node_stale_locked(n);
			dir->children--;
			n = NULL;
		}
		if (n) {
			fdcache_offer(n, fd);
			if (!n->name)
				set_name_locked(n, dir, comp);
		} else {
			n = node_alloc(&st, h);
			if (!n) {
				close(fd);
				goto fail;
			}
			if (set_name_locked(n, dir, comp) < 0) {
				D.node_bytes -= alloc_bytes(n);
				close(fd);
				free(n);
				goto fail;
			}
			fdcache_offer(n, fd);
			table_add(n);
		}
		dir = n;
	}
	return dir;
fail:
	node_maybe_free(dir);
	return NULL;
}

/*
 * Outside nodes_lock: an object only the kernel's inode referred to is
 * gone (ESTALE), and on XFS the open waits a jiffy at a time while its
 * inode is being freed (xfs_iget): 2 to 4 opens of 6.6 to 10.9 ms in
 * each delete of 20,000 files, which held the lock every lookup takes
 * (bench/results/2026-12-07-removal-fd.txt).  Not opened before the
 * removal: then every such delete opens and later closes an object about
 * to be freed, and took 1.16 to 1.19 times as long.
 */
int node_removed_fd(dev_t dev, ino_t ino, const struct dnode *parent, const char *name,
		    struct node_known *k)
{
	struct dnode *n;

	k->bytes = 0;
	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	/* only a node node_update_removed() takes out of the tree */
	if (n && n->parent == parent && n->name && strcmp(n->name, name) == 0 &&
	    n->fh_bytes && !fdcache_holds(n)) {
		k->bytes = n->fh_bytes;
		k->type = n->fh_type;
		memcpy(k->fh, n->fh, n->fh_bytes);
	}
	pthread_mutex_unlock(&D.nodes_lock);
	if (!k->bytes)
		return -1;
	return open_by_node_handle(k->bytes, k->type, k->fh);
}

void node_update_removed(dev_t dev, ino_t ino, struct dnode *parent, const char *name,
			 const struct ovs_relpath *other, int keep, const struct node_known *k)
{
	struct dnode *n, *dir = NULL;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	if (n && n->parent == parent && n->name && strcmp(n->name, name) == 0) {
		/* Another name of a hard-linked file, if there is one. */
		if (other)
			dir = dir_node_of_locked(other);
		if (dir) {
			/* Hold dir while set_name_locked drops the old parent. */
			dir->children++;
			set_name_locked(n, dir, other->names[other->n - 1]);
			dir->children--;
		} else {
			set_name_locked(n, NULL, NULL);
			/* Out of the tree, maybe still open: no handle is
			 * sure to open it again.  keep is of n's object if
			 * n has its handle (n may be a node made since);
			 * once tried, not opened again under the lock. */
			if (keep >= 0 && node_is_known(n, k)) {
				fdcache_pin_fd(n, keep);
				keep = -1;
			} else {
				fdcache_pin(n, !k->bytes);
			}
		}
	}
	names_changed();
	pthread_mutex_unlock(&D.nodes_lock);
	if (keep >= 0)
		close(keep);
}

void node_update_exchanged(const struct stat *a, struct dnode *pa, const char *na,
			   const struct stat *b, struct dnode *pb, const char *nb)
{
	struct dnode *x, *y;
	bool x_match, y_match;

	pthread_mutex_lock(&D.nodes_lock);
	x = hash_find(a->st_dev, a->st_ino);
	y = hash_find(b->st_dev, b->st_ino);
	x_match = x && x->parent == pa && x->name && strcmp(x->name, na) == 0;
	y_match = y && y->parent == pb && y->name && strcmp(y->name, nb) == 0;
	/* Take refs on both parents before dropping any (set_name_locked
	 * may free a parent that drops to zero). */
	pa->children++;
	pb->children++;
	if (x_match)
		set_name_locked(x, pb, nb);
	if (y_match)
		set_name_locked(y, pa, na);
	pa->children--;
	pb->children--;
	names_changed();
	pthread_mutex_unlock(&D.nodes_lock);
}

bool node_open_begin(struct dnode *n, bool writable)
{
	bool ok;

	pthread_mutex_lock(&D.nodes_lock);
	/* An open racing an unlink: after it, if the unlink fails. */
	while (n->gone == NODE_MOVING)
		pthread_cond_wait(&D.moving_cond, &D.nodes_lock);
	ok = n->gone == NODE_PRESENT;
	if (ok) {
		n->nopen++;
		if (writable)
			n->nwriters++;
		D.open_handles++;
	}
	pthread_mutex_unlock(&D.nodes_lock);
	return ok;
}

bool node_has_handles(dev_t dev, ino_t ino)
{
	return node_has(dev, ino, false);
}

/* Counted (node_open_begin) before any open: a claim that finds no
 * handle knows none is being opened either. */
bool node_move_claim(dev_t dev, ino_t ino, const struct dnode *parent, const char *name)
{
	struct dnode *n;
	bool ok;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	ok = n && n->parent == parent && n->name && strcmp(n->name, name) == 0 &&
	     !n->nopen && n->gone == NODE_PRESENT;
	if (ok)
		__atomic_store_n(&n->gone, NODE_MOVING, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&D.nodes_lock);
	return ok;
}

void node_move_end(dev_t dev, ino_t ino, struct dnode *parent, const char *name, bool moved)
{
	struct dnode *n;

	pthread_mutex_lock(&D.nodes_lock);
	n = hash_find(dev, ino);
	if (n && n->gone == NODE_MOVING) {
		if (moved) {
			if (n->parent == parent && n->name && strcmp(n->name, name) == 0)
				set_name_locked(n, NULL, NULL);
			__atomic_store_n(&n->gone, NODE_MOVED, __ATOMIC_RELEASE);
			fdcache_drop(n);
		} else {
			__atomic_store_n(&n->gone, NODE_PRESENT, __ATOMIC_RELEASE);
		}
		pthread_cond_broadcast(&D.moving_cond);
	}
	if (moved)
		names_changed();
	pthread_mutex_unlock(&D.nodes_lock);
}

void node_open_count(struct dnode *n, bool writable, int delta)
{
	pthread_mutex_lock(&D.nodes_lock);
	n->nopen += delta;
	if (writable)
		n->nwriters += delta;
	D.open_handles += delta;
	if (delta < 0)
		node_maybe_free(n);
	pthread_mutex_unlock(&D.nodes_lock);
}

size_t nodes_with_writers(fuse_ino_t **out)
{
	fuse_ino_t *v = NULL;
	size_t cnt = 0, cap = 0;

	pthread_mutex_lock(&D.nodes_lock);
	for (size_t b = 0; b < D.nbuckets; b++) {
		for (struct dnode *n = D.buckets[b]; n; n = n->hnext) {
			if (!n->nwriters)
				continue;
			if (cnt == cap) {
				fuse_ino_t *nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

				if (!nv)
					goto out;
				v = nv;
			}
			v[cnt++] = node_ino(n);
		}
	}
out:
	pthread_mutex_unlock(&D.nodes_lock);
	*out = v;
	return cnt;
}

/* ---- the caller's identity ------------------------------------------- */

/*
 * setfsuid/setfsgid are per thread in Linux, and so is the supplementary
 * group list at the syscall level: glibc's setgroups() changes every
 * thread of the process (it broadcasts), so the raw syscall is used.  The
 * umask lives in fs_struct, which threads share unless they unshare it.
 *
 * Capabilities (rule 19) are per thread too, through the raw capset
 * (libcap's may broadcast).  FUSE does not say which capabilities the
 * caller holds, so a caller other than uid 0 is taken to hold none, and
 * uid 0 to hold what the daemon holds.  A non-zero fsuid alone drops only
 * the file capabilities (CAP_CHOWN, CAP_DAC_*, CAP_FOWNER, CAP_FSETID...);
 * the effective set is emptied as well, or CAP_SYS_RESOURCE would spend
 * ext4's reserved blocks and pass quota limits, and CAP_SYS_ADMIN would
 * list trusted.* xattrs.  The permitted set stays, so the switch back
 * needs no privilege.
 */
/*
 * What this thread acts as now.  Zero, as every thread starts: root, no
 * supplementary groups, umask 0, the daemon's capabilities
 * (identity_thread_init).  A switch costs a syscall per item, about 1-2 us
 * each for setgroups and setfsuid, so only what differs is changed: a
 * request from root needs none of them.
 */
static __thread struct {
	uid_t uid;
	gid_t gid;
	bool groups;		/* a non-empty supplementary group list */
	bool caller_groups;	/* ... and it is a caller's, not root's own */
	mode_t umask;
	bool caps_dropped;	/* effective set cut down to caps_kept */
	uint64_t caps_kept;
} acting;

/* The thread's capabilities as it started: what identity_restore() puts
 * back.  Unknown (identity_thread_init not run or failed): acting for a
 * user is refused, since a capset from it would drop them for good. */
static __thread struct __user_cap_data_struct thread_caps[_LINUX_CAPABILITY_U32S_3];
static __thread bool thread_caps_known;

/* The effective set as the thread started, or only the capabilities of
 * keep in it (a mask of 1 << CAP_*) when dropped. */
static int caps_set(bool dropped, uint64_t keep)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];

	memcpy(caps, thread_caps, sizeof(caps));
	if (dropped)
		for (size_t i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
			caps[i].effective &= (uint32_t)(keep >> (32 * i));
	return syscall(SYS_capset, &hdr, caps) < 0 ? -errno : 0;
}

int identity_thread_init(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };

	if (syscall(SYS_capget, &hdr, thread_caps) < 0)
		return -errno;
	thread_caps_known = true;
	/* What `acting` assumes: a daemon started through sudo or
	 * with initgroups() would otherwise keep, say, group 0. */
	if (syscall(SYS_setgroups, (size_t)0, NULL) < 0) {
		acting.groups = true;	/* try again at the first switch */
		return -errno;
	}
	if (unshare(CLONE_FS) < 0)
		return -errno;
	umask(0);
	return 0;
}

/* setfsuid/setfsgid answer the previous id, never an error: a switch the
 * kernel refused (no CAP_SETUID/CAP_SETGID) shows only when the id asked
 * back (with an invalid one, which changes nothing) is not the one set. */
static int set_fsid(long nr, unsigned int id)
{
	syscall(nr, id);
	if ((unsigned int)syscall(nr, -1) == id)
		return 0;
	errno = EPERM;
	return -EPERM;
}

/* A switch that did not happen: the request fails with EIO, not with an
 * answer the caller could take for the filesystem's own (identity_restore
 * puts back whatever part did happen). */
static int switch_failed(const char *what, unsigned int id, int err)
{
	errno = -err;
	dlog(LOG_ERR, "cannot act as the caller (%s %u): %m; request failed with EIO",
	     what, id);
	return -EIO;
}

/* Act as uid/gid with the n supplementary groups (umask: NULL to keep 0);
 * a uid other than 0 keeps only the capabilities of keep. */
static int identity_switch(uid_t uid, gid_t gid, const gid_t *groups, int n,
			   const mode_t *umask_to, uint64_t keep)
{
	bool drop = uid != 0;
	int rc;

	/* Root's own groups do not matter: it passes every check. */
	if (n > 0 || acting.groups) {
		/* setgroups changes all or nothing */
		if (syscall(SYS_setgroups, (size_t)n, groups) < 0)
			return switch_failed("groups of gid", gid, -errno);
		acting.groups = n > 0;
		acting.caller_groups = n > 0;
	}
	if (gid != acting.gid) {
		rc = set_fsid(SYS_setfsgid, gid);
		if (rc < 0)
			return switch_failed("fsgid", gid, rc);
		acting.gid = gid;
	}
	if (uid != acting.uid) {
		rc = set_fsid(SYS_setfsuid, uid);
		if (rc < 0)
			return switch_failed("fsuid", uid, rc);
		acting.uid = uid;
	}
	if (umask_to && *umask_to != acting.umask) {
		umask(*umask_to);
		acting.umask = *umask_to;
	}
	/* Last: setgroups above needs CAP_SETGID. */
	if (drop != acting.caps_dropped || (drop && keep != acting.caps_kept)) {
		rc = thread_caps_known ? caps_set(drop, keep) : -EPERM;
		if (rc < 0) {
			/* part of the set may be gone: restore it all */
			acting.caps_dropped = true;
			return switch_failed("capabilities of uid", uid, rc);
		}
		acting.caps_dropped = drop;
		acting.caps_kept = keep;
	}
	return 0;
}

static int become_caller(fuse_req_t req, const mode_t *umask_to, uint64_t keep)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[256];
	int n = 0;

	if (ctx->uid != 0) {
		n = fuse_req_getgroups(req, 256, groups);
		if (n < 0)
			n = 0;	/* the caller is gone */
		if (n > 256)
			n = 256;
	}
	return identity_switch(ctx->uid, ctx->gid, groups, n, umask_to, keep);
}

int identity_become(fuse_req_t req, bool with_umask)
{
	return become_caller(req, with_umask ? &fuse_req_ctx(req)->umask : NULL, 0);
}

int identity_become_keeping(fuse_req_t req, uint64_t keep)
{
	return become_caller(req, NULL, keep);
}

int identity_open_by_handle(int mount_fd, struct file_handle *fh, int flags)
{
	const uint64_t need = 1ULL << CAP_DAC_READ_SEARCH;
	bool raise = acting.caps_dropped && !(acting.caps_kept & need);
	int fd, err;

	/* Acting for a user, the thread has no capability: raise the one
	 * open_by_handle_at needs just for the call.  O_PATH checks no
	 * permission, so the user gains nothing by it. */
	if (raise && caps_set(true, acting.caps_kept | need) < 0)
		raise = false;	/* the open fails with EPERM */
	fd = open_by_handle_at(mount_fd, fh, flags);
	err = errno;
	if (raise && caps_set(true, acting.caps_kept) < 0) {
		dlog(LOG_CRIT, "cannot drop CAP_DAC_READ_SEARCH again while acting for uid "
		     "%u: %m; stopping rather than serve with it", (unsigned int)acting.uid);
		abort();
	}
	errno = err;
	return fd;
}

/*
 * CAP_FSETID stays for data changes: the kernel has already cleared the
 * setuid and setgid bits a caller's write(2), fallocate or
 * copy_file_range clears, through a SETATTR made with the caller's own
 * rights (file_remove_privs), and it keeps the mode it then knows.  The
 * real filesystem must not clear them again on its own, out of the
 * kernel's sight: after page writeback above all, which clears nothing
 * natively.
 */
int identity_become_writer(fuse_req_t req, uid_t opener_uid, gid_t opener_gid,
			   bool writeback)
{
	if (writeback)
		return identity_switch(opener_uid, opener_gid, NULL, 0, NULL,
				       1ULL << CAP_FSETID);
	return become_caller(req, NULL, 1ULL << CAP_FSETID);
}

/*
 * Back to root with the daemon's capabilities.  A thread that cannot get
 * back would go on serving as someone else: preserving with a user's
 * rights (copies refused, or made with the wrong owner) and answering root
 * with them.  No request can be failed from here (the caller may already
 * have its answer), so the daemon aborts: its mount answers ENOTCONN, SRC
 * changes no more, and status and fsck report the volume broken until it
 * is activated again.  Nothing but a kernel refusing root its own
 * capabilities (a security module) makes this happen.
 */
void identity_restore(void)
{
	const char *failed = NULL;

	/* First: setgroups below needs CAP_SETGID back. */
	if (acting.caps_dropped) {
		if (caps_set(false, 0) < 0)
			failed = "capabilities";
		else
			acting.caps_dropped = false;
	}
	if (!failed && acting.uid != 0) {
		if (set_fsid(SYS_setfsuid, 0) < 0)
			failed = "fsuid";
		else
			acting.uid = 0;
	}
	if (!failed && acting.gid != 0) {
		if (set_fsid(SYS_setfsgid, 0) < 0)
			failed = "fsgid";
		else
			acting.gid = 0;
	}
	if (!failed && acting.groups) {
		/* The daemon's own list (identity_thread_init could not
		 * empty it) may stay: root passes every check anyway. */
		if (syscall(SYS_setgroups, (size_t)0, NULL) == 0)
			acting.groups = acting.caller_groups = false;
		else if (acting.caller_groups)
			failed = "supplementary groups";
	}
	if (failed) {
		dlog(LOG_CRIT, "cannot restore the daemon's %s after acting for uid %u: %m; "
		     "stopping rather than serve with a wrong identity", failed,
		     (unsigned int)acting.uid);
		abort();
	}
	if (acting.umask != 0) {
		umask(0);
		acting.umask = 0;
	}
}
