/*
 * The preservation rules of DESIGN.md section 2, applied to one layer: the
 * daemon calls these before every change to SRC, under its own locks
 * (rule 9: one object's preserve and change at a time, all names of a
 * hard-linked inode being one object; preserves of different objects run
 * in parallel, see struct ovs_layer).  Every call is idempotent: what is already in the upper was
 * preserved first and wins, so a second call, or a call after a crash at
 * any point, finds the work done or finishes it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "preserve-int.h"
#include "walk.h"

int ovs_layer_open(const char *upper, const char *work, int srcfd, unsigned flags,
		   struct ovs_layer **out)
{
	int upperfd, workfd;

	upperfd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (upperfd < 0)
		return ovs_err(errno, "open upper %s: %m", upper);
	workfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (workfd < 0) {
		int err = errno;

		close(upperfd);
		return ovs_err(err, "open work %s: %m", work);
	}
	return ovs_layer_open_fds(upperfd, workfd, srcfd, flags, out);
}

/* The directory dirfd, opened by its handle on the mount mntfd is on:
 * an fd, or -1 (no handles, no CAP_DAC_READ_SEARCH). */
static int reopen_on_mount(int mntfd, int dirfd)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h = { .fh.handle_bytes = MAX_HANDLE_SZ };
	int mount_id;

	if (name_to_handle_at(dirfd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0)
		return -1;
	return open_by_handle_at(mntfd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int ovs_layer_open_fds(int upperfd, int workfd, int srcfd, unsigned flags,
		       struct ovs_layer **out)
{
	struct ovs_layer *l;
	struct stat ust, wst, sst;
	int rc;

	l = calloc(1, sizeof(*l));
	if (!l) {
		rc = ovs_err(ENOMEM, "open layer: out of memory");
		goto fail;
	}
	l->srcfd = srcfd;
	l->flags = flags;
	for (size_t i = 0; i < OVS_UPPER_DIR_LOCKS; i++)
		pthread_mutex_init(&l->dir_locks[i], NULL);
	pthread_mutex_init(&l->whiteout_lock, NULL);
	l->upperfd = upperfd;
	l->workfd = workfd;
	if (fstat(upperfd, &ust) < 0 || fstat(workfd, &wst) < 0 || fstat(srcfd, &sst) < 0) {
		rc = ovs_err(errno, "stat layer: %m");
		goto fail;
	}
	/* Copies are renamed from work into the upper. */
	if (ust.st_dev != wst.st_dev) {
		rc = ovs_err(EXDEV, "the upper and work directories of the layer are not "
			     "on the same filesystem");
		goto fail;
	}
	if (!S_ISDIR(sst.st_mode)) {
		rc = ovs_err(ENOTDIR, "source root is not a directory");
		goto fail;
	}
	l->src_dev = sst.st_dev;
	l->upper_ino = ust.st_ino;
	l->pid = getpid();
	{
		struct statfs sfs;

		/* One log for the upper and the changes to SRC: same device
		 * (XFS has no subvolumes; a store elsewhere has its own). */
		l->log_ordered = fstatfs(upperfd, &sfs) == 0 && sfs.f_type == XFS_SUPER_MAGIC &&
				 ust.st_dev == sst.st_dev;
	}
	l->upper_on_src_mount = l->log_ordered ? reopen_on_mount(srcfd, upperfd) : -1;
	*out = l;
	return 0;
fail:
	close(workfd);
	close(upperfd);
	free(l);
	return rc;
}

void ovs_layer_close(struct ovs_layer *l)
{
	if (!l)
		return;
	close(l->upperfd);
	close(l->workfd);
	if (l->upper_on_src_mount >= 0)
		close(l->upper_on_src_mount);
	free(l);
}

int ovs_layer_upper_fd(const struct ovs_layer *l)
{
	return l->upperfd;
}

bool ovs_layer_cloned(const struct ovs_layer *l)
{
	return __atomic_load_n(&l->last_cloned, __ATOMIC_RELAXED);
}

/* ---- rule 8, ordered by the log ------------------------------------------- */

/*
 * On XFS the upper and SRC (same device: log_ordered) share one log.
 * Transactions enter the CIL in the order they commit, checkpoints are
 * written in sequence order (each commit record after the one before),
 * and recovery replays a prefix of them; a log force - any fsync, a
 * sync, the log worker, a full CIL - writes every checkpoint up to the
 * one it needs, after a cache flush (REQ_PREFLUSH) that also makes the
 * data writeback FICLONE waited for before it shared the extents
 * durable.  So a change to SRC that reaches the disk through the log
 * (rename, unlink, setattr, xattrs, an append's allocation and size, the
 * remap of a copy-on-write over the extents a clone shares) cannot be
 * durable before the upper's entries, clones, whiteouts, metadata and
 * restored times that were committed before it: a preserve that wrote
 * nothing outside the log needs no fsync at all.
 *
 * Not so, and every fsync stays, when the preserve copied bytes: the
 * copy is not shared, so an overwrite in place of SRC's file followed by
 * fdatasync (which forces the log only for size or extent changes) can
 * be durable while the copy's entry in the upper is not; nor for a
 * realtime file (its data is not ordered with the log); nor for an
 * object on another filesystem (a mount inside SRC, a store elsewhere),
 * whose change is in another log.  A failed write of the log shuts XFS
 * down, and with it the change to SRC, so the layer's sticky sync_err,
 * still set by every fsync that is made, is needed for nothing more.
 * ext4 (fast commits log single inodes) and btrfs (log trees per inode)
 * give no such order: log_ordered is XFS only.
 *
 * The scope is the calling thread's, from an entry point's start to its
 * end; preserves in parallel each have their own.  A directory one made
 * without fsync may be found by another thread whose preserve copied
 * bytes: that one's fsync of it (or of anything) forces the log past
 * the directory's entry too.
 */
static __thread const struct ovs_layer *log_scope;

bool ovs_log_orders(const struct ovs_layer *l)
{
	return log_scope == l && !(l->flags & OVS_LAYER_NOSYNC);
}

void ovs_log_order_lost(const struct ovs_layer *l)
{
	if (log_scope == l)
		log_scope = NULL;
}

static void log_scope_begin(struct ovs_layer *l)
{
	ovs_first_change_begin();
	log_scope = l->log_ordered ? l : NULL;
}

/* The object a change is about to reach: on the upper's filesystem? */
static void log_scope_object(struct ovs_layer *l, const struct stat *st)
{
	if (st->st_dev != l->src_dev)
		ovs_log_order_lost(l);
}

/* ---- coverage ------------------------------------------------------------- */

/*
 * The upper directory that would hold path's last name, as a coverage
 * walk finds it on its way (struct ovs_upper_dir: the preserve then
 * installs into it, or an unlink's move moves into it).
 */
void ovs_upper_dir_release(struct ovs_upper_dir *ud)
{
	if (ud->fd >= 0 && ud->owned)
		close(ud->fd);
	ud->fd = -1;
}

/*
 * With l and ud: each directory is opened under its parent's lock, as
 * ovs_upper_parent does, so the one handed back in ud is complete and
 * its entry durable (or logged first); the lock is keyed by the inode
 * number the walk's stat already gave.  ud is set only for
 * OVS_NOT_COVERED with every parent there.
 */
static int coverage_walk(struct ovs_layer *l, int upperfd, const struct ovs_relpath *path,
			 struct ovs_upper_dir *ud)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	int cur = upperfd, rc = OVS_NOT_COVERED;
	ino_t cur_ino = l ? l->upper_ino : 0;
	size_t i;

	if (ud) {
		ud->fd = -1;
		ud->layer = l;
	}
	if (!path->n)
		return ovl_is_opaque_at(upperfd, "") > 0 ? OVS_ENTRY_OPAQUE_DIR : OVS_ENTRY_DIR;
	for (i = 0; i < path->n; i++) {
		const char *comp = path->names[i];
		bool last = i + 1 == path->n;
		pthread_mutex_t *m = NULL;
		struct stat st;
		int fd, err;

		if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			err = errno;
			rc = err == ENOENT ? OVS_NOT_COVERED
					   : ovs_err(err, "stat %s in the upper: %s",
						     ovs_relpath_describe(path, what, sizeof(what)),
						     strerror(err));
			if (last && err == ENOENT && ud) {
				ud->fd = cur;
				ud->ino = cur_ino;
				ud->owned = cur != upperfd;
				return rc;
			}
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc = last ? OVS_ENTRY_NONDIR : OVS_COVERED_BY_ANCESTOR;
			break;
		}
		rc = ovl_is_opaque_at(cur, comp);
		if (rc < 0)
			break;
		if (last) {
			rc = rc ? OVS_ENTRY_OPAQUE_DIR : OVS_ENTRY_DIR;
			break;
		}
		if (rc) {
			rc = OVS_COVERED_BY_ANCESTOR;
			break;
		}
		if (l && ud)
			m = ovs_upper_dir_lock_ino(l, cur_ino);
		fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		if (m)
			pthread_mutex_unlock(m);
		if (fd < 0) {
			rc = ovs_err(err, "open %s in the upper: %s",
				     ovs_relpath_describe(path, what, sizeof(what)), strerror(err));
			break;
		}
		if (cur != upperfd)
			close(cur);
		cur = fd;
		cur_ino = st.st_ino;
	}
	if (cur != upperfd)
		close(cur);
	return rc;
}

