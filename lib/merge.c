/*
 * Merging adjacent overlay layers (merge.h), dropping snapshots, and
 * finishing an interrupted merge or drop.
 *
 * Merging the newer layer B into the older layer A, for a path p where
 * both have a directory and A's is not opaque (the roots, to begin with):
 * for each name n in B/p,
 *   - A has nothing at n: B's entry (file, whiteout, whole subtree) moves
 *     to A/p/n by rename: A:B showed exactly B's entry there;
 *   - A has a whiteout, a non-directory or an opaque directory at n: A
 *     hid B's entry; it stays behind and is deleted with B;
 *   - A has a plain directory and B a whiteout or non-directory: A:B
 *     showed only A's directory (overlayfs stops a merge at a
 *     non-directory), so A/p/n becomes opaque to keep hiding what lies
 *     below B;
 *   - both have directories: merge them recursively; if B's is opaque,
 *     A/p/n becomes opaque afterwards (B hid what lies below it).
 *
 * Crash safety without an undo log: every step is a single atomic change
 * (a rename, an xattr, a utimensat) and the decision for a name depends
 * only on the state it leaves.  A name that moved is gone from B; a
 * directory of A becomes opaque only after its B counterpart has been
 * fully processed, so finding it opaque on a re-run means "nothing more to
 * take from B here" either way.  A directory of A whose entries change
 * keeps its original times in an xattr until they are restored, so a
 * re-run restores the original times, not those of the interruption.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libovsnap.h"
#include "ovsnap-private.h"
#include "preserve.h"
#include "control.h"
#include "merge.h"
#include "views.h"
#include "walk.h"

/* Times of a directory of the older layer from before the merge touched
 * it; overlayfs hides trusted.overlay.* names it does not know. */
#define OVS_XATTR_MERGE_TIMES	"trusted.overlay.ovsnap.merge-times"
#define OVL_XATTR_METACOPY	"trusted.overlay.metacopy"

/* ---- the crash test hook ------------------------------------------------ */

/*
 * OVSNAP_TEST_CRASH_AFTER=N: _exit(9) right after the N-th change, so the
 * crash tests can interrupt a merge or drop at every step.  The only
 * place where the library exits, and only when a test asks for it.
 */
static long crash_after = -1;
static long steps_done;

static void crash_hook_init(void)
{
	static bool done;
	const char *s;

	if (done)
		return;
	done = true;
	s = getenv("OVSNAP_TEST_CRASH_AFTER");
	if (s && *s)
		crash_after = strtol(s, NULL, 10);
}

static void step(void)
{
	steps_done++;
	if (crash_after > 0 && steps_done >= crash_after)
		_exit(9);
}

/* ---- helpers --------------------------------------------------------------- */

struct merge_ctx {
	unsigned flags;
	ovs_progress_fn progress;
	void *arg;
	uint64_t total;
	struct ovs_merge_stats st;
};

static void note_entry(struct merge_ctx *c)
{
	c->st.entries++;
	if (c->progress && c->st.entries % 1024 == 0)
		c->progress(c->arg, c->st.entries, c->total);
}

static int open_dir_at(int dirfd, const char *name, const char *path)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return ovs_err(errno, "merge: open %s: %m", path);
	return fd;
}

static bool has_xattr(int dirfd, const char *name, const char *attr)
{
	return ovs_lgetxattrat(dirfd, name, attr, NULL, 0) >= 0;
}

/* ---- saved directory times --------------------------------------------- */

struct dir_times {
	struct timespec ts[2];	/* atime, mtime as utimensat() wants them */
};

/* 1 and t filled if fd carries saved times, 0 if not. */
static int saved_times_load(int fd, const char *path, struct dir_times *t)
{
	char buf[96];
	long long as, ms;
	long an, mn;
	ssize_t n;

	n = ovs_lgetxattrat(fd, "", OVS_XATTR_MERGE_TIMES, buf, sizeof(buf) - 1);
	if (n == -ENODATA)
		return 0;
	if (n < 0)
		return ovs_err(-n, "merge: read saved times of %s: %s", *path ? path : "/",
			       strerror(-n));
	buf[n] = 0;
	if (sscanf(buf, "%lld.%ld %lld.%ld", &as, &an, &ms, &mn) != 4)
		return ovs_err(EUCLEAN, "merge: bad saved times '%s' on %s", buf,
			       *path ? path : "/");
	t->ts[0].tv_sec = as;
	t->ts[0].tv_nsec = an;
	t->ts[1].tv_sec = ms;
	t->ts[1].tv_nsec = mn;
	return 1;
}

