/*
 * fuse-passthrough — a plain libfuse passthrough of one directory, with
 * nothing to preserve, no barrier, no identity switch and no name
 * tracking: what a workload costs in FUSE round trips alone.  It mounts
 * the way ovsnapd does (allow_other, default_permissions, multi-threaded,
 * files opened with noflush, entries, attributes and negative lookups
 * cached for a day, spliced read replies; libfuse's own loop where ovsnapd
 * has its own), so the
 * benchmarks can tell the cost of FUSE on this kernel and libfuse from
 * what ovsnapd adds to it.
 *
 *   fuse-passthrough [--dir-fds] [--readdirplus] [--io-uring] DIR MOUNTPOINT
 *                                     (stays in the foreground; umount ends it)
 *
 * --dir-fds: only directories keep an O_PATH descriptor; any other inode
 * is its parent's descriptor and its name (the first name it was looked
 * up by), stat'ed and opened relative to the parent.  A walk of more
 * files than RLIMIT_NOFILE allows (bench/view-walk-bench.sh: 100,000
 * files, where the hard limit may be 20,000) then works, at one fstatat
 * per LOOKUP instead of an openat and an fstat.  Without renames (which
 * this baseline does not do) the name stays right until it is unlinked.
 *
 * --readdirplus: answer READDIRPLUS (every chunk, not the kernel's "auto"
 * choice), each entry with the attributes a LOOKUP would give, as
 * ovsnap-viewd does: the floor of a walk through FUSE, where the default
 * (plain READDIR, then a LOOKUP per entry) is what most FUSE servers do.
 *
 * --io-uring: ask for FUSE over io_uring (libfuse 3.18+, HAVE_FUSE_URING):
 * the session gets -o io_uring, and when the kernel offers it (its
 * enable_uring parameter is Y) libfuse serves requests from one ring thread
 * per CPU ("fuse-ring-N") instead of the /dev/fuse loop.  Whether the
 * kernel offered it goes to stderr at INIT; bench/uring-bench.sh checks the
 * ring threads exist.  Without the option io_uring is refused, even if
 * libfuse's FUSE_URING_ENABLE is in the environment: the baseline stays the
 * plain request loop.
 *
 * A baseline for bench/ only, no filesystem to rely on: no locks,
 * links or symlinks, renames that do not update cached nodes (enough for
 * bench/metadata-bench.sh), and root's identity for every request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CACHE_TIMEOUT	86400.0
#define NBUCKETS	(1 << 16)

struct node {
	struct node *next;
	ino_t ino;
	dev_t dev;
	int fd;			/* O_PATH, or -1 (--dir-fds, not a directory) */
	uint64_t nlookup;
	struct node *parent;	/* fd == -1: holds one lookup reference */
	char *name;		/* fd == -1: the name in parent */
};

static int dir_fds_only, want_readdirplus, want_uring;

static struct node root;
static struct node *buckets[NBUCKETS];
static pthread_mutex_t nodes_lock = PTHREAD_MUTEX_INITIALIZER;

static struct node *node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &root : (struct node *)(uintptr_t)ino;
}

static size_t bucket(ino_t ino)
{
	return (ino * 0x9e3779b97f4a7c15ULL >> 32) & (NBUCKETS - 1);
}

/* The node of the object fd refers to (fd -1: name in parent), one more
 * lookup reference on it. */
static struct node *node_get(int fd, const struct stat *st, struct node *parent,
			     const char *name)
{
	struct node *n;

	pthread_mutex_lock(&nodes_lock);
	for (n = buckets[bucket(st->st_ino)]; n; n = n->next)
		if (n->ino == st->st_ino && n->dev == st->st_dev)
			break;
	if (n) {
		if (fd >= 0)
			close(fd);
	} else {
		n = calloc(1, sizeof(*n));
		if (n && fd < 0 && !(n->name = strdup(name))) {
			free(n);
			n = NULL;
		}
		if (!n) {
			pthread_mutex_unlock(&nodes_lock);
			if (fd >= 0)
				close(fd);
			return NULL;
		}
		n->ino = st->st_ino;
		n->dev = st->st_dev;
		n->fd = fd;
		if (fd < 0) {
			n->parent = parent;
			parent->nlookup++;
		}
		n->next = buckets[bucket(st->st_ino)];
		buckets[bucket(st->st_ino)] = n;
	}
	n->nlookup++;
	pthread_mutex_unlock(&nodes_lock);
	return n;
}