int ovs_coverage_rel(int upperfd, const struct ovs_relpath *path)
{
	return coverage_walk(NULL, upperfd, path, NULL);
}

int ovs_coverage_at(int upperfd, const char *path)
{
	struct ovs_relpath rp;
	void *mem;
	int rc = ovs_relpath_split(path, &rp, &mem);

	if (rc < 0)
		return rc;
	rc = ovs_coverage_rel(upperfd, &rp);
	free(mem);
	return rc;
}

static int coverage(struct ovs_layer *l, const struct ovs_relpath *path)
{
	return ovs_coverage_rel(l->upperfd, path);
}

int ovs_covered_at(int upperfd, const char *path)
{
	int c = ovs_coverage_at(upperfd, path);

	return c < 0 ? c : c != OVS_NOT_COVERED;
}

int ovs_covered(struct ovs_layer *l, const struct ovs_relpath *path)
{
	int c = coverage(l, path);

	return c < 0 ? c : c != OVS_NOT_COVERED;
}

/* For messages only (rule 18: bounded, never opened). */
#define DESCRIBE(path, buf) ovs_relpath_describe((path), (buf), sizeof(buf))

/* ---- rule 1 and rule 6 ------------------------------------------------------ */

static bool same_object(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Does the upper's entry at path hold a copy of the SRC inode ino?  (A
 * crash may have left one name of a hard-linked set preserved.) */
