/*
 * Copy-up: one object of SRC into the upper layer, with everything the
 * overlayfs layer format needs to show it as it was (DESIGN.md rules 1, 7,
 * 8, 14, 16).
 *
 * A copy is built in the layer's work dir under a temp name, made durable,
 * and renamed into the upper only when complete, so a crash leaves either
 * nothing or the whole object in the upper (and at most a harmless temp in
 * work).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "preserve-int.h"
#include "walk.h"

#define SRC_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | \
		     RESOLVE_NO_XDEV)

/* Open path beneath dirfd as a SRC object: no symlink, no mount crossed,
 * O_NOATIME where the caller may. */
static int src_open_at(int dirfd, const char *path, int flags)
{
	int fd;

	flags |= O_CLOEXEC | O_NOFOLLOW;
	/* O_NOATIME keeps the snapshot's own reads out of SRC's atimes; it
	 * fails with EPERM only for a caller without CAP_FOWNER. */
	if (!(flags & O_PATH)) {
		fd = ovs_open_beneath(dirfd, path, flags | O_NOATIME, SRC_RESOLVE);
		if (fd != -EPERM)
			return fd;
	}
	return ovs_open_beneath(dirfd, path, flags, SRC_RESOLVE);
}

int ovs_src_walk(int srcfd, const struct ovs_relpath *path, size_t depth, int flags)
{
	int start = srcfd, cur = -1, fd;
	size_t i = 0;

	if (depth > path->n)
		return -EINVAL;
	/* The caller's open parent saves the walk from the root. */
	if (path->srcdirfd >= 0 && path->n > 0 && depth >= path->n - 1) {
		start = path->srcdirfd;
		i = path->n - 1;
	}
	if (i == depth)
		return src_open_at(start, "", flags);
	for (; i < depth; i++) {
		fd = src_open_at(cur < 0 ? start : cur, path->names[i],
				 i + 1 == depth ? flags : O_PATH | O_DIRECTORY);
		if (cur >= 0)
			close(cur);
		if (fd < 0)
			return fd;
		cur = fd;
	}
	return cur;
}

int ovs_src_open(const struct ovs_layer *l, const struct ovs_relpath *path, size_t depth,
		 int flags)
{
	return ovs_src_walk(l->srcfd, path, depth, flags);
}

#define UPPER_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | \
		       RESOLVE_NO_XDEV)

int ovs_upper_open(const struct ovs_layer *l, const struct ovs_relpath *path, size_t depth,
		   int flags)
{
	int cur = -1, fd;
	size_t i;

	if (depth > path->n)
		return -EINVAL;
	if (depth == 0)
		return ovs_open_beneath(l->upperfd, "", flags | O_CLOEXEC | O_NOFOLLOW,
					UPPER_RESOLVE);
	for (i = 0; i < depth; i++) {
		fd = ovs_open_beneath(cur < 0 ? l->upperfd : cur, path->names[i],
				      (i + 1 == depth ? flags : O_PATH | O_DIRECTORY) |
					      O_CLOEXEC | O_NOFOLLOW,
				      UPPER_RESOLVE);
		if (cur >= 0)
			close(cur);
		if (fd < 0)
			return fd;
		cur = fd;
	}
	return cur;
}

int ovs_src_open_parent(const struct ovs_layer *l, const struct ovs_relpath *path)
{
	int fd;

	if (!path->n)
		return ovs_err(EINVAL, "the source root has no parent");
	fd = ovs_src_open(l, path, path->n - 1, O_PATH | O_DIRECTORY);
	if (fd < 0) {
		char what[OVS_RELPATH_DESCRIBE_MAX];
		struct ovs_relpath parent = { path->names, path->n - 1, -1, NULL };

		fd = ovs_err(-fd, "open %s in the source: %s",
			     ovs_relpath_describe(&parent, what, sizeof(what)), strerror(-fd));
	}
	return fd;
}

int ovs_upper_dir_times(int udirfd, struct timespec times[2])
{
	struct stat st;

	if (fstat(udirfd, &st) < 0)
		return ovs_err(errno, "stat upper directory: %m");
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	return 0;
}