static void node_forget(struct node *n, uint64_t nlookup)
{
	struct node **pp, *parent;

	if (n == &root)
		return;
	pthread_mutex_lock(&nodes_lock);
	n->nlookup -= nlookup < n->nlookup ? nlookup : n->nlookup;
	while (n != &root && n->nlookup == 0) {
		for (pp = &buckets[bucket(n->ino)]; *pp != n; pp = &(*pp)->next)
			;
		*pp = n->next;
		parent = n->parent;
		if (n->fd >= 0)
			close(n->fd);
		free(n->name);
		free(n);
		if (!parent)
			break;
		n = parent;
		n->nlookup--;
	}
	pthread_mutex_unlock(&nodes_lock);
}

/* A path naming n for path-based calls: /proc/self/fd/FD[/NAME]. */
static void node_proc(const struct node *n, char *buf, size_t len)
{
	if (n->fd >= 0)
		snprintf(buf, len, "/proc/self/fd/%d", n->fd);
	else
		snprintf(buf, len, "/proc/self/fd/%d/%s", n->parent->fd, n->name);
}

/* A descriptor on n's filesystem (for statfs). */
static int node_anyfd(const struct node *n)
{
	return n->fd >= 0 ? n->fd : n->parent->fd;
}

static int entry_of(struct node *parent, const char *name, struct fuse_entry_param *e)
{
	struct node *n;
	int fd;

	memset(e, 0, sizeof(*e));
	if (dir_fds_only) {
		if (fstatat(parent->fd, name, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
			return errno;
		fd = -1;
		if (S_ISDIR(e->attr.st_mode)) {
			fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY);
			if (fd < 0)
				return errno;
		}
		n = node_get(fd, &e->attr, parent, name);
		goto got;
	}
	fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;

		close(fd);
		return err;
	}
	n = node_get(fd, &e->attr, parent, name);
got:
	if (!n)
		return ENOMEM;
	e->ino = (fuse_ino_t)(uintptr_t)n;
	e->attr_timeout = e->entry_timeout = CACHE_TIMEOUT;
	return 0;
}

static void reply_entry_or_err(fuse_req_t req, int err, const struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, e);
}

static void ff_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_EXPORT_SUPPORT |
			FUSE_CAP_HANDLE_KILLPRIV | FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
	conn->time_gran = 1;
	if (want_readdirplus && (conn->capable & FUSE_CAP_READDIRPLUS)) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	} else {
		conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	}
#ifdef HAVE_FUSE_URING
	/* Through conn->want like every flag above (the bit is one of its
	 * 32): libfuse drops every change to conn->want, logging "Both
	 * conn->want_ext and conn->want are set", if init changes both. */
	if (!want_uring)
		conn->want &= ~FUSE_CAP_OVER_IO_URING;
	else if (conn->capable & FUSE_CAP_OVER_IO_URING)
		conn->want |= FUSE_CAP_OVER_IO_URING;
	if (want_uring)
		fprintf(stderr, "fuse-passthrough: io_uring %s\n",
			(conn->capable & FUSE_CAP_OVER_IO_URING) ? "offered by the kernel, requested" :
			"not offered by the kernel (/sys/module/fuse/parameters/enable_uring is N?)");
#endif
}

static void ff_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = entry_of(node_of(parent), name, &e);

	if (err == ENOENT) {
		e.entry_timeout = CACHE_TIMEOUT;
		err = 0;
	}
	reply_entry_or_err(req, err, &e);
}

static void ff_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	node_forget(node_of(ino), nlookup);
	fuse_reply_none(req);
}

static void ff_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		node_forget(node_of(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void ff_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	struct node *n = node_of(ino);

	if ((n->fd >= 0 ? fstatat(n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
			: fstatat(n->parent->fd, n->name, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

static void ff_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	char proc[64 + 256];

	node_proc(node_of(ino), proc, sizeof(proc));
	if ((valid & FUSE_SET_ATTR_MODE) && chmod(proc, attr->st_mode) < 0)
		goto fail;
	if ((valid & FUSE_SET_ATTR_SIZE) &&
	    (fi ? ftruncate((int)fi->fh, attr->st_size) : truncate(proc, attr->st_size)) < 0)
		goto fail;
	ff_getattr(req, ino, fi);
	return;
fail:
	fuse_reply_err(req, errno);
}

static void ff_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	int err = 0;

	if (mkdirat(node_of(parent)->fd, name, mode) < 0)
		err = errno;
	if (!err)
		err = entry_of(node_of(parent), name, &e);
	reply_entry_or_err(req, err, &e);
}

static void ff_remove(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	fuse_reply_err(req, unlinkat(node_of(parent)->fd, name, flags) < 0 ? errno : 0);
}

static void ff_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ff_remove(req, parent, name, 0);
}

static void ff_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	ff_remove(req, parent, name, AT_REMOVEDIR);
}

static void ff_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (syscall(SYS_renameat2, node_of(parent)->fd, name, node_of(newparent)->fd,
		    newname, flags) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_err(req, 0);
}

static void ff_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char proc[64 + 256];
	int fd;

	node_proc(node_of(ino), proc, sizeof(proc));
	fd = open(proc, fi->flags & ~O_NOFOLLOW);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void ff_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd, err;

	fd = openat(node_of(parent)->fd, name, (fi->flags | O_CREAT) & ~O_NOFOLLOW, mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = entry_of(node_of(parent), name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->noflush = 1;
	if (fuse_reply_create(req, &e, fi) < 0) {
		node_forget(node_of(e.ino), 1);
		close(fd);
	}
}

static void ff_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	(void)ino;
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = (int)fi->fh;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void ff_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t n;

	(void)ino;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void ff_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) < 0 ? errno : 0);
}