static bool upper_copy_of(struct ovs_layer *l, const struct ovs_relpath *path, ino_t ino)
{
	char buf[160], want[40];
	ssize_t n;
	int udir = ovs_upper_parent(l, path, false);

	if (udir < 0)
		return false;
	n = ovs_lgetxattrat(udir, ovs_relpath_base(path), OVS_XATTR_ORIGIN, buf, sizeof(buf) - 1);
	close(udir);
	if (n < 0)
		return false;
	buf[n] = '\0';
	snprintf(want, sizeof(want), "ino=%llu ", (unsigned long long)ino);
	return strncmp(buf, want, strlen(want)) == 0;
}

/*
 * SRC's directory that holds path's last name: the caller's
 * path->srcdirfd itself where it gave one (a reopen of it would cost two
 * syscalls per preserve for nothing), else opened; src_parent_put
 * releases it.
 */
static int src_parent(struct ovs_layer *l, const struct ovs_relpath *path)
{
	if (path->srcdirfd >= 0 && path->n)
		return path->srcdirfd;
	return ovs_src_open_parent(l, path);
}

static void src_parent_put(const struct ovs_relpath *path, int sdir)
{
	if (sdir != path->srcdirfd)
		close(sdir);
}

/*
 * Copy up one object with a single name (or a directory's metadata).
 * known: its stat, made under the caller's lock, or NULL; ud: the upper
 * directory to install into, as a coverage walk found it (closed here),
 * or NULL to find it (and make missing parents).
 */
static int copy_up_one(struct ovs_layer *l, const struct ovs_relpath *path, bool opaque,
		       const struct stat *known, struct ovs_upper_dir *ud)
{
	char tmp[OVS_TMP_NAME_MAX], what[OVS_RELPATH_DESCRIBE_MAX];
	struct ovs_upper_dir found = { .fd = -1 };
	struct stat st;
	int sdir, rc;

	if (!ud)
		ud = &found;
	sdir = src_parent(l, path);
	if (sdir < 0) {
		ovs_upper_dir_release(ud);
		return sdir;
	}
	rc = ovs_copy_to_work(l, sdir, ovs_relpath_base(path), opaque, known, &st, tmp);
	src_parent_put(path, sdir);
	if (rc < 0) {
		ovs_upper_dir_release(ud);
		return ovs_err_keep(-rc, "preserve %s", DESCRIBE(path, what));
	}
	if (ud->fd < 0) {
		ud->fd = ovs_upper_parent(l, path, true);
		if (ud->fd < 0) {
			ovs_discard(l, tmp);
			return ud->fd;
		}
		ud->ino = 0;
		ud->owned = true;
	}
	rc = ovs_install(l, tmp, &st, ud->fd, ud->ino, ovs_relpath_base(path));
	ovs_upper_dir_release(ud);
	return rc;
}

static int link_name_to(struct ovs_layer *l, int fromdirfd, const char *from,
			const struct ovs_relpath *name)
{
	int udir, rc;

	udir = ovs_upper_parent(l, name, true);
	if (udir < 0)
		return udir;
	rc = ovs_link_into(l, fromdirfd, from, udir, ovs_relpath_base(name));
	close(udir);
	return rc;
}

