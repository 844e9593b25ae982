/*
 * fuse-pt-modes — a reproducer for the kernel's FUSE io modes (issue 12):
 * what happens when opens of one inode get different answers (kernel
 * passthrough, FOPEN_DIRECT_IO, both, or the page cache).  Not a
 * benchmark and not a test: bench/fuse-pt-modes.sh drives it and prints
 * each case's result on the running kernel, which ovsnapd(8)'s "FUSE
 * passthrough" section quotes.
 *
 *   fuse-pt-modes [--allow-mmap] DIR MOUNTPOINT CTLFILE
 *
 * Serves the regular files directly in DIR (no folders, no creates).
 * Every OPEN reads the first byte of CTLFILE and answers with it:
 *   p  FOPEN_PASSTHROUGH (one backing file per inode, shared by its opens)
 *   P  FOPEN_PASSTHROUGH | FOPEN_DIRECT_IO
 *   d  FOPEN_DIRECT_IO
 *   c  the page cache (no flag)
 *   r  as p, then "retire" the node: later LOOKUPs of its name get a new
 *      node id (a second FUSE inode of the same file, in no mode yet) and
 *      the kernel is told to drop the name's dentry
 *   R  as r, without telling the kernel (a LOOKUP that raced the retiring)
 *   E  on a retired node: p for a read-only open, else ESTALE (the kernel
 *      retries an open that fails with ESTALE once, revalidating the path)
 * --allow-mmap negotiates FUSE_DIRECT_IO_ALLOW_MMAP.  Each READ, WRITE,
 * SETATTR, FALLOCATE, FSYNC, OPEN and RELEASE that reaches this process
 * is logged on stderr, so the driver can tell what bypassed it.
 * Needs libfuse 3.17.1+ and CAP_SYS_ADMIN (backing files).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_FUSE_PASSTHROUGH
#define MAXN 256

struct node {
	ino_t sino;		/* inode number in DIR; 0: free slot */
	char name[256];
	int backing_id, npt;
	int retired;		/* LOOKUPs of name get another node */
};

static struct node nodes[MAXN];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int dirfd_, allow_mmap;
static const char *ctl;
static struct fuse_session *se_;

#define INO(i)	((fuse_ino_t)(i) + 2)
#define NODE(ino) (&nodes[(ino) - 2])

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void pm_init(void *u, struct fuse_conn_info *conn)
{
	(void)u;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (!fuse_set_feature_flag(conn, FUSE_CAP_PASSTHROUGH))
		logf_("INIT passthrough not offered");
	if (allow_mmap && !fuse_set_feature_flag(conn, FUSE_CAP_DIRECT_IO_ALLOW_MMAP))
		logf_("INIT direct_io_allow_mmap not offered");
	conn->max_backing_stack_depth = 1;
}

static int stat_name(const char *name, struct stat *st)
{
	return fstatat(dirfd_, name, st, AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
}

static void pm_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int i, freei = -1, err;

	memset(&e, 0, sizeof(e));
	if (parent != FUSE_ROOT_ID || strlen(name) >= 256) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	err = stat_name(name, &e.attr);
	if (err || !S_ISREG(e.attr.st_mode)) {
		fuse_reply_err(req, err ? err : ENOENT);
		return;
	}
	pthread_mutex_lock(&lock);
	for (i = 0; i < MAXN; i++) {
		if (nodes[i].sino == e.attr.st_ino && !nodes[i].retired)
			break;
		if ((!nodes[i].sino || nodes[i].retired == 2) && freei < 0)
			freei = i;
	}
	if (i == MAXN) {
		i = freei;
		memset(&nodes[i], 0, sizeof(nodes[i]));
		nodes[i].sino = e.attr.st_ino;
		strcpy(nodes[i].name, name);
	}
	pthread_mutex_unlock(&lock);
	e.ino = INO(i);
	logf_("LOOKUP %s -> node %d", name, i);
	/* as ovsnapd: names and attributes cached for a day */
	e.attr_timeout = e.entry_timeout = 86400;
	fuse_reply_entry(req, &e);
}

static void pm_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	if (ino == FUSE_ROOT_ID)
		err = fstat(dirfd_, &st) < 0 ? errno : 0;
	else
		err = stat_name(NODE(ino)->name, &st);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	fuse_reply_attr(req, &st, 86400);
}

static void pm_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	int fd = fi ? (int)fi->fh : openat(dirfd_, NODE(ino)->name, O_WRONLY);

	logf_("SETATTR %s valid=%#x size=%lld", NODE(ino)->name, valid,
	      (long long)attr->st_size);
	if ((valid & FUSE_SET_ATTR_SIZE) && ftruncate(fd, attr->st_size) < 0) {
		fuse_reply_err(req, errno);
	} else if ((valid & FUSE_SET_ATTR_MODE) && fchmod(fd, attr->st_mode) < 0) {
		fuse_reply_err(req, errno);
	} else {
		if (!fi)
			close(fd);
		pm_getattr(req, ino, NULL);
		return;
	}
	if (!fi)
		close(fd);
}

