/*
 * ovs-fakeview — what an attacker can mount without ovsnap: an empty
 * read-only FUSE filesystem whose mount-table entry reads like a snapshot
 * view (source ovsnap-view:SRC:ID, type fuse.ovsnap-view).
 *
 * Usage: ovs-fakeview [--direct] SRC ID MOUNTPOINT
 *
 * Run by an ordinary user, libfuse mounts through fusermount3, which
 * records the user's uid as user_id= (auto_unmount makes libfuse go to
 * fusermount3 at once).  fusermount3 opens /dev/fuse as the user, which
 * fails where /dev/fuse is not open to users (some containers; it is 0666
 * on a stock system): --direct mounts with mount(2) instead, for a caller
 * with the user's uid that keeps CAP_SYS_ADMIN and CAP_DAC_OVERRIDE, and
 * libfuse records getuid() as user_id= just as fusermount3 would.  Prints
 * "ok" on stdout once mounted, then serves (an empty root directory)
 * until unmounted.
 */
#define FUSE_USE_VERSION OVS_FUSE_USE_VERSION
#include <errno.h>
#include <stdbool.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fake_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st = { .st_ino = 1, .st_mode = S_IFDIR | 0755, .st_nlink = 2 };

	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	st.st_uid = getuid();
	st.st_gid = getgid();
	fuse_reply_attr(req, &st, 1.0);
}

static void fake_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fuse_reply_err(req, ENOENT);
}

static void fake_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	(void)ino;
	(void)size;
	(void)off;
	(void)fi;
	fuse_reply_buf(req, NULL, 0);
}

static const struct fuse_lowlevel_ops fake_ops = {
	.getattr = fake_getattr,
	.lookup = fake_lookup,
	.readdir = fake_readdir,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	bool direct = argc == 5 && strcmp(argv[1], "--direct") == 0;
	char *opts;
	int rc = 1;

	if (argc != 4 && !direct) {
		fprintf(stderr, "usage: ovs-fakeview [--direct] SRC ID MOUNTPOINT\n");
		return 2;
	}
	argv += direct;
	if (asprintf(&opts, "ro,%sfsname=ovsnap-view:%s:%s,subtype=ovsnap-view",
		     direct ? "" : "auto_unmount,", argv[1], argv[2]) < 0)
		return 1;
	if (fuse_opt_add_arg(&args, "ovs-fakeview") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts))
		return 1;
	se = fuse_session_new(&args, &fake_ops, sizeof(fake_ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, argv[3]) != 0)
		goto out_signals;
	printf("ok\n");
	fflush(stdout);
	rc = fuse_session_loop(se) == 0 ? 0 : 1;
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
	free(opts);
	return rc;
}