static int src_stat(struct ovs_layer *l, const struct ovs_relpath *path, struct stat *st)
{
	int sdir, rc = 0;

	if (!path->n)
		return -EINVAL;	/* the root has no name to stat it by */
	if (path->srcdirfd >= 0)
		sdir = path->srcdirfd;
	else
		sdir = ovs_src_open(l, path, path->n - 1, O_PATH | O_DIRECTORY);
	if (sdir < 0)
		return sdir;
	if (fstatat(sdir, ovs_relpath_base(path), st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	src_parent_put(path, sdir);
	return rc;
}

/* The stat of SRC's object at path: the caller's, made under its lock
 * (path->st, given with path->srcdirfd), else a fresh one. */
static int src_stat_known(struct ovs_layer *l, const struct ovs_relpath *path, struct stat *st)
{
	if (path->st && path->srcdirfd >= 0) {
		*st = *path->st;
		return 0;
	}
	return src_stat(l, path, st);
}

/*
 * Rule 6: every name of a multiply-linked inode shows the old content, as
 * one inode in the upper.  The copy is linked to the other names first and
 * moved to path last, so once path is covered all its names are.
 */
static int copy_up_linked(struct ovs_layer *l, struct ovs_hlmap *m,
			  const struct ovs_relpath *path, const struct stat *st)
{
	char tmp[OVS_TMP_NAME_MAX];
	const struct ovs_relpath *existing = NULL;
	struct other_names { struct ovs_relpath *rp; size_t n; } o = { 0 };
	struct stat cst;
	size_t i;
	int rc, sdir, edir = -1;

	/* o.rp[0] is path itself */
	rc = ovs_hlmap_names(m, l->srcfd, path, &o.rp, &o.n);
	if (rc < 0)
		goto out;
	/* A name already preserved as this inode (before a crash) is the
	 * copy to link to. */
	for (i = 1; i < o.n; i++) {
		if (coverage(l, &o.rp[i]) == OVS_ENTRY_NONDIR &&
		    upper_copy_of(l, &o.rp[i], st->st_ino)) {
			existing = &o.rp[i];
			break;
		}
	}
	if (existing) {
		/* Linked to from its parent, reached one name at a time. */
		edir = ovs_upper_parent(l, existing, false);
		if (edir < 0) {
			rc = edir;
			goto out;
		}
	} else {
		sdir = ovs_src_open_parent(l, path);
		if (sdir < 0) {
			rc = sdir;
			goto out;
		}
		rc = ovs_copy_to_work(l, sdir, ovs_relpath_base(path), false, st, &cst, tmp);
		close(sdir);
		if (rc < 0)
			goto out;
	}
	for (i = 1; i < o.n; i++) {
		struct stat nst;

		if (&o.rp[i] == existing)
			continue;
		/* Skip names the map has wrong and names already covered
		 * (preserved, or born after the snapshot). */
		if (src_stat(l, &o.rp[i], &nst) < 0 ||
		    !same_object(&nst, st) || ovs_covered(l, &o.rp[i]) != 0)
			continue;
		rc = existing ? link_name_to(l, edir, ovs_relpath_base(existing), &o.rp[i])
			      : link_name_to(l, l->workfd, tmp, &o.rp[i]);
		if (rc < 0)
			goto fail;
	}
	if (existing) {
		rc = link_name_to(l, edir, ovs_relpath_base(existing), path);
	} else {
		int udir = ovs_upper_parent(l, path, true);

		if (udir < 0) {
			rc = udir;
			goto fail;
		}
		rc = ovs_install(l, tmp, &cst, udir, 0, ovs_relpath_base(path));
		close(udir);
	}
	goto out;
fail:
	if (!existing)
		ovs_discard(l, tmp);
out:
	if (edir >= 0)
		close(edir);
	ovs_hlmap_names_free(o.rp, o.n);
	return rc;
}

/* ud: as copy_up_one's (closed here). */
static int preserve_object(struct ovs_layer *l, struct ovs_hlmap *m,
			   const struct ovs_relpath *path, const struct stat *st,
			   struct ovs_upper_dir *ud)
{
	log_scope_object(l, st);
	if (m && !S_ISDIR(st->st_mode) && st->st_nlink > 1) {
		if (ud)
			ovs_upper_dir_release(ud);
		return copy_up_linked(l, m, path, st);
	}
	return copy_up_one(l, path, false, st, ud);
}

/* Rule 3: the upper's copy of the directory at path made opaque, for an
 * rmdir and for a plain copy whose directory SRC lost (plain_copy_alone). */
static int make_opaque(struct ovs_layer *l, const struct ovs_relpath *path)
{
	const char *ubase = ovs_relpath_base(path);
	int udir, rc;

	udir = ovs_upper_parent(l, path, false);
	if (udir < 0)
		return udir;
	rc = ovl_set_opaque_at(udir, ubase);
	if (rc == 0 && !(l->flags & OVS_LAYER_NOSYNC) && !l->batch && !ovs_log_orders(l)) {
		int fd = openat(udir, ubase, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		rc = fd < 0 ? ovs_err(errno, "open %s in the upper: %m", ubase)
			    : ovs_layer_fsync(l, fd, "", ubase);
		if (fd >= 0)
			close(fd);
	}
	close(udir);
	return rc;
}

/*
 * The upper holds a plain copy of the directory at path.  A plain copy
 * merges with SRC's directory; where SRC has none (only a change behind
 * the mount does that: through it an rmdir makes the copy opaque first,
 * and nothing replaces a directory with a file), the snapshot shows the
 * copy's entries alone, and a directory SRC gets there (a create, an
 * exchange) would merge into them.  Made opaque, the copy goes on showing
 * just those.  1 if it was made opaque, 0 if SRC has a directory there.
 */
static int plain_copy_alone(struct ovs_layer *l, const struct ovs_relpath *path)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct stat st;
	int rc;

	if (!path->n)
		return 0;	/* SRC's root */
	rc = src_stat_known(l, path, &st);
	if (rc == 0 && S_ISDIR(st.st_mode))
		return 0;
	if (rc < 0 && rc != -ENOENT)
		return ovs_err(-rc, "preserve %s: %s", DESCRIBE(path, what), strerror(-rc));
	rc = make_opaque(l, path);
	return rc < 0 ? rc : 1;
}

/*
 * An unlink of the only name of a regular file ends the file's life in
 * SRC: the file itself can be the preserved copy.  One rename takes it
 * out of SRC into the upper, the preserve and the change in one step of
 * the log (so only where the log orders them: log_ordered, rule 8), with
 * nothing to copy, no new inode, and its own birth time and inode number;
 * the origin xattr keeps the ctime the rename changes (rule 16).  Only
 * the caller knows whether anything else still reaches the file (an open
 * handle, a mapping): may_move.
 */
static bool movable(const struct ovs_layer *l, const struct stat *st)
{
	return l->log_ordered && l->upper_on_src_mount >= 0 && !l->batch &&
	       S_ISREG(st->st_mode) && st->st_nlink == 1 && st->st_dev == l->src_dev;
}

/* Rule 1 for the object at path; with may_move, 1 instead when it may be
 * moved into the upper at its unlink (ovs_preserve_unlink), its parents
 * there made, and in *to (if not NULL) the upper directory it moves into
 * where the walk found it on SRC's mount.  *cov (if not NULL):
 * OVS_COV_SIBLINGS when the walk found every name in path's parent folder
 * covered (as ovs_preserve_name_cov), else 0. */
static int preserve_object_at(struct ovs_layer *l, struct ovs_hlmap *m,
			      const struct ovs_relpath *path, bool may_move,
			      struct ovs_upper_dir *to, unsigned *cov)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct ovs_upper_dir ud;
	struct stat st;
	bool known = path->st && path->srcdirfd >= 0;
	/* A file the caller's stat already shows movable is looked for from
	 * the upper on SRC's mount, where its move renames it to: the walk
	 * then hands the move its directory (rename(2) stays within one
	 * mount). */
	bool on_src = to && may_move && known && movable(l, path->st);
	int rc = coverage_walk(l, on_src ? l->upper_on_src_mount : l->upperfd, path, &ud);

	if (cov)
		*cov = rc == OVS_COVERED_BY_ANCESTOR ? OVS_COV_SIBLINGS : 0;
	if (rc == OVS_ENTRY_DIR) {
		rc = plain_copy_alone(l, path);
		return rc < 0 ? rc : 0;
	}
	if (rc != OVS_NOT_COVERED)
		return rc < 0 ? rc : 0;
	rc = src_stat_known(l, path, &st);
	if (rc < 0) {
		ovs_upper_dir_release(&ud);
		return ovs_err(-rc, "preserve %s: %s", DESCRIBE(path, what), strerror(-rc));
	}
	if (!may_move || !movable(l, &st)) {
		/* A copy installs from work, on the store's mount (on_src
		 * implies movable: never so, but never on SRC's mount). */
		if (on_src)
			ovs_upper_dir_release(&ud);
		return preserve_object(l, m, path, &st, on_src ? NULL : &ud);
	}
	if (on_src && ud.fd >= 0) {
		*to = ud;
		return 1;
	}
	/* The parents a copy would be installed in, made now, out of the
	 * change: the move finds them. */
	if (ud.fd < 0) {
		ud.fd = ovs_upper_parent(l, path, true);
		if (ud.fd < 0)
			return ud.fd;
		ud.owned = true;
	}
	ovs_upper_dir_release(&ud);
	return 1;
}

/* ---- rule 8, grouped ----------------------------------------------------- */

/*
 * The group is the calling thread's own: file renames and unlinks run in
 * parallel (the daemon locks them by object), so two groups may be open
 * on one layer at once.  Only entries that are not directories are
 * deferred (ovs_upper_dir_done's may_defer): another thread's preserve
 * may build below a directory this one made, and must find its entry
 * durable already; nobody else needs this thread's files and whiteouts,
 * whose objects and names it holds the busy marks of until the change.
 */
static __thread struct ovs_layer *group_layer;
static __thread unsigned ngroup;
static __thread int group_fds[OVS_GROUP_MAX];

void ovs_preserve_group_begin(struct ovs_layer *l)
{
	group_layer = l;
	ngroup = 0;
}

int ovs_group_defer(struct ovs_layer *l, int udirfd)
{
	struct stat st, kept;
	int fd;

	if (group_layer != l || fstat(udirfd, &st) < 0)
		return -1;
	for (unsigned i = 0; i < ngroup; i++)
		if (fstat(group_fds[i], &kept) == 0 && kept.st_ino == st.st_ino &&
		    kept.st_dev == st.st_dev)
			return 0;
	if (ngroup == OVS_GROUP_MAX)
		return -1;
	fd = fcntl(udirfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -1;
	group_fds[ngroup++] = fd;
	return 0;
}

int ovs_preserve_group_end(struct ovs_layer *l)
{
	int rc = 0;

	if (group_layer != l)
		return 0;
	group_layer = NULL;
	if (ngroup)
		ovs_first_change_begin();
	/* Each directory's fsync makes its entries as they are now durable:
	 * all the group added, whatever the order.  Every one is tried even
	 * after a failure: a retry of the change finds the entries in place,
	 * takes them as covered and defers nothing. */
	for (unsigned i = 0; i < ngroup; i++) {
		int r = ovs_layer_fsync(l, group_fds[i], "upper directory", "");

		if (r < 0 && rc == 0)
			rc = r;
		close(group_fds[i]);
	}
	if (ngroup)
		ovs_first_change_end();
	ngroup = 0;
	return rc < 0 ? rc : ovs_layer_check(l);
}

/* ---- rule 3 ------------------------------------------------------------------ */

static int preserve_rmdir(struct ovs_layer *l, const struct ovs_relpath *path)
{
	int c;

	if (!path->n)
		return ovs_err(EBUSY, "the source root cannot be removed");
	c = coverage(l, path);
	switch (c) {
	case OVS_NOT_COVERED:
		/* SRC's directory is empty now, so the copy must hide it:
		 * opaque from birth, visible only when complete. */
		return copy_up_one(l, path, true, NULL, NULL);
	case OVS_ENTRY_DIR:
		/* Every snapshot-time entry gone from SRC was preserved in it
		 * before it went, so the upper's contents are the whole dir. */
		return make_opaque(l, path);
	default:
		return c < 0 ? c : 0;
	}
}

/* ---- rule 2 ------------------------------------------------------------------ */

/* 1 if the directory at path in SRC has no entries, 0 if it has.  Read
 * with O_NOATIME: its copy-up may follow and must record the old atime. */
static int src_dir_is_empty(struct ovs_layer *l, const struct ovs_relpath *path)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct dirent *de;
	DIR *dir;
	int fd, empty = 1;

	fd = ovs_src_open(l, path, path->n, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return ovs_err(-fd, "open %s: %s", DESCRIBE(path, what), strerror(-fd));
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return ovs_err(ENOMEM, "read %s: out of memory", DESCRIBE(path, what));
	}
	while (errno = 0, (de = readdir(dir))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	}
	if (empty && errno) {
		int err = errno;

		empty = ovs_err(err, "read %s: %s", DESCRIBE(path, what), strerror(err));
	}
	closedir(dir);
	return empty;
}

static int preserve_name(struct ovs_layer *l, struct ovs_hlmap *m,
			 const struct ovs_relpath *path, unsigned *cov)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct stat st;
	int rc, udir;

	*cov = 0;
	if (!path->n)
		return 0;
	rc = coverage(l, path);
	switch (rc) {
	case OVS_NOT_COVERED:
		break;
	case OVS_COVERED_BY_ANCESTOR:
		*cov = OVS_COV_SIBLINGS | OVS_COV_BELOW;
		return 0;
	case OVS_ENTRY_NONDIR:
	case OVS_ENTRY_OPAQUE_DIR:
		*cov = OVS_COV_BELOW;
		return 0;
	case OVS_ENTRY_DIR:
		rc = plain_copy_alone(l, path);
		if (rc > 0)
			*cov = OVS_COV_BELOW;
		return rc < 0 ? rc : 0;
	default:
		return rc < 0 ? rc : 0;
	}
	rc = src_stat(l, path, &st);
	if (rc == 0) {
		/* Only an empty directory can be replaced by a new name
		 * (rename over it): that is its rmdir.  Over a non-empty one
		 * the change fails (EEXIST, ENOTEMPTY), and an opaque copy
		 * would hide its entries from the snapshot (rule 3). */
		if (S_ISDIR(st.st_mode)) {
			rc = src_dir_is_empty(l, path);
			if (rc <= 0)
				return rc;
			return preserve_rmdir(l, path);
		}
		return preserve_object(l, m, path, &st, NULL);
	}
	if (rc != -ENOENT)
		return ovs_err(-rc, "preserve %s: %s", DESCRIBE(path, what), strerror(-rc));
	udir = ovs_upper_parent(l, path, true);
	if (udir < 0)
		return udir;
	rc = ovs_whiteout_at(l, udir, ovs_relpath_base(path));
	close(udir);
	if (rc == 0)
		*cov = OVS_COV_BELOW;
	return rc;
}

