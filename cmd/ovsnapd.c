/*
 * ovsnapd — the snapshot-mount daemon of one volume (ovsnapd(8)).
 *
 *   ovsnapd [--foreground] [--ready-fd N] [--debug] SRC
 *
 * Opens the real SRC before covering it (also when a dead snapshot mount
 * still covers it), opens the newest snapshot's layer, mounts itself over
 * SRC and serves until `ovsnap deactivate` stops it.  The CLI starts it
 * (cmd/daemon-client.c) and waits for "ok\n" or "err MESSAGE\n" on the
 * ready fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "sd-notify.h"
#include "control.h"
#include "ovsnap-private.h"

#ifndef OPEN_TREE_CLONE
# define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
# define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef FUSE_SUPER_MAGIC
# define FUSE_SUPER_MAGIC 0x65735546
#endif

struct daemon D = {
	.srcfd = -1,
	.ctl_fd = -1,
	/* Writer first: a take must not starve behind a stream of writes. */
	.preserve_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP,
	.ns_lock = NS_LOCK_INITIALIZER,
	.busy_lock = PTHREAD_MUTEX_INITIALIZER,
	.busy_cond = PTHREAD_COND_INITIALIZER,
	.nodes_lock = PTHREAD_MUTEX_INITIALIZER,
	.moving_cond = PTHREAD_COND_INITIALIZER,
	.loop_lock = PTHREAD_MUTEX_INITIALIZER,
	.loop_cond = PTHREAD_COND_INITIALIZER,
	.barrier_cond = PTHREAD_COND_INITIALIZER,
	.epoch = 1,
};

static bool use_syslog;
/* SRC as given, for lines logged before setup() records it */
static const char *log_src = "-";

void dlog(int prio, const char *fmt, ...)
{
	char msg[2048], stamp[32];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* "volume=SRC" as the CLI's lines of the same volume (lib/log.c) */
	if (use_syslog)
		syslog(prio, "volume=%s %s", D.src ? D.src : log_src, msg);
	/* stderr is the terminal (--foreground) or the log file the CLI
	 * opened next to the control socket. */
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%F %T", &tm);
	fprintf(stderr, "%s ovsnapd[%d]: %s\n", stamp, (int)getpid(), msg);
	errno = saved;
}

static int mkdir_p(const char *dir, mode_t mode)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * A directory fd of the real SRC that works even when a dead snapshot
 * mount still covers it: clone the mount SRC lives on without its
 * submounts (OPEN_TREE_CLONE, not recursive) and walk to SRC inside the
 * clone.  The clone has no dead FUSE mount over SRC and no mounts inside
 * SRC either (rule 15).  *mi gets the mount, for its flags.
 */
static int open_real_source(const char *src, struct ovs_mountinfo *mi)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV,
	};
	const char *rel;
	struct statfs sfs;
	size_t tlen;
	int mntfd, fd, rc;

	rc = ovs_mount_find(src, mi);
	if (rc < 0)
		return rc;
	tlen = strlen(mi->target);
	if (strcmp(mi->target, "/") == 0)
		rel = src + 1;
	else if (strncmp(src, mi->target, tlen) == 0 && (src[tlen] == '/' || !src[tlen]))
		rel = src + tlen + (src[tlen] == '/');
	else
		return ovs_err(EINVAL, "%s is not below its mount point %s", src, mi->target);
	if (!*rel)
		rel = ".";

	mntfd = syscall(SYS_open_tree, AT_FDCWD, mi->target, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (mntfd < 0)
		return ovs_err(errno, "clone the mount %s: %m", mi->target);
	if (fstatfs(mntfd, &sfs) == 0 && sfs.f_type == FUSE_SUPER_MAGIC) {
		close(mntfd);
		return ovs_err(EBUSY, "%s is covered by a FUSE mount; unmount it first",
			       mi->target);
	}
	fd = syscall(SYS_openat2, mntfd, rel, &how, sizeof(how));
	rc = errno;
	close(mntfd);
	if (fd < 0)
		return ovs_err(rc, "open %s below its mount: %s", src, strerror(rc));
	return fd;
}

/* Mount the FUSE file system over SRC ourselves: libfuse's own mount
 * stat()s the mount point first, which fails on a dead snapshot mount we
 * are about to stack over.  libfuse then takes the fd as /dev/fd/N. */
