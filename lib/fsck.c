/*
 * ovsnap fsck in the library: every check of ovsnap-fsck(8), each finding
 * handed to the caller's callback after its repair was tried.
 *
 * Repairs come in two levels: PREEN ones lose nothing (leftovers, stray
 * layer directories, xattrs the kernel ignores anyway); REPAIR_ALL ones give
 * something up to make the volume usable again (unregistering a lost
 * snapshot).  A repair marked "quiet" needs the preservation engine stopped:
 * while the snapshot mount runs, its daemon writes into the layers without
 * taking the volume lock.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "preserve.h"
#include "control.h"
#include "merge.h"
#include "runs.h"
#include "fsck.h"
#include "walk.h"
#include "views.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

/* overlayfs' own subdirectories of a work dir, and the engine's shared
 * whiteout (lib/copyup.c); anything else in a work dir is a leftover. */
#define OVL_WORK_WORK		"work"
#define OVL_WORK_INDEX		"index"
#define OVS_WHITEOUT_BASE	"wh-base"

struct fsck {
	const struct ovs_fsck_opts *o;
	struct ovs_fsck_summary *sum;
	struct ovs_volume *v;
	const char *src;
	bool registry_ok;
	bool engine_running;	/* a live daemon writes the newest layer */
	int engine_pid;		/* its pid, or 0 when it did not say */
	uint64_t engine_layer;	/* the layer it preserves into (0: none) */
	bool unprotected;	/* the mount is dead or missing while active */
	bool intent_pending;	/* an interrupted operation is still recorded */
	int treefd;		/* detached clone of SRC's filesystem, or -1 */
	int srcfd;		/* SRC's real directory (below our mount), or -1 */
};

/* ---- findings ------------------------------------------------------------ */

enum fix_level { FIX_PREEN = OVS_FSCK_PREEN, FIX_ALL = OVS_FSCK_REPAIR_ALL };

struct fix {
	enum fix_level level;
	bool quiet;		/* needs the engine stopped */
	const char *done;	/* "removed" */
	const char *does;	/* "removes it" */
	int rc;			/* 1 not tried, 0 done, -errno failed */
};

#define FIX(lvl, q, dn, ds) { .level = (lvl), .quiet = (q), .done = (dn), .does = (ds), .rc = 1 }

/* Whether the repair may run in this mode and state. */
static bool fix_go(struct fsck *ck, const struct fix *fx)
{
	if ((int)ck->o->repair < (int)fx->level)
		return false;
	return !(fx->quiet && ck->engine_running);
}

static void finding(struct fsck *ck, enum ovs_fsck_severity sev, const uint64_t *snap,
		    const char *path, const char *check, const struct fix *fx,
		    const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static void finding(struct fsck *ck, enum ovs_fsck_severity sev, const uint64_t *snap,
		    const char *path, const char *check, const struct fix *fx,
		    const char *fmt, ...)
{
	struct ovs_fsck_finding f = {
		.severity = sev, .path = path, .check = check,
		.repairable = fx != NULL, .repaired = fx && fx->rc == 0,
	};
	char *msg = NULL, *body = NULL;
	const char *tail = "";
	char *tailbuf = NULL;
	va_list ap;
	int rc;

	/* Paths in messages may be of any length (rule 18): no fixed buffer. */
	va_start(ap, fmt);
	rc = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (rc < 0)
		body = NULL;
	if (fx && fx->rc == 0)
		rc = asprintf(&tailbuf, ": %s", fx->done);
	else if (fx && fx->rc < 0)
		rc = asprintf(&tailbuf, ": repair failed: %s", ovs_last_error());
	else if (fx && (int)ck->o->repair < (int)fx->level)
		rc = asprintf(&tailbuf, ": not repaired (fsck %s %s)",
			      fx->level == FIX_PREEN ? "-p" : "-y", fx->does);
	else if (fx)
		rc = asprintf(&tailbuf, ": not repaired while the snapshot mount "
			      "runs (run 'ovsnap deactivate %s' first)", ck->src);
	if (rc < 0)
		tailbuf = NULL;
	if (tailbuf)
		tail = tailbuf;
	if (asprintf(&msg, "%s%s", body ? body : fmt, tail) < 0)
		msg = NULL;
	free(body);
	free(tailbuf);
	f.message = msg ? msg : fmt;
	if (snap) {
		f.has_snapshot = true;
		f.snapshot = *snap;
	}
	if (sev == OVS_FSCK_ERROR) {
		ck->sum->errors++;
		if (f.repaired)
			ck->sum->repaired++;
	} else {
		ck->sum->warnings++;
	}
	if (f.repaired) {
		char id[40] = "";

		if (snap)
			snprintf(id, sizeof(id), "snapshot=%" PRIu64 " ", *snap);
		ovs_log(ck->v, "%sfsck repaired check=%s: %s", id, check, f.message);
	}
	if (ck->o->report)
		ck->o->report(&f, ck->o->data);
	free(msg);
}

static void format_time(int64_t ns, char *buf, size_t len)
{
	ovs_format_time_local(ns, buf, len);
}

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* ---- walking a tree ---------------------------------------------------------- */

typedef void (*walk_fn)(struct fsck *ck, void *ctx, int dirfd, const char *name,
			const char *path, const struct stat *st);

struct fsck_walk {
	struct fsck *ck;
	void *ctx;
	dev_t dev;
	walk_fn fn;
};

static int fsck_walk_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
			   struct ovs_walk_dir *child)
{
	struct fsck_walk *w = arg;
	struct stat st;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;	/* raced with a removal */
	w->fn(w->ck, w->ctx, d->fd, name, path, &st);
	if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev)
		return 0;
	/* O_NOATIME: a layer's atimes are the snapshot's, and reading a
	 * directory would overwrite them (EPERM for a caller who owns
	 * neither the directory nor CAP_FOWNER: then without). */
	child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC |
			   O_NOATIME);
	if (child->fd < 0 && errno == EPERM)
		child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return child->fd < 0 ? 0 : OVS_WALK_DESCEND;
}

/* What cannot be read is not checked: go on with the rest. */
static int fsck_walk_read_error(void *arg, struct ovs_walk_dir *d, const char *path, int err)
{
	return 0;
}

static const struct ovs_walk_ops fsck_walk_ops = {
	.entry = fsck_walk_entry,
	.read_error = fsck_walk_read_error,
};

/*
 * Call fn for rootfd itself (name "", path "") and everything below it,
 * without following symlinks or crossing into another filesystem.
 */
static int walk_tree_quiet(struct fsck *ck, void *ctx, int rootfd, walk_fn fn)
{
	struct fsck_walk w = { .ck = ck, .ctx = ctx, .fn = fn };
	struct ovs_walk_dir root = { .aux = -1 };
	struct stat st;

	if (fstat(rootfd, &st) < 0)
		return 0;
	w.dev = st.st_dev;
	fn(ck, ctx, rootfd, "", "", &st);
	root.fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return root.fd < 0 ? -errno : ovs_walk(&root, "", &fsck_walk_ops, &w);
}

/* The same, with a warning if the walk could not be done. */
static void walk_tree(struct fsck *ck, void *ctx, int rootfd, walk_fn fn, const char *what)
{
	if (walk_tree_quiet(ck, ctx, rootfd, fn) < 0)
		finding(ck, OVS_FSCK_WARNING, NULL, "", "walk", NULL,
			"%s: cannot read the directory: %m", what);
}

/* The names of the xattrs of dirfd/name into buf; <0 if none readable. */
static ssize_t list_xattrs(int dirfd, const char *name, char *buf, size_t len)
{
	ssize_t n = ovs_llistxattrat(dirfd, name, buf, len);

	return n == -ENOTSUP ? 0 : n;
}

/*
 * Whether path is covered in a layer (DESIGN.md section 2): 0 not covered,
 * 1 an entry at path, 2 covered wholesale (an ancestor that is a whiteout,
 * a non-directory or opaque, or path itself an opaque directory).
 *
 * (ovs_covered() needs an open ovs_layer, which prepares the layer for
 * writing, and fsck -n writes nothing.)
 */