/* ---- rule 4 ------------------------------------------------------------------ */

struct merge_walk {
	struct ovs_layer *l;
	struct ovs_hlmap *m;
	const struct ovs_relpath *root;	/* the directory being renamed */
};

/*
 * Rule 6 inside the subtree: the names of a linked file at wpath (the
 * walk's path below the root, split for this rare case) are the root's
 * followed by wpath's; sdirfd, SRC's directory that holds it, saves the
 * walk down to it.
 */
static int merge_linked(struct merge_walk *w, int sdirfd, const char *wpath,
			const struct stat *sst)
{
	struct ovs_relpath sub, full;
	const char **v;
	void *mem;
	int rc = ovs_relpath_split(wpath, &sub, &mem);

	if (rc < 0)
		return rc;
	v = malloc((w->root->n + sub.n) * sizeof(*v));
	if (!v) {
		free(mem);
		return ovs_err(ENOMEM, "out of memory");
	}
	memcpy(v, w->root->names, w->root->n * sizeof(*v));
	memcpy(v + w->root->n, sub.names, sub.n * sizeof(*v));
	full.names = v;
	full.n = w->root->n + sub.n;
	full.srcdirfd = sdirfd;
	full.st = NULL;
	rc = copy_up_linked(w->l, w->m, &full, sst);
	free(v);
	free(mem);
	return rc;
}