static int mount_over_source(const struct ovs_mountinfo *mi)
{
	char opts[256], fdpath[32], fsname[PATH_MAX + 16];
	unsigned long flags = 0;
	struct stat st;
	int fd;

	if (fstat(D.srcfd, &st) < 0)
		return ovs_err(errno, "stat %s: %m", D.src);
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return ovs_err(errno, "open /dev/fuse: %m");
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=%o,user_id=0,group_id=0,allow_other,default_permissions",
		 fd, st.st_mode & S_IFMT);
	snprintf(fsname, sizeof(fsname), "ovsnap:%s", D.src);
	if (mi->nosuid)
		flags |= MS_NOSUID;
	if (mi->nodev)
		flags |= MS_NODEV;
	if (mi->noexec)
		flags |= MS_NOEXEC;
	if (mount(fsname, D.src, OVS_FUSE_FSTYPE, flags, opts) < 0) {
		int err = errno;

		close(fd);
		return ovs_err(err, "mount over %s: %s", D.src, strerror(err));
	}
	/* The mount's device identifies its users even once it is
	 * detached (deactivate --lazy).  DONT_SYNC: no request to ourselves,
	 * we do not serve yet. */
	{
		struct statx stx;

		if (statx(AT_FDCWD, D.src, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) == 0)
			D.fuse_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	}
	snprintf(fdpath, sizeof(fdpath), "/dev/fd/%d", fd);
	if (fuse_session_mount(D.se, fdpath) != 0) {
		umount2(D.src, MNT_DETACH);
		close(fd);
		return ovs_err(EIO, "libfuse refused the mounted fd");
	}
	return 0;
}

static int open_newest_layer(void)
{
	size_t n = ovs_snapshot_count(D.vol);
	const struct ovs_snapshot *s;
	int rc;

	if (n == 0)
		return 0;	/* no snapshot yet: nothing to preserve */
	s = ovs_snapshot_at(D.vol, n - 1);
	/* from the store's fd, no symlink followed (DESIGN.md rule 20) */
	rc = ovs_snapshot_layer_open(D.vol, s->id, D.srcfd, 0, &D.layer);
	if (rc < 0)
		return ovs_err_keep(rc, "open the layer of snapshot %" PRIu64, s->id);
	D.layer_id = s->id;
	return 0;
}

static int setup(const char *src)
{
	struct ovs_mountinfo mi = { 0 };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char sockdir[PATH_MAX];
	struct stat st;
	size_t outside = 0;
	int rc;

	if (src[0] != '/')
		return ovs_err(EINVAL, "%s: not an absolute path", src);
	D.src = strdup(src);
	if (!D.src)
		return ovs_err(ENOMEM, "out of memory");
	rc = ovs_volume_open(src, &D.vol);
	if (rc == 0)
		rc = ovs_registry_load(D.vol);
	if (rc < 0)
		return rc;

	rc = open_real_source(src, &mi);
	if (rc < 0)
		goto out;
	D.srcfd = rc;
	if (fstat(D.srcfd, &st) < 0) {
		rc = ovs_err(errno, "stat %s: %m", src);
		goto out;
	}
	D.src_dev = st.st_dev;
	/* Rule 15: another filesystem below SRC (a btrfs subvolume) would
	 * answer EXDEV on the live path and vanish from views.  Only btrfs
	 * has them; mounts are not in the clone D.srcfd comes from (the CLI
	 * checks those). */
	{
		struct statfs sfs;
		char *where = NULL;

		rc = 0;
		if (fstatfs(D.srcfd, &sfs) == 0 && sfs.f_type == BTRFS_SUPER_MAGIC)
			rc = ovs_find_other_fs(D.srcfd, &where);
		if (rc > 0) {
			rc = ovs_err(EXDEV, "SRC holds %s/%s, a btrfs subvolume or another "
				     "filesystem: snapshots do not cross filesystems; move it out "
				     "or snapshot it as a volume of its own", src, where);
			free(where);
		}
		if (rc < 0)
			goto out;
	}

	rc = open_newest_layer();
	if (rc < 0)
		goto out;
	rc = ovs_hlmap_build(D.srcfd, &D.hlmap, &outside);
	if (rc < 0) {
		rc = ovs_err_keep(rc, "map the hard links of %s", src);
		goto out;
	}
	if (outside)
		dlog(LOG_WARNING, "%zu hard link%s from outside %s: changes through %s "
		     "bypass the snapshots", outside, outside == 1 ? "" : "s", src,
		     outside == 1 ? "it" : "them");
	rc = nodes_init(D.srcfd);
	if (rc < 0) {
		rc = ovs_err(-rc, "set up the inode table: %s", strerror(-rc));
		goto out;
	}

	if (fuse_opt_add_arg(&args, "ovsnapd") != 0 ||
	    (D.debug && fuse_opt_add_arg(&args, "-d") != 0)) {
		rc = ovs_err(ENOMEM, "out of memory");
		goto out;
	}
	D.se = fuse_session_new(&args, &daemon_ops, sizeof(daemon_ops), NULL);
	fuse_opt_free_args(&args);
	if (!D.se) {
		rc = ovs_err(EIO, "cannot create the FUSE session");
		goto out;
	}

	/* Listen before mounting: nothing to undo on SRC if this fails. */
	snprintf(sockdir, sizeof(sockdir), "%s", ovs_volume_socket(D.vol));
	rc = mkdir_p(dirname(sockdir), 0700);
	if (rc < 0) {
		rc = ovs_err(-rc, "create the directory of %s: %s", ovs_volume_socket(D.vol),
			     strerror(-rc));
		goto out;
	}
	rc = ovs_ctl_listen(ovs_volume_socket(D.vol));
	if (rc < 0)
		goto out;
	D.ctl_fd = rc;

	rc = mount_over_source(&mi);
	if (rc < 0) {
		unlink(ovs_volume_socket(D.vol));
		goto out;
	}
	dlog(LOG_INFO, "serving %s (layer %" PRIu64 ")", src, D.layer_id);
	rc = 0;
out:
	ovs_mountinfo_clear(&mi);
	return rc;
}

