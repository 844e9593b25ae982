/*
 * The FUSE operations of the snapshot mount: a passthrough to the real SRC
 * (reached through O_PATH fds of a private clone of its mount) with the
 * preservation rules of DESIGN.md section 2 before every change.
 *
 * Locking (rules 9 and 13), outermost first:
 *  - ns_lock (phase-fair, daemon-nslock.c): every change of an object or
 *    of names that moves no directory holds it for reading across
 *    preserve+change: a first change (a data or metadata change of an
 *    object not yet known covered in this epoch), a create, an unlink, a
 *    link, a rename of a file (over a file or not, or an exchange of two
 *    files), an rmdir (of an empty directory no node hangs from).  A
 *    change that moves the chains of names of other objects (a rename of
 *    a directory, an exchange involving one) and a restore's change hold
 *    it for writing, so the chains every preserve walks stay put while
 *    it runs, and it waits for every change under way (and its preserve).
 *    Phase-fair: a rename of a directory gets in once the changes it
 *    found are done, however many arrive meanwhile (they wait behind it,
 *    also for a long preserve among those it waits for), and the changes
 *    that waited for it go before the next one.  Page-cache writeback
 *    waits for no waiting rename: a take waits for it (rule 13).
 *  - busy marks on the objects a change under ns_lock (read) preserves
 *    or renames (the object of a first change; the directory of a create;
 *    the object and its directory of an unlink or rmdir; the object and
 *    the new directory of a link; both objects and both directories of a
 *    rename), held across preserve+change and taken all at once
 *    (busy_acquire), so no two requests wait for each other's marks.  A
 *    second change of the same object waits for the first and then finds
 *    it covered, so two racing changes never both decide "not yet
 *    preserved"; changes of other objects run in parallel (what they
 *    share in the upper is serialised by the engine, struct ovs_layer).
 *    The mark of an object also keeps its node's name (lent by
 *    node_relpath) from changing or being freed under a preserve, and
 *    its other names (rule 6: a preserve of a hard-linked object copies
 *    them all) from moving; a directory's mark keeps it from losing its
 *    name (rmdir) and from being found empty while an entry is made in
 *    it (rule 3).  The kernel also serialises the changes of one
 *    directory (its i_rwsem) and renames across directories
 *    (s_vfs_rename_mutex); the marks do not rely on it.
 *    A change of an object already covered in this epoch needs neither:
 *    a covered path stays covered for the life of the layer, whatever
 *    the object is renamed to (every new name it gets is covered first).
 *    After a take, first changes wait until the preserves still running
 *    into the retired layer are done (layers_wait_retired): those read
 *    SRC's directories above their objects as they were at the take.
 *  - preserve_lock (rwlock): every change holds it for reading while it
 *    changes SRC, after its preservation (which holds a reference to its
 *    layer instead, see preserve_begin); a take holds it for writing only
 *    to swap the layer, so the layer and epoch are stable during a change.
 *  - nodes_lock (daemon-nodes.c): the inode table, innermost.
 *
 * Identity: preservation runs as root; namespace changes, opens, data
 * writes, xattr changes and xattr listing run as the caller, with none of
 * root's capabilities for a caller other than root (daemon-nodes.c), so
 * ownership, setgid directories, the umask, default ACLs, sticky
 * directories, reserved blocks and quotas behave as on the real
 * filesystem.  setattr runs as root: the kernel has checked it
 * (default_permissions), and it also carries the kernel's own clearing of
 * setuid bits after a write by another user, which the caller could not do.
 * An unlink that moves its file into the layer (unlink_by_move) is the
 * daemon's rename, made once the right of a caller other than root to
 * remove the name is checked as the caller (and not made for them in a
 * sticky directory).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon.h"
#include "fuse-uring.h"
#include "walk.h"

#define PROC_FD_PATH(buf, fd) snprintf(buf, sizeof(buf), "/proc/self/fd/%d", fd)

static struct dhandle *handle_of(struct fuse_file_info *fi)
{
	return (struct dhandle *)(uintptr_t)fi->fh;
}

static int stat_node(struct dnode *n, struct stat *st)
{
	int fd = node_fd_get(n), rc = 0;

	if (fd < 0)
		return fd;
	if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	node_fd_put(n);
	return rc;
}

/* ---- preservation ------------------------------------------------------ */

/*
 * The change this thread is making (a thread serves one request at a
 * time).  A first change of an object runs in two phases (rule 13):
 *
 *   preserve  under its change locks only, out of the count a take waits for,
 *             holding a reference to the layer it preserves into;
 *   change    counted again and under preserve_lock (read), after checking
 *             that no take switched layers meanwhile; if one did, the
 *             preserve runs again, into the new layer, before SRC changes.
 *
 * So a take never waits for a long preserve (a big subtree clone, a large
 * copy on ext4): the change it guards has not reached SRC yet and belongs
 * after the take.
 */
static __thread struct ovs_layer *pres_layer;	/* referenced, or NULL */
static __thread uint64_t pres_epoch;		/* the epoch of pres_layer */
static __thread bool pres_locked;		/* preserve_lock held (read) */
static __thread bool pres_gated;		/* test hook: hold at the gate */

/* preserve_done(): a take or merge switched layers; preserve again. */
#define PRESERVE_AGAIN (-1)

static void change_enter(void)
{
	pthread_rwlock_rdlock(&D.preserve_lock);
	pres_locked = true;
}

static void change_leave(void)
{
	if (pres_layer) {
		layer_put(pres_layer);
		pres_layer = NULL;
	}
	if (pres_locked) {
		pres_locked = false;
		pthread_rwlock_unlock(&D.preserve_lock);
	}
}

/* ---- the change locks ---------------------------------------------------- */

/* A busy mark (see the top of this file), on the thread's own list of
 * marks in D.busy. */
struct busy_mark {
	dev_t dev;
	ino_t ino;
	struct busy_mark *next;
};

/* The most marks one request holds: a rename of a file over another one
 * marks both objects and both directories. */
#define BUSY_MAX 4

/* The objects (or directories) a change marks busy. */
struct busy_keys {
	struct { dev_t dev; ino_t ino; } k[BUSY_MAX];
	unsigned n;
};

/* A key beyond BUSY_MAX is a programming error: dropped, it would leave
 * its object unmarked, and the change would race that object's
 * preserve. */
static void keys_add(struct busy_keys *ks, dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < ks->n; i++)
		if (ks->k[i].dev == dev && ks->k[i].ino == ino)
			return;
	if (ks->n >= BUSY_MAX) {
		dlog(LOG_CRIT, "more than %d busy marks for one change (BUSY_MAX): "
		     "a programming error", BUSY_MAX);
		abort();
	}
	ks->k[ks->n].dev = dev;
	ks->k[ks->n].ino = ino;
	ks->n++;
}

static bool keys_have(const struct busy_keys *ks, dev_t dev, ino_t ino)
{
	for (unsigned i = 0; i < ks->n; i++)
		if (ks->k[i].dev == dev && ks->k[i].ino == ino)
			return true;
	return false;
}

static __thread struct busy_mark my_busy[BUSY_MAX];
static __thread unsigned nbusy;		/* marks held */
static __thread bool ns_held;		/* ns_lock, for reading or writing */

static bool busy_marked(dev_t dev, ino_t ino)
{
	for (struct busy_mark *b = D.busy; b; b = b->next)
		if (b->dev == dev && b->ino == ino)
			return true;
	return false;
}

/*
 * All the marks of ks at once: wait until none of them is held, then hold
 * them all.  A thread never waits for a mark while it holds one, so no
 * two can wait for each other (no order of taking is needed), and one
 * waiting for an object under a long preserve holds back nobody meanwhile
 * (not the creates in that object's directory, say).
 */
static void busy_acquire(const struct busy_keys *ks)
{
	bool held;

	pthread_mutex_lock(&D.busy_lock);
	do {
		held = false;
		for (unsigned i = 0; i < ks->n && !held; i++)
			held = busy_marked(ks->k[i].dev, ks->k[i].ino);
		if (held)
			pthread_cond_wait(&D.busy_cond, &D.busy_lock);
	} while (held);
	for (unsigned i = 0; i < ks->n; i++) {
		my_busy[i].dev = ks->k[i].dev;
		my_busy[i].ino = ks->k[i].ino;
		my_busy[i].next = D.busy;
		D.busy = &my_busy[i];
	}
	nbusy = ks->n;
	pthread_mutex_unlock(&D.busy_lock);
}

static void busy_release(void)
{
	struct busy_mark **p;

	pthread_mutex_lock(&D.busy_lock);
	for (p = &D.busy; *p; ) {
		bool mine = false;

		for (unsigned i = 0; i < nbusy && !mine; i++)
			mine = *p == &my_busy[i];
		if (mine)
			*p = (*p)->next;
		else
			p = &(*p)->next;
	}
	nbusy = 0;
	pthread_cond_broadcast(&D.busy_cond);
	pthread_mutex_unlock(&D.busy_lock);
}

/*
 * The locks of a change that marks the objects of ks busy (a first change
 * of one object, a create in a directory, a change of names that moves
 * no directory): ns_lock for reading and the marks.  Out of the count a
 * take waits for before waiting: a holder may be waiting for a take,
 * which must not wait for this request.
 */
static void ns_take(bool exclusive, bool writeback)
{
	/* Taken again, it would wait for itself behind a waiting rename. */
	if (ns_held) {
		dlog(LOG_CRIT, "ns_lock taken twice by one thread: a programming error");
		abort();
	}
	if (exclusive)
		ns_lock_exclusive(&D.ns_lock);
	else
		ns_lock_shared(&D.ns_lock, writeback);
	ns_held = true;
}

