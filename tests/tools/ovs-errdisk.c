/*
 * ovs-errdisk — a disk image whose writes fail on demand, for tests of
 * write errors (device-mapper's dm-error and dm-flakey, the block layer's
 * fail_make_request and XFS's errortag are all missing on some kernels).
 * A FUSE filesystem with one file, "disk", backed by IMAGE; a loop device
 * over MOUNTPOINT/disk carries the filesystem under test.
 *
 * Usage: ovs-errdisk IMAGE ARMFILE MOUNTPOINT
 *
 * While ARMFILE exists, every write whose data holds the 16 bytes
 * "OVSNAP-EIO-MARK!" fails with EIO (the loop device fails the bio, the
 * filesystem above sees a failed writeback): a test writes the marker
 * into the file data it wants lost, and metadata (which never holds it)
 * keeps working.  Prints "ok" once mounted, serves until unmounted.
 */
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARK "OVSNAP-EIO-MARK!"
#define DISK_INO 2

static int image_fd;
static const char *arm_file;

static int disk_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (ino != DISK_INO)
		return ENOENT;
	if (fstat(image_fd, st) < 0)
		return errno;
	st->st_ino = ino;
	st->st_mode = S_IFREG | 0600;
	return 0;
}

static void ed_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .ino = DISK_INO, .attr_timeout = 1, .entry_timeout = 1 };

	if (parent != FUSE_ROOT_ID || strcmp(name, "disk")) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	disk_stat(DISK_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void ed_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err = disk_stat(ino, &st);

	(void)fi;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, 1.0);
}

static void ed_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	fi->direct_io = 1;	/* every write reaches ed_write */
	fuse_reply_open(req, fi);
}

static void ed_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	(void)ino;
	(void)fi;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = image_fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, 0);
}

static void ed_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	ssize_t n;

	(void)ino;
	(void)fi;
	if (access(arm_file, F_OK) == 0 && memmem(data, size, MARK, strlen(MARK))) {
		fuse_reply_err(req, EIO);
		return;
	}
	n = pwrite(image_fd, data, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, n);
}

static void ed_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, 0);	/* the image's durability is not under test */
}

static const struct fuse_lowlevel_ops ed_ops = {
	.lookup = ed_lookup,
	.getattr = ed_getattr,
	.open = ed_open,
	.read = ed_read,
	.write = ed_write,
	.fsync = ed_fsync,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "allow_other", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: ovs-errdisk IMAGE ARMFILE MOUNTPOINT\n");
		return 2;
	}
	image_fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (image_fd < 0) {
		fprintf(stderr, "ovs-errdisk: open %s: %m\n", argv[1]);
		return 1;
	}
	arm_file = argv[2];
	se = fuse_session_new(&args, &ed_ops, sizeof(ed_ops), NULL);
	if (!se || fuse_session_mount(se, argv[3]) != 0) {
		fprintf(stderr, "ovs-errdisk: cannot mount at %s\n", argv[3]);
		return 1;
	}
	printf("ok\n");
	fflush(stdout);
	rc = fuse_session_loop(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return rc ? 1 : 0;
}