static int saved_times_store(int fd, const char *path, struct dir_times *t)
{
	struct stat st;
	char buf[96];
	int n, rc;

	if (fstat(fd, &st) < 0)
		return ovs_err(errno, "merge: stat %s: %m", *path ? path : "/");
	t->ts[0] = st.st_atim;
	t->ts[1] = st.st_mtim;
	n = snprintf(buf, sizeof(buf), "%lld.%09ld %lld.%09ld",
		     (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
		     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	rc = ovs_lsetxattrat(fd, "", OVS_XATTR_MERGE_TIMES, buf, n, 0);
	if (rc < 0)
		return ovs_err(-rc, "merge: save times of %s: %s", *path ? path : "/",
			       strerror(-rc));
	step();
	return 0;
}

static int saved_times_restore(int fd, const char *path, const struct dir_times *t)
{
	int rc;

	if (futimens(fd, t->ts) < 0)
		return ovs_err(errno, "merge: restore times of %s: %m", *path ? path : "/");
	step();
	rc = ovs_lremovexattrat(fd, "", OVS_XATTR_MERGE_TIMES);
	if (rc < 0 && rc != -ENODATA)
		return ovs_err(-rc, "merge: clear saved times of %s: %s", *path ? path : "/",
			       strerror(-rc));
	step();
	return 0;
}

/* ---- the check before the first change ------------------------------------ */

/*
 * Walk the newer layer (d->fd; and the older layer's directories where
 * both have one, d->aux) and refuse what this merge does not understand:
 * redirects and metacopy entries, which ovsnap never writes.  Counts the
 * entries for the progress report.
 */
static int precheck_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *sub,
			  struct ovs_walk_dir *child)
{
	struct merge_ctx *c = arg;
	int afd = d->aux, bfd = d->fd;
	struct stat bst, ast;

	c->total++;
	if (fstatat(bfd, name, &bst, AT_SYMLINK_NOFOLLOW) < 0)
		return ovs_err(errno, "merge: stat %s: %m", sub);
	if (S_ISDIR(bst.st_mode) || S_ISREG(bst.st_mode)) {
		const char *attr = S_ISDIR(bst.st_mode) ? OVL_XATTR_REDIRECT : OVL_XATTR_METACOPY;

		if (has_xattr(bfd, name, attr))
			return ovs_err(EOPNOTSUPP, "merge: %s in the newer layer has %s: "
				       "layers with redirects or metacopy are not supported",
				       sub, attr);
	}
	if (!S_ISDIR(bst.st_mode))
		return 0;
	if (afd >= 0 && fstatat(afd, name, &ast, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(ast.st_mode)) {
		if (has_xattr(afd, name, OVL_XATTR_REDIRECT))
			return ovs_err(EOPNOTSUPP, "merge: %s in the older layer has %s: layers "
				       "with redirects are not supported", sub, OVL_XATTR_REDIRECT);
		child->aux = open_dir_at(afd, name, sub);
		if (child->aux < 0)
			return child->aux;
	}
	child->fd = open_dir_at(bfd, name, sub);
	if (child->fd < 0) {
		if (child->aux >= 0)
			close(child->aux);
		return child->fd;
	}
	return OVS_WALK_DESCEND;
}

/* Unsorted, like the merge: a sorted walk holds a directory's names. */
static const struct ovs_walk_ops precheck_ops = {
	.entry = precheck_entry,
};

/* ---- the merge itself ---------------------------------------------------------- */

/* Walk levels: d->fd is the newer layer's directory (B, read), d->aux the
 * older one's (A); d->times the saved times of A's. */
#define MERGE_SAVED	1u	/* A's times are saved (in d->times and an xattr) */
#define MERGE_B_OPAQUE	2u	/* B's directory is opaque: A's turns opaque when done */

/* Descend into A's and B's directories name: open both, load A's saved
 * times. */
static int merge_descend(int afd, int bfd, const char *name, const char *sub, bool b_opaque,
			 struct ovs_walk_dir *child)
{
	struct dir_times t = { 0 };
	int saved;

	child->aux = open_dir_at(afd, name, sub);
	if (child->aux < 0)
		return child->aux;
	child->fd = open_dir_at(bfd, name, sub);
	if (child->fd < 0) {
		close(child->aux);
		return child->fd;
	}
	saved = saved_times_load(child->aux, sub, &t);
	if (saved < 0) {
		close(child->aux);
		close(child->fd);
		return saved;
	}
	child->flags = (saved ? MERGE_SAVED : 0) | (b_opaque ? MERGE_B_OPAQUE : 0);
	child->times[0] = t.ts[0];
	child->times[1] = t.ts[1];
	return OVS_WALK_DESCEND;
}

static int merge_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *sub,
		       struct ovs_walk_dir *child)
{
	struct merge_ctx *c = arg;
	int afd = d->aux, bfd = d->fd, opaque, b_opaque, rc;
	struct stat ast, bst;

	/* ENOENT: moved already, and readdir() shows it again (POSIX lets
	 * it show entries removed since the directory was opened) */
	if (fstatat(bfd, name, &bst, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? OVS_WALK_REMOVED :
		       ovs_err(errno, "merge: stat %s in the newer layer: %m", sub);
	note_entry(c);
	if (fstatat(afd, name, &ast, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return ovs_err(errno, "merge: stat %s in the older layer: %m", sub);
		/* Only B has it: move it, whatever it is. */
		if (!(d->flags & MERGE_SAVED)) {
			struct dir_times t = { 0 };
			const char *slash = strrchr(sub, '/');
			char *path = strndup(sub, slash ? (size_t)(slash - sub) : 0);

			rc = path ? saved_times_store(afd, path, &t)
				  : ovs_err(ENOMEM, "merge: out of memory");
			free(path);
			if (rc < 0)
				return rc;
			d->times[0] = t.ts[0];
			d->times[1] = t.ts[1];
			d->flags |= MERGE_SAVED;
		}
		if (renameat2(bfd, name, afd, name, RENAME_NOREPLACE) < 0)
			return ovs_err(errno, "merge: move %s into the older layer: %m", sub);
		step();
		c->st.moved++;
		return OVS_WALK_REMOVED;
	}
	if (!S_ISDIR(ast.st_mode)) {
		/* A's whiteout or non-directory hides B's entry. */
		c->st.discarded++;
		return 0;
	}
	opaque = ovl_is_opaque_at(afd, name);
	if (opaque < 0)
		return opaque;
	if (opaque) {
		c->st.discarded++;
		return 0;
	}
	if (!S_ISDIR(bst.st_mode)) {
		/* A plain directory over B's whiteout or non-directory: A:B
		 * showed A's directory alone. */
		rc = ovl_set_opaque_at(afd, name);
		if (rc == 0) {
			step();
			c->st.opaqued++;
		}
		return rc;
	}
	b_opaque = ovl_is_opaque_at(bfd, name);
	if (b_opaque < 0)
		return b_opaque;
	return merge_descend(afd, bfd, name, sub, b_opaque, child);
}

/* All of B's directory is merged into A's: restore A's times, then (only
 * now: an opaque A directory means "done here") mark it opaque if B's
 * was. */
static int merge_leave(void *arg, struct ovs_walk_dir *d, struct ovs_walk_dir *parent,
		       const char *path)
{
	struct merge_ctx *c = arg;
	int rc;

	if (d->flags & MERGE_SAVED) {
		struct dir_times t = { { d->times[0], d->times[1] } };

		rc = saved_times_restore(d->aux, path, &t);
		if (rc < 0)
			return rc;
	}
	if (parent && (d->flags & MERGE_B_OPAQUE)) {
		rc = ovl_set_opaque_at(parent->aux, d->name);
		if (rc < 0)
			return rc;
		step();
		c->st.opaqued++;
	}
	return 0;
}

/*
 * In readdir() order, each entry as it is read, so a directory of 10^6
 * names costs one readdir buffer, not its names (issue 13 item 3).  The
 * walk reads B's directory while moving entries out of it, and creates
 * nothing in it: an entry moved may show again (merge_entry() finds it
 * gone), and the walker reads B's directory again should one be skipped;
 * no decision depends on the order.
 */
static const struct ovs_walk_ops merge_ops = {
	.entry = merge_entry,
	.leave = merge_leave,
};

/* Walk the layers' roots (the caller's fds, kept) with ops. */
static int walk_layers(struct merge_ctx *c, int olderfd, int newerfd, bool load_times,
		       const struct ovs_walk_ops *ops)
{
	struct ovs_walk_dir root = { .fd = -1, .aux = -1 };

	root.aux = openat(olderfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root.aux < 0)
		return ovs_err(errno, "merge: open /: %m");
	root.fd = openat(newerfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root.fd < 0) {
		close(root.aux);
		return ovs_err(errno, "merge: open /: %m");
	}
	if (load_times) {
		struct dir_times t = { 0 };
		int saved = saved_times_load(root.aux, "", &t);

		if (saved < 0) {
			close(root.aux);
			close(root.fd);
			return saved;
		}
		root.flags = saved ? MERGE_SAVED : 0;
		root.times[0] = t.ts[0];
		root.times[1] = t.ts[1];
	}
	return ovs_walk(&root, "", ops, c);
}

int ovs_merge_layers(int olderfd, int newerfd, unsigned flags,
		     ovs_progress_fn progress, void *arg, struct ovs_merge_stats *stats)
{
	struct merge_ctx c = { .flags = flags, .progress = progress, .arg = arg };
	struct stat ast, bst;
	int rc;

	crash_hook_init();
	if (fstat(olderfd, &ast) < 0 || fstat(newerfd, &bst) < 0)
		return ovs_err(errno, "merge: stat of a layer: %m");
	if (ast.st_dev != bst.st_dev)
		return ovs_err(EXDEV, "merge: the layers are on different filesystems");
	if (ast.st_ino == bst.st_ino)
		return ovs_err(EINVAL, "merge: a layer cannot be merged into itself");
	rc = walk_layers(&c, olderfd, newerfd, false, &precheck_ops);
	if (rc < 0)
		return rc;
	/* The roots always merge: overlayfs ignores opaque on layer roots. */
	rc = walk_layers(&c, olderfd, newerfd, true, &merge_ops);
	if (rc < 0)
		return rc;
	if (progress)
		progress(arg, c.st.entries, c.total);
	/* What moved must be on disk before the registry forgets B. */
	if (!(flags & OVS_MERGE_NOSYNC) && syncfs(olderfd) < 0)
		return ovs_err(errno, "merge: sync: %m");
	if (stats)
		*stats = c.st;
	return 0;
}

/* ---- snapshots ------------------------------------------------------------------- */

static ssize_t snap_index(const struct ovs_volume *v, uint64_t id)
{
	size_t n = ovs_snapshot_count(v);

	for (size_t i = 0; i < n; i++)
		if (ovs_snapshot_at(v, i)->id == id)
			return i;
	return -1;
}

static int open_upper(struct ovs_volume *v, uint64_t id)
{
	int fd = ovs_snapshot_open_upper(v, id, O_RDONLY);

	if (fd < 0)
		return ovs_err_keep(-fd, "open the layer of snapshot %" PRIu64, id);
	return fd;
}

/* The newest snapshot of an active volume receives the daemon's copy-ups:
 * only the daemon may change its layer, under its barrier. */
static int refuse_active(struct ovs_volume *v, uint64_t id, unsigned flags)
{
	size_t n = ovs_snapshot_count(v);

	if (flags & OVS_MERGE_UNDER_BARRIER)
		return 0;
	if (!ovs_volume_active(v) || n == 0 || ovs_snapshot_at(v, n - 1)->id != id)
		return 0;
	return ovs_err(EBUSY, "snapshot %" PRIu64 " is the active one: run "
		       "'ovsnap deactivate %s' first", id, ovs_volume_source(v));
}

/*
 * Views: a snapshot that is mounted cannot go away, and a --kernel view
 * reads the layers directly, so no layer of its stack may change.  The
 * snapshots at registry positions (first, last] disappear; layers at
 * positions first..last change.  Daemon-served views of other snapshots
 * re-resolve through the current layers and keep working.
 */
static int refuse_views(struct ovs_volume *v, ssize_t first, ssize_t last, bool oldest_drop)
{
	struct ovs_view_mount *views = NULL;
	size_t nviews = 0, i;
	int rc;

	rc = ovs_volume_views(v, &views, &nviews);
	if (rc < 0)
		return rc;
	for (i = 0; i < nviews && rc == 0; i++) {
		ssize_t at = snap_index(v, views[i].id);

		if (at < 0)
			continue;
		if ((oldest_drop && at == first) || (!oldest_drop && at > first && at <= last))
			rc = ovs_err(EBUSY, "snapshot %" PRIu64 " is mounted at %s: "
				     "unmount it first ('ovsnap umount %s')",
				     views[i].id, views[i].target, views[i].target);
		else if (!oldest_drop && views[i].kernel && at <= last)
			rc = ovs_err(EBUSY, "the --kernel view of snapshot %" PRIu64 " at %s "
				     "uses the layers to merge: unmount it first",
				     views[i].id, views[i].target);
	}
	ovs_views_free(views, nviews);
	return rc;
}

static int merge_one(struct ovs_volume *v, uint64_t older, uint64_t newer,
		     ovs_progress_fn progress, void *arg)
{
	int afd, bfd, rc;

	afd = open_upper(v, older);
	if (afd < 0)
		return afd;
	bfd = open_upper(v, newer);
	if (bfd < 0) {
		close(afd);
		return bfd;
	}
	rc = ovs_merge_layers(afd, bfd, 0, progress, arg, NULL);
	close(afd);
	close(bfd);
	if (rc < 0)
		return ovs_err_keep(-rc, "merge snapshot %" PRIu64 " into %" PRIu64, newer, older);
	/* The registry forgets B, then B's directory (with what A hid) goes. */
	rc = ovs_registry_remove_snapshot(v, newer);
	if (rc < 0)
		return rc;
	step();
	return 0;
}

/* Fold every registered snapshot in (older, newer] into older, oldest
 * first.  Re-entrant: recovery calls it again with the same arguments. */
static int fold_range(struct ovs_volume *v, uint64_t older, uint64_t newer,
		      ovs_progress_fn progress, void *arg)
{
	for (;;) {
		ssize_t i = snap_index(v, older);
		const struct ovs_snapshot *next;
		int rc;

		if (i < 0)
			return ovs_err(ENOENT, "snapshot %" PRIu64 " is not in the registry", older);
		next = ovs_snapshot_at(v, i + 1);
		if (!next || next->id > newer)
			break;
		rc = merge_one(v, older, next->id, progress, arg);
		if (rc < 0)
			return rc;
	}
	/* A removal interrupted between registry and directory leaves the
	 * directory behind: remove those of the folded ids. */
	for (uint64_t id = older + 1; id <= newer; id++) {
		if (snap_index(v, id) < 0) {
			int rc = ovs_layer_remove(v, id);

			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int intent_begin(struct ovs_volume *v, const char *op, uint64_t a, uint64_t b)
{
	char text[128];
	int rc;

	if (b)
		snprintf(text, sizeof(text), "%s %" PRIu64 " %" PRIu64, op, a, b);
	else
		snprintf(text, sizeof(text), "%s %" PRIu64, op, a);
	rc = ovs_intent_write(v, text);
	if (rc < 0)
		return rc;
	step();
	return 0;
}

static int intent_end(struct ovs_volume *v)
{
	int rc = ovs_intent_clear(v);

	if (rc == 0)
		step();
	return rc;
}

int ovs_merge_snapshots(struct ovs_volume *v, uint64_t older, uint64_t newer,
			ovs_progress_fn progress, void *arg)
{
	return ovs_merge_snapshots_flags(v, older, newer, 0, progress, arg);
}

int ovs_merge_snapshots_flags(struct ovs_volume *v, uint64_t older, uint64_t newer,
			      unsigned flags, ovs_progress_fn progress, void *arg)
{
	ssize_t ia, ib;
	int rc;

	crash_hook_init();
	ia = snap_index(v, older);
	ib = snap_index(v, newer);
	if (ia < 0)
		return ovs_err(ENOENT, "no snapshot %" PRIu64, older);
	if (ib < 0)
		return ovs_err(ENOENT, "no snapshot %" PRIu64, newer);
	if (ib <= ia)
		return ovs_err(EINVAL, "snapshot %" PRIu64 " is not newer than %" PRIu64,
			       newer, older);
	rc = refuse_active(v, newer, flags);
	if (rc == 0)
		rc = refuse_views(v, ia, ib, false);
	if (rc == 0 && !(flags & OVS_MERGE_UNDER_BARRIER))
		rc = ovs_ctl_quiesce(v);
	if (rc < 0)
		return rc;
	rc = intent_begin(v, "merge", older, newer);
	if (rc < 0)
		return rc;
	rc = fold_range(v, older, newer, progress, arg);
	if (rc < 0)
		return rc;	/* the intent stays: the next command finishes it */
	rc = intent_end(v);
	if (rc == 0)
		ovs_log(v, "snapshot=%" PRIu64 " merge newer=%" PRIu64 " (those after %" PRIu64
			" up to %" PRIu64 " merged into it)", older, newer, older, newer);
	return rc;
}

int ovs_drop_snapshot(struct ovs_volume *v, uint64_t id, ovs_progress_fn progress, void *arg)
{
	return ovs_drop_snapshot_flags(v, id, 0, progress, arg);
}

int ovs_drop_snapshot_flags(struct ovs_volume *v, uint64_t id, unsigned flags,
			    ovs_progress_fn progress, void *arg)
{
	ssize_t i;
	int rc;

	crash_hook_init();
	i = snap_index(v, id);
	if (i < 0)
		return ovs_err(ENOENT, "no snapshot %" PRIu64, id);
	rc = refuse_active(v, id, flags);
	if (rc < 0)
		return rc;
	if (i > 0) {
		uint64_t into = ovs_snapshot_at(v, i - 1)->id;

		rc = ovs_merge_snapshots_flags(v, into, id, flags, progress, arg);
		if (rc == 0)
			ovs_log(v, "snapshot=%" PRIu64 " drop merged-into=%" PRIu64, id, into);
		return rc;
	}
	/* The oldest: no other view uses its layer. */
	rc = refuse_views(v, 0, 0, true);
	if (rc == 0 && !(flags & OVS_MERGE_UNDER_BARRIER))
		rc = ovs_ctl_quiesce(v);
	if (rc < 0)
		return rc;
	rc = intent_begin(v, "drop", id, 0);
	if (rc < 0)
		return rc;
	/* The registry forgets it first, then its directory goes. */
	rc = ovs_registry_remove_snapshot(v, id);
	if (rc < 0)
		return rc;
	step();
	rc = intent_end(v);
	if (rc == 0)
		ovs_log(v, "snapshot=%" PRIu64 " drop oldest", id);
	return rc;
}

int ovs_recover(struct ovs_volume *v)
{
	uint64_t a, b;
	char text[256], op[16];
	int rc;

	crash_hook_init();
	rc = ovs_intent_read(v, text, sizeof(text));
	if (rc < 0)
		return rc;
	if (!text[0])
		return 0;
	if (sscanf(text, "%15s", op) != 1)
		return 0;
	/* Half removed: only a forget may go on with it. */
	if (strcmp(op, "forget") == 0)
		return ovs_err(EBUSY, "an interrupted 'ovsnap forget' left the volume half removed: "
			       "run 'ovsnap forget %s' again to finish", ovs_volume_source(v));
	if ((strcmp(op, "merge") == 0 || strcmp(op, "drop") == 0) &&
	    (rc = ovs_ctl_quiesce(v)) < 0)
		return rc;
	if (strcmp(op, "merge") == 0) {
		if (sscanf(text, "merge %" SCNu64 " %" SCNu64, &a, &b) != 2)
			return ovs_err(EUCLEAN, "bad intent record '%s'", text);
		rc = fold_range(v, a, b, NULL, NULL);
		if (rc < 0)
			return ovs_err_keep(-rc, "finish the interrupted merge of %" PRIu64
					    "..%" PRIu64, a, b);
	} else if (strcmp(op, "drop") == 0) {
		if (sscanf(text, "drop %" SCNu64, &a) != 1)
			return ovs_err(EUCLEAN, "bad intent record '%s'", text);
		if (snap_index(v, a) >= 0) {
			rc = ovs_registry_remove_snapshot(v, a);
			if (rc < 0)
				return rc;
			step();
		}
		rc = ovs_layer_remove(v, a);
		if (rc < 0)
			return ovs_err_keep(-rc, "finish the interrupted drop of %" PRIu64, a);
	} else {
		return 0;	/* another command's intent */
	}
	rc = intent_end(v);
	return rc < 0 ? rc : 1;
}