/*
 * Completing an upper directory (d->aux) from SRC's (d->fd), one entry:
 * entries already in the upper win (whiteouts stay), the rest is cloned.
 * A directory to complete in turn is opened into child.
 */
static int merge_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
		       struct ovs_walk_dir *child)
{
	struct merge_walk *w = arg;
	struct ovs_layer *l = w->l;
	int sdirfd = d->fd, udirfd = d->aux, rc;
	char tmp[OVS_TMP_NAME_MAX];
	struct stat sst, ust;

	if (fstatat(sdirfd, name, &sst, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "stat %s: %m", path);
	if (fstatat(udirfd, name, &ust, AT_SYMLINK_NOFOLLOW) == 0) {
		int opaque;

		if (!S_ISDIR(ust.st_mode))
			return 0;	/* preserved before, or a whiteout */
		opaque = ovl_is_opaque_at(udirfd, name);
		if (opaque)
			return 0;	/* complete already (or an error) */
		if (!S_ISDIR(sst.st_mode))
			/* SRC replaced it: the upper holds all it had. */
			return ovl_set_opaque_at(udirfd, name);
	} else if (!S_ISDIR(sst.st_mode)) {
		if (w->m && sst.st_nlink > 1)
			/* Rule 6: links inside the subtree stay linked. */
			return merge_linked(w, sdirfd, path, &sst);
		rc = ovs_copy_to_work(l, sdirfd, name, false, &sst, &sst, tmp);
		if (rc == 0)
			rc = ovs_install(l, tmp, &sst, udirfd, 0, name);
		return rc;
	} else {
		/* A mount point inside SRC shows as an empty dir (rule 15):
		 * opaque, nothing below it copied. */
		bool mountpoint = sst.st_dev != l->src_dev;

		rc = ovs_copy_to_work(l, sdirfd, name, mountpoint, &sst, &sst, tmp);
		if (rc == 0)
			rc = ovs_install(l, tmp, &sst, udirfd, 0, name);
		if (rc < 0 || mountpoint)
			return rc;
	}
	child->fd = openat(sdirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
			   O_NOATIME);
	if (child->fd < 0)
		return ovs_err(errno, "open %s: %m", path);
	child->aux = openat(udirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (child->aux < 0) {
		rc = ovs_err(errno, "open %s in the upper: %m", path);
		close(child->fd);
		return rc;
	}
	rc = ovs_upper_dir_times(child->aux, child->times);
	if (rc < 0) {
		close(child->fd);
		close(child->aux);
		return rc;
	}
	return OVS_WALK_DESCEND;
}

/* An upper directory is complete: it turns opaque last, so an opaque
 * directory is always complete and a crash midway is finished by the next
 * call. */
static int merge_leave(void *arg, struct ovs_walk_dir *d, struct ovs_walk_dir *parent,
		       const char *path)
{
	struct merge_walk *w = arg;
	int rc;

	(void)parent;
	/* Entries durable before the flag that says "complete" (the log
	 * orders them before it). */
	if (!(w->l->flags & OVS_LAYER_NOSYNC) && !ovs_log_orders(w->l)) {
		rc = ovs_layer_fsync(w->l, d->aux, "in the upper: ", path);
		if (rc < 0)
			return rc;
	}
	rc = ovl_set_opaque_at(d->aux, "");
	if (rc == 0 && futimens(d->aux, d->times) < 0)
		rc = ovs_err(errno, "restore times of %s in the upper: %m", path);
	return rc;
}

static const struct ovs_walk_ops merge_ops = {
	.entry = merge_entry,
	.leave = merge_leave,
};

static int preserve_subtree(struct ovs_layer *l, struct ovs_hlmap *m,
			    const struct ovs_relpath *path)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct stat st;
	int c, sfd, ufd, rc;

	if (!path->n)
		return ovs_err(EINVAL, "the source root cannot be renamed");
	c = coverage(l, path);
	if (c < 0)
		return c;
	if (c == OVS_COVERED_BY_ANCESTOR || c == OVS_ENTRY_NONDIR || c == OVS_ENTRY_OPAQUE_DIR)
		return 0;
	rc = src_stat(l, path, &st);
	if (rc < 0)
		return ovs_err(-rc, "preserve %s: %s", DESCRIBE(path, what), strerror(-rc));
	if (!S_ISDIR(st.st_mode))
		return c == OVS_NOT_COVERED ? preserve_object(l, m, path, &st, NULL) : 0;
	log_scope_object(l, &st);
	if (c == OVS_NOT_COVERED) {
		rc = copy_up_one(l, path, false, &st, NULL);
		if (rc < 0)
			return rc;
	}
	sfd = ovs_src_open(l, path, path->n, O_RDONLY | O_DIRECTORY);
	if (sfd < 0)
		return ovs_err(-sfd, "open %s: %s", DESCRIBE(path, what), strerror(-sfd));
	ufd = ovs_upper_open(l, path, path->n, O_RDONLY | O_DIRECTORY);
	if (ufd < 0) {
		close(sfd);
		return ovs_err(-ufd, "open %s in the upper: %s", DESCRIBE(path, what),
			       strerror(-ufd));
	}
	{
		struct ovs_walk_dir root = { .fd = sfd, .aux = ufd };
		struct merge_walk w = { .l = l, .m = m, .root = path };

		rc = ovs_upper_dir_times(ufd, root.times);
		if (rc < 0) {
			close(sfd);
			close(ufd);
			return rc;
		}
		/* One syncfs at the end instead of an fsync per parent
		 * entry: files with copied bytes are still fsynced before
		 * they are moved in (clones on XFS are forced by the log,
		 * build_regular), and each directory before it is marked
		 * opaque; none of them where the log orders the whole tree
		 * before the rename (ovs_log_orders).  The walk's
		 * paths are relative to the renamed directory. */
		l->batch = true;
		rc = ovs_walk(&root, "", &merge_ops, &w);
		l->batch = false;
		if (rc < 0)
			rc = ovs_err_keep(-rc, "preserve the tree of %s", DESCRIBE(path, what));
	}
	if (rc == 0 && !(l->flags & OVS_LAYER_NOSYNC) && !ovs_log_orders(l) &&
	    syncfs(l->upperfd) < 0)
		rc = ovs_err(ovs_layer_sync_failed(l, errno), "sync the upper: %m");
	return rc;
}

/* ---- the entry points: rule 8 after a write error ---------------------------- */

/*
 * A layer whose sync failed holds entries that may not be on disk, and
 * a preserve that finds one takes it as done: refused before, and after
 * too, since another preserve's sync may fail while this one runs, on a
 * directory it then finds (ovs_upper_parent waits for a directory's entry
 * under its parent's lock, and the failure is recorded under that lock).
 */
static int checked(struct ovs_layer *l, int rc)
{
	return rc < 0 ? rc : ovs_layer_check(l);
}

/* Each entry point is one scope of ovs_log_orders, and one first change
 * that a bulk copy gives way to (copyup.c). */
static int scoped(struct ovs_layer *l, int rc)
{
	log_scope = NULL;
	ovs_first_change_end();
	return checked(l, rc);
}

/* scoped() for an entry point that reports what is covered in *cov:
 * nothing after an error. */
static int scoped_cov(struct ovs_layer *l, int rc, unsigned *cov)
{
	rc = scoped(l, rc);
	if (rc)
		*cov = 0;
	return rc;
}

int ovs_preserve_object_cov(struct ovs_layer *l, struct ovs_hlmap *m,
			    const struct ovs_relpath *path, unsigned *cov)
{
	int rc = ovs_layer_check(l);

	*cov = 0;
	if (rc)
		return rc;
	log_scope_begin(l);
	return scoped_cov(l, preserve_object_at(l, m, path, false, NULL, cov), cov);
}

int ovs_preserve_object(struct ovs_layer *l, struct ovs_hlmap *m,
			const struct ovs_relpath *path)
{
	unsigned cov;

	return ovs_preserve_object_cov(l, m, path, &cov);
}

int ovs_preserve_rmdir(struct ovs_layer *l, const struct ovs_relpath *path)
{
	int rc = ovs_layer_check(l);

	if (rc)
		return rc;
	log_scope_begin(l);
	return scoped(l, preserve_rmdir(l, path));
}

int ovs_preserve_name_cov(struct ovs_layer *l, struct ovs_hlmap *m,
			  const struct ovs_relpath *path, unsigned *cov)
{
	int rc = ovs_layer_check(l);

	*cov = 0;
	if (rc)
		return rc;
	log_scope_begin(l);
	return scoped_cov(l, preserve_name(l, m, path, cov), cov);
}

int ovs_preserve_name(struct ovs_layer *l, struct ovs_hlmap *m,
		      const struct ovs_relpath *path)
{
	unsigned cov;

	return ovs_preserve_name_cov(l, m, path, &cov);
}

int ovs_preserve_subtree(struct ovs_layer *l, struct ovs_hlmap *m,
			 const struct ovs_relpath *path)
{
	int rc = ovs_layer_check(l);

	if (rc)
		return rc;
	log_scope_begin(l);
	return scoped(l, preserve_subtree(l, m, path));
}

/* ---- rule 1 for an unlink, by moving ------------------------------------- */

int ovs_preserve_unlink(struct ovs_layer *l, struct ovs_hlmap *m,
			const struct ovs_relpath *path, bool may_move,
			struct ovs_upper_dir *to, unsigned *cov)
{
	int rc = ovs_layer_check(l);