static void change_lock_marks_for(const struct busy_keys *ks, bool writeback)
{
	request_uncount();
	ns_take(false, writeback);
	busy_acquire(ks);
}

static void change_lock_marks(const struct busy_keys *ks)
{
	change_lock_marks_for(ks, false);
}

/* The locks of a first change of the object of key, or of a create in
 * directory key; writeback: of page-cache writeback to it. */
static void change_lock_object(const struct dnode *key, bool writeback)
{
	struct busy_keys ks = { .n = 0 };

	keys_add(&ks, key->dev, key->ino);
	change_lock_marks_for(&ks, writeback);
}

/* The locks of a change that moves directories (a rename of one, a
 * restore's change): ns_lock for writing, which waits for every change
 * under ns_lock for reading (and their preserves). */
static void change_lock_names(void)
{
	request_uncount();
	ns_take(true, false);
}

static void change_unlock(void)
{
	if (nbusy)
		busy_release();
	if (ns_held) {
		ns_held = false;
		ns_unlock(&D.ns_lock);
	}
}

/* Enter the preserve phase; caller holds its change locks. */
static int preserve_begin(void)
{
	bool failed;

	request_uncount();
	pres_gated = false;
	pthread_rwlock_rdlock(&D.preserve_lock);
	pres_layer = layer_get();
	pres_epoch = D.epoch;
	failed = D.layer && !pres_layer;
	pthread_rwlock_unlock(&D.preserve_lock);
	/* Preserves of other objects into a layer a take retired still read
	 * SRC's directories as they were at the take (the global change lock
	 * this replaces kept every change back meanwhile): this first change
	 * of the new epoch, and the changes of objects it covers, wait for
	 * them. */
	if (!failed)
		layers_wait_retired(pres_layer);
	return failed ? ENOMEM : 0;
}

/* Leave the preserve phase for the change phase: 0, or PRESERVE_AGAIN with
 * the preserve phase entered again (or an errno). */
static int preserve_done(void)
{
	test_preserve_gate(pres_gated);
	layer_put(pres_layer);
	pres_layer = NULL;
	request_count();
	change_enter();
	if (D.epoch == pres_epoch)
		return 0;
	change_leave();
	dbg("layers switched during a preserve: preserving into the new one");
	return preserve_begin() ?: PRESERVE_AGAIN;
}

/* The end of one round of a preserve phase that left *err: true when a
 * take switched layers meanwhile and the round must run again (with *err
 * reset); false to go on to the change, or to fail with *err. */
static bool preserve_again(int *err)
{
	if (!*err)
		*err = preserve_done();
	if (*err != PRESERVE_AGAIN)
		return false;
	*err = 0;
	return true;
}

/* A path for a message only: bounded, never opened (rule 18). */
#define DESCRIBE(path, buf) ovs_relpath_describe((path), (buf), sizeof(buf))

static int preserve_failed(int rc, const char *what, const struct ovs_relpath *path)
{
	/* in the change phase (an unlink's move), D.layer */
	struct ovs_layer *l = pres_layer ? pres_layer : pres_locked ? D.layer : NULL;
	char where[OVS_RELPATH_DESCRIBE_MAX];
	bool first;

	/* A write error in the layer (rule 8): every first change fails
	 * the same way until the next take, said once. */
	if (l && ovs_layer_sync_error(l, &first)) {
		if (first)
			dlog(LOG_CRIT, "write error in the upper layer (%s, preserving %s before %s): "
			     "first changes are refused with EIO until the next take",
			     ovs_last_error(), DESCRIBE(path, where), what);
		return EIO;
	}
	dlog(LOG_ERR, "cannot preserve %s before %s: %s", DESCRIBE(path, where), what,
	     ovs_last_error());
	return rc < 0 ? -rc : EIO;
}

static bool node_covered_in(struct dnode *n, uint64_t epoch)
{
	return covered_epoch(__atomic_load_n(&n->covered, __ATOMIC_ACQUIRE)) == epoch;
}

/* The epoch in whose layer every name in folder n was found covered, or 0. */
static uint64_t node_names_epoch(struct dnode *n)
{
	uint64_t c = __atomic_load_n(&n->covered, __ATOMIC_ACQUIRE);

	return covered_names(c) ? covered_epoch(c) : 0;
}

/* In the preserve phase: every name in the folder whose covered word
 * (struct dnode's covered) is c is covered in pres_layer, so a preserve
 * of one of them, or of the object at one of them, would do nothing.  Not
 * after a write error in the layer, where the preserve refuses the change
 * (rule 8). */
static bool names_covered_by(uint64_t c)
{
	if (!pres_layer || ovs_layer_sync_error(pres_layer, NULL) || !covered_names(c))
		return false;
#ifdef OVS_MUTANT_NAMES_COVERED_ANY_EPOCH	/* make check-mutants: a take forgotten */
	return true;
#else
	return covered_epoch(c) == pres_epoch;
#endif
}

/* The same for folder n. */
static bool names_covered(struct dnode *n)
{
	return names_covered_by(__atomic_load_n(&n->covered, __ATOMIC_ACQUIRE));
}

/* Rule 1 for the object of node n, in the preserve phase. */
static int preserve_node(struct dnode *n, const char *what)
{
	struct ovs_relpath path;
	struct node_dir dir;
	struct stat st;
	unsigned cov;
	int rc;

	/* Moved into a layer by an unlink: the snapshot's copy now. */
	if (__atomic_load_n(&n->gone, __ATOMIC_ACQUIRE) != NODE_PRESENT)
		return ENOENT;
	if (!pres_layer || node_covered_in(n, pres_epoch))
		return 0;
	rc = node_relpath_dir(n, &path, &dir);
	if (rc == -ENOENT)
		return 0;	/* no name left: not part of the tree any more */
	if (rc < 0)
		return -rc;
	/* Preserving another object under this name would be silent
	 * damage to the snapshot: make sure the name is still ours, in the
	 * parent node's directory. */
	if (path.n) {
		if (fstatat(path.srcdirfd, path.names[path.n - 1], &st,
			    AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_dev != n->dev || st.st_ino != n->ino) {
			char where[OVS_RELPATH_DESCRIBE_MAX];

			dlog(LOG_ERR, "cannot preserve before %s: the name %s of inode %llu "
			     "is out of date", what, DESCRIBE(&path, where),
			     (unsigned long long)n->ino);
			node_relpath_free(&path);
			return EIO;
		}
		/* The preserve's stat too: one syscall less each. */
		path.st = &st;
	}
	/* Its name in a folder whose names are all covered (new since the
	 * take, or in one): the object is too, as the engine's walk of the
	 * layer would find (an ancestor of path is a whiteout, a file or
	 * opaque there), without the walk, one open per folder of path.
	 * A node forgotten and looked up again (a tree larger than the
	 * kernel's cache, a drop_caches) knows nothing of its own. */
	if (names_covered_by(dir.covered)) {
		node_covered_set(n, pres_epoch, false);
		node_relpath_free(&path);
		return 0;
	}
	pres_gated |= test_preserve_gate_wants(&path);
	rc = ovs_preserve_object_cov(pres_layer, D.hlmap, &path, &cov);
	if (rc < 0)
		rc = preserve_failed(rc, what, &path);
	else
		node_covered_set(n, pres_epoch, false);
	/* So are the folder's other names: remembered for the next. */
	if (cov & OVS_COV_SIBLINGS)
		node_dir_covered_set(n, &dir, pres_epoch);
	node_relpath_free(&path);
	return rc;
}

/*
 * Page-cache writeback (dirty pages of shared writable mmaps) is not held
 * by a barrier and a take forces it out before it raises one (rule 10):
 * it must land before the switch, in the layer it was dirtied for.  So it
 * preserves and changes in one go under preserve_lock (read), which the
 * switch waits for, rather than in two phases.
 */
static int writeback_change_begin(struct dnode *n, bool *locked, const char *what)
{
	change_lock_object(n, true);
	*locked = true;
	change_enter();
	pres_layer = layer_get();
	pres_epoch = D.epoch;
	if (D.layer && !pres_layer)
		return ENOMEM;
	return preserve_node(n, what);
}

/*
 * Before a data or metadata change of an existing object: the fast path
 * (already covered in this epoch) takes only the read side of
 * preserve_lock.  *locked tells whether n's change locks are held too;
 * release all with object_change_end().  writeback: the change is page-cache
 * writeback.
 */
static int object_change_begin(struct dnode *n, bool writeback, bool *locked, const char *what)
{
	int err;

	*locked = false;
	change_enter();
	if (!D.layer || node_covered_in(n, D.epoch))
		return 0;
	change_leave();
	if (writeback)
		return writeback_change_begin(n, locked, what);
	change_lock_object(n, false);
	*locked = true;
	err = preserve_begin();
	if (!err)
		do {
			err = preserve_node(n, what);
		} while (preserve_again(&err));
	return err;
}

static void object_change_end(bool locked)
{
	change_leave();
	if (locked)
		change_unlock();
}

/* A namespace change: the preserve phase under the change locks (the
 * marks of ks, or with ks NULL ns_lock for writing), then
 * preserve_done() before the change; ns_change_end() in every case. */
static int ns_change_begin(const struct busy_keys *ks)
{
	if (ks)
		change_lock_marks(ks);
	else
		change_lock_names();
	return preserve_begin();
}

static void ns_change_end(void)
{
	change_leave();
	change_unlock();
}

static int preserve_path(int (*fn)(struct ovs_layer *, struct ovs_hlmap *,
				   const struct ovs_relpath *),
			 const struct ovs_relpath *path, const char *what)
{
	int rc;

	if (!pres_layer)
		return 0;
	pres_gated |= test_preserve_gate_wants(path);
	rc = fn(pres_layer, D.hlmap, path);
	if (rc < 0)
		return preserve_failed(rc, what, path);
	return 0;
}

/* Rule 2 for a new name at path in folder dir: what the layer covers
 * around it in *cov (ovs_preserve_name_cov; 0 without a layer), and
 * dir remembered as a folder whose names are all covered when they are. */
static int preserve_name_path(struct dnode *dir, const struct ovs_relpath *path, unsigned *cov,
			      const char *what)
{
	int rc;

	*cov = 0;
	if (!pres_layer)
		return 0;
	pres_gated |= test_preserve_gate_wants(path);
	rc = ovs_preserve_name_cov(pres_layer, D.hlmap, path, cov);
	if (rc < 0)
		return preserve_failed(rc, what, path);
	if (*cov & OVS_COV_SIBLINGS)
		node_covered_set(dir, pres_epoch, true);
	return 0;
}

static int preserve_rmdir_path(const struct ovs_relpath *path, const char *what)
{
	int rc;

	if (!pres_layer)
		return 0;
	pres_gated |= test_preserve_gate_wants(path);
	rc = ovs_preserve_rmdir(pres_layer, path);
	if (rc < 0)
		return preserve_failed(rc, what, path);
	return 0;
}

/*
 * A change asked for on the control socket (daemon-restore.c) to the
 * existing object at path: preserved as a first change of it would be
 * (rule 1), then change(arg) while no take can switch layers.  The one
 * place outside the FUSE operations that knows how a change is locked.
 * 0 or a positive errno.
 */
int change_object_by_request(const struct ovs_relpath *path, int (*change)(void *arg),
			     void *arg)
{
	int err;

	/* ns_lock for writing: no other change (a first change, a create,
	 * an unlink or a rename of a file) runs meanwhile, so none can race
	 * this one on the object at path (which has no node to take a busy
	 * mark on).  Restores are rare and their clones quick. */
	err = ns_change_begin(NULL);
	if (!err)
		do {
			err = preserve_path(ovs_preserve_object, path, "a restore");
		} while (preserve_again(&err));
	if (!err)
		err = change(arg);
	ns_change_end();
	request_uncount();
	return err;
}

/* Rule 3 needs the directory empty before it is marked opaque: an opaque
 * copy of a non-empty directory would hide its old entries. */
static int dir_is_empty(int dirfd, const char *name)
{
	struct dirent *de;
	DIR *dp;
	int fd, empty = 1;

	/* O_NOATIME (rule 16): this read comes before the copy-up, which
	 * must record the directory's atime as of the snapshot. */
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(dp))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	}
	closedir(dp);
	return empty;
}