int ovs_layer_sync_failed(struct ovs_layer *l, int err)
{
	int none = 0;

	__atomic_compare_exchange_n(&l->sync_err, &none, err, false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
	return err;
}

int ovs_layer_sync_error(struct ovs_layer *l, bool *first)
{
	int err = __atomic_load_n(&l->sync_err, __ATOMIC_ACQUIRE);

	if (first)
		*first = err && !__atomic_exchange_n(&l->sync_err_told, true, __ATOMIC_RELAXED);
	return err;
}

int ovs_layer_check(struct ovs_layer *l)
{
	int err = ovs_layer_sync_error(l, NULL);

	if (!err)
		return 0;
	return ovs_err(EIO, "an earlier sync of the upper layer failed (%s): what it "
		       "preserved may not be on disk, so changes are refused until the next take",
		       strerror(err));
}

int ovs_layer_fsync(struct ovs_layer *l, int fd, const char *what, const char *path)
{
	if (fsync(fd) == 0)
		return 0;
	return ovs_err(ovs_layer_sync_failed(l, errno), "fsync %s%s: %m", what, path);
}

int ovs_upper_dir_done(struct ovs_layer *l, int udirfd, const struct timespec times[2],
		       bool may_defer)
{
	/* Rule 7: the preserved directory keeps its snapshot-time times even
	 * though we just added an entry to it. */
	if (futimens(udirfd, times) < 0)
		return ovs_err(errno, "restore times of an upper directory: %m");
	/* Rule 8: the entry is on disk before SRC may change (or the log
	 * orders it before the change: ovs_log_orders). */
	/* Under the directory's lock (install_locked, ovs_link_into): whoever
	 * finds this entry next finds the layer marked if it failed. */
	if (!(l->flags & OVS_LAYER_NOSYNC) && !l->batch && !ovs_log_orders(l) &&
	    (!may_defer || ovs_group_defer(l, udirfd) < 0))
		return ovs_layer_fsync(l, udirfd, "upper directory", "");
	return 0;
}

/* Names a temp may have to skip: leftovers of a crashed daemon that ran
 * with the same pid (likely after a reboot) and the same counter. */
#define TMP_NAME_TRIES	100000

static void tmp_name(struct ovs_layer *l, char *tmp)
{
	unsigned long n = __atomic_add_fetch(&l->seq, 1, __ATOMIC_RELAXED);

	snprintf(tmp, OVS_TMP_NAME_MAX, OVS_TMP_PREFIX "%d.%lu", (int)l->pid, n);
}

/* ---- data ---------------------------------------------------------------- */

/*
 * Write-behind: a copy that is not a clone keeps at most two chunks of
 * dirty data in the page cache.  Each full chunk's writeback is started
 * at once and the chunk before it waited for.  Without it a big copy
 * leaves gigabytes dirty, and on ext4 (data=ordered, and a device cache
 * flush with every journal commit) each small fsync of another first
 * change - forced into the same journal - waits for all of them (issue
 * 13: eight workers' first changes took 3-4x longer during a 1 GiB copy).
 * The final fsync of the copy stays (rule 8); this only spreads its
 * work over the copy.
 */
#define WRITE_BEHIND_CHUNK	((off_t)8 << 20)

/*
 * A bulk copy gives way to first changes (issue 13 item 2).  Write-behind
 * keeps a big copy's dirty data small, but the copy still keeps the disk
 * busy with its reads and writes, and every fsync of a small first change
 * running beside it queues behind them: on ext4 eight processes' first
 * changes took 4.2 to 4.3 times as long during a 10 GiB copy-up, and 1.0
 * to 1.05 times since it gives way (bench/results/, copy-gives-way).
 *
 * Each entry point of the engine (preserve.c) counts in first_changes for
 * as long as it runs, whether or not it finds anything to preserve.  A
 * copy that has reached BULK_AFTER into its file is a bulk one: its own
 * entry point stops counting, and at each chunk from there, while other
 * entry points of this process run, it lets its writeback finish (nothing
 * of it left queued before theirs) and waits for them, at most
 * BULK_YIELD_MS per chunk: under a constant stream of first changes the
 * copy still moves a chunk per BULK_YIELD_MS.  A change blocked on the
 * copy's own object waits in the daemon, outside any entry point, and the
 * copy holds no lock of the engine while it copies, so it never waits for
 * a change that waits for it.  A copy that never reaches BULK_AFTER never
 * waits; two bulk copies wait for each other only while one of them is
 * still below BULK_AFTER.
 */
#define BULK_AFTER		((off_t)64 << 20)
#define BULK_YIELD_MS		100

static unsigned first_changes;		/* entry points running, bulk ones aside */
static unsigned long bulk_yields;	/* chunks after which a copy waited */
static __thread unsigned fc_depth;	/* this thread's entry points */
static __thread bool fc_counted;	/* and whether it counts in first_changes */

void ovs_first_change_begin(void)
{
	if (fc_depth++ == 0) {
		fc_counted = true;
		__atomic_add_fetch(&first_changes, 1, __ATOMIC_SEQ_CST);
	}
}

static void first_change_uncount(void)
{
	if (fc_counted) {
		fc_counted = false;
		__atomic_sub_fetch(&first_changes, 1, __ATOMIC_SEQ_CST);
	}
}

void ovs_first_change_end(void)
{
	if (fc_depth && --fc_depth == 0)
		first_change_uncount();
}

unsigned long ovs_copy_yields(void)
{
	return __atomic_load_n(&bulk_yields, __ATOMIC_RELAXED);
}

struct write_behind {
	int fd;
	int err;		/* a writeback error the waits reported */
	bool drop_cache;	/* the copy is not read soon: drop what is written */
	off_t started;		/* writeback started below this offset */
	off_t waited;		/* and waited for below this one */
};

/* Wait for the writeback of w->fd below w->started: 0, or the -errno of
 * a failed one. */
static int write_behind_wait(struct write_behind *w)
{
	if (w->started <= w->waited)
		return 0;
	/* A wait reports a failed writeback, and the kernel then considers it
	 * seen: the final fsync would return 0. */
	if (sync_file_range(w->fd, w->waited, w->started - w->waited,
			    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) < 0) {
		w->err = errno;
		return -errno;
	}
	if (w->drop_cache)
		posix_fadvise(w->fd, w->waited, w->started - w->waited, POSIX_FADV_DONTNEED);
	w->waited = w->started;
	return 0;
}

/* A bulk copy between two chunks: wait while other first changes run. */
static int give_way(struct write_behind *w)
{
	int64_t t0;
	int rc;

	first_change_uncount();
	if (!__atomic_load_n(&first_changes, __ATOMIC_SEQ_CST))
		return 0;
	rc = write_behind_wait(w);
	if (rc < 0)
		return rc;
	__atomic_add_fetch(&bulk_yields, 1, __ATOMIC_RELAXED);
	t0 = ovs_mono_ms();
	while (__atomic_load_n(&first_changes, __ATOMIC_SEQ_CST) &&
	       ovs_mono_ms() - t0 < BULK_YIELD_MS)
		usleep(1000);
	return 0;
}

/* Data of w->fd below end is written (by write or copy_file_range):
 * 0, or the -errno of a failed writeback. */
static int write_behind(struct write_behind *w, off_t end)
{
	int rc;

	if (end - w->started < WRITE_BEHIND_CHUNK)
		return 0;
	sync_file_range(w->fd, w->started, end - w->started, SYNC_FILE_RANGE_WRITE);
	rc = write_behind_wait(w);
	if (rc < 0)
		return rc;
	w->started = end;
	return end >= BULK_AFTER ? give_way(w) : 0;
}

static int copy_range_rw(int in, struct write_behind *w, off_t off, off_t end)
{
	static __thread char buf[1 << 17];

	while (off < end) {
		size_t want = end - off < (off_t)sizeof(buf) ? end - off : sizeof(buf);
		ssize_t n = pread(in, buf, want, off);
		int rc;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;		/* the file shrank under us */
		rc = ovs_pwrite_all(w->fd, buf, n, off);
		if (rc < 0)
			return rc;
		off += n;
		rc = write_behind(w, off);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int copy_range(int in, struct write_behind *w, off_t off, off_t end, bool *use_cfr)
{
	int rc;

	while (*use_cfr && off < end) {
		loff_t ioff = off, ooff = off;
		/* One chunk a call: one call would copy a whole data range,
		 * gigabytes, before write-behind could start. */
		size_t len = end - off < WRITE_BEHIND_CHUNK ? end - off : WRITE_BEHIND_CHUNK;
		ssize_t n = copy_file_range(in, &ioff, w->fd, &ooff, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
			    errno == EINVAL) {
				*use_cfr = false;
				break;
			}
			return -errno;
		}
		if (n == 0)
			return 0;
		off += n;
		rc = write_behind(w, off);
		if (rc < 0)
			return rc;
	}
	return copy_range_rw(in, w, off, end);
}

static int copy_ranges(int in, struct write_behind *w, off_t size)
{
	int out = w->fd;
	bool use_cfr = true;
	off_t off = 0;
	int rc;

	while (off < size) {
		off_t data = lseek(in, off, SEEK_DATA), hole;

		if (data < 0) {
			if (errno == ENXIO)
				break;		/* only a hole is left */
			if (errno == EINVAL)	/* no SEEK_DATA: all is data */
				return copy_range(in, w, off, size, &use_cfr);
			return -errno;
		}
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > size)
			hole = size;
		rc = copy_range(in, w, data, hole, &use_cfr);
		if (rc < 0)
			return rc;
		off = hole;
	}
	if (ftruncate(out, size) < 0)
		return -errno;
	return 0;
}

int ovs_copy_data_ranges(int in, int out, off_t size, bool drop_cache, int *writeback_err)
{
	struct write_behind w = { .fd = out, .drop_cache = drop_cache };
	int rc = copy_ranges(in, &w, size);

	if (writeback_err)
		*writeback_err = w.err;
	return rc;
}

/* *copied: the data was copied, not cloned (nor empty). */
static int copy_file_data(struct ovs_layer *l, int in, int out, off_t size, const char *path,
			  bool *copied)
{
	int rc, wb_err;

	*copied = false;

	__atomic_store_n(&l->last_cloned, false, __ATOMIC_RELAXED);
	if (size == 0)
		return 0;
	/* A clone shares the extents: O(1) in data, and it keeps holes.  It
	 * fails per file (other fs, inline data, a swapfile...), so the
	 * fallback is decided per file, not per volume (rule 16). */
	if (ioctl(out, FICLONE, in) == 0) {
		__atomic_store_n(&l->last_cloned, true, __ATOMIC_RELAXED);
		return 0;
	}
	if (errno != EOPNOTSUPP && errno != EXDEV && errno != EINVAL &&
	    errno != ENOTTY && errno != ETXTBSY)
		return ovs_err(errno, "clone %s: %m", path);
	rc = ovs_copy_data_ranges(in, out, size, true, &wb_err);
	if (rc < 0) {
		if (wb_err)
			ovs_layer_sync_failed(l, wb_err);
		return ovs_err(-rc, "copy %s: %s", path, strerror(-rc));
	}
	*copied = true;
	return 0;
}

/* ---- metadata ------------------------------------------------------------- */

#define XATTR_LIST_MAX_LEN	65536
#define XATTR_VALUE_MAX_LEN	65536

/* Rule 14: a user's trusted.overlay.X must not steer overlayfs; store it
 * escaped as trusted.overlay.overlay.X, which the kernel (6.7+) shows as
 * the original name. */
static const char *escaped_xattr_name(const char *name, char *buf, size_t len)
{
	size_t plen = strlen(OVL_XATTR_PREFIX);

	if (strncmp(name, OVL_XATTR_PREFIX, plen) != 0)
		return name;
	snprintf(buf, len, "%s%s", OVL_XATTR_ESCAPE, name + plen);
	return buf;
}

/* Copy every xattr (ACLs and security.* included) of (sfd, sname) to
 * (dfd, dname); *acl: a system. attribute (an ACL, which sets mode bits)
 * was copied. */
static int copy_xattrs(int sfd, const char *sname, int dfd, const char *dname,
		       const char *path, bool *acl)
{
	char *list = NULL, *val = NULL, *p;
	ssize_t llen;
	int rc = 0;

	list = malloc(XATTR_LIST_MAX_LEN);
	val = malloc(XATTR_VALUE_MAX_LEN);
	if (!list || !val) {
		rc = ovs_err(ENOMEM, "copy xattrs of %s: out of memory", path);
		goto out;
	}
	llen = ovs_llistxattrat(sfd, sname, list, XATTR_LIST_MAX_LEN);
	if (llen == -ENOTSUP)
		goto out;
	if (llen < 0) {
		rc = ovs_err(-llen, "list xattrs of %s: %s", path, strerror(-llen));
		goto out;
	}
	for (p = list; p < list + llen; p += strlen(p) + 1) {
		char ebuf[XATTR_NAME_MAX + 32];
		const char *dst_name;
		ssize_t vlen = ovs_lgetxattrat(sfd, sname, p, val, XATTR_VALUE_MAX_LEN);
		int r;

		if (vlen == -ENODATA)
			continue;	/* removed since the list */
		if (vlen < 0) {
			rc = ovs_err(-vlen, "read xattr %s of %s: %s", p, path,
				     strerror(-vlen));
			goto out;
		}
		dst_name = escaped_xattr_name(p, ebuf, sizeof(ebuf));
		r = ovs_lsetxattrat(dfd, dname, dst_name, val, vlen, 0);
		if (r < 0) {
			rc = ovs_err(-r, "copy xattr %s of %s: %s", p, path, strerror(-r));
			goto out;
		}
		if (!strncmp(dst_name, "system.", 7))
			*acl = true;
	}
out:
	free(list);
	free(val);
	return rc;
}

/* Rule 16: the original identity, for views that show stable inodes. */
static int set_origin(int dfd, const char *dname, const struct statx *stx, const char *path)
{
	char buf[160];
	int n, rc;

	n = snprintf(buf, sizeof(buf), "ino=%llu ctime=%lld.%09u btime=",
		     (unsigned long long)stx->stx_ino, (long long)stx->stx_ctime.tv_sec,
		     stx->stx_ctime.tv_nsec);
	if (stx->stx_mask & STATX_BTIME)
		n += snprintf(buf + n, sizeof(buf) - n, "%lld.%09u",
			      (long long)stx->stx_btime.tv_sec, stx->stx_btime.tv_nsec);
	else
		n += snprintf(buf + n, sizeof(buf) - n, "-");
	rc = ovs_lsetxattrat(dfd, dname, OVS_XATTR_ORIGIN, buf, n, 0);
	if (rc < 0)
		return ovs_err(-rc, "set %s of %s: %s", OVS_XATTR_ORIGIN, path, strerror(-rc));
	return 0;
}

static void statx_to_stat(const struct statx *x, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(x->stx_dev_major, x->stx_dev_minor);
	st->st_ino = x->stx_ino;
	st->st_mode = x->stx_mode;
	st->st_nlink = x->stx_nlink;
	st->st_uid = x->stx_uid;
	st->st_gid = x->stx_gid;
	st->st_rdev = makedev(x->stx_rdev_major, x->stx_rdev_minor);
	st->st_size = x->stx_size;
	st->st_blocks = x->stx_blocks;
	st->st_atim.tv_sec = x->stx_atime.tv_sec;
	st->st_atim.tv_nsec = x->stx_atime.tv_nsec;
	st->st_mtim.tv_sec = x->stx_mtime.tv_sec;
	st->st_mtim.tv_nsec = x->stx_mtime.tv_nsec;
	st->st_ctim.tv_sec = x->stx_ctime.tv_sec;
	st->st_ctim.tv_nsec = x->stx_ctime.tv_nsec;
}

/* See OVL_XATTR_ORIGIN: lets overlayfs hide whiteouts in this directory
 * even once it is opaque. */
static int mark_dir_copied_up(int dirfd, const char *path)
{
	int rc = ovs_lsetxattrat(dirfd, "", OVL_XATTR_ORIGIN, "", 0, 0);

	if (rc < 0)
		return ovs_err(-rc, "set %s on copy of %s: %s", OVL_XATTR_ORIGIN, path,
			       strerror(-rc));
	return 0;
}

/*
 * Owner, mode, xattrs, origin, then times last (anything before would
 * touch them).  chown comes before chmod because it clears suid/sgid;
 * (dfd, "") is dfd itself.
 */
static int copy_metadata(int sfd, const char *sname, const struct statx *stx, int dfd,
			 const char *dname, const char *path)
{
	struct timespec times[2] = {
		{ .tv_sec = stx->stx_atime.tv_sec, .tv_nsec = stx->stx_atime.tv_nsec },
		{ .tv_sec = stx->stx_mtime.tv_sec, .tv_nsec = stx->stx_mtime.tv_nsec },
	};
	int empty = *dname ? 0 : AT_EMPTY_PATH;
	bool acl = false, set_mode;
	struct stat now;
	int rc;

	/* Each chown and chmod is a transaction of the filesystem's log, and
	 * a copy is mostly made by root with the mode it needs already
	 * (build_regular): only what differs is set.  A chown clears the
	 * set-id bits of a file that has them: the chmod follows it then. */
	if (fstatat(dfd, dname, &now, AT_SYMLINK_NOFOLLOW | empty) < 0)
		return ovs_err(errno, "stat copy of %s: %m", path);
	set_mode = (now.st_mode & 07777) != (stx->stx_mode & 07777);
	if (now.st_uid != stx->stx_uid || now.st_gid != stx->stx_gid) {
		if (fchownat(dfd, dname, stx->stx_uid, stx->stx_gid,
			     AT_SYMLINK_NOFOLLOW | empty) < 0)
			return ovs_err(errno, "chown copy of %s: %m", path);
		if (now.st_mode & (S_ISUID | S_ISGID))
			set_mode = true;
	}
	rc = copy_xattrs(sfd, sname, dfd, dname, path, &acl);
	if (rc < 0)
		return rc;
	/* After the ACLs: chmod recomputes the ACL mask from the same bits. */
	if (!S_ISLNK(stx->stx_mode) && (set_mode || acl)) {
		rc = *dname ? fchmodat(dfd, dname, stx->stx_mode & 07777, 0)
			    : fchmod(dfd, stx->stx_mode & 07777);
		if (rc < 0)
			return ovs_err(errno, "chmod copy of %s: %m", path);
	}
	rc = set_origin(dfd, dname, stx, path);
	if (rc < 0)
		return rc;
	rc = *dname ? utimensat(dfd, dname, times, AT_SYMLINK_NOFOLLOW) : futimens(dfd, times);
	if (rc < 0)
		return ovs_err(errno, "set times of copy of %s: %m", path);
	return 0;
}

int ovs_copy_root_metadata(int srcrootfd, int upperfd)
{
	struct statx stx;
	int rc = mark_dir_copied_up(upperfd, "/");

	if (rc < 0)
		return rc;

	if (statx(srcrootfd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW,
		  STATX_BASIC_STATS | STATX_BTIME, &stx) < 0)
		return ovs_err(errno, "stat source root: %m");
	return copy_metadata(srcrootfd, "", &stx, upperfd, "", "/");
}

/* ---- building a copy in work ---------------------------------------------- */

/*
 * A clone the XFS log orders before the later fsync of its directory
 * (build_regular): not a file on the realtime device, whose data extents
 * are allocated and remapped apart from the data device's (reflink there
 * needs the rtgroups of kernel 6.14 and a newer mkfs.xfs; xfsprogs 6.1
 * refuses "reflink not supported with realtime devices", so no clone of
 * a realtime file happens on such a filesystem).  A file whose flags
 * cannot be read keeps its fsync.
 */
static bool clone_log_ordered(const struct ovs_layer *l, int fd)
{
	struct fsxattr fsx;

	if (!l->log_ordered)
		return false;
	return ioctl(fd, FS_IOC_FSGETXATTR, &fsx) == 0 && !(fsx.fsx_xflags & FS_XFLAG_REALTIME);
}

static int build_regular(struct ovs_layer *l, int sdirfd, const char *name,
			 struct statx *stx, const char *tmp, const char *path)
{
	int in = -1, out = -1, rc;
	bool copied;

	in = openat(sdirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (in < 0 && errno == EPERM)
		in = openat(sdirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return ovs_err(errno, "open %s: %m", path);
	/* The stat of what we opened, not of what the name meant before. */
	if (statx(in, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, stx) < 0) {
		rc = ovs_err(errno, "stat %s: %m", path);
		goto out;
	}
	/* With the permission bits of the copy (work is root's alone, rule
	 * 20), so that copy_metadata need not chmod it. */
	out = openat(l->workfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, stx->stx_mode & 0777);
	if (out < 0) {
		rc = ovs_err(errno, "create %s in work: %m", tmp);
		goto out;
	}
	rc = copy_file_data(l, in, out, stx->stx_size, path, &copied);
	if (rc < 0)
		goto out;
	rc = copy_metadata(in, "", stx, out, "", path);
	if (rc < 0)
		goto out;
	/* Rule 8: a clone and the copied metadata are logged before the
	 * rename that moves the copy into the upper; on XFS the fsync of
	 * that directory (ovs_upper_dir_done, or the group's or subtree's
	 * sync) forces the log up to it, and with it the clone (whose data
	 * FICLONE wrote back first; the log force flushes the device's
	 * cache).  Copied bytes are not ordered with the log: fsync them,
	 * and realtime files (clone_log_ordered); and the entry's fsync is
	 * needed too (ovs_log_order_lost): an overwrite in place of SRC's
	 * unshared file, fdatasynced, forces no log. */
	if (!(l->flags & OVS_LAYER_NOSYNC) && !(!copied && clone_log_ordered(l, out))) {
		ovs_log_order_lost(l);
		rc = ovs_layer_fsync(l, out, "copy of ", path);
		if (rc < 0)
			goto out;
	}
	/* The last chunks of a big copy, now clean, out of the page cache
	 * too (write-behind dropped the others). */
	if (copied && stx->stx_size > WRITE_BEHIND_CHUNK)
		posix_fadvise(out, 0, 0, POSIX_FADV_DONTNEED);
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

static int build_dir(struct ovs_layer *l, int sdirfd, const char *name, bool opaque,
		     struct statx *stx, const char *tmp, const char *path)
{
	int in, out = -1, rc;

	in = openat(sdirfd, *name ? name : ".",
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (in < 0)
		return ovs_err(errno, "open %s: %m", path);
	if (statx(in, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, stx) < 0) {
		rc = ovs_err(errno, "stat %s: %m", path);
		goto out;
	}
	if (mkdirat(l->workfd, tmp, 0700) < 0) {
		rc = ovs_err(errno, "mkdir %s in work: %m", tmp);
		goto out;
	}
	out = openat(l->workfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0) {
		rc = ovs_err(errno, "open %s in work: %m", tmp);
		goto out;
	}
	if (opaque) {
		rc = ovl_set_opaque_at(out, "");
		if (rc < 0)
			goto out;
	}
	rc = mark_dir_copied_up(out, path);
	if (rc < 0)
		goto out;
	rc = copy_metadata(in, "", stx, out, "", path);
	if (rc < 0)
		goto out;
	if (!(l->flags & OVS_LAYER_NOSYNC) && !ovs_log_orders(l))
		rc = ovs_layer_fsync(l, out, "copy of ", path);
out:
	close(in);
	if (out >= 0)
		close(out);
	return rc;
}

static int build_other(struct ovs_layer *l, int sdirfd, const char *name, struct statx *stx,
		       const char *tmp, const char *path)
{
	if (statx(sdirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, stx) < 0)
		return ovs_err(errno, "stat %s: %m", path);
	if (S_ISLNK(stx->stx_mode)) {
		char *target = malloc(stx->stx_size + 2);
		ssize_t n;

		if (!target)
			return ovs_err(ENOMEM, "read link %s: out of memory", path);
		n = readlinkat(sdirfd, name, target, stx->stx_size + 2);
		if (n < 0 || (size_t)n > stx->stx_size) {
			free(target);
			return ovs_err(n < 0 ? errno : EAGAIN, "read link %s: %s", path,
				       n < 0 ? strerror(errno) : "changed while read");
		}
		target[n] = '\0';
		n = symlinkat(target, l->workfd, tmp);
		free(target);
		if (n < 0)
			return ovs_err(errno, "symlink %s in work: %m", tmp);
	} else if (S_ISCHR(stx->stx_mode) || S_ISBLK(stx->stx_mode) ||
		   S_ISFIFO(stx->stx_mode) || S_ISSOCK(stx->stx_mode)) {
		dev_t rdev = makedev(stx->stx_rdev_major, stx->stx_rdev_minor);

		if (mknodat(l->workfd, tmp, (stx->stx_mode & S_IFMT) | 0600, rdev) < 0)
			return ovs_err(errno, "mknod %s in work: %m", tmp);
	} else {
		return ovs_err(EINVAL, "%s: unknown file type 0%o", path, stx->stx_mode & S_IFMT);
	}
	/* No fsync of a symlink or device node: the parent fsync after the
	 * rename into the upper writes the new inode with its entry. */
	return copy_metadata(sdirfd, name, stx, l->workfd, tmp, path);
}

int ovs_copy_to_work(struct ovs_layer *l, int sdirfd, const char *name, bool opaque,
		     const struct stat *known, struct stat *st, char *tmp)
{
	struct statx stx;
	struct stat probe;
	int rc, tries;

	/* The caller's stat, made under the same lock, saves a syscall per
	 * preserve; each builder stats what it opened again anyway. */
	if (known)
		probe = *known;
	else if (fstatat(sdirfd, *name ? name : ".", &probe, AT_SYMLINK_NOFOLLOW) < 0)
		return ovs_err(errno, "stat %s: %m", name);
	/* A mount inside SRC: not in the upper's log. */
	if (probe.st_dev != l->src_dev)
		ovs_log_order_lost(l);
	for (tries = 0; ; tries++) {
		tmp_name(l, tmp);
		if (S_ISREG(probe.st_mode))
			rc = build_regular(l, sdirfd, name, &stx, tmp, name);
		else if (S_ISDIR(probe.st_mode))
			rc = build_dir(l, sdirfd, name, opaque, &stx, tmp, name);
		else
			rc = build_other(l, sdirfd, name, &stx, tmp, name);
		/* EEXIST comes only from making the temp: a daemon that died
		 * with our pid left one of that name (fsck removes it, not
		 * us: it is not ours).  The next number is free. */
		if (rc != -EEXIST || tries == TMP_NAME_TRIES)
			break;
	}
	if (rc < 0) {
		if (rc != -EEXIST)
			ovs_discard(l, tmp);
		return rc;
	}
	statx_to_stat(&stx, st);
	return 0;
}

void ovs_discard(struct ovs_layer *l, const char *tmp)
{
	if (unlinkat(l->workfd, tmp, 0) < 0 && errno == EISDIR)
		unlinkat(l->workfd, tmp, AT_REMOVEDIR);
}

pthread_mutex_t *ovs_upper_dir_lock_ino(struct ovs_layer *l, ino_t ino)
{
	pthread_mutex_t *m = &l->dir_locks[ino % OVS_UPPER_DIR_LOCKS];

	pthread_mutex_lock(m);
	return m;
}

/*
 * The lock of the upper directory udirfd (see struct ovs_layer), found by
 * its inode number uino (0: fstat it), and with times its times, read
 * under the lock (read before, they may be another preserve's in
 * flight).  *rc: 0, or the error of an fstat, which fails only on a
 * broken fd: any lock will do then, the operation under it fails too.
 */
static pthread_mutex_t *upper_dir_lock(struct ovs_layer *l, int udirfd, ino_t uino,
				       struct timespec times[2], int *rc)
{
	pthread_mutex_t *m;
	struct stat st;

	*rc = 0;
	if (!uino) {
		if (fstat(udirfd, &st) == 0)
			uino = st.st_ino;
		else
			*rc = ovs_err(errno, "stat upper directory: %m");
	}
	m = ovs_upper_dir_lock_ino(l, uino);
	if (times && *rc == 0)
		*rc = ovs_upper_dir_times(udirfd, times);
	return m;
}

/* ovs_install with udirfd's lock held and its times saved. */
static int install_locked(struct ovs_layer *l, const char *tmp, const struct stat *st,
			  int udirfd, const char *name, const struct timespec times[2])
{
	int rc;

	/* NOREPLACE: whatever is already there was preserved first and wins. */
	if (renameat2(l->workfd, tmp, udirfd, name, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST) {
			ovs_discard(l, tmp);
			return 0;
		}
		rc = ovs_err(errno, "move copy of %s into the upper: %m", name);
		goto fail;
	}
	/* Some filesystems touch a directory moved between parents. */
	if (S_ISDIR(st->st_mode)) {
		struct timespec dt[2] = { st->st_atim, st->st_mtim };

		if (utimensat(udirfd, name, dt, AT_SYMLINK_NOFOLLOW) < 0)
			return ovs_err(errno, "set times of %s: %m", name);
	}
	return ovs_upper_dir_done(l, udirfd, times, !S_ISDIR(st->st_mode));
fail:
	ovs_discard(l, tmp);
	return rc;
}

int ovs_install(struct ovs_layer *l, const char *tmp, const struct stat *st, int udirfd,
		ino_t uino, const char *name)
{
	struct timespec times[2];
	int rc;
	pthread_mutex_t *m = upper_dir_lock(l, udirfd, uino, times, &rc);

	if (rc == 0)
		rc = install_locked(l, tmp, st, udirfd, name, times);
	else
		ovs_discard(l, tmp);
	pthread_mutex_unlock(m);
	return rc;
}

int ovs_link_into(struct ovs_layer *l, int fromdirfd, const char *from, int udirfd,
		  const char *name)
{
	struct timespec times[2];
	int rc;
	pthread_mutex_t *m = upper_dir_lock(l, udirfd, 0, times, &rc);

	if (rc == 0 && linkat(fromdirfd, from, udirfd, name, 0) < 0)
		rc = errno == EEXIST ? 1 : ovs_err(errno, "link %s in the upper: %m", name);
	if (rc == 0)
		rc = ovs_upper_dir_done(l, udirfd, times, true);
	pthread_mutex_unlock(m);
	return rc == 1 ? 0 : rc;
}

/* Does (dfd, name) carry a trusted.overlay.* xattr (rule 14), or more
 * names than a look costs here?  Either way it is copied, not moved. */
static bool overlay_xattr_or_many(int dfd, const char *name)
{
	char list[4096];
	ssize_t len = ovs_llistxattrat(dfd, name, list, sizeof(list));
	size_t plen = strlen(OVL_XATTR_PREFIX);

	if (len == -ENOTSUP)
		return false;
	if (len < 0)
		return true;
	for (char *p = list; p < list + len; p += strlen(p) + 1)
		if (strncmp(p, OVL_XATTR_PREFIX, plen) == 0)
			return true;
	return false;
}

int ovs_move_into(struct ovs_layer *l, int sdirfd, const char *name, const struct stat *known,
		  int udirfd, ino_t uino, bool *moved)
{
	struct timespec times[2];
	struct statx stx;
	pthread_mutex_t *m;
	int rc, r;

	*moved = false;
	if (statx(sdirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &stx) < 0)
		return ovs_err(errno, "stat %s: %m", name);
	/* Not the object the caller knows, or one a move cannot keep as it
	 * was: a copy, or nothing to do, is the caller's. */
	if (stx.stx_ino != known->st_ino ||
	    makedev(stx.stx_dev_major, stx.stx_dev_minor) != known->st_dev ||
	    stx.stx_dev_major != major(l->src_dev) || stx.stx_dev_minor != minor(l->src_dev) ||
	    !S_ISREG(stx.stx_mode) || stx.stx_nlink != 1 || overlay_xattr_or_many(sdirfd, name))
		return 0;
	m = upper_dir_lock(l, udirfd, uino, times, &rc);
	if (rc < 0)
		goto out;
	if (renameat2(sdirfd, name, udirfd, name, RENAME_NOREPLACE) < 0) {
		/* EEXIST: preserved meanwhile, the first preserve wins; EXDEV:
		 * another XFS project; EPERM: an immutable or append-only file
		 * or directory, whose unlink fails the same way after a copy. */
		if (errno != EEXIST && errno != EXDEV && errno != EPERM)
			rc = ovs_err(errno, "move %s into the upper: %m", name);
		goto out;
	}
	*moved = true;
	/* Rule 16: the ctime it had, which the rename changed. */
	rc = set_origin(udirfd, name, &stx, name);
	if (rc < 0) {
		/* Back where it was: the unlink it guards fails instead. */
		if (renameat2(udirfd, name, sdirfd, name, RENAME_NOREPLACE) == 0)
			*moved = false;
		else
			rc = ovs_err_keep(errno, "%s moved into the upper, not back (%s)", name,
					  strerror(errno));
	}
	/* Restored even after a way back: the upper directory was changed. */
	r = ovs_upper_dir_done(l, udirfd, times, true);
	if (r < 0 && rc == 0)
		rc = r;
out:
	pthread_mutex_unlock(m);
	return rc;
}

/* ---- whiteouts ------------------------------------------------------------ */

/* (Re)make work/wh-base, the layer's one shared whiteout inode. */
static int make_whiteout_base(struct ovs_layer *l)
{
	char tmp[OVS_TMP_NAME_MAX];
	int tries = 0;

	do {
		tmp_name(l, tmp);
		if (mknodat(l->workfd, tmp, S_IFCHR | 0, makedev(0, 0)) == 0)
			break;
		/* A dead daemon with our pid may have left this name. */
		if (errno != EEXIST || ++tries > TMP_NAME_TRIES)
			return -errno;
	} while (true);
	if (renameat(l->workfd, tmp, l->workfd, OVS_WHITEOUT_BASE) < 0) {
		int err = errno;

		unlinkat(l->workfd, tmp, 0);
		return -err;
	}
	/* Once per layer: the links made to it must never outlive it (the
	 * log orders it before them, where it orders the preserve). */
	if (!(l->flags & OVS_LAYER_NOSYNC) && !ovs_log_orders(l) && syncfs(l->workfd) < 0)
		return -ovs_layer_sync_failed(l, errno);
	return 0;
}

/* Caller holds l->whiteout_lock: two threads must not both find the
 * base missing or full and make one each. */
static int link_whiteout(struct ovs_layer *l, int udirfd, const char *name)
{
	struct stat st;
	int rc;

	if (fstatat(l->workfd, OVS_WHITEOUT_BASE, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !ovl_is_whiteout(&st)) {
		rc = make_whiteout_base(l);
		if (rc < 0)
			return rc;
	}
	if (linkat(l->workfd, OVS_WHITEOUT_BASE, udirfd, name, 0) == 0)
		return 0;
	if (errno != EMLINK)
		return -errno;
	/* The base is full (ext4 caps links at 65000): start a fresh one. */
	rc = make_whiteout_base(l);
	if (rc < 0)
		return rc;
	return linkat(l->workfd, OVS_WHITEOUT_BASE, udirfd, name, 0) == 0 ? 0 : -errno;
}

int ovs_whiteout_at(struct ovs_layer *l, int udirfd, const char *name)
{
	struct timespec times[2];
	int rc;
	pthread_mutex_t *m = upper_dir_lock(l, udirfd, 0, times, &rc);

	if (rc < 0)
		goto out;
	pthread_mutex_lock(&l->whiteout_lock);
	rc = link_whiteout(l, udirfd, name);
	pthread_mutex_unlock(&l->whiteout_lock);
	if (rc == -EEXIST) {
		rc = 0;		/* preserved before */
		goto out;
	}
	if (rc < 0 && mknodat(udirfd, name, S_IFCHR | 0, makedev(0, 0)) < 0) {
		rc = errno == EEXIST ? 0 : ovs_err(errno, "whiteout %s: %m", name);
		goto out;
	}
	rc = ovs_upper_dir_done(l, udirfd, times, true);
out:
	pthread_mutex_unlock(m);
	return rc;
}

/* ---- parents in the upper ------------------------------------------------- */

int ovs_upper_parent(struct ovs_layer *l, const struct ovs_relpath *path, bool create)
{
	return ovs_upper_parent_from(l, l->upperfd, path, create);
}

int ovs_upper_parent_from(struct ovs_layer *l, int rootfd, const struct ovs_relpath *path,
			  bool create)
{
	char what[OVS_RELPATH_DESCRIBE_MAX];
	int cur, scur = -1, rc;
	size_t i;

	/* rootfd itself until the first level: a dup to close at once
	 * would cost two calls for nothing. */
	cur = rootfd;
	for (i = 0; i + 1 < path->n; i++) {
		const char *comp = path->names[i];
		struct ovs_relpath upto = { path->names, i + 1, -1, NULL };
		pthread_mutex_t *m;
		int fd, err;

		/* Under the parent's lock: a directory another preserve is
		 * installing right now is found once it is complete and
		 * durable, or made here (see struct ovs_layer). */
		m = create ? upper_dir_lock(l, cur, 0, NULL, &rc) : NULL;
		fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && scur >= 0) {
			/* Found, made by a parallel preserve: scur is SRC's
			 * directory one level up now, so a level missing below
			 * is reached from SRC's root again. */
			close(scur);
			scur = -1;
		}
		if (fd < 0 && errno == ENOENT && create) {
			/* Missing in the upper: SRC's directory at this prefix
			 * is unchanged since the snapshot (any change would
			 * have preserved it), so copy its metadata now.  The
			 * first one is reached from SRC's root, the ones below
			 * it (missing too) each from the one above. */
			char tmp[OVS_TMP_NAME_MAX];
			struct stat st;
			int sfd = scur < 0 ? ovs_src_walk(l->srcfd, &upto, i + 1,
							  O_RDONLY | O_DIRECTORY)
					   : src_open_at(scur, comp, O_RDONLY | O_DIRECTORY);

			if (sfd < 0) {
				pthread_mutex_unlock(m);
				rc = ovs_err(-sfd, "open %s in the source: %s",
					     ovs_relpath_describe(&upto, what, sizeof(what)),
					     strerror(-sfd));
				goto fail;
			}
			if (scur >= 0)
				close(scur);
			scur = sfd;
			rc = ovs_copy_to_work(l, sfd, "", false, NULL, &st, tmp);
			if (rc == 0) {
				struct timespec times[2];

				rc = ovs_upper_dir_times(cur, times);
				if (rc == 0)
					rc = install_locked(l, tmp, &st, cur, comp, times);
				else
					ovs_discard(l, tmp);
			}
			if (rc < 0) {
				pthread_mutex_unlock(m);
				goto fail;
			}
			fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (m)
			pthread_mutex_unlock(m);
		if (fd < 0) {
			err = errno;
			rc = ovs_err(err, "open %s in the upper: %s",
				     ovs_relpath_describe(&upto, what, sizeof(what)), strerror(err));
			goto fail;
		}
		if (cur != rootfd)
			close(cur);
		cur = fd;
	}
	if (cur == rootfd) {
		cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
		if (cur < 0)
			cur = ovs_err(errno, "dup: %m");
	}
	goto out;
fail:
	if (cur != rootfd)
		close(cur);
	cur = rc;
out:
	if (scur >= 0)
		close(scur);
	return cur;
}