	*cov = 0;
	if (to)
		ovs_upper_dir_release(to);
	if (rc)
		return rc;
	log_scope_begin(l);
	rc = preserve_object_at(l, m, path, may_move, to, cov);
	if (rc == 1) {
		rc = scoped(l, 0);
		if (rc == 0)
			return 1;
		if (to)
			ovs_upper_dir_release(to);	/* only a 1 hands it over */
		return rc;
	}
	return scoped_cov(l, rc, cov);
}

int ovs_move_to_upper(struct ovs_layer *l, const struct ovs_relpath *path,
		      const struct stat *st, struct ovs_upper_dir *to, bool *moved)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	struct ovs_upper_dir ud = OVS_UPPER_DIR_INIT;
	int rc = ovs_layer_check(l), sdir;

	*moved = false;
	if (to) {
		if (to->layer == l)
			ud = *to;
		else
			ovs_upper_dir_release(to);
		to->fd = -1;
	}
	if (rc < 0 || !path->n || !movable(l, st)) {
		ovs_upper_dir_release(&ud);
		return rc;
	}
	log_scope_begin(l);
	if (ud.fd < 0) {
		ud.fd = ovs_upper_parent_from(l, l->upper_on_src_mount, path, false);
		if (ud.fd == -ENOENT)
			return scoped(l, 0);	/* not made (a crash, fsck): a copy makes it */
		if (ud.fd < 0)
			return scoped(l, ud.fd);
		ud.ino = 0;
		ud.owned = true;
	}
	sdir = src_parent(l, path);
	if (sdir < 0) {
		ovs_upper_dir_release(&ud);
		return scoped(l, sdir);
	}
	rc = ovs_move_into(l, sdir, ovs_relpath_base(path), st, ud.fd, ud.ino, moved);
	src_parent_put(path, sdir);
	ovs_upper_dir_release(&ud);
	if (rc < 0)
		rc = ovs_err_keep(-rc, "preserve %s", DESCRIBE(path, what));
	return scoped(l, rc);
}