static void *inval_name(void *arg)
{
	struct node *n = arg;
	int rc = fuse_lowlevel_notify_inval_entry(se_, FUSE_ROOT_ID, n->name, strlen(n->name));

	logf_("INVAL %s: %d", n->name, rc);
	return NULL;
}

static void pm_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = NODE(ino);
	char mode = 'c';
	int fd, cfd;

	cfd = open(ctl, O_RDONLY);
	if (cfd >= 0) {
		if (read(cfd, &mode, 1) != 1)
			mode = 'c';
		close(cfd);
	}
	if (mode == 'E') {
		if (!n->retired)
			mode = 'c';
		else if ((fi->flags & O_ACCMODE) == O_RDONLY)
			mode = 'p';
		else {
			logf_("OPEN %s flags=%#o: ESTALE (node retired)", n->name, fi->flags);
			fuse_reply_err(req, ESTALE);
			return;
		}
	}
	fd = openat(dirfd_, n->name, fi->flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL));
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 0;
	fi->direct_io = mode == 'd' || mode == 'P';
	if (mode == 'p' || mode == 'P' || mode == 'r' || mode == 'R') {
		pthread_mutex_lock(&lock);
		if (!n->backing_id) {
			int bfd = openat(dirfd_, n->name, O_RDONLY);

			n->backing_id = fuse_passthrough_open(req, bfd);
			close(bfd);
		}
		if (n->backing_id > 0) {
			n->npt++;
			fi->backing_id = n->backing_id;
		} else {
			logf_("OPEN %s: no backing file: %m", n->name);
			n->backing_id = 0;
		}
		pthread_mutex_unlock(&lock);
	}
	logf_("OPEN %s flags=%#o mode=%c", n->name, fi->flags, mode);
	if (mode == 'r' || mode == 'R')
		n->retired = 1;
	fuse_reply_open(req, fi);
	if (mode == 'r') {
		pthread_t t;

		/* not from this thread: an O_CREAT open holds the folder's
		 * lock, which the invalidation takes */
		if (pthread_create(&t, NULL, inval_name, n) == 0)
			pthread_detach(t);
	}
}

static void pm_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = NODE(ino);

	logf_("RELEASE %s%s", n->name, fi->backing_id ? " (passthrough)" : "");
	pthread_mutex_lock(&lock);
	if (fi->backing_id && --n->npt == 0) {
		fuse_passthrough_close(req, n->backing_id);
		n->backing_id = 0;
	}
	pthread_mutex_unlock(&lock);
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pm_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf = malloc(size);
	ssize_t n = pread((int)fi->fh, buf, size, off);

	logf_("READ %s off=%lld size=%zu", NODE(ino)->name, (long long)off, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void pm_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	ssize_t n = pwrite((int)fi->fh, buf, size, off);

	logf_("WRITE %s off=%lld size=%zu", NODE(ino)->name, (long long)off, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pm_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	logf_("FSYNC %s", NODE(ino)->name);
	fuse_reply_err(req, (datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh)) < 0 ?
			    errno : 0);
}

static void pm_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	logf_("FALLOCATE %s mode=%d off=%lld len=%lld", NODE(ino)->name, mode,
	      (long long)off, (long long)len);
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) < 0 ? errno : 0);
}

static void pm_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void pm_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino;
	(void)size;
	(void)off;
	(void)fi;
	fuse_reply_buf(req, NULL, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.init = pm_init,
	.lookup = pm_lookup,
	.getattr = pm_getattr,
	.setattr = pm_setattr,
	.open = pm_open,
	.release = pm_release,
	.read = pm_read,
	.write = pm_write,
	.fsync = pm_fsync,
	.fallocate = pm_fallocate,
	.flush = pm_flush,
	.readdir = pm_readdir,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "allow_other,fsname=fuse-pt-modes", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_loop_config *cfg;
	struct fuse_session *se;
	int rc = 1;

	if (argc == 5 && strcmp(argv[1], "--allow-mmap") == 0) {
		allow_mmap = 1;
		argv++;
		argc--;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: fuse-pt-modes [--allow-mmap] DIR MOUNTPOINT CTLFILE\n");
		return 2;
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	dirfd_ = open(argv[1], O_PATH | O_DIRECTORY);
	if (dirfd_ < 0) {
		fprintf(stderr, "fuse-pt-modes: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	ctl = argv[3];
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	se_ = se;
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
#else
int main(void)
{
	fputs("fuse-pt-modes: built against libfuse < 3.17.1 (no passthrough API)\n", stderr);
	return 77;
}
#endif