static void ff_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void ff_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char proc[64 + 256], *buf = size ? malloc(size) : NULL;
	ssize_t n;

	node_proc(node_of(ino), proc, sizeof(proc));
	n = getxattr(proc, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void ff_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int fd = openat(node_of(ino)->fd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);

	if (!d) {
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void ff_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	struct dirent *de;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	seekdir(d, off);
	while ((de = readdir(d))) {
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)DTTOIF(de->d_type) };
		size_t len = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st,
					       telldir(d));

		if (len > size - used)
			break;
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* Entries with their attributes, one lookup reference each (--readdirplus). */
static void ff_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	struct dirent *de;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	seekdir(d, off);
	while ((de = readdir(d))) {
		struct fuse_entry_param e = { 0 };
		bool dot = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
		size_t len;

		if (dot) {
			e.attr.st_ino = de->d_ino;
			e.attr.st_mode = (mode_t)DTTOIF(de->d_type);
		} else if (entry_of(node_of(ino), de->d_name, &e) != 0) {
			continue;
		}
		len = fuse_add_direntry_plus(req, buf + used, size - used, de->d_name, &e,
					     telldir(d));
		if (len > size - used) {
			if (!dot)
				node_forget(node_of(e.ino), 1);
			break;
		}
		used += len;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ff_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	closedir((DIR *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void ff_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	if (fstatvfs(node_anyfd(node_of(ino)), &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.init = ff_init,
	.lookup = ff_lookup,
	.forget = ff_forget,
	.forget_multi = ff_forget_multi,
	.getattr = ff_getattr,
	.setattr = ff_setattr,
	.mkdir = ff_mkdir,
	.unlink = ff_unlink,
	.rmdir = ff_rmdir,
	.rename = ff_rename,
	.open = ff_open,
	.create = ff_create,
	.read = ff_read,
	.write_buf = ff_write_buf,
	.fsync = ff_fsync,
	.release = ff_release,
	.getxattr = ff_getxattr,
	.opendir = ff_opendir,
	.readdir = ff_readdir,
	.readdirplus = ff_readdirplus,
	.releasedir = ff_releasedir,
	.statfs = ff_statfs,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o",
			  "allow_other,default_permissions,fsname=fuse-passthrough", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	struct stat st;
	int rc = 1;

	for (; argc > 3 && strncmp(argv[1], "--", 2) == 0; argv++, argc--) {
		if (strcmp(argv[1], "--dir-fds") == 0)
			dir_fds_only = 1;
		else if (strcmp(argv[1], "--readdirplus") == 0)
			want_readdirplus = 1;
		else if (strcmp(argv[1], "--io-uring") == 0)
			want_uring = 1;
		else
			break;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: fuse-passthrough [--dir-fds] [--readdirplus] [--io-uring] "
			"DIR MOUNTPOINT\n");
		return 2;
	}
#ifdef HAVE_FUSE_URING
	if (want_uring)
		fargv[2] = "allow_other,default_permissions,fsname=fuse-passthrough,io_uring";
#else
	if (want_uring) {
		fprintf(stderr, "fuse-passthrough: --io-uring: built against libfuse < 3.18\n");
		return 2;
	}
#endif
	root.fd = open(argv[1], O_PATH | O_DIRECTORY);
	if (root.fd < 0 || fstat(root.fd, &st) < 0) {
		fprintf(stderr, "fuse-passthrough: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	root.ino = st.st_ino;
	root.dev = st.st_dev;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) == 0 && fuse_session_mount(se, argv[2]) == 0) {
		cfg = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		rc = fuse_session_loop_mt(se, cfg) ? 1 : 0;
		fuse_loop_cfg_destroy(cfg);
		fuse_session_unmount(se);
	}
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return rc;
}