/* Two names under SRC of the hard-linked object at path, for its node
 * when path goes away: other_of() is the other one, or NULL.  Only one
 * other: an unlink or rename of each name of a file with n links would
 * otherwise copy all n names, quadratic in n. */
struct other_names {
	struct ovs_relpath *names;	/* names[0] is path itself, n <= 2 */
	size_t n;
};

static void other_names_get(const struct ovs_relpath *path, const struct stat *st,
			    struct other_names *o)
{
	if (S_ISDIR(st->st_mode) || st->st_nlink < 2 || !D.hlmap ||
	    ovs_hlmap_names_max(D.hlmap, D.srcfd, path, 2, &o->names, &o->n) < 0) {
		o->names = NULL;
		o->n = 0;
	}
}

static const struct ovs_relpath *other_of(const struct other_names *o)
{
	return o->n > 1 ? &o->names[1] : NULL;
}

/* ---- entries ------------------------------------------------------------- */

/*
 * How long the kernel may trust names, negative names and attributes
 * without asking.  Only this mount changes SRC while it is mounted (the
 * store and the layers are outside it, and preservation reads SRC but
 * writes only into the layer), and every change through it updates the
 * kernel's caches itself; keep_cache relies on the same for file data.
 * A short timeout cost a LOOKUP per name again after a second (deleting
 * 10,000 files: one more round trip each).  What bypasses the mount
 * (files held open across `activate --force`, hard links from outside
 * SRC, both reported by fsck) can leave these caches stale for as long.
 */
#define CACHE_TIMEOUT 86400.0

/*
 * Without file handles every inode the kernel caches holds an O_PATH fd
 * here (daemon-nodes.c); with them, open files do.  At the open file
 * limit, lookups and creates fail with EMFILE: say so once, with the
 * limit, since the caller only sees "Too many open files".
 */
