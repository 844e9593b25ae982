/*
 * Volumes: a source directory SRC, identified by its real path, and its
 * folder in a store.  Creating one checks everything that would make
 * snapshots impossible or wrong before it changes anything.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ovsnap-private.h"

#define INDEX_DIR "volumes"
/* Volumes whose forget is under way: an entry named as in the index,
 * pointing at the store folder being removed, or at FORGET_REMOVED and
 * the folder once nothing of the snapshots is left in it (forget_mark). */
#define FORGET_DIR "forgetting"
#define FORGET_REMOVED "removed:"
#define PROBE_XATTR "trusted.ovsnap.probe"

/* ---- objects -------------------------------------------------------------- */

static struct ovs_volume *volume_new(const char *source, const char *store)
{
	struct ovs_volume *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->refcount = 1;
	v->dirfd = -1;
	v->lockfd = -1;
	v->source = strdup(source);
	v->store = strdup(store);
	if (!v->source || !v->store) {
		ovs_volume_unref(v);
		return NULL;
	}
	return v;
}

struct ovs_volume *ovs_volume_ref(struct ovs_volume *v)
{
	if (v)
		v->refcount++;
	return v;
}

void ovs_volume_unref(struct ovs_volume *v)
{
	if (!v || --v->refcount > 0)
		return;
	ovs_volume_unlock(v);
	if (v->dirfd >= 0)
		close(v->dirfd);
	ovs_registry_clear(&v->reg);
	free(v->source);
	free(v->store);
	free(v->socket);
	free(v->problem);
	free(v);
}

const char *ovs_volume_source(const struct ovs_volume *v)
{
	return v->source;
}

const char *ovs_volume_store(const struct ovs_volume *v)
{
	return v->store;
}

const char *ovs_volume_fstype(const struct ovs_volume *v)
{
	return v->reg.fstype;
}

const char *ovs_volume_fsuuid(const struct ovs_volume *v)
{
	return v->reg.fsuuid;
}

bool ovs_volume_can_clone(const struct ovs_volume *v)
{
	return v->reg.can_clone;
}

bool ovs_volume_active(const struct ovs_volume *v)
{
	return v->reg.active;
}

int64_t ovs_volume_deactivated_ns(const struct ovs_volume *v)
{
	return v->reg.deactivated_ns;
}

const char *ovs_volume_problem(const struct ovs_volume *v)
{
	return v->problem;
}

bool ovs_volume_store_missing(const struct ovs_volume *v)
{
	return v->problem && v->store_missing;
}

int ovs_volume_dirfd(const struct ovs_volume *v)
{
	return v->dirfd;
}