static int layer_covers(int upperfd, const char *path)
{
	switch (ovs_coverage_at(upperfd, path)) {
	case OVS_ENTRY_NONDIR:
	case OVS_ENTRY_DIR:
		return 1;
	case OVS_COVERED_BY_ANCESTOR:
	case OVS_ENTRY_OPAQUE_DIR:
		return 2;
	default:
		return 0;	/* not covered, or unreadable: report it */
	}
}

/* ---- the volume, its lock and its registry --------------------------------- */

static void check_registry(struct fsck *ck)
{
	int rc = ovs_registry_load(ck->v);

	if (rc == 0) {
		ck->registry_ok = true;
		return;
	}
	/* The registry is the only record of which layer belongs to which
	 * snapshot in which order; nothing else holds a copy of it. */
	finding(ck, OVS_FSCK_ERROR, NULL, OVS_REGISTRY_FILE, "registry", NULL,
		"%s: no backup of the registry exists, so fsck cannot restore it; the "
		"layers in %s/%s are untouched: repair the file by hand (ovsnap-store(5))",
		ovs_last_error(), ovs_volume_store(ck->v), OVS_LAYERS_DIR);
}

/* A volume that only the default store holds, with no index entry: left
 * by a setup that failed or crashed half way.  Takes find it, but list
 * and activate --all (the boot path) do not. */
static void check_index(struct fsck *ck)
{
	struct fix fx = FIX(FIX_PREEN, false, "added to the index", "adds it to the index");

	if (ovs_volume_indexed(ck->v) != 0)
		return;
	if (fix_go(ck, &fx))
		fx.rc = ovs_volume_reindex(ck->v);
	finding(ck, OVS_FSCK_ERROR, NULL, ovs_state_dir(), "index", &fx,
		"the volume is not in the index (a setup that failed half way?): "
		"'ovsnap list' and 'ovsnap activate --all' do not see it");
}

/* ---- the mounts ------------------------------------------------------------- */

static struct libmnt_table *mount_table(void)
{
	struct libmnt_table *tb = mnt_new_table();

	if (tb && mnt_table_parse_mtab(tb, NULL) < 0) {
		mnt_unref_table(tb);
		tb = NULL;
	}
	return tb;
}

/*
 * The running daemon's pid and the layer it preserves into.  Its
 * preserves take no volume lock, so its work directory holds the copies
 * it is making while fsck looks: they are not leftovers.  The volume lock
 * fsck holds keeps the layer from switching (no take, merge or drop).
 */
static void engine_identify(struct fsck *ck)
{
	char reply[OVS_CTL_MSG_MAX];
	uint64_t layer;
	int pid;

	if (ovs_ctl_call(ovs_volume_socket(ck->v), "status", -1, reply, sizeof(reply), 5000) < 0)
		return;
	if (sscanf(reply, "ok pid=%d layer=%" SCNu64, &pid, &layer) != 2 || pid <= 0)
		return;
	ck->engine_pid = pid;
	ck->engine_layer = layer;
}

/* Is ovsnap's FUSE mount over SRC, and does it answer? */
static void check_snapshot_mount(struct fsck *ck, struct libmnt_table *tb)
{
	struct libmnt_fs *fs = NULL;
	struct statx stx;
	bool mounted = false;

	if (tb && (fs = mnt_table_find_target(tb, ck->src, MNT_ITER_BACKWARD)))
		mounted = mnt_fs_get_fstype(fs) &&
			  strcmp(mnt_fs_get_fstype(fs), OVS_FUSE_FSTYPE) == 0;
	/* FORCE_SYNC: the kernel answers a plain stat from its attribute
	 * cache (kept for a day by ovsnapd) even after the daemon died. */
	if (mounted && statx(AT_FDCWD, ck->src, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &stx) < 0 &&
	    errno == ENOTCONN) {
		ck->unprotected = true;
		finding(ck, OVS_FSCK_ERROR, NULL, ck->src, "daemon", NULL,
			"the snapshot mount does not answer (ENOTCONN): its daemon died; "
			"fsck does not start daemons: run 'ovsnap activate %s'", ck->src);
		return;
	}
	if (mounted) {
		ck->engine_running = true;
		engine_identify(ck);
		if (ck->registry_ok && !ovs_volume_active(ck->v))
			finding(ck, OVS_FSCK_WARNING, NULL, ck->src, "daemon", NULL,
				"a snapshot mount covers SRC but the registry says the volume "
				"is deactivated");
		return;
	}
	if (ck->registry_ok && ovs_volume_active(ck->v)) {
		ck->unprotected = true;
		finding(ck, OVS_FSCK_ERROR, NULL, ck->src, "daemon", NULL,
			"the volume is active but no snapshot mount covers SRC, so changes "
			"are not preserved: run 'ovsnap activate %s'", ck->src);
	}
}

static bool registered(struct fsck *ck, uint64_t id)
{
	for (size_t i = 0; i < ovs_snapshot_count(ck->v); i++)
		if (ovs_snapshot_at(ck->v, i)->id == id)
			return true;
	return false;
}

/*
 * Views of snapshots the registry no longer has.  Only what lib/views.c
 * counts as a view: a FUSE mount any user can make with the same source
 * text is none of ovsnap's (DESIGN.md rule 20), and fsck neither reports
 * nor unmounts it.
 */
static void check_views(struct fsck *ck)
{
	struct ovs_view_mount *views;
	size_t n;

	if (!ck->registry_ok)
		return;
	if (ovs_views_all(&views, &n) < 0) {
		finding(ck, OVS_FSCK_WARNING, NULL, ck->src, "view", NULL,
			"cannot read the mount table: %s", ovs_last_error());
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct fix fx = FIX(FIX_PREEN, false, "unmounted", "unmounts it");

		if (strcmp(views[i].source, ck->src) != 0 || registered(ck, views[i].id))
			continue;
		if (fix_go(ck, &fx))
			fx.rc = ovs_umount_lazy(views[i].target);
		finding(ck, OVS_FSCK_ERROR, &views[i].id, views[i].target, "view", &fx,
			"view of snapshot %" PRIu64 ", which no longer exists", views[i].id);
	}
	ovs_views_free(views, n);
}

/*
 * SRC's real directory.  While ovsnap's mount covers SRC (alive or dead),
 * clone the mount below it without its submounts (open_tree): in the clone,
 * SRC's path leads to the real directory.
 */
