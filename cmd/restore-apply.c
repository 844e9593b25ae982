/*
 * restore_paths(): make paths of the live tree what they were in a
 * snapshot (see restore.h).
 *
 * Which paths: ovs_diff() from the snapshot to the live tree, which reads
 * only the layers (never the whole tree) and lists every path that
 * differs, parents before their entries.  The list goes to a spool (an
 * unlinked file, cmd/common.c), not memory, and is applied from there in
 * a second pass: a rollback of a million paths holds none of them (issue
 * 13).  Not as the diff finds them: the diff reads SRC below its marks
 * and the newest layer, which the changes themselves alter.  How: every
 * change goes through
 * the snapshot mount (SRC as users see it), so the daemon preserves what
 * it replaces into the newest layer and the restore can itself be undone.
 * File data cannot be cloned through FUSE, so the data of a file is handed
 * to the daemon instead ("clone-into", cmd/daemon-restore.c), which
 * preserves the file and then clones the snapshot's data into it.
 *
 * Everything compares states, so a second run after an interruption
 * (SIGKILL at any point) finds what is still different and finishes it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cmd.h"
#include "clone.h"
#include "control.h"
#include "diff.h"
#include "ovsnap-private.h"
#include "resolve.h"
#include "restore.h"
#include "restore-links.h"
#include "walk.h"

struct change {
	const char *path;
	enum ovs_diff_kind kind;
	unsigned fields;
};

/*
 * The changes, in the diff's order, as records of the spool: the kind
 * ('A' + kind), the fields ('@' + fields, 5 bits), the path, a NUL.
 * Neither byte before the path is a NUL, so a record starts after a NUL
 * and the spool can be bisected by its bytes (differs()).
 */
#define REC_KIND	'A'
#define REC_FIELDS	'@'
_Static_assert(OVS_DIFF_XATTRS < 0x20, "the fields of a change fit in 5 bits");

struct spool {
	int fd;
	bool in_memory;
	FILE *f;		/* writing, then reading */
	off_t size;
	uint64_t count;
	char *rec;		/* the record read last */
	size_t reccap;
	char *probe;		/* a record read by differs() */
	size_t probecap;
};

struct restore {
	const char *cmd;
	struct ovs_volume *v;
	const char *src;
	int livefd;			/* SRC through the snapshot mount */
	int *fds;			/* the layers from the snapshot on */
	size_t nfds;
	int srcfd;			/* SRC's real directory: the lowest layer */
	struct ovs_rstack *stack;	/* the snapshot */
	struct spool changes;
	/* linked files of the snapshot: the live name each was first
	 * restored at */
	struct link_names links;
	struct link_names layer_links;	/* names of linked files in the layers */
	bool layer_links_read;
	char **dirs;			/* directories whose times are still due */
	size_t ndirs, capdirs;
	char **parent_dirs;		/* made by make_parents(): times at the end */
	size_t nparent_dirs;
	char **shut;			/* directories shut by copy_metadata(): their */
	size_t nshut, capshut;		/* owner, mode and xattrs come with their times */
	struct restore_stats *stats;
	bool to_dest;			/* --to: livefd is DEST's parent, no daemon */
};

/* ---- test hook ------------------------------------------------------------ */

void restore_step(void)
{
	static long left = -2;

	if (left == -2) {
		const char *h = getenv("OVSNAPD_TEST_HOOKS");
		const char *n = getenv("OVSNAP_TEST_RESTORE_KILL_AFTER");

		left = h && strcmp(h, "1") == 0 && n ? strtol(n, NULL, 10) : -1;
	}
	if (left < 0)
		return;
	if (left-- == 0)
		raise(SIGKILL);
}