static void note_fd_limit(int err)
{
	static bool said;
	struct rlimit rl;

	if ((err != EMFILE && err != ENFILE) || __atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		return;
	if (err == ENFILE || getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		dlog(LOG_ERR, "out of file descriptors (%s): lookups in SRC fail until "
		     "the kernel forgets some inodes", strerror(err));
		return;
	}
	if (D.handles)
		dlog(LOG_ERR, "out of file descriptors: open files and the fd cache reach "
		     "its limit, %llu; requests fail with EMFILE until files are closed",
		     (unsigned long long)rl.rlim_cur);
	else
		dlog(LOG_ERR, "out of file descriptors: the daemon holds one for every inode "
		     "the kernel caches, and its limit is %llu; lookups in SRC fail with "
		     "EMFILE until the kernel forgets some inodes",
		     (unsigned long long)rl.rlim_cur);
}

/*
 * known: what the daemon knew of the object of the inode number a listing
 * gave the name (node_knows_ino), before the name is stat'ed: then that
 * stat, and the name's handle unless the daemon holds an fd of it, may be
 * all it takes (node_get_known), one or two system calls where opening the
 * name, its stat, its handle and the close of an fd the cache evicts for
 * it take four.  A folder listed again after a change of it (the kernel
 * drops its listing) finds most of its objects so, however many of them
 * the fd cache still holds.
 */
static int do_lookup(struct dnode *parent, const char *name, struct fuse_entry_param *e,
		     const struct node_known *known)
{
	struct dnode *n;
	int fd;

	if (!strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
		return EINVAL;
	memset(e, 0, sizeof(*e));
	for (;;) {
		uint64_t seq = nodes_seq();
		int pfd = node_fd_get(parent);

		if (pfd < 0)
			return -pfd;
		if (known) {
			int err = 0;
			const struct node_known *k = known;

			known = NULL;	/* once: a race falls back to the open */
			if (fstatat(pfd, name, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
				err = errno;
			else if (e->attr.st_dev != D.src_dev)
				n = NULL;	/* the open below answers EXDEV */
			else if (!(n = node_get_known(&e->attr, parent, name, seq, pfd, k)))
				err = errno;
			if (err || n) {
				node_fd_put(parent);
				if (n)
					break;
				if (err == EAGAIN)
					continue;
				return err;
			}
		}
		fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		node_fd_put(parent);
		if (fd < 0) {
			note_fd_limit(errno);
			return errno;
		}
		if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
			int err = errno;

			close(fd);
			return err;
		}
		/* Rule 15: the clone of SRC's mount has no submounts, so
		 * only another device on the same mount is left: a btrfs
		 * subvolume. */
		if (e->attr.st_dev != D.src_dev) {
			close(fd);
			return EXDEV;
		}
		n = node_get(fd, &e->attr, parent, name, seq);
		if (n)
			break;
		if (errno != EAGAIN)
			return errno;
	}
	/* Every name in parent covered: in a folder in it too. */
	if (S_ISDIR(e->attr.st_mode)) {
		uint64_t epoch = node_names_epoch(parent);

		if (epoch)
			node_covered_set(n, epoch, true);
	}
	e->ino = node_ino(n);
	e->attr_timeout = CACHE_TIMEOUT;
	e->entry_timeout = CACHE_TIMEOUT;
	return 0;
}

/* After a name was created: the new object is covered by the whiteout
 * preserve_name put there. */
static int new_entry(struct dnode *parent, const char *name, struct fuse_entry_param *e)
{
	int err = do_lookup(parent, name, e, NULL);

	if (!err)
		node_covered_set(node_of(e->ino), D.epoch, false);
	return err;
}

/*
 * An entry was made in SRC but cannot be handed to the kernel (no fd left
 * for its node, say): remove it again, so that a failed request leaves
 * nothing behind that the kernel's negative entry (cached for a day)
 * would hide.  Caller holds the change locks of a create in parent (or
 * of a link), so the name is still the one it made.  path: the entry's path in SRC when it is a new hard link, to keep
 * the map of linked inodes current.
 */
static void undo_entry(struct dnode *parent, const char *name, bool dir,
		       const struct ovs_relpath *path, const char *what)
{
	struct stat st;
	int pfd = node_fd_get(parent);

	if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    unlinkat(pfd, name, dir ? AT_REMOVEDIR : 0) < 0) {
		if (pfd < 0)
			errno = -pfd;
		dlog(LOG_ERR, "cannot remove %s again after a failed %s: %m", name, what);
		if (pfd >= 0)
			node_fd_put(parent);
		return;
	}
	node_fd_put(parent);
	if (path && D.hlmap)
		ovs_hlmap_unlink(D.hlmap, path, &st);
}

/* ---- operations ------------------------------------------------------------ */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* The header peek of daemon-loop.c needs requests in memory, but
	 * replies may be spliced: file data of reads then goes from the real
	 * file to /dev/fuse without a copy through the daemon (measured:
	 * about 1.8x faster cold sequential reads). */
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	/* Rule 10: never let the kernel hold all writes back. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
	/* The kernel clears setuid bits itself (through setattr). */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* Only this mount reaches SRC, so the kernel's local lock tables
	 * are complete: POSIX and flock locks need no daemon round trip. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	if (conn->capable & FUSE_CAP_POSIX_ACL)
		conn->want |= FUSE_CAP_POSIX_ACL;
	/* The real filesystem applies the umask, or a default ACL instead. */
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->time_gran = 1;
	/*
	 * Every chunk of a listing with its entries' attributes.  With the
	 * kernel's "auto" heuristic only the first chunk of a directory
	 * (about 200 entries) came that way: a walker that reads the whole
	 * listing before it stats (find, fts, du) made the kernel ask the
	 * rest with plain READDIR and then LOOKUP each name, a round trip
	 * per entry (0.8 per file in bench/live-walk-bench.sh).  Plain
	 * listings (ls without -l) pay for attributes they do not use, as
	 * the views do (view-ops.c).
	 */
	if (conn->capable & FUSE_CAP_READDIRPLUS) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	}
	/*
	 * FUSE passthrough of file data (issue 12) stays off on the live
	 * path: no answer to OPEN keeps both the errors of the real
	 * filesystem and rules 1, 10 and 12.  Checked on 6.18 with
	 * bench/fuse-pt-modes.sh (ovsnapd(8), "FUSE passthrough"): while a
	 * read-only open is in passthrough mode, an open answered in the page
	 * cache or with FOPEN_DIRECT_IO alone fails with EIO
	 * (fuse_file_io_open wants FOPEN_PASSTHROUGH while the inode has a
	 * backing file, before it lets direct_io opens skip the mode
	 * accounting).  FOPEN_PASSTHROUGH | FOPEN_DIRECT_IO works and sends
	 * read, write, truncate, fallocate and fsync here, but its mmap goes
	 * to the backing file (fuse_file_mmap -> fuse_passthrough_mmap):
	 * shared stores reach SRC unpreserved and past the take's barrier,
	 * also after RELEASE (the mapping holds the backing file).  A
	 * direct_io writer opened first lets a passthrough reader in, then its
	 * own mmap fails with ENODEV.  Giving the file a second FUSE inode
	 * for later opens (new node id on LOOKUP, ESTALE to a writer that
	 * still reaches the old one) leaves a /proc/PID/fd reopen failing
	 * with ESTALE and the readers blind to the writer's shared-mapping
	 * stores until writeback.  Views use passthrough for files in frozen
	 * layers (view-ops.c), which never change.
	 */
#ifdef HAVE_FUSE_PASSTHROUGH
	dlog(LOG_INFO, "FUSE passthrough: %s", (conn->capable & FUSE_CAP_PASSTHROUGH) ?
	     "offered by the kernel; off on the live path (writes must reach the daemon), "
	     "used by views for files in frozen layers" :
	     "not offered by this kernel (6.9+ has it)");
#else
	dlog(LOG_INFO, "FUSE passthrough: off (built against libfuse < 3.17.1)");
#endif
	/* Refused even if FUSE_URING_ENABLE asks libfuse for it (fuse-uring.c). */
	dlog(LOG_INFO, "FUSE over io_uring: %s", fuse_uring_choose(conn,
	     "off (offered by the kernel; its ring threads would serve requests "
	     "past the take barrier of ovsnapd's own request loop)"));
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = do_lookup(node_of(parent), name, &e, NULL);

	if (err == ENOENT) {
		/* A negative entry the kernel may cache: the name can only
		 * appear through this mount, which tells the kernel. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = CACHE_TIMEOUT;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(node_of(ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		node_forget(node_of(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc;

	(void)fi;
	rc = stat_node(node_of(ino), &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

/* nfd: the node's O_PATH fd */
static int apply_setattr_fd(int nfd, struct stat *attr, int valid, struct fuse_file_info *fi)
{
	char proc[64];
	int fd = fi ? handle_of(fi)->fd : -1;

	PROC_FD_PATH(proc, nfd);
	if (valid & FUSE_SET_ATTR_MODE) {
		if ((fd >= 0 ? fchmod(fd, attr->st_mode) : chmod(proc, attr->st_mode)) < 0)
			return errno;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

		if (fchownat(nfd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return errno;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		if ((fd >= 0 ? ftruncate(fd, attr->st_size) : truncate(proc, attr->st_size)) < 0)
			return errno;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {
			{ .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT },
		};

		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if ((fd >= 0 ? futimens(fd, tv)
			     : utimensat(nfd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)) < 0)
			return errno;
	}
	return 0;
}

static int apply_setattr(struct dnode *n, struct stat *attr, int valid,
			 struct fuse_file_info *fi)
{
	int nfd = node_fd_get(n), err;

	if (nfd < 0)
		return -nfd;
	err = apply_setattr_fd(nfd, attr, valid, fi);
	node_fd_put(n);
	return err;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	struct dnode *n = node_of(ino);
	struct stat st;
	bool locked;
	int err;

#ifdef OVS_MUTANT_CHMOD_UNPRESERVED	/* make check-mutants: chmod unpreserved */
	if (valid & FUSE_SET_ATTR_MODE) { locked = false; change_enter(); err = 0; } else
#endif
	err = object_change_begin(n, false, &locked, "setattr");
	if (!err)
		err = apply_setattr(n, attr, valid, fi);
	object_change_end(locked);
	if (!err)
		err = -stat_node(n, &st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	struct dnode *n = node_of(ino);
	int fd = node_fd_get(n);
	ssize_t len = fd < 0 ? (errno = -fd, -1) : readlinkat(fd, "", buf, sizeof(buf));

	if (fd >= 0)
		node_fd_put(n);
	if (len < 0)
		fuse_reply_err(req, errno);
	else if (len == sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[len] = 0;
		fuse_reply_readlink(req, buf);
	}
}

/* Under the locks of a change of names, the objects are not the ones
 * marked (a change that bypassed the mount, or a directory where a file
 * was): the change starts again under ns_lock for writing. */
#define NS_RELOCK (-3)

/* After NS_RELOCK: out of the marks, to start again under ns_lock for
 * writing (counted in the status reply, for the tests). */
static struct busy_keys *ns_relock(void)
{
	ns_change_end();
	__atomic_add_fetch(&D.relocks, 1, __ATOMIC_RELAXED);
	return NULL;
}

static bool entry_stat(struct dnode *dir, const char *name, struct stat *st);

/*
 * Rule 2 before a new name: ns_change_begin() and the preserve phase;
 * ns_change_end() in every case.  The kernel asks for a create only where
 * it knows no entry, but a name made behind the mount (a negative entry
 * it caches for a day) reaches an object: that object is preserved by
 * ovs_preserve_name under ns_lock for writing (the stat under the
 * directory's mark finds it: NS_RELOCK), so its preserve and the
 * create's open (with O_TRUNC, a change of it) are one step against its
 * other changes (rule 9); for that rare object no create stats its name
 * before the mark.  *existed: an object was
 * at the name when it was preserved.  all_names: under ns_lock for
 * writing from the start.
 *
 * In a folder whose names are all covered in this epoch (a folder new
 * since the take, or in one) nothing is preserved and the name is not
 * stat'ed: *existed is false, so the create is exclusive, and an object
 * made there behind the mount fails it with EEXIST; op_create then goes
 * again with all_names, the way that stats the name.  *below: every name
 * below the new one is covered too (for a new folder).
 */
static int create_begin(struct dnode *parent, const char *name, struct ovs_relpath *path,
			bool *existed, bool *below, bool all_names)
{
	struct busy_keys keys = { .n = 0 }, *ks = all_names ? NULL : &keys;
	struct stat st;
	unsigned cov;
	int rc, err;

	keys_add(&keys, parent->dev, parent->ino);
again:
	err = ns_change_begin(ks);
	if (!err)
		do {
			*existed = *below = false;
			node_relpath_free(path);
			rc = node_relpath(parent, name, path);
			if (rc < 0)
				err = -rc;
			if (!err && !all_names && (!pres_layer || names_covered(parent))) {
				*below = pres_layer != NULL;
				continue;	/* to preserve_again() */
			}
			if (!err) {
				*existed = fstatat(path->srcdirfd, name, &st,
						   AT_SYMLINK_NOFOLLOW) == 0;
				if (*existed && ks && !keys_have(ks, st.st_dev, st.st_ino))
					err = NS_RELOCK;
			}
			if (!err)
				err = preserve_name_path(parent, path, &cov, "create");
			*below = !err && (cov & OVS_COV_BELOW);
		} while (preserve_again(&err));
	if (err == NS_RELOCK) {
		ks = ns_relock();
		goto again;
	}
	return err;
}

enum create_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

/* mknod, mkdir and symlink: rule 2, then create as the caller. */
static void make_entry(fuse_req_t req, fuse_ino_t parent_ino, const char *name,
		       enum create_kind kind, mode_t mode, dev_t rdev, const char *target)
{
	struct dnode *parent = node_of(parent_ino);
	struct fuse_entry_param e;
	struct ovs_relpath path = { .srcdirfd = -1 };
	bool existed, below;
	int rc, err = 0;

	/* Rule 14: a 0/0 character device reads as a whiteout. */
	if (kind == MAKE_NODE && S_ISCHR(mode) && rdev == 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	err = create_begin(parent, name, &path, &existed, &below, false);
	if (!err) {
		rc = identity_become(req, kind != MAKE_SYMLINK);
		if (rc == 0) {
			if (kind == MAKE_DIR)
				rc = mkdirat(path.srcdirfd, name, mode);
			else if (kind == MAKE_SYMLINK)
				rc = symlinkat(target, path.srcdirfd, name);
			else
				rc = mknodat(path.srcdirfd, name, mode, rdev);
			if (rc < 0)
				rc = -errno;
		}
		identity_restore();
		err = -rc;
	}
	if (!err) {
		err = new_entry(parent, name, &e);
		if (err)
			undo_entry(parent, name, kind == MAKE_DIR, NULL, "create");
		else if (kind == MAKE_DIR && below)
			node_covered_set(node_of(e.ino), pres_epoch, true);
	}
	ns_change_end();
	node_relpath_free(&path);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	make_entry(req, parent, name, MAKE_NODE, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_entry(req, parent, name, MAKE_DIR, mode | S_IFDIR, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_entry(req, parent, name, MAKE_SYMLINK, S_IFLNK, 0, link);
}

/* The path and state of parent/name before an unlink (dir false) or an
 * rmdir (dir true): 0, or the errno the removal fails with. */
static int entry_to_remove(struct dnode *parent, const char *name, bool dir,
			   struct ovs_relpath *path, struct stat *st)
{
	int rc;

	node_relpath_free(path);
	rc = node_relpath(parent, name, path);

	if (rc < 0)
		return -rc;
	if (fstatat(path->srcdirfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	if (dir && !S_ISDIR(st->st_mode))
		return ENOTDIR;
	if (!dir && S_ISDIR(st->st_mode))
		return EISDIR;
	return 0;
}

/*
 * The object at dir/name, not followed, looked at before the change
 * locks are taken, to know which to take: false when there is none (the
 * change then fails under its locks, or finds another object there).
 */
static bool entry_stat(struct dnode *dir, const char *name, struct stat *st)
{
	int fd = node_fd_get(dir);
	bool found;

	if (fd < 0)
		return false;
	found = fstatat(fd, name, st, AT_SYMLINK_NOFOLLOW) == 0;
	node_fd_put(dir);
	return found;
}

/* unlink_by_move(): not moved, nothing changed: copy in the preserve
 * phase and unlink. */
#define MOVE_REFUSED (-4)

/*
 * Whether a caller other than root may remove a name in the directory
 * dirfd, checked as the unlink itself would check it (rule 19), before
 * the daemon's own rename does it for them: 0, the errno the unlink
 * fails with, or MOVE_REFUSED where this check cannot tell (no
 * faccessat2): the unlink as the caller tells.
 */
static int caller_may_remove(fuse_req_t req, int dirfd)
{
	int rc;

	if (fuse_req_ctx(req)->uid == 0)
		return 0;
	rc = identity_become(req, false);
	if (rc == 0 && syscall(SYS_faccessat2, dirfd, "", W_OK | X_OK,
			       AT_EACCESS | AT_EMPTY_PATH) < 0)
		rc = -errno;
	identity_restore();
	if (rc == -EACCES || rc == -EPERM || rc == -EROFS)
		return -rc;
	return rc ? MOVE_REFUSED : 0;
}

/*
 * Whether the unlink of the object st, its only name in dirfd, may move
 * it into the layer rather than copy it (ovs_preserve_unlink): a regular
 * file with one name and no open handle now, and for a caller other than
 * root not in a sticky directory (whose rule also asks who owns the file:
 * the unlink as the caller answers that).
 */
static bool may_move(fuse_req_t req, int dirfd, const struct stat *st)
{
	struct stat dst;

	if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || test_no_move() ||
	    node_has_handles(st->st_dev, st->st_ino))
		return false;
	return fuse_req_ctx(req)->uid == 0 ||
	       (fstat(dirfd, &dst) == 0 && !(dst.st_mode & S_ISVTX));
}

/*
 * The preserve phase of an unlink (its change locks held, ns_change_begin
 * or preserve_begin done): the object at parent/name in *path and *st,
 * preserved, or *movable when the engine left it to be moved into the
 * layer at the unlink itself (with, in *to, the upper directory it moves
 * into, if its walk found it: unlink_by_move's); copy: never that.
 */
static int unlink_preserve(fuse_req_t req, struct dnode *parent, const char *name,
			   const struct busy_keys *ks, struct ovs_relpath *path,
			   struct stat *st, bool copy, bool *movable, struct ovs_upper_dir *to)
{
	unsigned cov;
	int err, rc;

	do {
		*movable = false;
		err = entry_to_remove(parent, name, false, path, st);
#ifdef OVS_MUTANT_UNLINK_UNMARKED
		if (0)
#endif
		if (!err && ks && !keys_have(ks, st->st_dev, st->st_ino))
			err = NS_RELOCK;
		/* The preserve's stat too, made under the marks. */
		path->st = st;
		/* In a folder whose names are all covered the engine would
		 * find the name covered and preserve nothing (names_covered). */
		if (!err && pres_layer && !names_covered(parent)) {
			pres_gated |= test_preserve_gate_wants(path);
			rc = ovs_preserve_unlink(pres_layer, D.hlmap, path,
						 !copy && may_move(req, path->srcdirfd, st), to,
						 &cov);
			if (rc < 0)
				err = preserve_failed(rc, "unlink", path);
			*movable = rc == 1;
			if (cov & OVS_COV_SIBLINGS)
				node_covered_set(parent, pres_epoch, true);
		}
	} while (preserve_again(&err));
	return err;
}

/*
 * The unlink of a file ovs_preserve_unlink left to move, in the change
 * phase (no take can switch layers: D.layer is the layer it decided in):
 * the file itself leaves SRC for the layer, its node claimed so that no
 * handle opens meanwhile, and nothing reaches it through the node after.
 * MOVE_REFUSED where it cannot (a handle opened since, the filesystem
 * refuses the rename), SRC unchanged.
 */
static int unlink_by_move(fuse_req_t req, struct dnode *parent, const char *name,
			  const struct ovs_relpath *path, const struct stat *st,
			  struct ovs_upper_dir *to, bool *moved)
{
	int rc, may;

	*moved = false;
	if (!node_move_claim(st->st_dev, st->st_ino, parent, name))
		return MOVE_REFUSED;
	may = caller_may_remove(req, path->srcdirfd);
	rc = may ? 0 : ovs_move_to_upper(D.layer, path, st, to, moved);
	node_move_end(st->st_dev, st->st_ino, parent, name, *moved);
	if (may)
		return may;	/* refused as the unlink would be, or unknown */
	if (*moved) {
		if (rc < 0)
			dlog(LOG_ERR, "unlink of a file moved into the layer: %s",
			     ovs_last_error());
		return 0;
	}
	return rc < 0 ? preserve_failed(rc, "unlink", path) : MOVE_REFUSED;
}

/*
 * An unlink moves one name of one object and no other object's chain:
 * it marks the object busy (its first changes, its other names, rule 6)
 * and the directory (its creates, rule 3's emptiness of an rmdir), under
 * ns_lock for reading, so it waits for no preserve of anything else.
 */
static void op_unlink(fuse_req_t req, fuse_ino_t parent_ino, const char *name)
{
	struct dnode *parent = node_of(parent_ino);
	struct ovs_relpath path = { .srcdirfd = -1 };
	struct other_names other = { 0 };
	struct busy_keys keys = { .n = 0 }, *ks = &keys;
	struct node_known k = { .bytes = 0 };
	struct ovs_upper_dir to = OVS_UPPER_DIR_INIT;
	struct stat st;
	bool movable = false, moved = false, copy = false;
	int rc, err = 0, keep = -1;

	keys_add(ks, parent->dev, parent->ino);
#ifndef OVS_MUTANT_UNLINK_UNMARKED	/* make check-mutants: the object unmarked */
	if (entry_stat(parent, name, &st))
		keys_add(ks, st.st_dev, st.st_ino);
#endif
again:
	err = ns_change_begin(ks);
	if (!err)
		err = unlink_preserve(req, parent, name, ks, &path, &st, copy, &movable, &to);
	if (!err && movable) {
		err = unlink_by_move(req, parent, name, &path, &st, &to, &moved);
		if (err == MOVE_REFUSED) {
			/* Back to the preserve phase, out of a take's way, to
			 * copy it (rule 13). */
			copy = true;
			change_leave();
			err = preserve_begin() ?:
			      unlink_preserve(req, parent, name, ks, &path, &st, copy, &movable,
					      &to);
		}
	}
	ovs_upper_dir_release(&to);
	if (err == NS_RELOCK) {
		ks = ns_relock();
		goto again;
	}
	if (!err && !moved) {
		other_names_get(&path, &st, &other);
		rc = identity_become(req, false);
		if (rc == 0 && unlinkat(path.srcdirfd, name, 0) < 0)
			rc = -errno;
		identity_restore();
		err = -rc;
	}
	if (!err && !moved) {
		if (D.hlmap && st.st_nlink > 1)
			ovs_hlmap_unlink(D.hlmap, &path, &st);
		if (!other_of(&other))
			keep = node_removed_fd(st.st_dev, st.st_ino, parent, name, &k);
		node_update_removed(st.st_dev, st.st_ino, parent, name, other_of(&other), keep, &k);
	}
	ns_change_end();
	ovs_hlmap_names_free(other.names, other.n);
	node_relpath_free(&path);
	fuse_reply_err(req, err);
}

/*
 * An rmdir of an empty directory moves no other object's chain either:
 * it marks the directory and its parent.  Empty under the directory's
 * mark: a create, link or rename into it marks it too, and a rename of
 * a directory into it holds ns_lock for writing, so nothing can appear
 * in it until the rmdir is done (rule 3).  A node still hanging from it
 * (a name out of date) might lie on a chain a preserve walks: then under
 * ns_lock for writing, as a change that moves chains.
 */
static void op_rmdir(fuse_req_t req, fuse_ino_t parent_ino, const char *name)
{
	struct dnode *parent = node_of(parent_ino);
	struct ovs_relpath path = { .srcdirfd = -1 };
	struct busy_keys keys = { .n = 0 }, *ks = &keys;
	struct node_known k = { .bytes = 0 };
	struct stat st;
	int rc, err = 0;

	keys_add(ks, parent->dev, parent->ino);
	if (entry_stat(parent, name, &st))
		keys_add(ks, st.st_dev, st.st_ino);
again:
	err = ns_change_begin(ks);
	if (!err)
		do {
			err = entry_to_remove(parent, name, true, &path, &st);
			if (!err && ks && (!keys_have(ks, st.st_dev, st.st_ino) ||
					   node_has_children(st.st_dev, st.st_ino)))
				err = NS_RELOCK;
			if (!err) {
				rc = dir_is_empty(path.srcdirfd, name);
				err = rc < 0 ? -rc : rc == 0 ? ENOTEMPTY : 0;
			}
			if (!err)
				err = preserve_rmdir_path(&path, "rmdir");
		} while (preserve_again(&err));
	if (err == NS_RELOCK) {
		ks = ns_relock();
		goto again;
	}
	if (!err) {
		rc = identity_become(req, false);
		if (rc == 0 && unlinkat(path.srcdirfd, name, AT_REMOVEDIR) < 0)
			rc = -errno;
		identity_restore();
		err = -rc;
	}
	if (!err)
		node_update_removed(st.st_dev, st.st_ino, parent, name, NULL,
				    node_removed_fd(st.st_dev, st.st_ino, parent, name, &k), &k);
	ns_change_end();
	node_relpath_free(&path);
	fuse_reply_err(req, err);
}

/* Preserve one side of a rename as an object that is about to move. */
static int preserve_moving(const struct ovs_relpath *path, const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return preserve_path(ovs_preserve_subtree, path, "rename");
	return preserve_path(ovs_preserve_object, path, "rename");
}

/* rename_prepare(): both names are one file, so rename(2) does nothing. */
#define RENAME_NOTHING (-2)

struct rename_args {
	struct dnode *parent, *newparent;
	const char *name, *newname;
	unsigned int flags;
	struct ovs_relpath from, to;	/* freed by the caller */
	struct stat st_from, st_to;
	bool target_exists;
};

/* Whether the side of a rename with object st may move under the marks
 * of ks (ks NULL: under ns_lock for writing, anything may). */
static bool rename_side_marked(const struct busy_keys *ks, const struct stat *st)
{
	return !ks || (!S_ISDIR(st->st_mode) && keys_have(ks, st->st_dev, st->st_ino));
}

/* The checks and the preserve phase of a rename under the marks of ks
 * (or NULL: ns_lock for writing). */
static int rename_prepare(struct rename_args *a, const struct busy_keys *ks)
{
	bool from_covered, to_covered;
	unsigned cov;
	int rc, err = 0;

	a->target_exists = false;
	node_relpath_free(&a->from);
	node_relpath_free(&a->to);
	rc = node_relpath(a->parent, a->name, &a->from);
	if (rc == 0)
		rc = node_relpath(a->newparent, a->newname, &a->to);
	if (rc < 0)
		return -rc;
	if (fstatat(a->from.srcdirfd, a->name, &a->st_from, AT_SYMLINK_NOFOLLOW) < 0)
		return errno;
	if (fstatat(a->to.srcdirfd, a->newname, &a->st_to, AT_SYMLINK_NOFOLLOW) == 0)
		a->target_exists = true;
	else if (errno != ENOENT)
		return errno;
	if (!rename_side_marked(ks, &a->st_from) ||
	    (a->target_exists && !rename_side_marked(ks, &a->st_to)))
		return NS_RELOCK;
	if (a->target_exists && a->st_to.st_dev == a->st_from.st_dev &&
	    a->st_to.st_ino == a->st_from.st_ino)
		return RENAME_NOTHING;
	if ((a->flags & RENAME_EXCHANGE) && !a->target_exists)
		return ENOENT;
	if ((a->flags & RENAME_NOREPLACE) && a->target_exists)
		return EEXIST;

	/* Preserving more than a failing rename needed is harmless: an
	 * uncovered path still shows its snapshot state.  Only the opaque
	 * mark of rule 3 must not land on a non-empty directory. */
	/* Both names' preserves, then one fsync per upper directory they
	 * touched (rule 8; the busy marks of both names and objects keep
	 * other preserves off what the group defers).  A name in a folder
	 * whose names are all covered needs none. */
	from_covered = names_covered(a->parent);
	to_covered = names_covered(a->newparent);
	if (from_covered && to_covered)
		return 0;
	if (pres_layer)
		ovs_preserve_group_begin(pres_layer);
	if (!from_covered)
		err = preserve_moving(&a->from, &a->st_from);
	if (!err && !to_covered) {
		if (a->flags & RENAME_EXCHANGE) {
			err = preserve_moving(&a->to, &a->st_to);
		} else if (a->target_exists && S_ISDIR(a->st_to.st_mode)) {
			rc = dir_is_empty(a->to.srcdirfd, a->newname);
			if (rc < 0)
				err = -rc;
			else if (rc == 1)
				err = preserve_rmdir_path(&a->to, "rename over a directory");
			/* not empty: the rename fails */
		} else {
			err = preserve_name_path(a->newparent, &a->to, &cov, "rename");
		}
	}
	if (pres_layer) {
		rc = ovs_preserve_group_end(pres_layer);
		if (rc < 0 && !err)
			err = preserve_failed(rc, "rename", &a->to);
	}
	return err;
}

/*
 * A rename of a file (over another file or not, or an exchange of two
 * files) moves the names of those objects only: it marks them and both
 * directories, under ns_lock for reading.  A directory on either side
 * moves the chain of everything below it, which the preserves of other
 * objects walk: ns_lock for writing, which waits for them all.
 */
static struct busy_keys *rename_keys(struct rename_args *a, struct busy_keys *ks)
{
	struct stat st;

	keys_add(ks, a->parent->dev, a->parent->ino);
	keys_add(ks, a->newparent->dev, a->newparent->ino);
	if (entry_stat(a->parent, a->name, &st)) {
		if (S_ISDIR(st.st_mode))
			return NULL;
		keys_add(ks, st.st_dev, st.st_ino);
	}
	if (entry_stat(a->newparent, a->newname, &st)) {
		if (S_ISDIR(st.st_mode))
			return NULL;
		keys_add(ks, st.st_dev, st.st_ino);
	}
	return ks;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent_ino, const char *name,
		      fuse_ino_t newparent_ino, const char *newname, unsigned int flags)
{
	struct rename_args a = {
		.parent = node_of(parent_ino), .newparent = node_of(newparent_ino),
		.name = name, .newname = newname, .flags = flags,
		.from = { .srcdirfd = -1 }, .to = { .srcdirfd = -1 },
	};
	struct other_names other = { 0 };
	struct busy_keys keys = { .n = 0 }, *ks;
	struct node_known k = { .bytes = 0 };
	int rc, err = 0;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
#ifdef OVS_MUTANT_RENAME_EXDEV	/* make check-mutants: every rename refused */
	{ fuse_reply_err(req, EXDEV); return; }
#endif
	ks = rename_keys(&a, &keys);
again:
	err = ns_change_begin(ks);
	if (!err)
		do {
			err = rename_prepare(&a, ks);
		} while (preserve_again(&err));
	if (err == NS_RELOCK) {
		ks = ns_relock();
		goto again;
	}
	if (err == RENAME_NOTHING) {
		ns_change_end();
		node_relpath_free(&a.from);
		node_relpath_free(&a.to);
		fuse_reply_err(req, 0);
		return;
	}

	if (!err) {
		if (a.target_exists && !(flags & RENAME_EXCHANGE))
			other_names_get(&a.to, &a.st_to, &other);
		rc = identity_become(req, false);
		if (rc == 0 && renameat2(a.from.srcdirfd, name, a.to.srcdirfd, newname, flags) < 0)
			rc = -errno;
		identity_restore();
		err = -rc;
	}
	/* The link map first: a.from and a.to lend the nodes' names, which
	 * the node updates may change. */
	if (!err && (flags & RENAME_EXCHANGE)) {
		if (D.hlmap)
			ovs_hlmap_exchange(D.hlmap, &a.from, &a.to);
		node_update_exchanged(&a.st_from, a.parent, name, &a.st_to, a.newparent, newname);
	} else if (!err) {
		if (D.hlmap) {
			if (a.target_exists && !S_ISDIR(a.st_to.st_mode) && a.st_to.st_nlink > 1)
				ovs_hlmap_unlink(D.hlmap, &a.to, &a.st_to);
			ovs_hlmap_rename(D.hlmap, &a.from, &a.to);
		}
		if (a.target_exists)
			node_update_removed(a.st_to.st_dev, a.st_to.st_ino, a.newparent, newname,
					    other_of(&other),
					    other_of(&other) ? -1 :
					    node_removed_fd(a.st_to.st_dev, a.st_to.st_ino,
							    a.newparent, newname, &k),
					    &k);
		node_update_moved(a.st_from.st_dev, a.st_from.st_ino, a.parent, name,
				  a.newparent, newname);
	}
	ns_change_end();
	ovs_hlmap_names_free(other.names, other.n);
	node_relpath_free(&a.from);
	node_relpath_free(&a.to);
	fuse_reply_err(req, err);
}

/*
 * The kernel answers EPERM itself for user.* xattrs on anything but files
 * and directories, and for hard links to directories.  So the real
 * filesystem answering it here for such an object means the node's fd
 * holds another object than the kernel's inode stands for: log what the
 * fd holds.  Any other EPERM (trusted.* as a user, protected_hardlinks,
 * an immutable file) is the caller's and goes unlogged.
 */
static void eperm_evidence(struct dnode *n, const char *what, const char *name, bool xattr)
{
	char where[OVS_RELPATH_DESCRIBE_MAX];
	struct stat st;

	if (stat_node(n, &st) < 0)
		return;
	if (xattr ? strncmp(name, "user.", 5) != 0 || S_ISREG(st.st_mode) ||
			    S_ISDIR(st.st_mode)
		  : !S_ISDIR(st.st_mode))
		return;
	dlog(LOG_ERR, "%s %s on %s: EPERM; node %p is inode %llu type %#o, its fd "
	     "holds inode %llu mode %#o nlink %llu", what, name,
	     node_describe(n, where, sizeof(where)), (void *)n,
	     (unsigned long long)n->ino, (unsigned)n->type, (unsigned long long)st.st_ino,
	     (unsigned)st.st_mode, (unsigned long long)st.st_nlink);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent_ino,
		    const char *newname)
{
	struct dnode *n = node_of(ino), *newparent = node_of(newparent_ino);
	struct ovs_relpath from = { .srcdirfd = -1 }, to = { .srcdirfd = -1 };
	struct busy_keys ks = { .n = 0 };
	char proc[64];
	struct fuse_entry_param e;
	unsigned cov;
	int rc, err = 0;

	/* A new name of n, no other object's: n's mark (its own name is
	 * lent to from, its names are all preserved at once, rule 6) and
	 * the directory's (a create in it), under ns_lock for reading. */
#ifndef OVS_MUTANT_LINK_UNMARKED	/* make check-mutants: the object unmarked */
	keys_add(&ks, n->dev, n->ino);
#endif
	keys_add(&ks, newparent->dev, newparent->ino);
	err = ns_change_begin(&ks);
	if (!err)
		do {
			node_relpath_free(&from);
			node_relpath_free(&to);
			rc = node_relpath(n, NULL, &from);
			if (rc == 0)
				rc = node_relpath(newparent, newname, &to);
			if (rc < 0)
				err = -rc;
			if (!err)
				err = preserve_node(n, "link");
			if (!err && !names_covered(newparent))
				err = preserve_name_path(newparent, &to, &cov, "link");
		} while (preserve_again(&err));
	if (!err) {
		int nfd = node_fd_get(n);

		PROC_FD_PATH(proc, nfd);
		rc = nfd < 0 ? nfd : identity_become(req, false);
		if (rc == 0 && linkat(AT_FDCWD, proc, to.srcdirfd, newname, AT_SYMLINK_FOLLOW) < 0)
			rc = -errno;
		identity_restore();
		if (nfd >= 0)
			node_fd_put(n);
		err = -rc;
		if (err == EPERM)
			eperm_evidence(n, "link", newname, false);
	}
	if (!err) {
		if (D.hlmap)
			ovs_hlmap_link(D.hlmap, D.srcfd, &from, &to);
		err = new_entry(newparent, newname, &e);
		if (err)
			undo_entry(newparent, newname, false, &to, "link");
	}
	ns_change_end();
	node_relpath_free(&from);
	node_relpath_free(&to);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

/* ---- files ---------------------------------------------------------------- */

/* counted: node_open_begin() counted it already. */
static struct dhandle *new_handle(fuse_req_t req, struct dnode *n, int fd, bool writable,
				  bool counted)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct dhandle *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->fd = fd;
	h->node = n;
	h->writable = writable;
	h->uid = ctx->uid;
	h->gid = ctx->gid;
	if (!counted)
		node_open_count(n, writable, 1);
	return h;
}

static int open_flags(int flags)
{
	/* O_DIRECT would need aligned buffers for our pwrite; the kernel
	 * already bypasses its cache for such opens.  O_APPEND is the
	 * kernel's: it turns a write(2) into a WRITE at the end of the file
	 * (under the inode lock, from the size it keeps up to date for
	 * every change through this mount), while the WRITEs of page
	 * writeback (shared mmap) and of pwritev2(RWF_NOAPPEND) carry their
	 * own offsets; pwrite on an O_APPEND fd would append them all. */
	return (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_DIRECT | O_APPEND)) |
	       O_CLOEXEC;
}

static bool flags_writable(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY;
}

/* The open file fi stands for is handle h, with the flags every open of
 * this mount carries. */
static void handle_to_kernel(struct fuse_file_info *fi, struct dhandle *h)
{
	fi->fh = (uintptr_t)h;
	/* Every change to SRC passes through this mount, so the kernel's
	 * page cache stays right across opens. */
	fi->keep_cache = 1;
	/* No FLUSH on close: locks are the kernel's own (op_init), XFS,
	 * ext4 and btrfs report no errors at close, and the take writes
	 * dirty pages back with notify_inval_inode, not FLUSH. */
	fi->noflush = 1;
}

/* An open reply that could not be delivered (-ENOENT: the kernel dropped
 * the request, its connection aborted): the handle is nobody's. */
static void handle_drop(struct dhandle *h)
{
	node_open_count(h->node, h->writable, -1);
	close(h->fd);
	free(h);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dnode *n = node_of(ino);
	bool trunc = fi->flags & O_TRUNC, locked = false, writable = flags_writable(fi->flags);
	struct dhandle *h;
	char proc[64];
	int fd = -1, rc, err = 0;

	/* Counted first: an unlink moves into the layer only an object
	 * nothing has open or is opening (node_move_claim). */
	if (!node_open_begin(n, writable)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (trunc)
		err = object_change_begin(n, false, &locked, "open with O_TRUNC");
	if (!err) {
		int nfd = node_fd_get(n);

		PROC_FD_PATH(proc, nfd);
		rc = nfd < 0 ? nfd : identity_become(req, false);
		if (rc == 0) {
			fd = open(proc, open_flags(fi->flags));
			if (fd < 0)
				rc = -errno;
		}
		identity_restore();
		if (nfd >= 0)
			node_fd_put(n);
		err = -rc;
	}
	if (trunc)
		object_change_end(locked);
	if (!err) {
		h = new_handle(req, n, fd, writable, true);
		if (!h) {
			close(fd);
			err = ENOMEM;
		}
	}
	if (err) {
		node_open_count(n, writable, -1);
		fuse_reply_err(req, err);
		return;
	}
	handle_to_kernel(fi, h);
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_drop(h);
}

/* fd (opened O_NONBLOCK) is a regular file: true, with the caller's
 * O_NONBLOCK back; false, fd closed. */
static bool open_regular(int fd, int flags)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    fcntl(fd, F_SETFL, (fcntl(fd, F_GETFL) & ~O_NONBLOCK) | (flags & O_NONBLOCK)) == 0)
		return true;
	close(fd);
	return false;
}

static void op_create(fuse_req_t req, fuse_ino_t parent_ino, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct dnode *parent = node_of(parent_ino);
	struct fuse_entry_param e;
	struct dhandle *h = NULL;
	struct ovs_relpath path = { .srcdirfd = -1 };
	bool existed, below, excl = false, all_names = false;
	int fd = -1, rc, err = 0;

again:
	err = create_begin(parent, name, &path, &existed, &below, all_names);
	if (!err) {
		/* Exclusive unless the object at the name was preserved and
		 * marked: one that appears after the preserve (behind the
		 * mount) is opened, and truncated, only once it is. */
		excl = (fi->flags & O_EXCL) || !existed;
		rc = identity_become(req, true);
		if (rc == 0) {
			/* O_NONBLOCK: a FIFO made there behind the mount would
			 * hold this worker, its marks and every take until a
			 * reader came; the kernel takes nothing but a regular
			 * file from a create anyway */
			fd = openat(path.srcdirfd, name, open_flags(fi->flags) | O_CREAT |
				    O_NOFOLLOW | (excl ? O_EXCL : O_NONBLOCK), mode);
			if (fd < 0)
				rc = -errno;
			else if (!excl && !open_regular(fd, fi->flags))
				rc = -EEXIST;
		}
		identity_restore();
		err = -rc;
		if (err == EEXIST && !(fi->flags & O_EXCL) && !all_names) {
			ns_change_end();
			all_names = true;
			goto again;
		}
	}
	if (!err) {
		err = new_entry(parent, name, &e);
		/* Only a file this create made goes again. */
		if (err && excl)
			undo_entry(parent, name, false, NULL, "create");
	}
	ns_change_end();
	node_relpath_free(&path);
	if (!err) {
		/* Counted after the open: a created object is covered in
		 * this epoch (a whiteout, or its old object preserved), so
		 * no unlink moves it (node_move_claim). */
		h = new_handle(req, node_of(e.ino), fd, flags_writable(fi->flags), false);
		if (!h) {
			node_forget(node_of(e.ino), 1);
			err = ENOMEM;
		}
	}
	if (err) {
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, err);
		return;
	}
	handle_to_kernel(fi, h);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* The kernel holds neither the open file nor the entry. */
		handle_drop(h);
		node_forget(node_of(e.ino), 1);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = handle_of(fi)->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, 0);
}

/*
 * Data changes run as the writer (rule 19), after the preserve, which
 * needs root's rights: a user must not spend ext4's reserved blocks or
 * pass a quota limit.  Page writeback carries no caller (the kernel sends
 * it as uid 0 from no process), so it acts as the opener of the handle
 * the kernel writes it through.
 */
static int write_identity(fuse_req_t req, struct fuse_file_info *fi)
{
	struct dhandle *h = handle_of(fi);

	return identity_become_writer(req, h->uid, h->gid, fi->writepage);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in_buf,
			 off_t off, struct fuse_file_info *fi)
{
	struct dnode *n = node_of(ino);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in_buf));
	struct write_in_flight w;
	bool locked;
	ssize_t res;
	int err;

	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = handle_of(fi)->fd;
	out.buf[0].pos = off;
	/* A write(2) keeps its pages locked in the kernel until answered;
	 * writeback does not, and a take must wait for it. */
	if (!fi->writepage)
		write_in_flight_begin(&w, ino, off, fuse_buf_size(in_buf));
	err = object_change_begin(n, fi->writepage, &locked, "write");
	if (!err)
		err = -write_identity(req, fi);
#ifdef OVS_MUTANT_WRITE_NOOP	/* make check-mutants: writes answered, not written */
	res = err ? -err : (ssize_t)fuse_buf_size(in_buf);
#else
	res = err ? -err : fuse_buf_copy(&out, in_buf, 0);
#endif
	identity_restore();
	object_change_end(locked);
	if (res < 0)
		fuse_reply_err(req, (int)-res);
	else
		fuse_reply_write(req, (size_t)res);
	if (!fi->writepage)
		write_in_flight_end(&w);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int fd = dup(handle_of(fi)->fd);

	(void)ino;
	/* Report errors of a filesystem that defers them to close. */
	if (fd < 0 || close(fd) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dhandle *h = handle_of(fi);

	(void)ino;
	close(h->fd);
	node_open_count(h->node, h->writable, -1);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = handle_of(fi)->fd;

	(void)ino;
	if ((datasync ? fdatasync(fd) : fsync(fd)) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_err(req, 0);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	bool locked;
	int err;

	err = object_change_begin(node_of(ino), false, &locked, "fallocate");
	if (!err)
		err = -write_identity(req, fi);
	if (!err && fallocate(handle_of(fi)->fd, mode, off, len) < 0)
		err = errno;
	identity_restore();
	object_change_end(locked);
	fuse_reply_err(req, err);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	bool locked;
	ssize_t res;
	int err;

	(void)ino_in;
	err = object_change_begin(node_of(ino_out), false, &locked, "copy_file_range");
	if (!err)
		err = -write_identity(req, fi_out);
	res = err ? -err : copy_file_range(handle_of(fi_in)->fd, &off_in, handle_of(fi_out)->fd,
					   &off_out, len, flags);
	if (res < 0 && !err)
		res = -errno;
	identity_restore();
	object_change_end(locked);
	if (res < 0)
		fuse_reply_err(req, (int)-res);
	else
		fuse_reply_write(req, (size_t)res);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t res = lseek(handle_of(fi)->fd, off, whence);

	(void)ino;
	if (res < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}

/* ---- directories ------------------------------------------------------------ */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dnode *n = node_of(ino);
	struct dhandle *h;
	DIR *dp;
	int fd;

	fd = node_fd_get(n);
	if (fd >= 0) {
		int nfd = fd;

		fd = openat(nfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		node_fd_put(n);
	} else {
		errno = -fd;
	}
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h = new_handle(req, n, -1, false, false);
	if (!h) {
		closedir(dp);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->fd = dirfd(dp);
	h->dir = dp;
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		node_open_count(n, false, -1);
		closedir(dp);
		free(h);
	}
}

static bool is_dot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct dhandle *h = handle_of(fi);
	struct dnode *dir = node_of(ino);
	char *buf = calloc(1, size), *p = buf;
	size_t rem = size;
	int err = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != h->dir_offset) {
		seekdir(h->dir, off);
		h->dir_entry = NULL;
		h->dir_offset = off;
	}
	for (;;) {
		struct fuse_entry_param e;
		struct node_known known;
		struct dirent *de = h->dir_entry;
		size_t entsize;

		if (!de) {
			errno = 0;
			de = readdir(h->dir);
			if (!de) {
				err = errno;
				break;
			}
			h->dir_entry = de;
		}
		if (plus) {
			memset(&e, 0, sizeof(e));
			if (is_dot(de->d_name) ||
			    do_lookup(dir, de->d_name, &e,
				      node_knows_ino(de->d_ino, &known) ? &known : NULL) != 0) {
				/* No entry for the kernel to cache: the name only. */
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = de->d_ino;
				e.attr.st_mode = DTTOIF(de->d_type);
			}
			entsize = fuse_add_direntry_plus(req, p, rem, de->d_name, &e, de->d_off);
			if (entsize > rem) {
				if (e.ino)
					node_unlist(node_of(e.ino));
				break;
			}
		} else {
			struct stat st = {
				.st_ino = de->d_ino, .st_mode = DTTOIF(de->d_type),
			};

			entsize = fuse_add_direntry(req, p, rem, de->d_name, &st, de->d_off);
			if (entsize > rem)
				break;
		}
		p += entsize;
		rem -= entsize;
		h->dir_entry = NULL;
		h->dir_offset = de->d_off;
	}
	/* An error after some entries is reported by the next call. */
	if (err && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dhandle *h = handle_of(fi);

	(void)ino;
	closedir(h->dir);
	node_open_count(h->node, false, -1);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	int fd = handle_of(fi)->fd;

	(void)ino;
	if ((datasync ? fdatasync(fd) : fsync(fd)) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	if (fstatvfs(D.srcfd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* ---- xattrs ------------------------------------------------------------------ */

/*
 * Through the node's /proc/self/fd magic link: it lands on the object
 * itself, a symlink included, and works on O_PATH fds (the *xattrat calls
 * with an empty name refuse O_PATH fds with EBADF).
 */
static ssize_t node_xattr(struct dnode *n, char op, const char *name, void *buf,
			  size_t size, int flags)
{
	char proc[64];
	ssize_t rc;
	int fd = node_fd_get(n);

	if (fd < 0)
		return fd;
	PROC_FD_PATH(proc, fd);
	switch (op) {
	case 'g':
		rc = getxattr(proc, name, buf, size);
		break;
	case 'l':
		rc = listxattr(proc, buf, size);
		break;
	case 's':
		rc = setxattr(proc, name, buf, size, flags);
		break;
	default:
		rc = removexattr(proc, name);
		break;
	}
	if (rc < 0)
		rc = -errno;
	node_fd_put(n);
	return rc;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	struct dnode *n = node_of(ino);
	bool locked;
	int rc, err;

	err = object_change_begin(n, false, &locked, "setxattr");
	if (!err) {
		rc = identity_become(req, false);
		if (rc == 0)
			rc = node_xattr(n, 's', name, (void *)value, size, flags);
		identity_restore();
		err = -rc;
	}
	if (err == EPERM)
		eperm_evidence(n, "setxattr", name, true);
	object_change_end(locked);
	fuse_reply_err(req, err);
}

/*
 * A write by a user to a file with file capabilities makes the kernel
 * remove security.capability on its own authority (killpriv), through a
 * REMOVEXATTR sent as the writer, who lacks the CAP_SETFCAP the real
 * filesystem then asks for.  The kernel has also checked an explicit
 * removal with the caller's rights already, so this one name keeps it.
 */
static uint64_t removexattr_caps(const char *name)
{
	return strcmp(name, "security.capability") == 0 ? 1ULL << CAP_SETFCAP : 0;
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct dnode *n = node_of(ino);
	bool locked;
	int rc, err;

	err = object_change_begin(n, false, &locked, "removexattr");
	if (!err) {
		rc = identity_become_keeping(req, removexattr_caps(name));
		if (rc == 0)
			rc = node_xattr(n, 'r', name, NULL, 0, 0);
		identity_restore();
		err = -rc;
	}
	if (err == EPERM)
		eperm_evidence(n, "removexattr", name, true);
	object_change_end(locked);
	fuse_reply_err(req, err);
}

static void reply_xattr_result(fuse_req_t req, ssize_t rc, size_t size, const char *buf)
{
	if (rc < 0)
		fuse_reply_err(req, (int)-rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t rc;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = node_xattr(node_of(ino), 'g', name, buf, size, 0);
	reply_xattr_result(req, rc, size, buf);
	free(buf);
}

/*
 * Listed as the caller (rule 19): the real filesystem leaves out what the
 * caller may not see, as it would natively (XFS and ext4 hide trusted.*
 * from callers without CAP_SYS_ADMIN, which a caller other than uid 0 is
 * taken to lack), while the kernel passes a FUSE listxattr on unfiltered.
 * getxattr needs no switch: the kernel refuses trusted.* names itself.
 */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t rc;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = identity_become(req, false);
	if (rc == 0)
		rc = node_xattr(node_of(ino), 'l', NULL, buf, size, 0);
	identity_restore();
	reply_xattr_result(req, rc, size, buf);
	free(buf);
}

const struct fuse_lowlevel_ops daemon_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write_buf = op_write_buf,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
	.copy_file_range = op_copy_file_range,
	.lseek = op_lseek,
};