static void open_real_src(struct fsck *ck, struct libmnt_table *tb)
{
	struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, ck->src, MNT_ITER_BACKWARD) : NULL;
	struct ovs_mountinfo mi;
	const char *rel;

	if (!fs || !mnt_fs_get_fstype(fs) || strcmp(mnt_fs_get_fstype(fs), OVS_FUSE_FSTYPE)) {
		ck->srcfd = open(ck->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		goto out;
	}
	if (ovs_mount_find(ck->src, &mi) < 0)
		goto out;
	if (strcmp(mi.target, ck->src) == 0) {
		/* SRC is the root of its filesystem: nothing above it to
		 * clone; the live view is all there is */
		ovs_mountinfo_clear(&mi);
		if (ck->engine_running)
			ck->srcfd = open(ck->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		goto out;
	}
	ck->treefd = syscall(SYS_open_tree, AT_FDCWD, mi.target,
			     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	rel = ck->src + strlen(mi.target);
	while (*rel == '/')
		rel++;
	if (ck->treefd >= 0)
		ck->srcfd = openat(ck->treefd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				   O_CLOEXEC);
	ovs_mountinfo_clear(&mi);
out:
	if (ck->srcfd < 0)
		finding(ck, OVS_FSCK_WARNING, NULL, ck->src, "walk", NULL,
			"cannot reach the real directory below the snapshot mount (%m): "
			"the checks of SRC's content were skipped");
}

/* ---- interrupted operations ------------------------------------------------ */

static void check_intent(struct fsck *ck)
{
	struct fix fx = FIX(FIX_PREEN, false, "finished", "finishes it");
	char text[1024];
	int rc = ovs_intent_read(ck->v, text, sizeof(text));

	if (rc < 0) {
		ck->intent_pending = true;
		finding(ck, OVS_FSCK_ERROR, NULL, OVS_INTENT_FILE, "intent", NULL,
			"%s: remove it by hand once you know no operation is running",
			ovs_last_error());
		return;
	}
	if (!text[0])
		return;
	if (strncmp(text, "merge ", 6) != 0 && strncmp(text, "drop ", 5) != 0) {
		/* no recovery for it here: the command that wrote it
		 * finishes it the next time it runs */
		ck->intent_pending = true;
		finding(ck, OVS_FSCK_ERROR, NULL, OVS_INTENT_FILE, "intent", NULL,
			"interrupted operation '%s': fsck cannot finish or roll it back; "
			"leave the store as it is", text);
		return;
	}
	/* Finishing it is what the next merge or drop would do first: the
	 * intent is written before the first change and every step is
	 * idempotent (lib/merge.c). */
	if (fix_go(ck, &fx)) {
		rc = ovs_recover(ck->v);
		fx.rc = rc < 0 ? rc : 0;
		if (rc >= 0 && ovs_registry_load(ck->v) < 0)
			ck->registry_ok = false;
	}
	if (fx.rc != 0)
		ck->intent_pending = true;
	finding(ck, OVS_FSCK_ERROR, NULL, OVS_INTENT_FILE, "intent", &fx,
		"interrupted operation '%s'", text);
}

/* ---- the registry against the store ------------------------------------------ */

/*
 * Rule 20: a layer directory that is a symlink (or a mount) leads out of
 * the store; ovsnap refuses to use it, and only a human can tell what it
 * was meant to be.  True when it was reported.
 */
static bool layer_planted(struct fsck *ck, int layersfd, uint64_t id)
{
	static const char *const parts[] = { "", "/upper", "/work" };

	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		char rel[64], path[96];
		int fd;

		snprintf(rel, sizeof(rel), "%" PRIu64 "%s", id, parts[k]);
		fd = ovs_store_open_beneath(layersfd, rel, O_PATH, 0);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		if (fd != -ELOOP && fd != -EXDEV)
			return false;
		snprintf(path, sizeof(path), "%s/%s", OVS_LAYERS_DIR, rel);
		finding(ck, OVS_FSCK_ERROR, &id, path, "store", NULL,
			"a symbolic link or a mount point, not a directory of the store: "
			"ovsnap refuses to use the layer; was the store tampered with? "
			"check it and replace it by hand");
		return true;
	}
	return false;
}

static void check_layer_dirs(struct fsck *ck)
{
	const struct ovs_volume *v = ck->v;
	size_t n = ovs_snapshot_count(v);
	uint64_t *ids = calloc(n + 1, sizeof(*ids));
	int layersfd;

	if (!ids)
		return;
	for (size_t i = 0; i < n; i++)
		ids[i] = ovs_snapshot_at(v, i)->id;
	layersfd = openat(ovs_volume_dirfd(v), OVS_LAYERS_DIR,
			  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	for (size_t i = 0; i < n; i++) {
		char name[32], path[64], older[128] = "";
		struct stat st;
		bool upper_ok, work_ok;
		size_t len = 0;

		if (layersfd >= 0 && layer_planted(ck, layersfd, ids[i]))
			continue;
		snprintf(name, sizeof(name), "%" PRIu64 "/upper", ids[i]);
		upper_ok = layersfd >= 0 && fstatat(layersfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			   S_ISDIR(st.st_mode);
		snprintf(name, sizeof(name), "%" PRIu64 "/work", ids[i]);
		work_ok = layersfd >= 0 && fstatat(layersfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			  S_ISDIR(st.st_mode);
		if (upper_ok && work_ok)
			continue;
		if (upper_ok) {
			struct fix fx = FIX(FIX_PREEN, false, "recreated", "recreates it");

			if (fix_go(ck, &fx)) {
				fx.rc = 0;
				if (mkdirat(layersfd, name, 0700) < 0)
					fx.rc = ovs_err(errno, "mkdir %s: %m", name);
				else if (fsync(layersfd) < 0)
					fx.rc = ovs_err(errno, "fsync: %m");
			}
			snprintf(path, sizeof(path), "%s/%s", OVS_LAYERS_DIR, name);
			finding(ck, OVS_FSCK_ERROR, &ids[i], path, "layer-missing", &fx,
				"work directory missing (the snapshot itself is intact)");
			continue;
		}
		/* The layer held what this snapshot preserved; older snapshots
		 * see SRC through it, so they lose it too. */
		for (size_t j = 0; j < i && len < sizeof(older); j++)
			len += snprintf(older + len, sizeof(older) - len, "%s%" PRIu64,
					j ? " " : "", ids[j]);
		snprintf(path, sizeof(path), "%s/%" PRIu64 "/upper", OVS_LAYERS_DIR, ids[i]);
		{
			struct fix fx = FIX(FIX_ALL, true, "unregistered it",
					    "unregisters it");

			if (fix_go(ck, &fx))
				fx.rc = ovs_registry_remove_snapshot(ck->v, ids[i]);
			finding(ck, OVS_FSCK_ERROR, &ids[i], path, "layer-missing", &fx,
				"missing: snapshot %" PRIu64 " is lost%s%s%s", ids[i],
				i ? " and the views of the older snapshots (" : "", older,
				i ? ") miss what it preserved" : "");
		}
	}
	free(ids);

	/* Layer directories the registry does not name: a take that died
	 * before registering, a drop that died after unregistering. */
	if (layersfd >= 0 && !ck->intent_pending) {
		DIR *dir = fdopendir(layersfd);
		struct dirent *d;

		if (!dir) {
			close(layersfd);
			return;
		}
		while ((d = readdir(dir))) {
			char path[PATH_MAX];
			uint64_t id;

			if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", OVS_LAYERS_DIR, d->d_name);
			if (ovs_parse_u64(d->d_name, &id) == 0) {
				struct fix fx = FIX(FIX_PREEN, false, "removed", "removes it");

				if (registered(ck, id))
					continue;
				if (fix_go(ck, &fx))
					fx.rc = ovs_layer_remove(ck->v, id);
				finding(ck, OVS_FSCK_ERROR, NULL, path, "layer-extra", &fx,
					"layer directory not in the registry (left over by an "
					"interrupted take or drop)");
			} else {
				struct fix fx = FIX(FIX_ALL, false, "removed", "removes it");

				if (fix_go(ck, &fx)) {
					fx.rc = ovs_remove_tree_at(dirfd(dir), d->d_name);
					if (fx.rc == 0 && fsync(dirfd(dir)) < 0)
						fx.rc = ovs_err(errno, "fsync: %m");
				}
				finding(ck, OVS_FSCK_ERROR, NULL, path, "layer-extra", &fx,
					"not a layer of ovsnap's");
			}
		}
		closedir(dir);
	} else if (layersfd >= 0) {
		close(layersfd);
	}
}

/* ---- leftovers in work directories ----------------------------------------- */

static void check_work(struct fsck *ck, uint64_t id, int workfd)
{
	DIR *dir;
	struct dirent *d;
	int fd = fcntl(workfd, F_DUPFD_CLOEXEC, 3);
	char live[OVS_TMP_NAME_MAX] = "";
	struct stat st;

	/* The running daemon's temporaries in the layer it preserves into:
	 * copies in progress, in place or gone once they are done. */
	if (ck->engine_pid > 0 && id == ck->engine_layer)
		snprintf(live, sizeof(live), OVS_TMP_PREFIX "%d.", ck->engine_pid);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((d = readdir(dir))) {
		char path[PATH_MAX];

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (*live && strncmp(d->d_name, live, strlen(live)) == 0)
			continue;
		if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(path, sizeof(path), "work/%s", d->d_name);
		if (strcmp(d->d_name, OVL_WORK_INDEX) == 0 && S_ISDIR(st.st_mode))
			continue;
		if (strcmp(d->d_name, OVL_WORK_WORK) == 0 && S_ISDIR(st.st_mode)) {
			/* overlayfs leaves work/incompat/volatile behind after a
			 * volatile mount and refuses the work dir until it goes */
			struct fix fx = FIX(FIX_PREEN, true, "removed", "removes it");

			if (fstatat(fd, OVL_WORK_WORK "/incompat/volatile", &st,
				    AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			if (fix_go(ck, &fx)) {
				int inc = openat(fd, OVL_WORK_WORK "/incompat",
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				fx.rc = inc < 0 ? ovs_err(errno, "open work/incompat: %m")
						: ovs_remove_tree_at(inc, "volatile");
				if (inc >= 0)
					close(inc);
			}
			finding(ck, OVS_FSCK_ERROR, &id, "work/" OVL_WORK_WORK "/incompat/volatile",
				"volatile", &fx, "stale volatile marker of an overlay mount");
			continue;
		}
		if (strcmp(d->d_name, OVS_WHITEOUT_BASE) == 0 && ovl_is_whiteout(&st))
			continue;
		{
			struct fix fx = FIX(FIX_PREEN, true, "removed", "removes it");

			if (fix_go(ck, &fx)) {
				fx.rc = ovs_remove_tree_at(fd, d->d_name);
				if (fx.rc == 0 && fsync(fd) < 0)
					fx.rc = ovs_err(errno, "fsync: %m");
			}
			if (strcmp(d->d_name, OVS_WHITEOUT_BASE) == 0)
				finding(ck, OVS_FSCK_ERROR, &id, path, "work-leftover", &fx,
					"the shared whiteout is not a 0/0 character device "
					"(the engine makes a new one)");
			else
				finding(ck, OVS_FSCK_ERROR, &id, path, "work-leftover", &fx,
					"leftover of an unfinished copy-up");
		}
	}
	closedir(dir);
}

/* ---- the layer format ---------------------------------------------------- */

struct layer_ctx {
	uint64_t id;
	bool frozen;
	int64_t frozen_ns;	/* creation of the next snapshot */
	int upperfd;
	const int *lowerfds;	/* newer layers, then SRC (-1 = unavailable) */
	size_t nlower;
};

/*
 * Whether a redirect's target is in a lower layer: an absolute one from
 * the layer's root, a relative one beside path.  Of any length, resolved
 * from each layer's fd in pieces (rule 18) and never outside it nor
 * through a symlink.
 */
static bool redirect_target_exists(const struct layer_ctx *lc, const char *path,
				   const char *target)
{
	const char *slash = strrchr(path, '/');
	bool found = false;
	char *full;
	int rc;

	if (target[0] == '/')
		rc = asprintf(&full, "%s", target + 1);
	else if (slash)
		rc = asprintf(&full, "%.*s/%s", (int)(slash - path), path, target);
	else
		rc = asprintf(&full, "%s", target);
	if (rc < 0)
		return false;
	for (size_t i = 0; i < lc->nlower && !found; i++) {
		int fd;

		if (lc->lowerfds[i] < 0)
			continue;
		fd = ovs_open_beneath(lc->lowerfds[i], full, O_PATH | O_NOFOLLOW | O_CLOEXEC,
				      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
		if (fd >= 0) {
			close(fd);
			found = true;
		}
	}
	free(full);
	return found;
}

/* The fix of a finding that is the xattr attr itself: remove it, if the
 * mode allows. */
static void remove_xattr_fix(struct fsck *ck, struct fix *fx, int dirfd, const char *name,
			     const char *attr)
{
	if (!fix_go(ck, fx))
		return;
	fx->rc = ovs_lremovexattrat(dirfd, name, attr);
	if (fx->rc < 0)
		ovs_err(-fx->rc, "remove %s: %s", attr, strerror(-fx->rc));
}

static void check_layer_xattrs(struct fsck *ck, struct layer_ctx *lc, int dirfd,
			       const char *name, const char *path, const char *upath,
			       const struct stat *st)
{
	/* a value may be as long as the kernel allows (a redirect of any
	 * length, rule 18), not cut at PATH_MAX */
	enum { VAL_MAX = 65536 };
	char names[65536], *val = malloc(VAL_MAX + 1);
	ssize_t n = val ? list_xattrs(dirfd, name, names, sizeof(names)) : -ENOMEM;

	for (char *a = names; n > 0 && a < names + n; a += strlen(a) + 1) {
		ssize_t vlen;

		if (strcmp(a, OVL_XATTR_OPAQUE) == 0) {
			/* the kernel reads only "y" (opaque), and only on
			 * directories: dropping anything else changes no view.
			 * "x" marks a folder holding xwhiteouts, which ovsnap
			 * neither writes nor reads: without it the kernel too
			 * reads what is inside as plain entries, as ovsnap's
			 * views and merge do */
			struct fix fx = FIX(FIX_PREEN, true, "removed", "removes it");

			vlen = ovs_lgetxattrat(dirfd, name, a, val, VAL_MAX);
			if (vlen < 0)
				continue;
			val[vlen] = '\0';
			if (S_ISDIR(st->st_mode) && vlen == 1 && val[0] == 'y')
				continue;
			remove_xattr_fix(ck, &fx, dirfd, name, a);
			if (!S_ISDIR(st->st_mode))
				finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "layer-format", &fx,
					"opaque xattr on a non-directory");
			else if (vlen == 1 && val[0] == 'x')
				finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "layer-format", &fx,
					"opaque xattr 'x' (a folder of xwhiteouts: ovsnap writes "
					"none and reads none, the kernel may read some)");
			else
				finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "layer-format", &fx,
					"opaque xattr with the value '%.*s' (only 'y' makes a "
					"folder opaque)", 32, val);
		} else if (strcmp(a, OVL_XATTR_XWHITEOUT) == 0) {
			/* the kernel reads an xwhiteout only in a folder marked
			 * "x", which is reported and removed too: removed, the
			 * kernel shows the entry as ovsnap's views do */
			struct fix fx = FIX(FIX_PREEN, true, "removed", "removes it");

			remove_xattr_fix(ck, &fx, dirfd, name, a);
			finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "layer-format", &fx,
				"xwhiteout mark (ovsnap writes none and reads none; the kernel "
				"reads an empty file that carries it, in a folder marked 'x', "
				"as a whiteout)");
		} else if (strcmp(a, OVL_XATTR_REDIRECT) == 0) {
			struct fix fx = FIX(FIX_ALL, true, "removed (the directory now merges "
					    "with the one at its own path below)", "removes it");
			bool exists;

			vlen = ovs_lgetxattrat(dirfd, name, a, val, VAL_MAX);
			if (vlen < 0)
				continue;
			val[vlen] = '\0';
			exists = redirect_target_exists(lc, path, val);
			remove_xattr_fix(ck, &fx, dirfd, name, a);
			finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "layer-format", &fx,
				"redirect to '%s'%s (ovsnap never writes redirects)", val,
				exists ? "" : ", which points to nothing");
		} else if (strncmp(a, "user.overlay.", 13) == 0) {
			/* In a trusted.overlay layer the kernel ignores these; a
			 * user may have set them on a file, so it is their data */
			finding(ck, OVS_FSCK_WARNING, &lc->id, upath, "layer-format", NULL,
				"xattr %s of the user.overlay namespace in a layer of the "
				"trusted.overlay namespace (overlayfs ignores it; keep it if "
				"the file's owner set it)", a);
		}
	}
	free(val);
}

static void check_layer_entry(struct fsck *ck, void *ctx, int dirfd, const char *name,
			      const char *path, const struct stat *st)
{
	struct layer_ctx *lc = ctx;
	char *upath;
	int64_t ctime_ns = ts_ns(&st->st_ctim), mtime_ns = ts_ns(&st->st_mtim);

	if (asprintf(&upath, "upper%s%s", *path ? "/" : "", path) < 0)
		return;
	check_layer_xattrs(ck, lc, dirfd, name, path, upath, st);
	/*
	 * A frozen layer changes only by merge, and a merge moves entries
	 * by rename, which sets their ctime but keeps their mtime (the
	 * object's own, from before the copy-up).  So a reliable sign of a
	 * change after the freeze is both times after it; chmod, chown and
	 * xattr changes alone (ctime only) cannot be told from a merge.
	 */
	if (lc->frozen && ctime_ns > lc->frozen_ns && mtime_ns > lc->frozen_ns) {
		char when[64], frozen[64];

		format_time(mtime_ns, when, sizeof(when));
		format_time(lc->frozen_ns, frozen, sizeof(frozen));
		finding(ck, OVS_FSCK_ERROR, &lc->id, upath, "frozen-change", NULL,
			"changed at %s, after the layer was frozen at %s: snapshot %" PRIu64
			" (and the older ones) may not show the past here", when, frozen,
			lc->id);
	}
	free(upath);
}

static void check_layers_content(struct fsck *ck)
{
	const struct ovs_volume *v = ck->v;
	size_t n = ovs_snapshot_count(v);
	int *upperfds = calloc(n + 1, sizeof(int));

	if (!upperfds)
		return;
	for (size_t i = 0; i < n; i++) {
		/* from the store's fd, no symlink followed (DESIGN.md rule 20) */
		upperfds[i] = ovs_snapshot_open_upper(v, ovs_snapshot_at(v, i)->id, O_RDONLY);
		if (upperfds[i] < 0)
			upperfds[i] = -1;
	}
	upperfds[n] = ck->srcfd;
	for (size_t i = 0; i < n; i++) {
		const struct ovs_snapshot *s = ovs_snapshot_at(v, i);
		struct layer_ctx lc = {
			.id = s->id,
			.frozen = i + 1 < n,
			.frozen_ns = i + 1 < n ? ovs_snapshot_at(v, i + 1)->created_ns : 0,
			.upperfd = upperfds[i],
			.lowerfds = upperfds + i + 1,
			.nlower = n - i,
		};
		int workfd;

		if ((workfd = ovs_snapshot_open_work(v, s->id, O_RDONLY)) >= 0) {
			check_work(ck, s->id, workfd);
			close(workfd);
		}
		if (upperfds[i] >= 0)
			walk_tree(ck, &lc, upperfds[i], check_layer_entry, "layer");
	}
	for (size_t i = 0; i < n; i++)
		if (upperfds[i] >= 0)
			close(upperfds[i]);
	free(upperfds);
}

/* ---- SRC: user data overlayfs would misread, unprotected changes --------- */

/*
 * SRC's multiply-linked non-directories whose names the walk has not all
 * met yet: ino -> links and names met, a hash table (open addressing,
 * linear probing, at most 3/4 full, backward-shift deletion).  An inode
 * leaves it when its last name is met, so it holds the inodes whose other
 * names are still ahead of the walk or outside SRC, 16 bytes each, and no
 * path: the paths of those left at the end are found by a second walk,
 * which recounts just them (issue 13 item 3; a list of every linked name
 * and its path cost about 150 bytes a name).  Keyed by the inode number
 * alone, as the findings always were.
 *
 * The table grows to LINK_TABLE_MAX_BYTES, no further: when full there, it
 * is written out sorted by inode as a run to an unlinked file (in /tmp; in
 * memory only if /tmp has no room for one) and starts empty.  At the end
 * the runs and what the table holds are merged by inode (an inode's links
 * are those its first name showed, its names met the sum), and the
 * inodes still short of names, in inode order, are recounted by the
 * second walk a table's worth at a time.  Past OVS_RUNS_FAN_IN runs (some
 * 10^7 linked inodes), runs are first merged in groups into longer ones
 * (ovs_runs_reduce()), so the merge reads at most a fan-in's worth at
 * once.  So fsck holds the table, a 4 KiB buffer per run up to the
 * fan-in and the paths of a table's worth of findings, however many
 * links SRC holds.  Should the file fail (full, no memory
 * for a memfd), the table grows in memory as it did before.
 */
#define LINK_TABLE_MAX_BYTES	(4u << 20)
/* records written at a time by the merge */
#define LINK_RUN_BUF		256

struct link_count {
	ino_t ino;
	uint32_t nlink;		/* 0: a free slot */
	uint32_t met;
};

struct link_table {
	struct link_count *slot;
	size_t n, cap;		/* cap: a power of two, or 0 */
	size_t max_cap;		/* cap at LINK_TABLE_MAX_BYTES */
	char **path;		/* the second walk: the first name met, by slot */
	struct ovs_runs spill;	/* the runs, then the merge's output */
	bool spill_failed;	/* grow in memory from now on */
};

struct src_ctx {
	bool check_changes;
	/* changes with a ctime in (since_ns, until_ns] were not preserved */
	int64_t since_ns;
	int64_t until_ns;	/* INT64_MAX while still unprotected */
	const char *since_why;
	/* the mount died after until_ns (the reactivation): changes after
	 * it are unprotected too, for this reason; NULL when it runs */
	const char *later_why;
	int *upperfds;		/* every snapshot's upper, oldest first */
	size_t nuppers;
	/* coverage of the walk's current directories in each layer, by
	 * depth (see struct dir_cov) */
	struct dir_cov *cov;
	size_t ncov;
	struct link_table links;
	bool recount;		/* the second walk: recount the links left */
};

static size_t link_home(ino_t ino, size_t cap)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ULL;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* The slot of ino, or of the free slot where it would go. */
static size_t link_slot(const struct link_table *t, ino_t ino)
{
	size_t i = link_home(ino, t->cap);

	while (t->slot[i].nlink && t->slot[i].ino != ino)
		i = (i + 1) & (t->cap - 1);
	return i;
}

/* The largest table: LINK_TABLE_MAX_BYTES, or the tests' budget
 * OVSNAP_TEST_FSCK_LINK_TABLE_BYTES (to run the spill on small trees). */
static size_t link_max_cap(void)
{
	const char *env = getenv("OVSNAP_TEST_FSCK_LINK_TABLE_BYTES");
	unsigned long long bytes = LINK_TABLE_MAX_BYTES;
	size_t cap = 16;

	if (env && strtoull(env, NULL, 10) > 0)
		bytes = strtoull(env, NULL, 10);
	while (2 * cap * sizeof(struct link_count) <= bytes)
		cap *= 2;
	return cap;
}

static int link_grow(struct link_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024, oldcap = t->cap;

	if (!t->cap && cap > t->max_cap && !t->spill_failed)
		cap = t->max_cap;
	struct link_count *old = t->slot, *nt = calloc(cap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	t->slot = nt;
	t->cap = cap;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].nlink)
			nt[link_slot(t, old[i].ino)] = old[i];
	free(old);
	return 0;
}

/* Free slot i, moving back the entries of its probe run that may not stay
 * behind a hole. */
static void link_remove(struct link_table *t, size_t i)
{
	size_t mask = t->cap - 1, j = i;

	for (;;) {
		size_t home;

		j = (j + 1) & mask;
		if (!t->slot[j].nlink)
			break;
		home = link_home(t->slot[j].ino, t->cap);
		/* j may move to i unless its home lies cyclically in (i, j] */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->slot[i] = t->slot[j];
			i = j;
		}
	}
	t->slot[i].nlink = 0;
	t->n--;
}

static uint32_t nlink32(nlink_t n)
{
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

static int cmp_link_ino(const void *a, const void *b)
{
	const struct link_count *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Gather the table's inodes at its start, sorted by inode (it is no hash
 * table then until emptied or grown). */
static void link_sort(struct link_table *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->cap; i++)
		if (t->slot[i].nlink)
			t->slot[n++] = t->slot[i];
	memset(t->slot + n, 0, (t->cap - n) * sizeof(*t->slot));
	qsort(t->slot, n, sizeof(*t->slot), cmp_link_ino);
}

/* The full table: write it out as a run (to an unlinked file in /tmp,
 * memory if it must) and empty it.  On a failure the table holds its
 * inodes, sorted (link_grow() hashes them again). */
static int link_spill(struct link_table *t)
{
	size_t bytes = t->n * sizeof(*t->slot);
	int rc;

	link_sort(t);
	rc = ovs_runs_append(&t->spill, t->slot, bytes);
	if (rc == 0)
		rc = ovs_runs_finish(&t->spill);
	if (rc < 0) {
		ovs_runs_abandon(&t->spill);
		return rc;
	}
	memset(t->slot, 0, bytes);
	t->n = 0;
	return 0;
}

/* The first walk met a name of the linked inode st: count it, and forget
 * the inode once all its links were met.  Out of memory, the name is not
 * counted (nor was it before: a check, not a repair). */
static void link_met(struct link_table *t, const struct stat *st)
{
	size_t i;

	if (4 * (t->n + 1) > 3 * t->cap) {
		bool tried = t->cap >= t->max_cap && !t->spill_failed, spilled = false;

		if (tried) {
			spilled = link_spill(t) == 0;
			t->spill_failed = !spilled;
		}
		if (!spilled && link_grow(t) < 0) {
			if (tried) {	/* maybe sorted, no hash: lost */
				memset(t->slot, 0, t->cap * sizeof(*t->slot));
				t->n = 0;
			}
			return;
		}
	}
	i = link_slot(t, st->st_ino);
	if (!t->slot[i].nlink) {
		t->slot[i].ino = st->st_ino;
		t->slot[i].nlink = nlink32(st->st_nlink);
		t->slot[i].met = 0;
		t->n++;
	}
	if (++t->slot[i].met >= t->slot[i].nlink)
		link_remove(t, i);
}

/* The second walk met a name of the linked inode st, full its path: count
 * it if its inode was left by the first one, and keep its first path. */
static void link_recount(struct link_table *t, const struct stat *st, const char *full)
{
	size_t i;

	if (!t->n)
		return;
	i = link_slot(t, st->st_ino);
	if (!t->slot[i].nlink)
		return;
	if (!t->path[i]) {
		if (!(t->path[i] = strdup(full)))
			return;
		t->slot[i].nlink = nlink32(st->st_nlink);
		t->slot[i].met = 0;
	}
	t->slot[i].met++;
}

/*
 * What a layer holds at a directory of the walk, for the entries in it:
 * nothing there (COV_ABSENT: they are not covered), a plain directory
 * (COV_PLAIN: look each one up), or a whiteout, a non-directory or an
 * opaque directory there or above (COV_WHOLE: covered wholesale).  Kept
 * per depth for the directories the walk is in, each computed from its
 * parent's the first time an entry below it changed, so the coverage of an
 * entry costs at most one lookup a layer, not one a layer and a level
 * (issue 13 item 3); the answers are those of ovs_coverage_at().
 */
enum { COV_ABSENT, COV_PLAIN, COV_WHOLE };

struct dir_cov {
	bool valid;
	unsigned char *layer;	/* nuppers states */
};

/* The depth of path: its number of names ("" is SRC's root, 0). */
static size_t path_depth(const char *path)
{
	size_t d = *path ? 1 : 0;

	for (; *path; path++)
		d += *path == '/';
	return d;
}

/* What layer fd holds at prefix (a directory of the walk, below its
 * parent's COV_PLAIN directory), as one of the states above. */
static unsigned char lookup_dir_state(int fd, const char *prefix)
{
	struct stat st;
	int opaque;

	if (fstatat(fd, prefix, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return COV_ABSENT;	/* unreadable: not covered, as before */
	if (!S_ISDIR(st.st_mode))
		return COV_WHOLE;
	opaque = ovl_is_opaque_at(fd, prefix);
	return opaque < 0 ? COV_ABSENT : opaque ? COV_WHOLE : COV_PLAIN;
}

/*
 * The states of the parent directory of path (depth > 0, its length under
 * PATH_MAX) in every layer, or NULL (out of memory).
 */
static const unsigned char *parent_coverage(struct src_ctx *sc, const char *path, size_t depth)
{
	size_t have = depth - 1, len;
	char *prefix;

	if (sc->ncov < depth) {
		struct dir_cov *c = realloc(sc->cov, depth * sizeof(*c));

		if (!c)
			return NULL;
		for (size_t i = sc->ncov; i < depth; i++) {
			c[i].valid = false;
			c[i].layer = malloc(sc->nuppers ? sc->nuppers : 1);
			if (!c[i].layer) {
				sc->cov = c;
				sc->ncov = i;
				return NULL;
			}
		}
		sc->cov = c;
		sc->ncov = depth;
	}
	if (!sc->cov[0].valid) {
		/* the root: ovs_coverage_at() never reads its opacity for
		 * what lies below it */
		for (size_t i = 0; i < sc->nuppers; i++)
			sc->cov[0].layer[i] = sc->upperfds[i] >= 0 ? COV_PLAIN : COV_ABSENT;
		sc->cov[0].valid = true;
	}
	while (!sc->cov[have].valid)
		have--;
	if (have == depth - 1)
		return sc->cov[have].layer;
	prefix = strdup(path);
	if (!prefix)
		return NULL;
	/* skip to the end of the have-th name */
	len = 0;
	for (size_t d = 0; d < have; d++) {
		len += strcspn(prefix + len, "/");
		len++;
	}
	for (size_t d = have + 1; d < depth; d++) {
		struct dir_cov *up = &sc->cov[d - 1], *cur = &sc->cov[d];
		char saved;

		len += strcspn(prefix + len, "/");
		saved = prefix[len];
		prefix[len] = '\0';
		for (size_t i = 0; i < sc->nuppers; i++)
			cur->layer[i] = up->layer[i] != COV_PLAIN ? up->layer[i] :
					lookup_dir_state(sc->upperfds[i], prefix);
		prefix[len] = saved;
		len++;
		cur->valid = true;
	}
	free(prefix);
	return sc->cov[depth - 1].layer;
}

/* The walk met a directory at path: the one its depth now stands for. */
static void coverage_enter_dir(struct src_ctx *sc, const char *path)
{
	size_t depth = path_depth(path);

	if (depth < sc->ncov)
		sc->cov[depth].valid = false;
}

/* Whether layer i covers path (as layer_covers()), given the states of
 * its parent directory. */
static int covers_below(struct src_ctx *sc, const unsigned char *parent, size_t i,
			const char *path)
{
	struct stat st;
	int opaque;

	if (parent[i] != COV_PLAIN)
		return parent[i] == COV_WHOLE ? 2 : 0;
	if (fstatat(sc->upperfds[i], path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return 1;
	opaque = ovl_is_opaque_at(sc->upperfds[i], path);
	return opaque < 0 ? 0 : opaque ? 2 : 1;
}

/*
 * The snapshots whose view of path shows a change made after they were
 * taken: walking from the newest layer down, every one until a layer that
 * preserved path (for a directory: preserved all its entries, i.e. an
 * opaque copy or a covering ancestor; a plain copy of a directory says
 * nothing about its entries, and a deletion leaves nothing but the
 * directory's ctime).  false when none is affected.
 */
static bool affected_snapshots(struct fsck *ck, struct src_ctx *sc, const char *path,
			       bool dir, char *buf, size_t len)
{
	size_t first = sc->nuppers, n = sc->nuppers, pos, depth = path_depth(path);
	const unsigned char *parent = NULL;

	/* a path too long for one lookup (rule 18) takes the long way */
	if (depth > 0 && strlen(path) < PATH_MAX)
		parent = parent_coverage(sc, path, depth);
	while (first > 0) {
		int fd = sc->upperfds[first - 1];
		int cov = fd < 0 ? 0 : parent ? covers_below(sc, parent, first - 1, path)
					      : layer_covers(fd, path);

		if (dir ? cov == 2 : cov != 0)
			break;
		first--;
	}
	if (first == n)
		return false;
	if (n - first > 8) {
		snprintf(buf, len, "%zu snapshots (%" PRIu64 " to %" PRIu64 ")", n - first,
			 ovs_snapshot_at(ck->v, first)->id, ovs_snapshot_at(ck->v, n - 1)->id);
		return true;
	}
	pos = snprintf(buf, len, "snapshot%s", n - first == 1 ? "" : "s");
	for (size_t i = first; i < n && pos < len; i++)
		pos += snprintf(buf + pos, len - pos, "%s%" PRIu64,
				i == first ? " " : i == n - 1 ? " and " : ", ",
				ovs_snapshot_at(ck->v, i)->id);
	return true;
}

static void check_src_object(struct fsck *ck, struct src_ctx *sc, int dirfd, const char *name,
			     const char *path, const char *full, const struct stat *st)
{
	char names[65536];
	ssize_t n;

	if (ovl_is_whiteout(st))
		finding(ck, OVS_FSCK_ERROR, NULL, full, "user-data", NULL,
			"0/0 character device: every snapshot view reads it as a whiteout "
			"(as if nothing were there); rename or remove it");
	n = list_xattrs(dirfd, name, names, sizeof(names));
	for (char *a = names; n > 0 && a < names + n; a += strlen(a) + 1) {
		if (strncmp(a, OVL_XATTR_PREFIX, strlen(OVL_XATTR_PREFIX)) != 0)
			continue;
		if (strncmp(a, OVL_XATTR_ESCAPE, strlen(OVL_XATTR_ESCAPE)) == 0)
			finding(ck, OVS_FSCK_ERROR, NULL, full, "user-data", NULL,
				"xattr %s: every snapshot view shows it as %s%s; remove it", a,
				OVL_XATTR_PREFIX, a + strlen(OVL_XATTR_ESCAPE));
		else
			finding(ck, OVS_FSCK_ERROR, NULL, full, "user-data", NULL,
				"unescaped xattr %s: overlayfs takes it for its own metadata "
				"in every snapshot view; remove it", a);
	}
	if (!S_ISDIR(st->st_mode) && st->st_nlink > 1)
		link_met(&sc->links, st);
	if (sc->check_changes && S_ISDIR(st->st_mode))
		coverage_enter_dir(sc, path);
	/* >=: a change in the tick of since_ns may be after it. */
	if (sc->check_changes && ts_ns(&st->st_ctim) >= sc->since_ns &&
	    (ts_ns(&st->st_ctim) <= sc->until_ns || sc->later_why)) {
		char when[64], affected[160];
		bool dir = S_ISDIR(st->st_mode);
		const char *why = ts_ns(&st->st_ctim) <= sc->until_ns ? sc->since_why :
				  sc->later_why;

		if (!affected_snapshots(ck, sc, path, dir, affected, sizeof(affected)))
			return;
		format_time(ts_ns(&st->st_ctim), when, sizeof(when));
		if (!dir)
			finding(ck, OVS_FSCK_ERROR, NULL, full, "unprotected-change", NULL,
				"changed at %s while unprotected (%s) and not preserved: "
				"%s may show its new state instead of the past",
				when, why, affected);
		else
			finding(ck, OVS_FSCK_ERROR, NULL, full, "unprotected-change", NULL,
				"directory changed at %s while unprotected (%s): if entries "
				"were deleted from it then, %s miss%s them (possibly incomplete)",
				when, why, affected,
				strncmp(affected, "snapshots", 9) ? "es" : "");
	}
}

static void check_src_entry(struct fsck *ck, void *ctx, int dirfd, const char *name,
			    const char *path, const struct stat *st)
{
	struct src_ctx *sc = ctx;
	char *full;

	if (sc->recount && (S_ISDIR(st->st_mode) || st->st_nlink < 2))
		return;
	/* SRC/path for messages, of any length (rule 18) */
	if (asprintf(&full, "%s%s%s", ck->src, *path ? "/" : "", path) < 0)
		return;
	if (sc->recount)
		link_recount(&sc->links, st, full);
	else
		check_src_object(ck, sc, dirfd, name, path, full, st);
	free(full);
}

struct outside {
	ino_t ino;
	uint32_t nlink, met;
	char *path;
};

static int cmp_outside(const void *a, const void *b)
{
	const struct outside *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * The inodes of the table (those the first walk met fewer names of than
 * their links): walk SRC again for their names (the first met is the one
 * reported, as ever) and report those still short of names, in inode
 * order.
 */
static void recount_and_report(struct fsck *ck, struct src_ctx *sc)
{
	struct link_table *t = &sc->links;
	struct outside *out = NULL;
	size_t nout = 0;

	if (t->n && (t->path = calloc(t->cap, sizeof(*t->path)))) {
		sc->recount = true;
		walk_tree_quiet(ck, sc, ck->srcfd, check_src_entry);
		sc->recount = false;
		out = calloc(t->n, sizeof(*out));
		for (size_t i = 0; out && i < t->cap; i++) {
			if (!t->path[i])
				continue;
			if (t->slot[i].met < t->slot[i].nlink)
				out[nout++] = (struct outside){ t->slot[i].ino, t->slot[i].nlink,
								t->slot[i].met, t->path[i] };
			else
				free(t->path[i]);
			t->path[i] = NULL;
		}
		qsort(out, nout, sizeof(*out), cmp_outside);
		for (size_t i = 0; i < nout; i++) {
			finding(ck, OVS_FSCK_ERROR, NULL, out[i].path, "user-data", NULL,
				"%lu of its %lu hard links are outside SRC: changes made "
				"through them bypass the snapshot mount",
				(unsigned long)(out[i].nlink - out[i].met),
				(unsigned long)out[i].nlink);
			free(out[i].path);
		}
		if (!out)
			for (size_t i = 0; i < t->cap; i++)
				free(t->path[i]);
		free(out);
		free(t->path);
		t->path = NULL;
	}
}

/* A run (or the table's sorted inodes, mem) read in order. */
struct run_reader {
	const struct link_count *mem;
	size_t next, n;		/* of mem */
	struct ovs_run_reader file;
};

/* The reader's next record, NULL at its end or on a read error (-errno
 * in *err). */
static const struct link_count *run_peek(struct run_reader *r, int *err)
{
	if (r->mem)
		return r->next < r->n ? &r->mem[r->next] : NULL;
	return ovs_run_peek(&r->file, sizeof(struct link_count), err);
}

static void run_take(struct run_reader *r)
{
	if (r->mem)
		r->next++;
	else
		ovs_run_skip(&r->file, sizeof(struct link_count));
}

static size_t link_rec_size(const void *head, void *arg)
{
	(void)head;
	(void)arg;
	return sizeof(struct link_count);
}

static int link_rec_cmp(const void *a, const void *b, void *arg)
{
	(void)arg;
	return cmp_link_ino(a, b);
}

static const struct ovs_runs_order link_order = {
	.head = sizeof(struct link_count), .size = link_rec_size, .cmp = link_rec_cmp,
};

/*
 * Merge the runs and the table (sorted) by inode into the inodes short of
 * names, written after the runs as the last one: *left of them.  An inode's
 * links are those of its earliest run (its first name met), its names met
 * the sum over all.  Past a fan-in of runs, groups of them are merged
 * first (equal inodes keep the order of their runs, so a run may then
 * hold an inode more than once, its earliest count first); should that
 * fail, all are read at once, in more memory.
 */
static int link_merge_runs(struct link_table *t, size_t *left)
{
	size_t k, nout = 0;
	struct run_reader *r;
	struct link_count out[LINK_RUN_BUF];
	int rc = 0;

	if (t->spill.n > ovs_runs_fan_in())
		(void)ovs_runs_reduce(&t->spill, ovs_runs_fan_in(), &link_order);
	k = t->spill.n + 1;
	r = calloc(k, sizeof(*r));
	if (!r)
		return -ENOMEM;
	link_sort(t);
	for (size_t i = 0; i < t->spill.n; i++)
		ovs_run_reader_init(&r[i].file, &t->spill, i);
	r[k - 1].mem = t->slot;
	r[k - 1].n = t->n;
	*left = 0;
	for (;;) {
		const struct link_count *c, *min = NULL;
		struct link_count sum;

		for (size_t i = 0; i < k; i++) {
			c = run_peek(&r[i], &rc);
			if (rc < 0)
				goto out;
			if (c && (!min || c->ino < min->ino))
				min = c;
		}
		if (!min)
			break;
		sum = (struct link_count){ min->ino, 0, 0 };
		for (size_t i = 0; i < k; i++) {
			while ((c = run_peek(&r[i], &rc)) && c->ino == sum.ino) {
				if (!sum.nlink)
					sum.nlink = c->nlink;
				sum.met += c->met;
				run_take(&r[i]);
			}
			if (rc < 0)
				goto out;
		}
		if (sum.met >= sum.nlink)
			continue;
		out[nout++] = sum;
		if (nout == LINK_RUN_BUF) {
			rc = ovs_runs_append(&t->spill, out, sizeof(out));
			if (rc < 0)
				goto out;
			*left += nout;
			nout = 0;
		}
	}
	rc = ovs_runs_append(&t->spill, out, nout * sizeof(*out));
	if (rc == 0)
		rc = ovs_runs_finish(&t->spill);
	*left += nout;
out:
	free(r);
	return rc;
}

/* The inodes the first walk met fewer names of than their links: those
 * of the table or, if it spilled, of the merge, a table's worth at a
 * time (the merge's are in inode order, so the findings are too). */
static void report_outside_links(struct fsck *ck, struct src_ctx *sc)
{
	struct link_table *t = &sc->links;
	struct ovs_run_reader *left_of = NULL;
	size_t left;
	int rc;

	if (!t->spill.n) {
		recount_and_report(ck, sc);
		goto out;
	}
	rc = link_merge_runs(t, &left);
	if (rc == 0 && !(left_of = malloc(sizeof(*left_of))))
		rc = -ENOMEM;
	if (rc < 0) {
		finding(ck, OVS_FSCK_WARNING, NULL, "", "walk", NULL,
			"SRC: cannot count the hard links: %s", strerror(-rc));
		goto out;
	}
	ovs_run_reader_init(left_of, &t->spill, t->spill.n - 1);
	while (left) {
		size_t chunk = left < 3 * t->cap / 4 ? left : 3 * t->cap / 4;

		memset(t->slot, 0, t->cap * sizeof(*t->slot));
		t->n = 0;
		for (size_t done = 0; done < chunk; done++) {
			const struct link_count *c = ovs_run_peek(left_of, sizeof(*c), &rc);

			if (!c) {
				finding(ck, OVS_FSCK_WARNING, NULL, "", "walk", NULL,
					"SRC: cannot count the hard links: %s",
					strerror(rc < 0 ? -rc : EIO));
				goto out;
			}
			/* marked only: the second walk counts their names */
			t->slot[link_slot(t, c->ino)] = (struct link_count){ c->ino, 1, 0 };
			ovs_run_skip(left_of, sizeof(*c));
		}
		t->n = chunk;
		recount_and_report(ck, sc);
		left -= chunk;
	}
out:
	free(left_of);
	free(t->slot);
	ovs_runs_free(&t->spill);
}

static void check_src(struct fsck *ck)
{
	struct src_ctx sc = { .until_ns = INT64_MAX,
			      .links = { .spill = OVS_RUNS_INIT, .max_cap = link_max_cap() } };
	size_t n = ck->registry_ok ? ovs_snapshot_count(ck->v) : 0;

	if (ck->srcfd < 0)
		return;
	if (n > 0) {
		const struct ovs_snapshot *newest = ovs_snapshot_at(ck->v, n - 1);
		int64_t deact = ovs_volume_deactivated_ns(ck->v);
		int64_t act = ck->v->reg.activated_ns;

		/* Unprotected from the last deactivation until the activation
		 * that followed it (or until now, if none did or the registry
		 * predates activated-ns), unless a snapshot was taken after
		 * the deactivation; or since the newest snapshot, if the mount
		 * is gone now (when exactly it died, nobody knows).
		 * deact is a ctime the filesystem stamped, fine-grained and
		 * so comparable with created_ns (see deactivation_stamp() in
		 * lib/registry.c). */
		if (deact > newest->created_ns) {
			sc.check_changes = true;
			sc.since_ns = deact;
			sc.since_why = "the volume was deactivated";
			if (ovs_volume_active(ck->v) && act >= deact) {
				sc.until_ns = act;
				if (ck->unprotected)
					sc.later_why = "the snapshot mount was not running";
			}
		} else if (ck->unprotected) {
			sc.check_changes = true;
			sc.since_ns = newest->created_ns;
			sc.since_why = "the snapshot mount was not running";
		}
	}
	if (sc.check_changes && (sc.upperfds = calloc(n, sizeof(int)))) {
		sc.nuppers = n;
		for (size_t i = 0; i < n; i++) {
			sc.upperfds[i] = ovs_snapshot_open_upper(ck->v,
								 ovs_snapshot_at(ck->v, i)->id,
								 O_RDONLY);
			if (sc.upperfds[i] < 0)
				sc.upperfds[i] = -1;
		}
	} else {
		sc.check_changes = false;
	}
	walk_tree(ck, &sc, ck->srcfd, check_src_entry, "SRC");
	report_outside_links(ck, &sc);
	for (size_t i = 0; i < sc.nuppers; i++)
		if (sc.upperfds[i] >= 0)
			close(sc.upperfds[i]);
	free(sc.upperfds);
	for (size_t i = 0; i < sc.ncov; i++)
		free(sc.cov[i].layer);
	free(sc.cov);
}

/* ---- all of it ------------------------------------------------------------- */

int ovs_fsck(const char *src, const struct ovs_fsck_opts *opts, struct ovs_fsck_summary *sum)
{
	struct fsck ck = { .o = opts, .sum = sum, .src = src, .treefd = -1, .srcfd = -1 };
	struct libmnt_table *tb;
	int rc;

	memset(sum, 0, sizeof(*sum));
	rc = ovs_volume_open_listed(src, &ck.v);
	if (rc == -ENOENT)
		return ovs_err(ENOENT, "%s is not an ovsnap volume", src);
	if (rc < 0)
		return rc;
	if (ovs_volume_dirfd(ck.v) < 0 && ovs_volume_problem(ck.v) &&
	    strstr(ovs_volume_problem(ck.v), " is unsafe: ")) {
		/* Rule 20: nothing in it can be trusted, nor checked. */
		finding(&ck, OVS_FSCK_ERROR, NULL, ovs_volume_store(ck.v), "store", NULL,
			"%s: ovsnap refuses to use the store until it and every directory "
			"above it are root's and not writable by group or others",
			ovs_volume_problem(ck.v));
		ovs_volume_unref(ck.v);
		return 0;
	}
	/* Its registry, or the whole folder, gone with the snapshots: what is
	 * left is the forget's to finish, nothing to repair. */
	if (ovs_volume_problem(ck.v) &&
	    ovs_volume_forget_marked(ck.v) == OVS_FORGET_REMOVED) {
		finding(&ck, OVS_FSCK_ERROR, NULL, ovs_volume_store(ck.v), "store", NULL,
			"an interrupted 'ovsnap forget' removed the store%s: run 'ovsnap "
			"forget %s' again to finish", ovs_volume_dirfd(ck.v) < 0 ? "" :
			"'s snapshots and registry", ovs_volume_source(ck.v));
		ovs_volume_unref(ck.v);
		return 0;
	}
	if (ovs_volume_dirfd(ck.v) < 0) {
		finding(&ck, OVS_FSCK_ERROR, NULL, ovs_volume_store(ck.v), "store", NULL,
			"the store of the volume cannot be found: if the filesystem that "
			"holds it is not mounted, mount it; if it is gone, so are the "
			"snapshots, and 'ovsnap forget --force %s' retires the volume",
			ovs_volume_source(ck.v));
		ovs_volume_unref(ck.v);
		return 0;
	}
	rc = ovs_volume_lock(ck.v, opts->wait, "fsck");
	/* Copies still landing in an older layer after a take would read
	 * as leftovers of a crash. */
	if (rc == 0)
		rc = ovs_ctl_quiesce(ck.v);
	if (rc < 0) {
		ovs_volume_unlock(ck.v);	/* if it was taken */
		ovs_volume_unref(ck.v);
		return rc;
	}
	check_registry(&ck);
	if (ck.registry_ok)
		check_index(&ck);
	tb = mount_table();
	check_snapshot_mount(&ck, tb);
	open_real_src(&ck, tb);
	if (ck.registry_ok) {
		check_intent(&ck);
	}
	if (ck.registry_ok) {
		check_layer_dirs(&ck);
		check_layers_content(&ck);
		check_views(&ck);
	}
	check_src(&ck);

	if (tb)
		mnt_unref_table(tb);
	if (ck.srcfd >= 0)
		close(ck.srcfd);
	if (ck.treefd >= 0)
		close(ck.treefd);
	ovs_volume_unlock(ck.v);
	ovs_volume_unref(ck.v);
	return 0;
}