void restore_pause(const char *made)
{
	const char *h = getenv("OVSNAPD_TEST_HOOKS");
	const char *p = getenv("OVSNAP_TEST_RESTORE_PAUSE");
	const char *at = getenv("OVSNAP_TEST_RESTORE_PAUSE_MADE");
	char *paused;
	int fd;

	if (!h || strcmp(h, "1") != 0 || !p || !*p)
		return;
	if (made ? !at || strcmp(at, made) != 0 : at != NULL)
		return;
	if (asprintf(&paused, "%s.paused", p) < 0)
		return;
	fd = open(paused, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	free(paused);
	/* at most a minute: a test that forgot to let go does not hang */
	for (int i = 0; i < 1200 && access(p, F_OK) < 0; i++)
		poll(NULL, 0, 50);
}

/* ---- the daemon ------------------------------------------------------------- */

int restore_writers(struct ovs_volume *v)
{
	char reply[OVS_CTL_MSG_MAX], *end;
	unsigned long n;
	int rc;

	rc = ovs_ctl_call(ovs_volume_socket(v), "writers", -1, reply, sizeof(reply), 5000);
	if (rc < 0)
		return rc;
	errno = 0;
	n = strncmp(reply, "ok ", 3) == 0 ? strtoul(reply + 3, &end, 10) : 0;
	if (strncmp(reply, "ok ", 3) != 0 || errno || end == reply + 3)
		return ovs_err(EPROTO, "unexpected answer from the daemon: %s", reply);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int restore_check_active(const char *cmd, struct ovs_volume *v)
{
	const char *src = ovs_volume_source(v);

	if (!ovs_volume_active(v)) {
		ovs_error("%s %s: the volume is deactivated; run 'ovsnap activate %s' first", cmd,
			  src, src);
		return EXIT_FAIL;
	}
	if (!ovs_daemon_running(v)) {
		ovs_error("%s %s: the snapshot mount is not running (the daemon died?); "
			  "run 'ovsnap activate %s'", cmd, src, src);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* The daemon clones the data of fd into the live file at path, after
 * preserving it: 1 cloned, 0 copied, -errno. */
static int daemon_clone_into(struct restore *r, const struct ovs_rentry *e, const char *path,
			     int fd)
{
	char req[OVS_CTL_MSG_MAX], reply[OVS_CTL_MSG_MAX];
	int rc;

	/* the owner: as live_pin() checks, for the daemon's own open */
	if ((size_t)snprintf(req, sizeof(req), "clone-into owner=%u %s", (unsigned)e->st.st_uid,
			     path) >= sizeof(req))
		return -ENAMETOOLONG;
	rc = ovs_ctl_call(ovs_volume_socket(r->v), req, fd, reply, sizeof(reply), -1);
	if (rc < 0)
		return rc;
	return strcmp(reply, "ok cloned") == 0;
}

/* ---- small helpers -------------------------------------------------------- */

/* ovs_err() with ": strerror(err)" after the message, all of it: the
 * paths it names may be of any length (DESIGN.md rule 18). */
static int __attribute__((format(printf, 2, 3))) fail(int err, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return ovs_err(err, "%s (and out of memory for the rest): %s", fmt, strerror(err));
	err = ovs_err(err, "%s: %s", msg, strerror(err));
	free(msg);
	return err;
}

static bool path_below(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (!n)
		return *path != '\0';
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static char *parent_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? strndup(path, slash - path) : strdup("");
}

/* A copy of path at the end of the list *paths (*n of *cap). */
static int paths_add(char ***paths, size_t *n, size_t *cap, const char *path)
{
	if (*n == *cap) {
		size_t more = *cap ? *cap * 2 : 64;
		char **p = realloc(*paths, more * sizeof(*p));

		if (!p)
			return ovs_err(ENOMEM, "out of memory");
		*paths = p;
		*cap = more;
	}
	(*paths)[*n] = strdup(path);
	if (!(*paths)[*n])
		return ovs_err(ENOMEM, "out of memory");
	(*n)++;
	return 0;
}

static int note_dir(struct restore *r, const char *path)
{
	for (size_t i = r->ndirs; i > 0; i--)
		if (strcmp(r->dirs[i - 1], path) == 0)
			return 0;
	return paths_add(&r->dirs, &r->ndirs, &r->capdirs, path);
}

/* ---- the snapshot's side ------------------------------------------------ */

/* 1 and *e when path is visible in the snapshot, 0 when absent. */
static int snap_lookup(struct restore *r, const char *path, struct ovs_rentry *e)
{
	int rc = ovs_resolve_lookup(r->stack, path, e);

	if (rc == -ENOTDIR)
		return 0;
	if (rc < 0)
		return rc;
	return e->kind == OVS_R_ENTRY;
}

/* The directory holding path in layer e->layer (O_PATH), and the name. */
static int snap_parent(struct restore *r, const struct ovs_rentry *e, const char *path,
		       const char **name)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int fd;

	if (!*path) {
		*name = ".";
		return ovs_rstack_openat(r->stack, e->layer, "", O_PATH | O_DIRECTORY);
	}
	*name = slash ? slash + 1 : path;
	parent = slash ? strndup(path, slash - path) : strdup("");
	if (!parent)
		return ovs_err(ENOMEM, "out of memory");
	fd = ovs_rstack_openat(r->stack, e->layer, parent, O_PATH | O_DIRECTORY);
	free(parent);
	return fd;
}

/* ---- the live side (all through the snapshot mount) ------------------- */

/*
 * The live directory holding path (O_PATH), and in *name its last name
 * ("." for "" itself), or -errno.  The restore runs as root in a tree
 * users write to, so no path of more than one name reaches an *at()
 * call: the parent is resolved beneath livefd without following any
 * symlink (DESIGN.md rule 15), and the last name is acted on from there
 * without following it.  A directory swapped for a symlink mid-restore
 * stops the restore with ELOOP instead of leading it outside SRC.
 */
static int live_parent(struct restore *r, const char *path, const char **name)
{
	const char *slash = strrchr(path, '/');
	char *parent;
	int fd;

	*name = !*path ? "." : slash ? slash + 1 : path;
	parent = slash ? strndup(path, slash - path) : strdup("");
	if (!parent)
		return -ENOMEM;
	fd = ovs_open_beneath(r->livefd, parent, O_PATH | O_DIRECTORY | O_CLOEXEC,
			      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
	free(parent);
	return fd;
}

/* fail() for a live_parent() that failed. */
static int parent_fail(int rc, const char *what, const char *path)
{
	if (rc == -ELOOP || rc == -EXDEV)
		return ovs_err(-rc, "%s %s: a directory above it is a symlink now (changed during "
				    "the restore?); not followed", what, path);
	return fail(-rc, "%s %s", what, path);
}

/* -ELOOP or -EXDEV: a directory above path is a symlink now (or a mount
 * point), which the diff did not see: a user changed SRC during the
 * restore.  The callers fail with parent_fail(): taken for "path is not
 * in the live tree", the restore went on and said it was done, with the
 * symlink and what lay below the directory still there. */
static int live_lstat(struct restore *r, const char *path, struct stat *st)
{
	const char *name;
	int pfd = live_parent(r, path, &name), rc = 0;

	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	close(pfd);
	return rc;
}

/* The names in the directory fd (taken over), but . and .., in *names. */
static int read_names(int fd, const char *path, char ***names, size_t *n)
{
	struct dirent *de;
	size_t cap = 0;
	DIR *d;
	int rc = 0;

	*names = NULL;
	*n = 0;
	d = fdopendir(fd);
	if (!d) {
		rc = fail(errno, "read %s", path);
		close(fd);
		return rc;
	}
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rc = paths_add(names, n, &cap, de->d_name);
	}
	if (rc == 0 && errno)
		rc = fail(errno, "read %s", path);
	closedir(d);
	return rc;
}

/*
 * Remove path and everything below it; absent is fine.  A directory's
 * names are read and its fds closed before its entries are removed, so
 * the fds held stay the same at any depth (rule 18): holding two per
 * level, a tree a user made 700 deep failed every restore and rollback
 * of it under 1,024 open files, and a rollback left pending could never
 * finish.
 */
static int live_remove(struct restore *r, const char *path)
{
	struct stat st;
	const char *name;
	char **names;
	size_t n;
	int fd, pfd, rc = live_lstat(r, path, &st);

	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;	/* a parent is no directory (any more) */
	if (rc == -ELOOP || rc == -EXDEV)
		return parent_fail(rc, "remove", path);
	if (rc < 0)
		return fail(-rc, "%s", path);
	pfd = live_parent(r, path, &name);
	if (pfd < 0)
		return parent_fail(pfd, "remove", path);
	if (!S_ISDIR(st.st_mode)) {
		rc = unlinkat(pfd, name, 0) < 0 && errno != ENOENT ? fail(errno, "remove %s", path) : 0;
		close(pfd);
		return rc;
	}
	fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(pfd);
	if (fd < 0)
		return fail(errno, "open %s", path);
	rc = read_names(fd, path, &names, &n);
	for (size_t i = 0; i < n; i++) {
		char *child;

		if (rc == 0 && asprintf(&child, "%s/%s", path, names[i]) < 0)
			rc = ovs_err(ENOMEM, "out of memory");
		else if (rc == 0) {
			rc = live_remove(r, child);
			free(child);
		}
		free(names[i]);
	}
	free(names);
	if (rc < 0)
		return rc;
	/* the parent again, as for any change: not followed if a symlink */
	pfd = live_parent(r, path, &name);
	if (pfd < 0)
		return parent_fail(pfd, "remove", path);
	if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = fail(errno, "remove %s", path);
	close(pfd);
	return rc;
}

#define OVERLAY_XATTR "trusted.overlay."
#define ESCAPED_XATTR "trusted.overlay.overlay."

/*
 * The user's name of the xattr name of a snapshot object, in buf; NULL
 * for layer metadata.  In a layer, the user's trusted.overlay.X is
 * escaped as trusted.overlay.overlay.X (DESIGN.md rule 14) and every
 * other trusted.overlay.* name is the layer's own; in SRC itself all
 * names are the user's.
 */
static const char *user_xattr(const char *name, bool in_layer, char *buf, size_t len)
{
	if (!in_layer || strncmp(name, OVERLAY_XATTR, strlen(OVERLAY_XATTR)) != 0)
		return name;
	if (strncmp(name, ESCAPED_XATTR, strlen(ESCAPED_XATTR)) != 0)
		return NULL;
	snprintf(buf, len, "%s%s", OVERLAY_XATTR, name + strlen(ESCAPED_XATTR));
	return buf;
}

static ssize_t list_xattrs(const char *proc, bool follow, char **out)
{
	ssize_t (*list)(const char *, char *, size_t) = follow ? listxattr : llistxattr;
	ssize_t n = list(proc, NULL, 0);
	char *buf;

	*out = NULL;
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	if (n == 0)
		return 0;
	buf = malloc(n);
	if (!buf)
		return -ENOMEM;
	n = list(proc, buf, n);
	if (n < 0) {
		free(buf);
		return -errno;
	}
	*out = buf;
	return n;
}

/* The live object's xattrs become the snapshot's (ACLs included). */
/*
 * The snapshot's xattrs onto the live object pinned by pin (live_pin()),
 * changed through its /proc/self/fd link, which names that very inode:
 * never by name, which a user who may rename in its directory could
 * point at a file of their own meanwhile (a security.capability set
 * there would be theirs to run).  A symlink is reached through its
 * parent with l*xattr() (the link of a pinned symlink cannot be told
 * from the symlink), its name checked against pin first.
 */
static int copy_xattrs(struct restore *r, int sdirfd, const char *sname, bool in_layer,
		       int pin, const struct stat *pst, const char *path)
{
	char sproc[PATH_MAX], lproc[PATH_MAX], *slist = NULL, *llist = NULL;
	char ubuf[XATTR_NAME_MAX + 1];
	bool follow = !S_ISLNK(pst->st_mode);
	int (*set)(const char *, const char *, const void *, size_t, int) =
		follow ? setxattr : lsetxattr;
	int (*remove)(const char *, const char *) = follow ? removexattr : lremovexattr;
	const char *lname;
	ssize_t sn, ln;
	int rc = 0, pfd = -1;

	if (follow) {
		snprintf(lproc, sizeof(lproc), "/proc/self/fd/%d", pin);
	} else {
		struct stat st;

		pfd = live_parent(r, path, &lname);
		if (pfd < 0)
			return parent_fail(pfd, "set the xattrs of", path);
		if (fstatat(pfd, lname, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_dev != pst->st_dev || st.st_ino != pst->st_ino) {
			close(pfd);
			return ovs_err(EAGAIN, "set the xattrs of %s: it changed during the "
				       "restore", path);
		}
		if ((size_t)snprintf(lproc, sizeof(lproc), "/proc/self/fd/%d/%s", pfd, lname) >=
		    sizeof(lproc)) {
			close(pfd);
			return ovs_err(ENAMETOOLONG, "%s", path);
		}
	}
	if ((size_t)snprintf(sproc, sizeof(sproc), "/proc/self/fd/%d/%s", sdirfd, sname) >=
	    sizeof(sproc)) {
		if (pfd >= 0)
			close(pfd);
		return ovs_err(ENAMETOOLONG, "%s", path);
	}
	sn = list_xattrs(sproc, false, &slist);
	ln = sn < 0 ? 0 : list_xattrs(lproc, follow, &llist);
	if (sn < 0 || ln < 0) {
		rc = fail(sn < 0 ? -sn : -ln, "xattrs of %s", path);
		goto out;
	}
	/* names the snapshot lacks go */
	for (char *p = llist; p && p < llist + ln; p += strlen(p) + 1) {
		bool keep = false;

		for (char *q = slist; q && q < slist + sn; q += strlen(q) + 1) {
			const char *u = user_xattr(q, in_layer, ubuf, sizeof(ubuf));

			keep |= u && strcmp(p, u) == 0;
		}
		if (!keep && remove(lproc, p) < 0 && errno != ENODATA) {
			rc = fail(errno, "remove xattr %s of %s", p, path);
			goto out;
		}
	}
	for (char *q = slist; q && q < slist + sn; q += strlen(q) + 1) {
		const char *u = user_xattr(q, in_layer, ubuf, sizeof(ubuf));
		ssize_t vn;
		char *val;

		if (!u)
			continue;
		vn = lgetxattr(sproc, q, NULL, 0);
		if (vn < 0) {
			rc = fail(errno, "xattr %s of %s in the snapshot", q, path);
			goto out;
		}
		val = malloc(vn + 1);
		if (!val) {
			rc = ovs_err(ENOMEM, "out of memory");
			goto out;
		}
		vn = lgetxattr(sproc, q, val, vn);
		if (vn < 0 || set(lproc, u, val, vn, 0) < 0)
			rc = fail(errno, "set xattr %s of %s", u, path);
		free(val);
		if (rc < 0)
			goto out;
	}
out:
	if (pfd >= 0)
		close(pfd);
	free(slist);
	free(llist);
	return rc;
}

static int set_times(struct restore *r, const char *path, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	const char *name;
	int pfd = live_parent(r, path, &name), rc = 0;

	if (pfd < 0)
		return parent_fail(pfd, "set the times of", path);
	if (utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		rc = fail(errno, "set the times of %s", path);
	close(pfd);
	return rc;
}

/*
 * The live object at path, pinned (O_PATH, not followed) with its stat in
 * *st, or -errno.  The restore runs as root in directories users may
 * write to: between its steps a user may rename what the restore made
 * and put a file of their own at the name.  So every step after the
 * first acts on the pinned inode, and only on one of the snapshot's
 * type, and for a regular file one that is root's (what the restore
 * made: it runs as root) or already the snapshot owner's
 * (apply_change() restores no other in place): never the snapshot's
 * data into, nor root's owner, mode or capabilities onto, a user's
 * file, which they may hold open.
 */
static int live_pin(struct restore *r, const struct ovs_rentry *e, const char *path,
		    struct stat *st)
{
	const char *name;
	int pfd, pin;

	pfd = live_parent(r, path, &name);
	if (pfd < 0)
		return pfd;
	pin = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	pin = pin < 0 ? -errno : pin;
	close(pfd);
	if (pin < 0)
		return pin;
	if (fstat(pin, st) < 0) {
		close(pin);
		return -errno;
	}
	if ((st->st_mode & S_IFMT) != (e->st.st_mode & S_IFMT) ||
	    (S_ISREG(st->st_mode) && st->st_uid != 0 && st->st_uid != e->st.st_uid)) {
		close(pin);
		return -EAGAIN;	/* it changed under the restore */
	}
	return pin;
}

/* fail() for a live_pin() that failed. */
static int pin_fail(int rc, const char *what, const char *path)
{
	if (rc == -EAGAIN)
		return ovs_err(EAGAIN, "%s %s: it changed during the restore (another object, "
			       "or another owner's, is at its name now); not changed", what, path);
	return parent_fail(rc, what, path);
}

/* xattrs, owner, mode (in that order: an ACL sets mode bits, a chown
 * clears setuid) of e onto the pinned live object pin (st). */
static int pinned_metadata(struct restore *r, const struct ovs_rentry *e, const char *spath,
			   const char *path, int pin, const struct stat *st)
{
	char proc[64];
	const char *sname;
	int sdirfd, rc;

	sdirfd = snap_parent(r, e, spath, &sname);
	if (sdirfd < 0)
		return ovs_err_keep(-sdirfd, "%s in the snapshot", spath);
	rc = copy_xattrs(r, sdirfd, sname, e->layer < (int)r->nfds, pin, st, path);
	close(sdirfd);
	if (rc == 0 && fchownat(pin, "", e->st.st_uid, e->st.st_gid,
				AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		rc = fail(errno, "chown %s", path);
	/* chmod follows a symlink, and a symlink has no mode of its own;
	 * the /proc/self/fd link names the pinned inode */
	if (rc == 0 && !S_ISLNK(st->st_mode)) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pin);
		if (chmod(proc, e->st.st_mode & 07777) < 0)
			rc = fail(errno, "chmod %s", path);
	}
	return rc;
}

/*
 * A directory restored in place whose owner or group is not the
 * snapshot's now: a user may have renamed another user's directory to
 * its name (in a shared folder), whose files the restore then removes.
 * Given the snapshot's owner and mode first, it opened those files to
 * the snapshot's owner while they were still there.  It is shut instead
 * (root's, 0700: an ACL's mask then grants nobody), and gets the
 * snapshot's owner, mode and xattrs with its times, once the changes in
 * it are done (dir_times()).
 */
static int shut_dir(struct restore *r, const char *path, int pin)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pin);
	if (chmod(proc, 0700) < 0)
		return fail(errno, "chmod %s", path);
	if (fchownat(pin, "", 0, 0, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return fail(errno, "chown %s", path);
	return paths_add(&r->shut, &r->nshut, &r->capshut, path);
}

/* Whether path was shut (shut_dir()); it is forgotten. */
static bool take_shut(struct restore *r, const char *path)
{
	for (size_t i = 0; i < r->nshut; i++)
		if (strcmp(r->shut[i], path) == 0) {
			free(r->shut[i]);
			r->shut[i] = r->shut[--r->nshut];
			return true;
		}
	return false;
}

/* xattrs, owner, mode, and for non-directories the times. */
static int copy_metadata(struct restore *r, const struct ovs_rentry *e, const char *spath,
			 const char *path)
{
	struct stat st;
	int pin, rc;

	pin = live_pin(r, e, path, &st);
	if (pin < 0)
		return pin_fail(pin, "restore the metadata of", path);
	if (S_ISDIR(st.st_mode) && !r->to_dest &&
	    (st.st_uid != e->st.st_uid || st.st_gid != e->st.st_gid)) {
		rc = shut_dir(r, path, pin);
		close(pin);
		return rc < 0 ? rc : note_dir(r, path);
	}
	rc = pinned_metadata(r, e, spath, path, pin, &st);
	close(pin);
	if (rc < 0)
		return rc;
	if (S_ISDIR(e->st.st_mode))
		return r->to_dest ? 0 : note_dir(r, path);
	return set_times(r, path, &e->st);
}

/*
 * The live regular file at path, open for writing, or -errno: pinned
 * (live_pin()) and opened through its /proc/self/fd link, the very
 * inode, so a FIFO or device, or a user's file, swapped in is never
 * opened by root; O_NONBLOCK all the same.
 */
static int live_open_file(struct restore *r, const struct ovs_rentry *e, const char *path)
{
	char proc[64];
	struct stat st;
	int pin, fd;

	pin = live_pin(r, e, path, &st);
	if (pin < 0)
		return pin;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pin);
	fd = open(proc, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(pin);
	return fd;
}

/* The data of the snapshot's file e at path into the live regular file
 * at path. */
static int copy_data(struct restore *r, const struct ovs_rentry *e, const char *spath,
		     const char *path)
{
	const char *sname;
	int sdirfd, fd, lfd, rc;
	bool cloned = false;

	sdirfd = snap_parent(r, e, spath, &sname);
	if (sdirfd < 0)
		return ovs_err_keep(-sdirfd, "%s in the snapshot", spath);
	fd = openat(sdirfd, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	close(sdirfd);
	if (fd < 0)
		return fail(errno, "open %s in the snapshot", spath);
	/*
	 * --to writes straight to DEST (a clone where it is on the same
	 * filesystem).  A live file changes only through the daemon: it
	 * clones where the filesystem can.  Where it cannot, the data is
	 * copied through the mount in ordinary writes instead: one request
	 * copying gigabytes would hold up takes (DESIGN.md rule 13).
	 */
	rc = r->to_dest || !ovs_volume_can_clone(r->v) ? -ENAMETOOLONG :
							 daemon_clone_into(r, e, path, fd);
	if (rc == -ENAMETOOLONG || rc == -EXDEV) {
		/* or too long for one control message, or this file cannot
		 * be cloned (the daemon only clones) */
		lfd = live_open_file(r, e, path);
		rc = lfd < 0 ? lfd : ovs_clone_data(lfd, fd, &cloned);
		if (lfd >= 0)
			close(lfd);
		if (rc == 0)
			rc = cloned;
		if (rc < 0 && rc != -EAGAIN) {
			close(fd);
			return fail(-rc, "restore the data of %s", path);
		}
	}
	close(fd);
	if (rc == -EAGAIN)
		return pin_fail(rc, "restore the data of", path);
	if (rc < 0)
		return ovs_err_keep(-rc, "restore the data of %s", path);
	if (rc > 0)
		r->stats->cloned++;
	else
		r->stats->copied++;
	return 0;
}

/* Hard links among the restored names: the layers keep every name of a
 * hard-linked file linked together (DESIGN.md rule 6).  The name e was
 * first restored at into *first (NULL: none yet): 0 or -errno. */
static int restored_link(struct restore *r, const struct ovs_rentry *e, const char **first)
{
	struct link_iter it;
	int rc;

	link_names_find(&r->links, e->st.st_dev, e->st.st_ino, &it);
	*first = link_names_next(&r->links, &it, &rc);
	return rc;
}

static int note_link(struct restore *r, const struct ovs_rentry *e, const char *path)
{
	return link_names_add(&r->links, e->st.st_dev, e->st.st_ino, path);
}

/* ---- hard links with names the restore does not touch ------------------- */

/* A name of the walk of a layer (read_layer_links). */
static int layer_links_entry(void *arg, struct ovs_walk_dir *d, const char *name,
			     const char *path, struct ovs_walk_dir *child)
{
	struct restore *r = arg;
	struct stat st;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISREG(st.st_mode) && st.st_nlink > 1)
		return link_names_add(&r->layer_links, st.st_dev, st.st_ino, path);
	if (!S_ISDIR(st.st_mode))
		return 0;
	child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return child->fd < 0 ? 0 : OVS_WALK_DESCEND;
}

/* What could not be read of a layer is left out, as a folder that cannot
 * be opened is. */
static int layer_links_read_error(void *arg, struct ovs_walk_dir *d, const char *path, int err)
{
	(void)arg;
	(void)d;
	(void)path;
	(void)err;
	return 0;
}

static const struct ovs_walk_ops layer_links_ops = {
	.entry = layer_links_entry, .read_error = layer_links_read_error,
};

/* Every multiply-linked file of the layer directory dirfd: by the library's
 * walker, which holds a bounded number of fds and no path per level at
 * any depth (DESIGN.md rule 18). */
static int read_layer_links(struct restore *r, int dirfd)
{
	struct ovs_walk_dir root = { .aux = -1 };

	root.fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root.fd < 0)
		return fail(errno, "read a layer");
	return ovs_walk(&root, "", &layer_links_ops, r);
}

/* Diff order: component by component (as lib/diff.c sorts). */
static int path_cmp(const char *x, const char *y)
{
	for (;; x++, y++) {
		int cx = *x == '/' ? 1 : *x ? (unsigned char)*x + 2 : 0;
		int cy = *y == '/' ? 1 : *y ? (unsigned char)*y + 2 : 0;

		if (cx != cy || !cx)
			return cx - cy;
	}
}

/* The record of the spool that starts at or after off (off itself when
 * a NUL is before it) into r->changes.probe, its length in *len: its
 * start, or -errno; the spool's size when there is none. */
static off_t spool_record(struct restore *r, off_t off, size_t *len)
{
	struct spool *sp = &r->changes;
	off_t start = off;
	size_t n = 0;
	bool found = off == 0;

	if (off > 0)
		start = off - 1;	/* a record starts after a NUL */
	while (start < sp->size) {
		ssize_t got;
		char *nul;

		if (n + 4096 > sp->probecap) {
			char *b = realloc(sp->probe, sp->probecap + 4096);

			if (!b)
				return -ENOMEM;
			sp->probe = b;
			sp->probecap += 4096;
		}
		got = pread(sp->fd, sp->probe + n, 4096, start + n);
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		if (!found) {
			nul = memchr(sp->probe, '\0', got);
			if (!nul) {
				start += got;
				continue;
			}
			/* the record after it: read it again from its start */
			start += nul - sp->probe + 1;
			found = true;
			continue;
		}
		nul = memchr(sp->probe + n, '\0', got);
		n += got;
		if (nul) {
			*len = nul - sp->probe + 1;
			return start;
		}
	}
	return sp->size;
}

/* path is among the changes (the spool is in path_cmp() order): 1, 0,
 * -errno. */
static int differs(struct restore *r, const char *path)
{
	off_t lo = 0, hi = r->changes.size;

	while (lo < hi) {
		off_t mid = lo + (hi - lo) / 2, start;
		size_t len = 0;
		int c;

		start = spool_record(r, mid, &len);
		if (start < 0)
			return ovs_err(-start, "read the spool of the changes: %s",
				       strerror(-start));
		if (start >= hi) {
			hi = mid;	/* none starts in [mid, hi) */
			continue;
		}
		c = path_cmp(path, r->changes.probe + 2);
		if (c == 0)
			return 1;
		if (c < 0)
			hi = mid;
		else
			lo = start + len;
	}
	return 0;
}

/*
 * A live name that is, unchanged, another name of the snapshot's
 * hard-linked file e: the layers keep every name of a file together
 * (DESIGN.md rule 6), so they are found there, the first in the order
 * of a walk of the layers.  Into *first (NULL when there is none): 0 or
 * -errno.
 */
static int unchanged_link(struct restore *r, const struct ovs_rentry *e, const char *path,
			  const char **first)
{
	struct link_iter it;
	const char *l;
	int rc;

	*first = NULL;
	if (!r->layer_links_read) {
		r->layer_links_read = true;
		for (size_t i = 0; i < r->nfds; i++)
			if (read_layer_links(r, r->fds[i]) < 0)
				return 0;
	}
	link_names_find(&r->layer_links, e->st.st_dev, e->st.st_ino, &it);
	while ((l = link_names_next(&r->layer_links, &it, &rc))) {
		struct ovs_rentry q;
		struct stat st;

		if (strcmp(l, path) == 0)
			continue;
		if (snap_lookup(r, l, &q) <= 0 || q.st.st_dev != e->st.st_dev ||
		    q.st.st_ino != e->st.st_ino)
			continue;
		if (differs(r, l) != 0 || live_lstat(r, l, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		*first = l;
		return 0;
	}
	return rc;
}

static int make_object_at(struct restore *r, const struct ovs_rentry *e, const char *spath,
			  const char *path, int pfd, const char *name);

/* Make the snapshot's object e at path, where the live tree has nothing. */
static int make_object(struct restore *r, const struct ovs_rentry *e, const char *spath,
		       const char *path)
{
	mode_t type = e->st.st_mode & S_IFMT;
	const char *name;
	int rc, pfd = live_parent(r, path, &name);

	if (pfd < 0)
		return parent_fail(pfd, "create", path);
	rc = make_object_at(r, e, spath, path, pfd, name);
	close(pfd);
	if (rc <= 0)
		return rc;
	restore_pause(path);
	if (type == S_IFREG) {
		rc = copy_data(r, e, spath, path);
		if (rc == 0 && e->st.st_nlink > 1)
			rc = note_link(r, e, path);
		if (rc < 0)
			return rc;
	}
	return copy_metadata(r, e, spath, path);
}

/* make_object() in the live directory pfd, as name: 1 made (data and
 * metadata still to come), 0 linked to a name made before, -errno. */
static int make_object_at(struct restore *r, const struct ovs_rentry *e, const char *spath,
			  const char *path, int pfd, const char *name)
{
	mode_t type = e->st.st_mode & S_IFMT;
	int fd, rc;

	switch (type) {
	case S_IFREG: {
		const char *first = NULL;
		const char *fname;
		int ffd;

		if (e->st.st_nlink > 1) {
			rc = restored_link(r, e, &first);
			if (rc == 0 && !first && !r->to_dest)
				rc = unchanged_link(r, e, path, &first);
			if (rc < 0)
				return rc;
		}
		if (first) {
			struct stat fst;
			int pin;

			/*
			 * The partner pinned, and linked by its fd: it must be
			 * a file with the snapshot's owner and size.  By name,
			 * whatever a user had put at it since it was chosen
			 * (their own file, renamed over an unchanged partner)
			 * got linked into place, exit 0.
			 */
			ffd = live_parent(r, first, &fname);
			if (ffd < 0)
				return parent_fail(ffd, "link to", first);
			pin = openat(ffd, fname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
			rc = pin < 0 ? -errno : 0;
			close(ffd);
			if (rc == 0 && (fstat(pin, &fst) < 0 || !S_ISREG(fst.st_mode) ||
					fst.st_uid != e->st.st_uid || fst.st_gid != e->st.st_gid ||
					fst.st_size != e->st.st_size))
				rc = -EAGAIN;
			if (rc == 0 && linkat(pin, "", pfd, name, AT_EMPTY_PATH) < 0)
				rc = -errno;
			if (pin >= 0)
				close(pin);
			if (rc == -EAGAIN)
				return pin_fail(rc, "link to", first);
			if (rc < 0)
				return fail(-rc, "link %s to %s", path, first);
			return 0;
		}
		fd = openat(pfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(errno, "create %s", path);
		close(fd);
		rc = 1;
		break;
	}
	case S_IFDIR:
		if (mkdirat(pfd, name, 0700) < 0)
			return fail(errno, "mkdir %s", path);
		rc = 1;
		break;
	case S_IFLNK: {
		const char *sname;
		char *target;
		int sdirfd, err = ENOMEM;
		ssize_t n;

		sdirfd = snap_parent(r, e, spath, &sname);
		if (sdirfd < 0)
			return ovs_err_keep(-sdirfd, "%s in the snapshot", spath);
		target = malloc(e->st.st_size + 1);
		n = target ? readlinkat(sdirfd, sname, target, e->st.st_size + 1) : -1;
		if (target)
			err = n < 0 ? errno : EAGAIN;	/* EAGAIN: it changed */
		close(sdirfd);
		if (n < 0 || n > e->st.st_size) {
			free(target);
			return fail(err, "read the symlink %s", spath);
		}
		target[n] = '\0';
		rc = symlinkat(target, pfd, name) < 0 ? -errno : 1;
		free(target);
		if (rc < 0)
			return fail(-rc, "symlink %s", path);
		break;
	}
	default:
		if (mknodat(pfd, name, e->st.st_mode & (S_IFMT | 0600), e->st.st_rdev) < 0)
			return fail(errno, "mknod %s", path);
		rc = 1;
	}
	return rc;
}

/* ---- one change ------------------------------------------------------------- */

static int apply_change(struct restore *r, const struct change *c)
{
	struct ovs_rentry e;
	struct stat st;
	int in_snap, rc;

	in_snap = snap_lookup(r, c->path, &e);
	if (in_snap < 0)
		return ovs_err_keep(-in_snap, "%s in the snapshot", c->path);
	rc = live_lstat(r, c->path, &st);
	if (rc == -ELOOP || rc == -EXDEV)
		return parent_fail(rc, "restore", c->path);
	if (rc < 0 && rc != -ENOENT && rc != -ENOTDIR)
		return fail(-rc, "%s", c->path);
	if (!in_snap)
		return live_remove(r, c->path);
	/*
	 * A regular file of another owner is made anew: whoever holds it
	 * open (its owner: a user who replaced root's file with their own)
	 * would read the snapshot's data through that descriptor, or write
	 * the file once it is root's again and setuid.
	 */
	if (rc == 0 && S_ISREG(st.st_mode) &&
	    (st.st_uid != e.st.st_uid || st.st_gid != e.st.st_gid))
		goto replace;
	if (rc == 0 && (st.st_mode & S_IFMT) == (e.st.st_mode & S_IFMT) && c->kind == OVS_DIFF_MODIFIED) {
		/* in place, unless the hard links differ; a symlink's target
		 * and a device's numbers cannot change in place */
		if (c->fields & OVS_DIFF_CONTENT) {
			if (S_ISREG(st.st_mode) && st.st_nlink == 1 && e.st.st_nlink == 1)
				rc = copy_data(r, &e, c->path, c->path);
			else
				goto replace;
		}
		return rc < 0 ? rc : copy_metadata(r, &e, c->path, c->path);
	}
replace:
	rc = live_remove(r, c->path);
	return rc < 0 ? rc : make_object(r, &e, c->path, c->path);
}

/* The missing parents of path, made as they were in the snapshot. */
static int make_parents(struct restore *r, const char *path)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return ovs_err(ENOMEM, "out of memory");
	for (char *slash = strchr(p, '/'); rc == 0 && slash; slash = strchr(slash + 1, '/')) {
		struct ovs_rentry e;
		struct stat st;
		int in_snap;

		*slash = '\0';
		if (live_lstat(r, p, &st) == 0 && S_ISDIR(st.st_mode)) {
			*slash = '/';
			continue;
		}
		in_snap = snap_lookup(r, p, &e);
		if (in_snap < 0)
			rc = ovs_err_keep(-in_snap, "%s in the snapshot", p);
		else if (!in_snap || !S_ISDIR(e.st.st_mode))
			break;	/* path is absent in the snapshot too */
		else if ((rc = live_remove(r, p)) == 0)
			rc = make_object(r, &e, p, p);
		*slash = '/';
	}
	free(p);
	return rc;
}

/* ---- the whole ------------------------------------------------------------ */

static int collect(const struct ovs_diff_change *c, void *arg)
{
	struct restore *r = arg;
	FILE *f = r->changes.f;

	putc(REC_KIND + c->kind, f);
	putc(REC_FIELDS + (c->fields & 0x1f), f);
	fputs(c->path, f);
	putc('\0', f);
	r->changes.count++;
	return ferror(f) ? -(errno ? errno : EIO) : 0;
}

static void spool_close(struct spool *sp)
{
	if (sp->f)
		fclose(sp->f);
	else if (sp->fd >= 0)
		close(sp->fd);
	sp->f = NULL;
	sp->fd = -1;
}

/*
 * The changes from snapshot snap to the live tree into the spool.  A
 * spool in /tmp that fills up is made again in memory (as ovsnap diff's,
 * cmd/diff.c), with the diff run again: nothing was changed yet.
 */
static int spool_changes(struct restore *r, uint64_t snap)
{
	struct spool *sp = &r->changes;
	int rc;

	for (;;) {
		sp->fd = ovs_spool_file("ovsnap-restore", &sp->in_memory);
		if (sp->fd < 0)
			return sp->fd;
		sp->f = fdopen(sp->fd, "w+");
		if (!sp->f)
			return fail(errno, "spool for the changes");
		sp->count = 0;
		rc = ovs_diff_all(r->v, snap, OVS_DIFF_LIVE, r->srcfd, collect, r);
		if (rc == 0 && fflush(sp->f) != 0)
			rc = -(errno ? errno : EIO);
		if (rc < 0 && ferror(sp->f)) {
			if (!sp->in_memory && ovs_spool_tmp_full(-rc)) {
				spool_close(sp);
				sp->in_memory = true;
				continue;
			}
			rc = fail(-rc, "spool for the changes");
		}
		if (rc < 0)
			return rc;
		sp->size = ftello(sp->f);
		rewind(sp->f);
		return 0;
	}
}

/* The next change of the spool into *c (valid until the next call): 1,
 * 0 after the last, -errno. */
static int spool_next(struct restore *r, struct change *c)
{
	struct spool *sp = &r->changes;
	ssize_t n = getdelim(&sp->rec, &sp->reccap, '\0', sp->f);

	if (n < 0)
		return ferror(sp->f) ? fail(errno ? errno : EIO, "read the spool of the changes")
				     : 0;
	if (n < 3 || sp->rec[n - 1] != '\0')
		return ovs_err(EIO, "read the spool of the changes: a truncated record");
	c->kind = sp->rec[0] - REC_KIND;
	c->fields = sp->rec[1] - REC_FIELDS;
	c->path = sp->rec + 2;
	return 1;
}

static int open_snapshot(struct restore *r, uint64_t snap)
{
	size_t n = ovs_snapshot_count(r->v), first = n;

	for (size_t i = 0; i < n; i++)
		if (ovs_snapshot_at(r->v, i)->id == snap)
			first = i;
	if (first == n)
		return ovs_err(ENOENT, "no snapshot %" PRIu64, snap);
	r->nfds = n - first;
	r->fds = calloc(r->nfds, sizeof(int));
	if (!r->fds)
		return ovs_err(ENOMEM, "out of memory");
	for (size_t i = 0; i < r->nfds; i++)
		r->fds[i] = -1;
	for (size_t i = 0; i < r->nfds; i++) {
		int fd = ovs_snapshot_open_upper(r->v, ovs_snapshot_at(r->v, first + i)->id,
						 O_RDONLY);

		if (fd < 0)
			return fd;
		r->fds[i] = fd;
	}
	return ovs_rstack_new(r->fds, r->nfds, r->srcfd, &r->stack);
}

static bool in_scope(const char *path, const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(path, paths[i]) == 0 || path_below(path, paths[i]))
			return true;
	return false;
}

/* A directory's times as they were in the snapshot, when it is a
 * directory in both. */
static int dir_times(struct restore *r, const char *path)
{
	struct ovs_rentry e;
	struct stat st;
	int in_snap = snap_lookup(r, path, &e);

	if (in_snap < 0)
		return ovs_err_keep(-in_snap, "%s in the snapshot", path);
	if (in_snap && S_ISDIR(e.st.st_mode) && take_shut(r, path)) {
		/* shut while the changes in it were made: now its metadata */
		int rc, pin = live_pin(r, &e, path, &st);

		if (pin < 0)
			return pin_fail(pin, "restore the metadata of", path);
		rc = pinned_metadata(r, &e, path, path, pin, &st);
		close(pin);
		if (rc < 0)
			return rc;
		return set_times(r, path, &e.st);
	}
	if (in_snap && S_ISDIR(e.st.st_mode) && live_lstat(r, path, &st) == 0 &&
	    S_ISDIR(st.st_mode))
		return set_times(r, path, &e.st);
	return 0;
}

/*
 * The times of the noted directories that path is not in (NULL: all).
 * The changes come in path order, so every change inside a directory
 * comes before the first change outside it: a directory's times can be
 * set as soon as the changes leave it, and only the directories on the
 * path of the current change wait.  A directory's own times do not
 * change its parent's, so the order among them does not matter.
 */
static int dirs_done(struct restore *r, const char *path)
{
	int rc = 0;

	for (size_t i = r->ndirs; i > 0; i--) {
		char *d = r->dirs[i - 1];

		if (path && (strcmp(path, d) == 0 || path_below(path, d)))
			continue;
		if (rc == 0)
			rc = dir_times(r, d);
		free(d);
		memmove(&r->dirs[i - 1], &r->dirs[i], (r->ndirs - i) * sizeof(*r->dirs));
		r->ndirs--;
	}
	return rc;
}

static int run(struct restore *r, uint64_t snap, const char *const *paths, size_t n)
{
	struct ovs_progress prog = { .what = r->cmd };
	char *removed = NULL;
	struct change c = { 0 };
	uint64_t done;
	int rc;

	r->livefd = open(r->src, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->livefd < 0)
		return fail(errno, "open %s", r->src);
	r->srcfd = ovs_open_real_source(r->src);
	if (r->srcfd < 0)
		return r->srcfd;
	rc = open_snapshot(r, snap);
	if (rc == 0)
		rc = spool_changes(r, snap);
	if (rc == 0)
		restore_pause(NULL);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = make_parents(r, paths[i]);
	/* the parents made above wait for the end: the changes below them
	 * may come after changes outside them */
	r->parent_dirs = r->dirs;
	r->nparent_dirs = r->ndirs;
	r->dirs = NULL;
	r->ndirs = r->capdirs = 0;
	for (done = 0; rc == 0 && (rc = spool_next(r, &c)) > 0; done++) {
		rc = 0;
		ovs_progress_show(&prog, done, r->changes.count);
		if (!in_scope(c.path, paths, n))
			continue;
		/* removed with a directory above it */
		if (removed && path_below(c.path, removed))
			continue;
		rc = dirs_done(r, c.path);
		if (rc == 0)
			rc = apply_change(r, &c);
		if (rc < 0)
			break;
		if (c.kind == OVS_DIFF_ADDED) {
			free(removed);
			removed = strdup(c.path);
			if (!removed)
				rc = ovs_err(ENOMEM, "out of memory");
		}
		r->stats->changed++;
		/* the directory it is in changed: its times come after the
		 * changes in it */
		if (rc == 0 && *c.path) {
			char *parent = parent_of(c.path);

			if (!parent)
				rc = ovs_err(ENOMEM, "out of memory");
			else if (in_scope(parent, paths, n))
				rc = note_dir(r, parent);
			free(parent);
		}
		restore_step();
	}
	free(removed);
	ovs_progress_end(&prog);
	if (rc == 0)
		rc = dirs_done(r, NULL);
	for (size_t i = r->nparent_dirs; rc == 0 && i > 0; i--)
		rc = dir_times(r, r->parent_dirs[i - 1]);
	return rc;
}

static void restore_free(struct restore *r)
{
	ovs_rstack_free(r->stack);
	for (size_t i = 0; r->fds && i < r->nfds; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	free(r->fds);
	spool_close(&r->changes);
	free(r->changes.rec);
	free(r->changes.probe);
	link_names_free(&r->links);
	link_names_free(&r->layer_links);
	for (size_t i = 0; i < r->ndirs; i++)
		free(r->dirs[i]);
	free(r->dirs);
	for (size_t i = 0; i < r->nparent_dirs; i++)
		free(r->parent_dirs[i]);
	free(r->parent_dirs);
	for (size_t i = 0; i < r->nshut; i++)
		free(r->shut[i]);
	free(r->shut);
	if (r->livefd >= 0)
		close(r->livefd);
	if (r->srcfd >= 0)
		close(r->srcfd);
}

int restore_paths(const char *cmd, struct ovs_volume *v, uint64_t snap, const char *const *paths,
		  size_t n, struct restore_stats *stats)
{
	struct restore r = { .cmd = cmd, .v = v, .src = ovs_volume_source(v), .livefd = -1,
			     .srcfd = -1, .stats = stats, .changes.fd = -1,
			     .links = LINK_NAMES_INIT, .layer_links = LINK_NAMES_INIT };
	int rc = run(&r, snap, paths, n);

	if (rc < 0)
		ovs_error_lib(rc, "%s %s", cmd, r.src);
	restore_free(&r);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}

/* ---- --to DEST -------------------------------------------------------------- */

/* The snapshot's spath and everything below it, made at dpath (relative
 * to r->livefd, DEST's parent); directory times after their entries. */
static int copy_out_tree(struct restore *r, const char *spath, const char *dpath)
{
	struct ovs_rdirent *ents = NULL;
	struct ovs_rentry e;
	size_t cnt = 0;
	int rc = snap_lookup(r, spath, &e);

	if (rc <= 0)
		return rc < 0 ? ovs_err_keep(-rc, "%s in the snapshot", spath) : 0;
	rc = make_object(r, &e, spath, dpath);
	if (rc < 0 || !S_ISDIR(e.st.st_mode))
		return rc < 0 ? rc : (r->stats->changed++, 0);
	r->stats->changed++;
	rc = ovs_resolve_readdir(r->stack, spath, &ents, &cnt);
	if (rc < 0)
		return ovs_err_keep(-rc, "read %s in the snapshot", spath);
	for (size_t i = 0; rc == 0 && i < cnt; i++) {
		char *sp = NULL, *dp = NULL;

		if (asprintf(&sp, "%s%s%s", spath, *spath ? "/" : "", ents[i].name) < 0 ||
		    asprintf(&dp, "%s/%s", dpath, ents[i].name) < 0)
			rc = ovs_err(ENOMEM, "out of memory");
		else
			rc = copy_out_tree(r, sp, dp);
		free(sp);
		free(dp);
	}
	ovs_resolve_dirents_free(ents, cnt);
	return rc < 0 ? rc : set_times(r, dpath, &e.st);
}

int restore_copy_out(const char *cmd, struct ovs_volume *v, uint64_t snap, const char *path,
		     int destdirfd, const char *destname, struct restore_stats *stats)
{
	struct restore r = { .cmd = cmd, .v = v, .src = ovs_volume_source(v), .livefd = destdirfd,
			     .srcfd = -1, .stats = stats, .to_dest = true, .changes.fd = -1,
			     .links = LINK_NAMES_INIT, .layer_links = LINK_NAMES_INIT };
	struct ovs_rentry e;
	int rc;

	r.srcfd = ovs_open_real_source(r.src);
	rc = r.srcfd < 0 ? r.srcfd : open_snapshot(&r, snap);
	if (rc == 0) {
		rc = snap_lookup(&r, path, &e);
		if (rc == 0)
			rc = ovs_err(ENOENT, "%s is not in snapshot %" PRIu64, *path ? path : ".",
				     snap);
	}
	if (rc > 0)
		rc = copy_out_tree(&r, path, destname);
	if (rc < 0)
		ovs_error_lib(rc, "%s %s", cmd, r.src);
	r.livefd = -1;	/* the caller's */
	restore_free(&r);
	return rc < 0 ? EXIT_FAIL : EXIT_OK;
}