/* Under ovsnapd@.service (Type=notify): ready, or why not. */
static void notify_status(const char *what, bool ready)
{
	char *msg;

	if (asprintf(&msg, "%sSTATUS=%s%s", ready ? "READY=1\n" : "",
		     ready ? "serving " : "setup failed: ", what) < 0)
		return;
	if (ovs_sd_notify(msg) < 0)
		dlog(LOG_WARNING, "cannot notify systemd on $NOTIFY_SOCKET");
	free(msg);
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: ovsnapd [--foreground] [--ready-fd N] [--debug] SRC\n"
		"The snapshot-mount daemon; `ovsnap take` and `ovsnap activate` start it.\n"
		"See ovsnapd(8).\n");
}

/*
 * On a filesystem without file handles the daemon holds an O_PATH fd for
 * every inode the kernel remembers, like passthrough_hp: one per file of
 * a large tree.  Inheriting the caller's limit (1024 in a login shell)
 * made creates fail with EMFILE after a thousand files.  Raise it as far
 * as the system allows (with handles, it sizes the fd cache and leaves
 * room for open files).
 */
static unsigned long long nofile_low;	/* the limit, when below nr_open */
static unsigned long nofile_nr_open;

static void raise_nofile_limit(void)
{
	struct rlimit rl;
	unsigned long nr_open = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");

	if (f) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (nr_open > rl.rlim_max) {
		struct rlimit want = { nr_open, nr_open };

		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (nr_open > rl.rlim_cur) {
		nofile_low = rl.rlim_cur;
		nofile_nr_open = nr_open;
	}
}

/* Said only where it matters: without file handles (daemon-nodes.c). */
void nofile_warn_if_low(void)
{
	if (nofile_low)
		dlog(LOG_WARNING, "open file limit %llu, below fs.nr_open (%lu): without file "
		     "handles the kernel can cache only about that many inodes of the tree",
		     nofile_low, nofile_nr_open);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "ready-fd", required_argument, NULL, 'r' },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, ready_fd = -1, rc;
	char *end;

	/* keep $NOTIFY_SOCKET for ourselves, out of what we start */
	ovs_sd_notify(NULL);
	while ((c = getopt_long(argc, argv, "fr:dh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			D.foreground = true;
			break;
		case 'r':
			errno = 0;
			ready_fd = strtol(optarg, &end, 10);
			if (errno || *end || ready_fd < 0) {
				fprintf(stderr, "ovsnapd: bad --ready-fd %s\n", optarg);
				return 2;
			}
			break;
		case 'd':
			D.debug = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (ready_fd >= 0)
		fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
	log_src = argv[optind];
	use_syslog = !D.foreground && !D.debug;
	if (use_syslog)
		ovs_log_open("ovsnapd");
	/* New files get exactly the mode the caller's request carries. */
	umask(0);
	raise_nofile_limit();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stderr, NULL, _IOLBF, 0);

	rc = setup(argv[optind]);
	if (rc < 0) {
		dlog(LOG_ERR, "%s: %s", argv[optind], ovs_last_error());
		if (ready_fd >= 0)
			dprintf(ready_fd, "err %s\n", ovs_last_error());
		notify_status(ovs_last_error(), false);
		return 1;
	}
	if (ready_fd >= 0) {
		dprintf(ready_fd, "ok\n");
		close(ready_fd);
	}
	notify_status(argv[optind], true);
	rc = daemon_loop();
	ovs_sd_notify("STOPPING=1");
	dlog(LOG_INFO, "exiting");
	return rc;
}