const char *ovs_volume_socket(const struct ovs_volume *v)
{
	struct sockaddr_un sun;
	char esc[PATH_MAX], path[PATH_MAX + 16];

	if (v->socket)
		return v->socket;
	if (ovs_path_escape(v->source, esc, sizeof(esc)) < 0)
		esc[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s.sock", ovs_run_dir(), esc);
	if (!esc[0] || strlen(path) >= sizeof(sun.sun_path)) {
		/* a unix socket path is at most 107 bytes: hash long sources
		 * (FNV-1a; both ends compute it the same way) */
		uint64_t h = 0xcbf29ce484222325ULL;

		for (const char *p = v->source; *p; p++)
			h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
		snprintf(path, sizeof(path), "%s/h-%016llx.sock", ovs_run_dir(),
			 (unsigned long long)h);
	}
	((struct ovs_volume *)v)->socket = strdup(path);
	return v->socket ? v->socket : "";
}

/*
 * The index names the volume's folder; trust it only as <store>/<esc>: an
 * absolute path without "." or ".." whose last name is the escaped source
 * (DESIGN.md rule 20).  A folder elsewhere would hand the volume, and the
 * root daemon's writes, to whatever lies there.
 */
static int check_folder_name(const char *folder, const char *esc)
{
	const char *base = strrchr(folder, '/');

	if (folder[0] != '/' || strstr(folder, "//") || strstr(folder, "/./") ||
	    strstr(folder, "/../") || !base || strcmp(base + 1, esc) != 0 || base == folder)
		return ovs_err(EUCLEAN, "the index names %s as the store folder of %s; "
			       "refused: it must be <store>/%s", folder, esc, esc);
	return 0;
}

/*
 * The store root that holds the volume folder folder (its parent), opened
 * after checking it and every directory above it: root's and closed to
 * others (rule 20).  The root's path in *root when asked (malloc'ed).
 */
static int open_store_root(const char *folder, char **root)
{
	const char *slash = strrchr(folder, '/');
	char *path, *what;
	int fd;

	if (!slash || !slash[1])
		return ovs_err(EINVAL, "store folder %s: not a path", folder);
	path = slash == folder ? strdup("/") : strndup(folder, slash - folder);
	if (!path || asprintf(&what, "store %s", path) < 0) {
		free(path);
		return ovs_err(ENOMEM, "out of memory");
	}
	fd = ovs_safe_dir_open(path, what, 0);
	free(what);
	if (fd >= 0 && root)
		*root = path;
	else
		free(path);
	return fd;
}

/* Open the volume's folder from its checked store: the store and every
 * directory above it root's and closed to others, the folder too. */
static int open_store_dir(struct ovs_volume *v, const char *esc)
{
	char *what;
	int rootfd, rc;

	rc = check_folder_name(v->store, esc);
	if (rc < 0)
		return rc;
	rootfd = open_store_root(v->store, NULL);
	if (rootfd < 0)
		return rootfd;
	if (asprintf(&what, "store folder %s", v->store) < 0) {
		close(rootfd);
		return ovs_err(ENOMEM, "out of memory");
	}
	rc = ovs_safe_dir_at(rootfd, esc, what);
	free(what);
	close(rootfd);
	if (rc < 0)
		return rc;
	v->dirfd = rc;
	return 0;
}

/* ---- the index of volumes --------------------------------------------------- */

static int index_path(const char *esc, char *buf, size_t len)
{
	if ((size_t)snprintf(buf, len, "%s/%s/%s", ovs_state_dir(), INDEX_DIR, esc) >= len)
		return ovs_err(ENAMETOOLONG, "state directory path too long");
	return 0;
}

static int mkdir_if_missing(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return ovs_err(errno, "cannot create %s: %m", path);
	return 0;
}

/* The state directory and its missing parents (a build under /usr/local
 * used to keep state where no parent existed). */
static int mkdir_with_parents(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return ovs_err(ENAMETOOLONG, "%s: name too long", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		rc = mkdir_if_missing(tmp, 0755);
		if (rc < 0)
			return rc;
		*p = '/';
	}
	return mkdir_if_missing(tmp, mode);
}

/*
 * The directory sub of the state directory (the index, or the forgets
 * under way), after checking it and the state directory (and all above)
 * as a store is checked: an index entry names the store whose layers the
 * root daemon writes to.  With create, missing ones are made; without,
 * -ENOENT when there is none yet.
 */
static int state_subdir_open(const char *sub, bool create)
{
	char dir[PATH_MAX + 32];
	int sfd, dfd, rc;

	if (create) {
		rc = mkdir_with_parents(ovs_state_dir(), 0755);
		if (rc < 0)
			return rc;
	}
	snprintf(dir, sizeof(dir), "state directory %s", ovs_state_dir());
	sfd = ovs_safe_dir_open(ovs_state_dir(), dir, 0);
	if (sfd < 0)
		return sfd;
	snprintf(dir, sizeof(dir), "%s/%s", ovs_state_dir(), sub);
	if (create && mkdirat(sfd, sub, 0755) < 0 && errno != EEXIST) {
		rc = ovs_err(errno, "cannot create %s: %m", dir);
		close(sfd);
		return rc;
	}
	snprintf(dir, sizeof(dir), "state directory %s/%s", ovs_state_dir(), sub);
	dfd = ovs_safe_dir_at(sfd, sub, dir);
	close(sfd);
	return dfd;
}

static int index_open(bool create)
{
	return state_subdir_open(INDEX_DIR, create);
}

/* Point the entry esc of the state directory sub at the store folder,
 * atomically (symlink + rename). */
static int state_link_add(const char *sub, const char *esc, const char *folder)
{
	char dir[PATH_MAX], tmp[NAME_MAX + 1];
	int dfd, rc = 0;

	snprintf(dir, sizeof(dir), "%s/%s", ovs_state_dir(), sub);
	dfd = state_subdir_open(sub, true);
	if (dfd < 0)
		return dfd;
	snprintf(tmp, sizeof(tmp), ".new.%d", (int)getpid());
	unlinkat(dfd, tmp, 0);
	if (symlinkat(folder, dfd, tmp) < 0) {
		rc = ovs_err(errno, "cannot create %s/%s: %m", dir, tmp);
	} else if (renameat(dfd, tmp, dfd, esc) < 0) {
		rc = ovs_err(errno, "cannot create %s/%s: %m", dir, esc);
		unlinkat(dfd, tmp, 0);
	} else if (fsync(dfd) < 0) {
		rc = ovs_err(errno, "fsync %s: %m", dir);
	}
	close(dfd);
	return rc;
}

/* Remove the forget marker named esc (forget_mark), if any. */
static int forget_unmark_esc(const char *esc)
{
	int dfd, rc = 0;

	dfd = state_subdir_open(FORGET_DIR, false);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	if (unlinkat(dfd, esc, 0) == 0) {
		if (fsync(dfd) < 0)
			rc = ovs_err(errno, "fsync %s/%s: %m", ovs_state_dir(), FORGET_DIR);
	} else if (errno != ENOENT) {
		rc = ovs_err(errno, "cannot remove %s/%s/%s: %m", ovs_state_dir(), FORGET_DIR,
			     esc);
	}
	close(dfd);
	return rc;
}

/*
 * Every writer of an index entry (a new volume, a store found again, fsck)
 * first removes a forget marker of the same name, left by a forget killed
 * after its unindex: a marker must not outlive the forget it stands for.
 * (Dropping one of a forget under way only makes a re-run more careful:
 * without --force it refuses where the store cannot be found.)
 */
static int index_add(const char *esc, const char *folder)
{
	int rc = forget_unmark_esc(esc);

	return rc < 0 ? rc : state_link_add(INDEX_DIR, esc, folder);
}

/* ---- checks of a store ----------------------------------------------------- */

/* Overlay layers need trusted.* xattrs (opaque, escapes, origin) and
 * whiteouts; say which one is missing rather than failing later. */
static int probe_store(int dirfd, const char *store, bool *can_clone)
{
	static const char probe_a[] = ".probe-xattr", probe_wh[] = ".probe-whiteout",
			  probe_b[] = ".probe-clone";
	char data[4096];
	int fa = -1, fb = -1, rc = 0;

	*can_clone = false;
	fa = openat(dirfd, probe_a, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fa < 0)
		return ovs_err(errno, "cannot write in the store %s: %m", store);
	if (fsetxattr(fa, PROBE_XATTR, "1", 1, 0) < 0) {
		rc = ovs_err(errno, "the store %s cannot hold overlay layers: trusted.* "
			     "xattrs do not work there: %m", store);
		goto out;
	}
	if (mknodat(dirfd, probe_wh, S_IFCHR | 0600, makedev(0, 0)) < 0) {
		rc = ovs_err(errno, "the store %s cannot hold overlay layers: whiteouts "
			     "(0/0 character devices) cannot be created there: %m", store);
		goto out;
	}
	/* FICLONE needs data to share: one block */
	memset(data, 'o', sizeof(data));
	fb = openat(dirfd, probe_b, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fb < 0) {
		rc = ovs_err(errno, "cannot write in the store %s: %m", store);
		goto out;
	}
	if (write(fa, data, sizeof(data)) == (ssize_t)sizeof(data) && fsync(fa) == 0 &&
	    ioctl(fb, FICLONE, fa) == 0)
		*can_clone = true;
out:
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	unlinkat(dirfd, probe_a, 0);
	unlinkat(dirfd, probe_b, 0);
	unlinkat(dirfd, probe_wh, 0);
	return rc;
}

/* realpath of a path that may not exist yet (its parent must). */
static char *resolve_maybe_missing(const char *path)
{
	char *real = realpath(path, NULL), *parent, *slash, *out;

	if (real || errno != ENOENT)
		return real;
	parent = strdup(path);
	if (!parent)
		return NULL;
	while ((slash = strrchr(parent, '/')) && slash[1] == '\0' && slash != parent)
		*slash = '\0';
	slash = strrchr(parent, '/');
	if (!slash || !slash[1]) {
		free(parent);
		errno = ENOENT;
		return NULL;
	}
	*slash = '\0';
	real = realpath(slash == parent ? "/" : parent, NULL);
	if (!real) {
		free(parent);
		return NULL;
	}
	if (asprintf(&out, "%s/%s", strcmp(real, "/") == 0 ? "" : real, slash + 1) < 0)
		out = NULL;
	free(real);
	free(parent);
	return out;
}

/* ---- create ----------------------------------------------------------------- */

struct create_ctx {
	char *src;		/* realpath of SRC */
	char *storeroot;	/* realpath of the store (may be created) */
	struct ovs_mountinfo src_mi, store_mi;
	char esc[NAME_MAX + 1];
	struct ovs_registry reg;
};

static int check_source(struct create_ctx *c, const char *src)
{
	struct stat st;
	char **below = NULL;
	size_t nbelow = 0;
	int rc;

	if (src[0] != '/')
		return ovs_err(EINVAL, "not an absolute path");
	c->src = realpath(src, NULL);
	if (!c->src)
		return ovs_err(errno, "%m");
	if (stat(c->src, &st) < 0)
		return ovs_err(errno, "%m");
	if (!S_ISDIR(st.st_mode))
		return ovs_err(ENOTDIR, "not a directory");
	rc = ovs_mount_find(c->src, &c->src_mi);
	if (rc < 0)
		return rc;
	if (!ovs_fstype_supported(c->src_mi.fstype))
		return ovs_err(EOPNOTSUPP, "SRC is on %s, which cannot hold snapshots "
			       "(supported: " OVS_SUPPORTED_FS ")", c->src_mi.fstype);
	rc = ovs_mounts_below(c->src, &below, &nbelow);
	if (rc < 0)
		return rc;
	if (nbelow)
		rc = ovs_err(EXDEV, "SRC holds the mount point %s%s: snapshots do not cross "
			     "filesystems; unmount it or snapshot each filesystem on its own",
			     below[0], nbelow > 1 ? " and others" : "");
	ovs_strv_free(below, nbelow);
	if (rc < 0)
		return rc;
	return ovs_path_escape(c->src, c->esc, sizeof(c->esc));
}

static int check_store(struct create_ctx *c, const char *store)
{
	bool src_is_fsroot = strcmp(c->src_mi.target, c->src) == 0;
	int rc;

	if (store) {
		char *abs = NULL;

		/* relative to the working directory, made absolute (and
		 * resolved) before anything records it */
		if (store[0] != '/') {
			char *cwd = get_current_dir_name();

			if (!cwd)
				return ovs_err(errno, "store %s: working directory: %m", store);
			if (asprintf(&abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", store) < 0)
				abs = NULL;
			free(cwd);
			if (!abs)
				return ovs_err(ENOMEM, "out of memory");
		}
		c->storeroot = resolve_maybe_missing(abs ? abs : store);
		free(abs);
		if (!c->storeroot)
			return ovs_err(errno, "store %s: %m", store);
	} else {
		if (src_is_fsroot)
			return ovs_err(EINVAL, "SRC is the root of its filesystem: the store "
				       "cannot live inside it; use --store DIR on another "
				       "filesystem (copy-ups will be full copies, not clones)");
		if (asprintf(&c->storeroot, "%s/%s", strcmp(c->src_mi.target, "/") == 0 ?
			     "" : c->src_mi.target, OVS_STORE_DEFAULT) < 0)
			return ovs_err(ENOMEM, "out of memory");
	}
	if (ovs_path_inside(c->storeroot, c->src))
		return ovs_err(EINVAL, "store %s is inside the source %s; overlayfs "
			       "refuses nested layers", c->storeroot, c->src);
	if (ovs_path_inside(c->src, c->storeroot))
		return ovs_err(EINVAL, "source %s is inside the store %s", c->src, c->storeroot);

	rc = ovs_mount_find(c->storeroot, &c->store_mi);
	if (rc < 0)
		return rc;
	if (!ovs_fstype_supported(c->store_mi.fstype))
		return ovs_err(EOPNOTSUPP, "store %s is on %s, which cannot hold snapshots "
			       "(supported: " OVS_SUPPORTED_FS ")", c->storeroot,
			       c->store_mi.fstype);
	/* the same filesystem seen through another mount is still nested */
	if (src_is_fsroot && c->store_mi.devno == c->src_mi.devno)
		return ovs_err(EINVAL, "store %s is on the filesystem whose root is %s; "
			       "overlayfs refuses nested layers: use --store DIR on "
			       "another filesystem", c->storeroot, c->src);
	return 0;
}

/* A folder left by an earlier create: a complete one is a volume already
 * (re-index it: the index is the part written last); a partial one, from
 * a crash half way, is removed. */
static int check_existing(struct create_ctx *c, int rootfd, char *folder)
{
	char idx[PATH_MAX];
	struct stat st;
	int fd;

	if (index_path(c->esc, idx, sizeof(idx)) < 0)
		return -ENAMETOOLONG;
	if (lstat(idx, &st) == 0) {
		/* the store may be on a filesystem that is not mounted now:
		 * never start over on our own */
		if (stat(idx, &st) < 0)
			return ovs_err(EEXIST, "registered already, but its store "
				       "cannot be found (is the filesystem that holds it "
				       "mounted?); 'ovsnap forget --force %s' removes the "
				       "registration", c->src);
		return ovs_err(EEXIST, "already an ovsnap volume");
	}
	fd = openat(rootfd, c->esc, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (faccessat(fd, OVS_REGISTRY_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		close(fd);
		index_add(c->esc, folder);
		return ovs_err(EEXIST, "already an ovsnap volume (store %s)", folder);
	}
	close(fd);
	return ovs_remove_tree_at(rootfd, c->esc);
}

int ovs_volume_create(const char *src, const struct ovs_volume_opts *opts,
		      struct ovs_volume **out)
{
	struct create_ctx c = { 0 };
	char tmpname[NAME_MAX + 1], folder[PATH_MAX];
	struct ovs_volume *v = NULL;
	int rootfd = -1, tmpfd = -1, rc;
	bool created_root = false;
	char *what = NULL;

	rc = check_source(&c, src);
	if (rc < 0)
		goto out;
	rc = check_store(&c, opts ? opts->store : NULL);
	if (rc < 0)
		goto out;
	if ((size_t)snprintf(folder, sizeof(folder), "%s/%s", c.storeroot, c.esc) >= sizeof(folder)) {
		rc = ovs_err(ENAMETOOLONG, "store path too long");
		goto out;
	}
	/* Rule 17, before anything is made: the volume of this very folder
	 * is no other volume (check_existing says it exists). */
	rc = ovs_check_nesting(c.src, folder, folder);
	if (rc < 0)
		goto out;

	if (asprintf(&what, "store %s", c.storeroot) < 0) {
		rc = ovs_err(ENOMEM, "out of memory");
		goto out;
	}
	/* Rule 20: a store users can change, or one below a directory they
	 * can change, would let them steer the daemon's writes.  Check the
	 * directories above before making anything there. */
	if (access(c.storeroot, F_OK) < 0 && errno == ENOENT) {
		char *parent = strndup(c.storeroot, strrchr(c.storeroot, '/') - c.storeroot);

		rc = parent ? ovs_safe_dir_open(*parent ? parent : "/", what, OVS_SAFE_PARENT) :
			      ovs_err(ENOMEM, "out of memory");
		free(parent);
		if (rc < 0)
			goto out;
		close(rc);
	}
	if (mkdir(c.storeroot, 0700) == 0) {
		created_root = true;
	} else if (errno != EEXIST) {
		rc = ovs_err(errno, "cannot create the store %s: %m", c.storeroot);
		goto out;
	}
	/* mkdir made a new one root's and 0700 at most */
	rootfd = ovs_safe_dir_open(c.storeroot, what, 0);
	if (rootfd < 0) {
		rc = rootfd;
		goto fail_root;
	}
	if (created_root && (fchown(rootfd, 0, 0) < 0 || fchmod(rootfd, 0700) < 0)) {
		rc = ovs_err(errno, "store %s: %m", c.storeroot);
		goto fail_root;
	}
	/* The same for the index, before anything is made in the store. */
	rc = index_open(true);
	if (rc < 0)
		goto fail_root;
	close(rc);
	rc = check_existing(&c, rootfd, folder);
	if (rc < 0)
		goto out;

	/* Build the folder under a temporary name and rename it into place:
	 * a crash leaves either nothing or a complete volume. */
	snprintf(tmpname, sizeof(tmpname), ".creating.%d", (int)getpid());
	rc = ovs_remove_tree_at(rootfd, tmpname);
	if (rc < 0)
		goto out;
	if (mkdirat(rootfd, tmpname, 0700) < 0) {
		rc = ovs_err(errno, "cannot create %s/%s: %m", c.storeroot, tmpname);
		goto out;
	}
	tmpfd = openat(rootfd, tmpname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmpfd < 0 || mkdirat(tmpfd, OVS_LAYERS_DIR, 0700) < 0) {
		rc = ovs_err(errno, "cannot create %s/%s: %m", c.storeroot, tmpname);
		goto fail_tmp;
	}
	c.reg.source = c.src;
	snprintf(c.reg.fstype, sizeof(c.reg.fstype), "%s", c.src_mi.fstype);
	rc = ovs_fs_uuid(&c.src_mi, c.src_mi.target, c.reg.fsuuid, sizeof(c.reg.fsuuid));
	if (rc < 0)
		goto fail_tmp;
	rc = probe_store(tmpfd, c.storeroot, &c.reg.can_clone);
	if (rc < 0)
		goto fail_tmp;
	if (c.reg.can_clone && c.store_mi.devno != c.src_mi.devno) {
		/* FICLONE works inside the store, but from SRC? btrfs
		 * subvolumes differ in devno yet share the filesystem */
		char uuid[OVS_FSUUID_MAX];

		if (ovs_fs_uuid(&c.store_mi, c.store_mi.target, uuid, sizeof(uuid)) < 0 ||
		    strcmp(uuid, c.reg.fsuuid) != 0)
			c.reg.can_clone = false;
	}
	c.reg.next_id = 1;
	rc = ovs_registry_store(tmpfd, c.src, &c.reg);
	if (rc < 0)
		goto fail_tmp;
	if (fsync(tmpfd) < 0 || renameat(rootfd, tmpname, rootfd, c.esc) < 0 ||
	    fsync(rootfd) < 0) {
		rc = ovs_err(errno, "cannot create %s: %m", folder);
		goto fail_tmp;
	}
	if (created_root) {
		char *parent = strdup(c.storeroot), *slash = parent ? strrchr(parent, '/') : NULL;

		if (slash) {
			*slash = '\0';
			ovs_fsync_dir(AT_FDCWD, *parent ? parent : "/");
		}
		free(parent);
	}
	rc = index_add(c.esc, folder);
	if (rc < 0) {
		/* Unindexed, the volume would work for take but never show in
		 * list nor come back at boot: undo the folder too. */
		if (renameat(rootfd, c.esc, rootfd, tmpname) == 0)
			goto fail_tmp;
		goto out;
	}
	rc = ovs_volume_open(c.src, out ? out : &v);
	if (rc == 0 && out)
		(*out)->created_storeroot = created_root;
	if (!out)
		ovs_volume_unref(v);
	goto out;

fail_tmp:
	ovs_remove_tree_at(rootfd, tmpname);
	fsync(rootfd);
fail_root:
	if (created_root)
		unlinkat(AT_FDCWD, c.storeroot, AT_REMOVEDIR);
out:
	if (tmpfd >= 0)
		close(tmpfd);
	if (rootfd >= 0)
		close(rootfd);
	c.reg.source = NULL;
	ovs_registry_clear(&c.reg);
	ovs_mountinfo_clear(&c.src_mi);
	ovs_mountinfo_clear(&c.store_mi);
	free(c.src);
	free(c.storeroot);
	free(what);
	return rc;
}

/*
 * Undo a setup that failed after ovs_volume_create (the first activation):
 * the index entry and the store folder go, and the store root too when
 * this setup made it and nothing else is left in it.  Only a volume whose
 * registry, read again now, has no snapshots; the caller holds its lock.
 */
int ovs_volume_remove_new(struct ovs_volume *v)
{
	char esc[NAME_MAX + 1], idx[PATH_MAX], target[PATH_MAX], *parent, *slash;
	ssize_t n;
	int pfd, rc;

	/* The daemon may have registered a snapshot this process never
	 * heard of (its reply lost): then the volume is not new. */
	rc = ovs_registry_load(v);
	if (rc < 0)
		return rc;
	if (v->reg.nsnaps > 0)
		return ovs_err(EBUSY, "%s has snapshots: not removed", v->source);
	rc = ovs_path_escape(v->source, esc, sizeof(esc));
	if (rc == 0)
		rc = index_path(esc, idx, sizeof(idx));
	if (rc < 0)
		return rc;
	n = readlink(idx, target, sizeof(target) - 1);
	if (n >= 0) {
		target[n] = '\0';
		if (strcmp(target, v->store) == 0 && unlink(idx) < 0 && errno != ENOENT)
			return ovs_err(errno, "cannot remove %s: %m", idx);
	}
	pfd = open_store_root(v->store, &parent);
	if (pfd < 0)
		return pfd;
	rc = ovs_remove_tree_at(pfd, strrchr(v->store, '/') + 1);
	if (rc == 0)
		fsync(pfd);
	close(pfd);
	/* A store root this setup made, now holding no other volume. */
	if (rc == 0 && v->created_storeroot && rmdir(parent) == 0) {
		slash = strrchr(parent, '/');
		if (slash) {
			*slash = '\0';
			ovs_fsync_dir(AT_FDCWD, *parent ? parent : "/");
		}
	}
	free(parent);
	return rc;
}

int ovs_volume_indexed(const struct ovs_volume *v)
{
	char esc[NAME_MAX + 1], idx[PATH_MAX], target[PATH_MAX];
	ssize_t n;
	int rc;

	rc = ovs_path_escape(v->source, esc, sizeof(esc));
	if (rc == 0)
		rc = index_path(esc, idx, sizeof(idx));
	if (rc < 0)
		return rc;
	n = readlink(idx, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "%s: %m", idx);
	target[n] = '\0';
	return strcmp(target, v->store) == 0;
}

int ovs_volume_reindex(const struct ovs_volume *v)
{
	char esc[NAME_MAX + 1];
	int rc = ovs_path_escape(v->source, esc, sizeof(esc));

	return rc < 0 ? rc : index_add(esc, v->store);
}

/* ---- open and list --------------------------------------------------------- */

/* The store folder of source: the index first, then the default store (an
 * index lost with /var still leaves the volume reachable). */
/* The folder the index entry esc names: 0, -ENOENT (no entry, no
 * message) or another -errno with the error set. */
static int index_read(const char *esc, char *folder, size_t len)
{
	char idx[PATH_MAX];
	ssize_t n = -1;
	int rc, dfd;

	rc = index_path(esc, idx, sizeof(idx));
	if (rc < 0)
		return rc;
	dfd = index_open(false);
	if (dfd < 0 && dfd != -ENOENT)
		return dfd;
	errno = ENOENT;
	if (dfd >= 0) {
		n = readlinkat(dfd, esc, folder, len - 1);
		close(dfd);
	}
	if (n >= 0) {
		folder[n] = '\0';
		return 0;
	}
	return errno == ENOENT ? -ENOENT : ovs_err(errno, "%s: %m", idx);
}

static int find_folder(const char *source, const char *esc, char *folder, size_t len)
{
	struct ovs_mountinfo mi;
	int rc = index_read(esc, folder, len);

	if (rc != -ENOENT)
		return rc;
	if (ovs_mount_find(source, &mi) < 0)
		return ovs_err(ENOENT, "not an ovsnap volume");
	snprintf(folder, len, "%s/%s/%s", strcmp(mi.target, "/") == 0 ? "" : mi.target,
		 OVS_STORE_DEFAULT, esc);
	ovs_mountinfo_clear(&mi);
	{
		char reg[PATH_MAX + 16];

		snprintf(reg, sizeof(reg), "%s/%s", folder, OVS_REGISTRY_FILE);
		if (access(reg, F_OK) < 0 && (errno == EACCES || errno == EPERM))
			return ovs_err(errno, "%s: %m (not readable by this user)", folder);
		if (access(reg, F_OK) < 0)
			return ovs_err(ENOENT, "not an ovsnap volume");
	}
	return 0;
}

int ovs_volume_open(const char *src, struct ovs_volume **out)
{
	char esc[NAME_MAX + 1], folder[PATH_MAX];
	struct ovs_volume *v;
	char *real;
	int rc;

	if (src[0] != '/')
		return ovs_err(EINVAL, "not an absolute path");
	/*
	 * A registered source as given is that volume, not resolved again:
	 * the caller resolved it (the CLI, the delegation helper as the
	 * user), and a user who owns a folder above it may have swapped the
	 * folder for a symlink since, to have root act on another volume.
	 * Anything else is resolved; a source deleted since it was
	 * registered is still a volume.
	 */
	if (ovs_path_escape(src, esc, sizeof(esc)) == 0 &&
	    index_read(esc, folder, sizeof(folder)) == 0) {
		real = strdup(src);
		if (!real)
			return ovs_err(ENOMEM, "out of memory");
	} else {
		real = realpath(src, NULL);
		if (!real && !(real = strdup(src)))
			return ovs_err(ENOMEM, "out of memory");
		rc = ovs_path_escape(real, esc, sizeof(esc));
		if (rc == 0)
			rc = find_folder(real, esc, folder, sizeof(folder));
		if (rc < 0) {
			free(real);
			return rc;
		}
	}
	v = volume_new(real, folder);
	free(real);
	if (!v)
		return ovs_err(ENOMEM, "out of memory");
	rc = open_store_dir(v, esc);
	if (rc < 0) {
		/* EPERM is the store checks' "unsafe", with its own message. */
		if (rc == -EACCES)
			rc = ovs_err(EACCES, "store %s: %s (not readable by this user)",
				     folder, strerror(EACCES));
		else if (rc == -ENOENT && ovs_volume_forget_marked(v) == OVS_FORGET_REMOVED)
			rc = ovs_err(EBUSY, "an interrupted 'ovsnap forget' removed the store: "
				     "run 'ovsnap forget %s' again to finish", v->source);
		else if (rc == -ENOENT)
			rc = ovs_err(ENOMEDIUM, "store %s is missing (is the filesystem that "
				     "holds it mounted?)", folder);
		ovs_volume_unref(v);
		return rc;
	}
	rc = ovs_registry_load(v);
	/* The index names the folder: a volume, whatever its registry. */
	if (rc == -ENOENT && ovs_volume_forget_marked(v) == OVS_FORGET_REMOVED)
		rc = ovs_err(EBUSY, "an interrupted 'ovsnap forget' left the volume half removed: "
			     "run 'ovsnap forget %s' again to finish", v->source);
	else if (rc == -ENOENT)
		rc = ovs_err(EUCLEAN, "registry %s/%s is missing (see 'ovsnap fsck %s')", folder,
			     OVS_REGISTRY_FILE, v->source);
	if (rc < 0) {
		ovs_volume_unref(v);
		return rc;
	}
	*out = v;
	return 0;
}

static int cmp_source(const void *a, const void *b)
{
	const struct ovs_volume *va = *(struct ovs_volume *const *)a;
	const struct ovs_volume *vb = *(struct ovs_volume *const *)b;

	return strcmp(va->source, vb->source);
}

/* An index entry as a volume; one that cannot be opened still shows, with
 * v->problem saying why, so that a lost store is never silently hidden. */
static struct ovs_volume *list_entry(int dfd, const char *name)
{
	char source[PATH_MAX], folder[PATH_MAX];
	struct ovs_volume *v;
	ssize_t n;
	int rc;

	if (ovs_path_unescape(name, source, sizeof(source)) < 0)
		return NULL;
	n = readlinkat(dfd, name, folder, sizeof(folder) - 1);
	if (n < 0)
		return NULL;
	folder[n] = '\0';
	v = volume_new(source, folder);
	if (!v)
		return NULL;
	rc = open_store_dir(v, name);
	if (rc == -ENOENT || rc == -EACCES) {
		/* A user who may not read the store must not be told that
		 * it is gone. */
		if (asprintf(&v->problem, "%s", rc == -ENOENT ? "store missing" :
			     "permission denied (the store is readable by root only)") < 0)
			v->problem = NULL;
		v->store_missing = rc == -ENOENT;
	} else if (rc < 0) {
		v->problem = strdup(ovs_last_error());
	} else if (ovs_registry_load(v) < 0) {
		v->problem = strdup(ovs_last_error());
	}
	return v;
}

int ovs_volume_list(struct ovs_volume ***vols, size_t *n)
{
	char dir[PATH_MAX];
	struct ovs_volume **list = NULL;
	size_t cnt = 0;
	struct dirent *de;
	DIR *d;
	int dfd;

	*vols = NULL;
	*n = 0;
	snprintf(dir, sizeof(dir), "%s/%s", ovs_state_dir(), INDEX_DIR);
	dfd = index_open(false);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	d = fdopendir(dfd);
	if (!d) {
		int err = errno;

		close(dfd);
		return ovs_err(err, "cannot read %s: %m", dir);
	}
	while ((errno = 0, de = readdir(d))) {
		struct ovs_volume *v, **nl;

		if (de->d_name[0] == '.')
			continue;
		v = list_entry(dfd, de->d_name);
		if (!v)
			continue;
		nl = realloc(list, (cnt + 1) * sizeof(*list));
		if (!nl) {
			ovs_volume_unref(v);
			ovs_volume_list_free(list, cnt);
			closedir(d);
			return ovs_err(ENOMEM, "out of memory");
		}
		list = nl;
		list[cnt++] = v;
	}
	closedir(d);
	if (cnt)
		qsort(list, cnt, sizeof(*list), cmp_source);
	*vols = list;
	*n = cnt;
	return 0;
}

int ovs_volume_open_listed(const char *src, struct ovs_volume **out)
{
	struct ovs_volume **vols;
	char *saved;		/* whole: it may name a path of any length */
	size_t n;
	int rc;

	rc = ovs_volume_open(src, out);
	if (rc == 0 || rc == -ENOENT)
		return rc;
	saved = strdup(ovs_last_error());
	if (ovs_volume_list(&vols, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(ovs_volume_source(vols[i]), src) == 0 && vols[i]->problem) {
				*out = ovs_volume_ref(vols[i]);
				ovs_volume_list_free(vols, n);
				free(saved);
				return 0;
			}
		}
		ovs_volume_list_free(vols, n);
	}
	rc = ovs_err(-rc, "%s", saved ? saved : "out of memory");
	free(saved);
	return rc;
}

void ovs_volume_list_free(struct ovs_volume **vols, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ovs_volume_unref(vols[i]);
	free(vols);
}

/* ---- forgetting a volume (ovsnap forget) ------------------------------------ */

/*
 * A forget goes in steps that each leave a state the next run recognises:
 * the intent "forget" in the store folder (every other command then
 * refuses the volume), the layers one by one, the other files of the
 * folder, the folder itself (registry, intent and lock last), and the
 * index entry at the very end, so that the volume can always be found
 * again until nothing of it is left.
 */

int ovs_volume_open_remains(const char *src, struct ovs_volume **out)
{
	char esc[NAME_MAX + 1], folder[PATH_MAX];
	char *saved = NULL;	/* whole: it may name a path of any length */
	struct ovs_volume *v;
	int rc;

	rc = ovs_volume_open(src, out);
	if (rc == 0)
		return 0;
	if (src[0] != '/')
		return ovs_err(EINVAL, "not an absolute path");
	if (!(saved = strdup(ovs_last_error())))
		return ovs_err(ENOMEM, "out of memory");
	rc = ovs_path_escape(src, esc, sizeof(esc));
	if (rc == 0)
		rc = find_folder(src, esc, folder, sizeof(folder));
	if (rc == 0)
		rc = check_folder_name(folder, esc);
	if (rc < 0)
		goto out;
	v = volume_new(src, folder);
	if (!v) {
		rc = ovs_err(ENOMEM, "out of memory");
		goto out;
	}
	rc = open_store_dir(v, esc);
	if (rc < 0 && rc != -ENOENT) {
		ovs_volume_unref(v);
		goto out;
	}
	if (rc == -ENOENT) {
		v->problem = strdup("store missing");
		v->store_missing = true;
	} else {
		v->problem = saved;
		saved = NULL;
	}
	*out = v;
	rc = 0;
out:
	free(saved);
	return rc;
}

/*
 * The forget marker: an entry of the state directory, named as the
 * volume's index entry.  It points at the store folder once the forget
 * has recorded its intent in it, and at FORGET_REMOVED and the folder
 * once only registry, intent and lock are left in it; the forget removes
 * it after the index entry.  It tells a store folder that a forget
 * removed from one that cannot be reached (on a filesystem not mounted,
 * or a --store directory gone): only the first is a forget to finish
 * (ovs_volume_forget_marked).
 */
static int forget_mark(const struct ovs_volume *v, bool removed)
{
	char esc[NAME_MAX + 1], target[PATH_MAX + sizeof(FORGET_REMOVED)];
	int rc = ovs_path_escape(v->source, esc, sizeof(esc));

	if (rc < 0)
		return rc;
	snprintf(target, sizeof(target), "%s%s", removed ? FORGET_REMOVED : "", v->store);
	return state_link_add(FORGET_DIR, esc, target);
}

/* Whether the folder's intent is a forget (0 no, 1 yes, -errno). */
static int forgetting(struct ovs_volume *v)
{
	char text[256];
	int rc = ovs_intent_read(v, text, sizeof(text));

	if (rc < 0)
		return rc;
	return strcmp(text, "forget") == 0;
}

int ovs_volume_forget_layers(struct ovs_volume *v, void (*step)(void))
{
	struct dirent *de;
	DIR *d;
	int fd, rc;

	if (v->dirfd < 0)
		return 0;
	if (v->lockfd < 0)
		return ovs_err(EINVAL, "forget %s: the volume is not locked", v->source);
	rc = forgetting(v);
	if (rc == 0)
		rc = ovs_intent_write(v, "forget");
	/* After the intent: a marker always means a forget that began (and
	 * one that says the snapshots are gone stays so). */
	if (rc >= 0 && (rc = ovs_volume_forget_marked(v)) >= 0 && rc != OVS_FORGET_REMOVED)
		rc = forget_mark(v, false);
	if (rc < 0)
		return rc;
	if (step)
		step();
	/* The layers one by one: the biggest part, and a crash in between
	 * leaves fewer. */
	fd = openat(v->dirfd, OVS_LAYERS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return ovs_err(errno, "cannot open %s/%s: %m", v->store, OVS_LAYERS_DIR);
	if (fd >= 0) {
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return ovs_err(errno, "cannot read %s/%s: %m", v->store, OVS_LAYERS_DIR);
		}
		while ((errno = 0, de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			rc = ovs_remove_tree_at(dirfd(d), de->d_name);
			if (rc < 0) {
				closedir(d);
				return ovs_err_keep(-rc, "forget %s: cannot remove a layer", v->source);
			}
			fsync(dirfd(d));
			if (step)
				step();
		}
		rc = errno ? ovs_err(errno, "cannot read %s/%s: %m", v->store, OVS_LAYERS_DIR) : 0;
		closedir(d);
		if (rc < 0)
			return rc;
	}
	/* Everything else but what says what this folder is. */
	d = NULL;
	fd = openat(v->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		d = fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return ovs_err(errno, "cannot read %s: %m", v->store);
	}
	while ((errno = 0, de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, OVS_REGISTRY_FILE) == 0 ||
		    strcmp(de->d_name, OVS_INTENT_FILE) == 0 ||
		    strcmp(de->d_name, OVS_LOCK_FILE) == 0)
			continue;
		rc = ovs_remove_tree_at(v->dirfd, de->d_name);
		if (rc < 0) {
			closedir(d);
			return ovs_err_keep(-rc, "forget %s: cannot empty %s", v->source, v->store);
		}
	}
	rc = errno ? ovs_err(errno, "cannot read %s: %m", v->store) : 0;
	closedir(d);
	if (rc < 0)
		return rc;
	if (fsync(v->dirfd) < 0)
		return ovs_err(errno, "fsync %s: %m", v->store);
	/* Nothing of the snapshots is left (checked, not assumed from the
	 * loops): a re-run that cannot find the folder from here on has
	 * only the index entry to remove. */
	if (faccessat(v->dirfd, OVS_LAYERS_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return ovs_err(EBUSY, "forget %s: %s/%s is still there", v->source, v->store,
			       OVS_LAYERS_DIR);
	rc = forget_mark(v, true);
	if (rc < 0)
		return rc;
	if (step)
		step();
	return 0;
}

int ovs_volume_forget_store(struct ovs_volume *v)
{
	static const char *const last[] = { OVS_REGISTRY_FILE, OVS_INTENT_FILE, OVS_LOCK_FILE };
	const char *base = strrchr(v->store, '/') + 1;
	char *root = NULL;
	int rootfd, rc = 0;

	if (v->dirfd < 0)
		return 0;
	/* Only a folder the forget has emptied: no layers left, and the
	 * intent still there or already gone together with the registry. */
	if (faccessat(v->dirfd, OVS_LAYERS_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
	    (faccessat(v->dirfd, OVS_REGISTRY_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
	     forgetting(v) != 1))
		return ovs_err(EBUSY, "%s is not a store being forgotten: not removed", v->store);
	for (size_t i = 0; i < sizeof(last) / sizeof(last[0]); i++) {
		if (unlinkat(v->dirfd, last[i], 0) < 0 && errno != ENOENT)
			return ovs_err(errno, "cannot remove %s/%s: %m", v->store, last[i]);
		if (fsync(v->dirfd) < 0)
			return ovs_err(errno, "fsync %s: %m", v->store);
	}
	rootfd = open_store_root(v->store, &root);
	if (rootfd < 0)
		return rootfd;
	if (unlinkat(rootfd, base, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		rc = ovs_err(errno, "cannot remove %s: %m", v->store);
	} else {
		close(v->dirfd);
		v->dirfd = -1;
		fsync(rootfd);
		/* The default store root goes with its last volume; a --store
		 * directory is the admin's and stays. */
		if (strcmp(strrchr(root, '/') + 1, OVS_STORE_DEFAULT) == 0 &&
		    rmdir(root) == 0) {
			char *slash = strrchr(root, '/');

			*slash = '\0';
			ovs_fsync_dir(AT_FDCWD, *root ? root : "/");
		}
	}
	close(rootfd);
	free(root);
	return rc;
}

/*
 * Read the entry of v in the state directory sub into target (of len
 * bytes), its name into esc (NAME_MAX + 1 bytes): 1, or 0 when there is
 * none (nor the directory), or -errno.  *dfd: the directory, left open
 * for the caller when it is there (else -1).
 */
static int state_link_read(const struct ovs_volume *v, const char *sub,
			   char esc[NAME_MAX + 1], char *target, size_t len, int *dfd)
{
	ssize_t n;
	int rc;

	*dfd = -1;
	rc = ovs_path_escape(v->source, esc, NAME_MAX + 1);
	if (rc < 0)
		return rc;
	rc = state_subdir_open(sub, false);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	*dfd = rc;
	n = readlinkat(*dfd, esc, target, len - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "cannot read %s/%s/%s: %m",
						     ovs_state_dir(), sub, esc);
	target[n] = '\0';
	return 1;
}

int ovs_volume_unindex(struct ovs_volume *v)
{
	char esc[NAME_MAX + 1], target[PATH_MAX];
	int dfd, rc;

	rc = state_link_read(v, INDEX_DIR, esc, target, sizeof(target), &dfd);
	if (rc == 1) {
		rc = 0;
		if (strcmp(target, v->store) != 0)
			rc = ovs_err(EBUSY, "the index names another store for %s (%s): not removed",
				     v->source, target);
		else if (unlinkat(dfd, esc, 0) < 0)
			rc = ovs_err(errno, "cannot remove the index entry of %s: %m", v->source);
		else if (fsync(dfd) < 0)
			rc = ovs_err(errno, "fsync %s/%s: %m", ovs_state_dir(), INDEX_DIR);
	}
	if (dfd >= 0)
		close(dfd);
	return rc;
}

int ovs_volume_forget_marked(const struct ovs_volume *v)
{
	char esc[NAME_MAX + 1], target[PATH_MAX + sizeof(FORGET_REMOVED)];
	const size_t plen = strlen(FORGET_REMOVED);
	int dfd, rc;

	rc = state_link_read(v, FORGET_DIR, esc, target, sizeof(target), &dfd);
	if (dfd >= 0)
		close(dfd);
	if (rc != 1)
		return rc;
	if (strcmp(target, v->store) == 0)
		return OVS_FORGET_BEGUN;
	if (strncmp(target, FORGET_REMOVED, plen) == 0 && strcmp(target + plen, v->store) == 0)
		return OVS_FORGET_REMOVED;
	return 0;
}

int ovs_volume_forget_unmark(const struct ovs_volume *v)
{
	char esc[NAME_MAX + 1];
	int rc = ovs_path_escape(v->source, esc, sizeof(esc));

	return rc < 0 ? rc : forget_unmark_esc(esc);
}
