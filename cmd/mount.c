/*
 * ovsnap mount — mount a read-only view of a snapshot.
 *
 * The default view is served by its own process, ovsnap-viewd, which stays
 * coherent while the live tree changes and newer snapshots are taken (see
 * cmd/view.h).  --kernel mounts the same layers with stock overlayfs
 * instead, which is only right while nothing changes them: the volume must
 * be inactive.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmount.h>
#include <limits.h>
#include <linux/mount.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"
#include "views.h"

static char *opt_options;
static int opt_kernel;

static struct poptOption mount_options[] = {
	{ "options", 'o', POPT_ARG_STRING, &opt_options, 0,
	  "mount options: suid, dev, noexec, ... (always read-only; nosuid,nodev by default)",
	  "OPTS" },
	{ "kernel", 'K', POPT_ARG_NONE, &opt_kernel, 0,
	  "mount the layers with stock overlayfs (only while the volume is inactive)", NULL },
	/* -k, until it became --keep elsewhere (issue 14 item 9): one release */
	{ NULL, 'k', POPT_ARG_NONE | POPT_ARGFLAG_DOC_HIDDEN, &opt_kernel, OVS_OPT_DEPRECATED,
	  "-K (--kernel)", NULL },
	OVS_POPT_AUTOHELP
	POPT_TABLEEND
};

/* How long a starting view may take to mount. */
#define VIEWD_START_TIMEOUT_MS (60 * 1000)

/* ---- mount options ------------------------------------------------------- */

struct view_mount_opts {
	unsigned long attr;	/* MOUNT_ATTR_* for --kernel */
	char *fuse;		/* the same, as FUSE mount options */
};

/* The options a view accepts, checked with libmount's option parser. */
static int parse_view_options(const char *optstr, struct view_mount_opts *o)
{
	static const struct {
		const char *name;
		unsigned long set, clear;
	} known[] = {
		{ "ro", 0, 0 },
		{ "suid", 0, MOUNT_ATTR_NOSUID },
		{ "nosuid", MOUNT_ATTR_NOSUID, 0 },
		{ "dev", 0, MOUNT_ATTR_NODEV },
		{ "nodev", MOUNT_ATTR_NODEV, 0 },
		{ "exec", 0, MOUNT_ATTR_NOEXEC },
		{ "noexec", MOUNT_ATTR_NOEXEC, 0 },
		{ "noatime", MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME },
		{ "relatime", MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
		{ "strictatime", MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
		{ "nodiratime", MOUNT_ATTR_NODIRATIME, 0 },
	};
	char *str = (char *)optstr, *name, *value;
	size_t namesz, valsz;
	int rc;

	o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	o->fuse = NULL;
	while (str && (rc = mnt_optstr_next_option(&str, &name, &namesz, &value, &valsz)) == 0) {
		size_t i;

		for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			if (strlen(known[i].name) == namesz &&
			    strncmp(known[i].name, name, namesz) == 0)
				break;
		if (namesz == 2 && strncmp(name, "rw", 2) == 0) {
			ovs_error("mount: -o rw: snapshot views are read-only");
			return -EINVAL;
		}
		if (i == sizeof(known) / sizeof(known[0]) || value) {
			ovs_error("mount: -o %.*s: not an option of snapshot views "
				  "(see ovsnap-mount(8))", (int)(value ? namesz + valsz + 1 : namesz),
				  name);
			return -EINVAL;
		}
		o->attr = (o->attr & ~known[i].clear) | known[i].set;
	}
	if (str && rc < 0) {
		ovs_error("mount: -o %s: cannot parse the options", optstr);
		return -EINVAL;
	}
	/* libfuse mounts nosuid,nodev unless told suid, dev */
	if (asprintf(&o->fuse, "%s%s%s%s", (o->attr & MOUNT_ATTR_NOSUID) ? "nosuid" : "suid",
		     (o->attr & MOUNT_ATTR_NODEV) ? ",nodev" : ",dev",
		     (o->attr & MOUNT_ATTR_NOEXEC) ? ",noexec" : "",
		     (o->attr & MOUNT_ATTR_NOATIME) ? ",noatime" : "") < 0)
		return -ENOMEM;
	return 0;
}

/* ---- the target ------------------------------------------------------------- */

/*
 * A canonical TARGET that can take a view: an existing directory that is
 * no mount point, not inside SRC (the live daemon must never find a
 * mount in its tree) nor inside the store.  The directory is opened once
 * (*fd, O_PATH) and the checks and the mount are of that directory: a
 * path looked up again would let a user who owns a folder on the way
 * swap it for a symlink in between, and have root's view cover a
 * directory of the user's choice (/etc, say) with files of theirs.  A
 * symlink as the last component is refused for the same reason: root
 * names the directory itself.
 */
static char *check_target(const char *arg, struct ovs_volume *v, int *fd)
{
	struct stat st;
	char *real = NULL, fstype[64];
	int rc;

	*fd = open(arg, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0) {
		if (errno == ELOOP || (errno == ENOTDIR && lstat(arg, &st) == 0 &&
				       S_ISLNK(st.st_mode)))
			ovs_error("mount: %s: a symbolic link (name the directory itself)",
				  arg);
		else if (errno == ENOTDIR)
			ovs_error("mount: %s: not a directory", arg);
		else
			ovs_error("mount: %s: %s", arg, strerror(errno));
		return NULL;
	}
	real = ovs_fd_path(*fd);
	if (!real) {
		ovs_error("mount: %s: cannot tell its path", arg);
		goto fail;
	}
	if (fstat(*fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		ovs_error("mount: %s: not a directory", arg);
		goto fail;
	}
	rc = ovs_is_mountpoint(real, fstype, sizeof(fstype));
	if (rc < 0) {
		ovs_error_lib(rc, "mount: %s", arg);
		goto fail;
	}
	if (rc > 0) {
		ovs_error("mount: %s: already a mount point (%s)", arg, fstype);
		goto fail;
	}
	if (ovs_path_inside(real, ovs_volume_source(v))) {
		ovs_error("mount: %s: inside %s, the directory the snapshots are of", arg,
			  ovs_volume_source(v));
		goto fail;
	}
	if (ovs_path_inside(real, ovs_volume_store(v))) {
		ovs_error("mount: %s: inside the snapshot store", arg);
		goto fail;
	}
	return real;
fail:
	free(real);
	close(*fd);
	*fd = -1;
	return NULL;
}

/* ---- a daemon-served view ------------------------------------------------ */

/*
 * The view goes on the directory of target_fd, through /proc/self/fd/4 in
 * the view daemon, not on whatever the path names by then; owner_uid (a
 * delegated mount) is recorded for umount.
 */
static int mount_daemon_view(struct ovs_volume *v, uint64_t id, const char *target,
			     const struct view_mount_opts *o, int target_fd, long owner_uid)
{
	char idstr[32], log[PATH_MAX], pidfile[PATH_MAX], pidtext[64], ownerfile[PATH_MAX];
	char *argv[] = { "ovsnap-viewd", "--ready-fd", "3", "-o", o->fuse,
			 (char *)ovs_volume_source(v), idstr,
			 "/proc/self/fd/4", NULL };
	struct stat st;
	pid_t pid;
	int rc, rundir;

	rc = ovs_mkdir_run_dir();
	if (rc < 0)
		return rc;
	if (ovs_view_run_file(target, "log", log, sizeof(log)) < 0 ||
	    ovs_view_run_file(target, "pid", pidfile, sizeof(pidfile)) < 0 ||
	    ovs_view_run_file(target, "owner", ownerfile, sizeof(ownerfile)) < 0)
		return ovs_err(ENAMETOOLONG, "%s: path too long", target);
	/* a stale record must not make a root's view a user's */
	unlink(ownerfile);
	snprintf(idstr, sizeof(idstr), "%" PRIu64, id);
	ovs_spawn_pass_fd = target_fd;
	pid = ovs_spawn_ready(ovs_helper_path("ovsnap-viewd", "OVSNAP_VIEWD"), argv, log,
			      VIEWD_START_TIMEOUT_MS);
	ovs_spawn_pass_fd = -1;
	if (pid < 0)
		return pid;
	/*
	 * umount waits for the process to be gone, so the filesystem under
	 * the layers can be unmounted right after it.  The device number of
	 * the mount ties the pid to this very FUSE connection: only a view
	 * whose recorded daemon serves it holds its snapshot against drop
	 * and retention (lib/views.c), since anyone can make a FUSE mount
	 * that reads like a view in the mount table.
	 */
	if (stat(target, &st) < 0) {
		rc = ovs_err(errno, "cannot stat the view at %s: %m", target);
		kill(pid, SIGTERM);
		return rc;
	}
	snprintf(pidtext, sizeof(pidtext), "%d %u:%u\n", (int)pid, major(st.st_dev),
		 minor(st.st_dev));
	rundir = open(ovs_run_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = rundir < 0 ? -errno :
	     ovs_write_file_atomic(rundir, strrchr(pidfile, '/') + 1, pidtext, strlen(pidtext),
				   0644);
	if (owner_uid >= 0) {
		char uidtext[32];
		int orc;

		/* Who may unmount it besides root (ovsnap-delegate(8)). */
		snprintf(uidtext, sizeof(uidtext), "%ld\n", owner_uid);
		orc = rundir < 0 ? -EBADF :
		      ovs_write_file_atomic(rundir, strrchr(ownerfile, '/') + 1, uidtext,
					    strlen(uidtext), 0644);
		if (orc < 0)
			fprintf(stderr, "%s: mount: warning: cannot record the view's owner in "
				"%s; only root can unmount it\n", ovs_progname, ownerfile);
	}
	if (rundir >= 0)
		close(rundir);
	if (rc < 0)
		fprintf(stderr, "%s: mount: warning: cannot record the view's pid in %s; "
			"umount will not wait for it to exit, and drop and retention will "
			"not see the view\n", ovs_progname, pidfile);
	return 0;
}

/* ---- a --kernel view ------------------------------------------------------------ */

static int fsconfig_str(int fsfd, const char *key, const char *value)
{
	if (syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, key, value, 0) < 0)
		return -errno;
	return 0;
}

/*
 * Stock overlayfs over U_k:...:U_n:SRC through the new mount API: one
 * "lowerdir+" per layer, so a stack of hundreds of layers is not limited by
 * the 4 KiB page of a mount(2) option string.
 */
static int mount_kernel_view(struct ovs_volume *v, size_t first, uint64_t id,
			     const char *target, int target_fd, const struct view_mount_opts *o)
{
	char *source = ovs_view_source(ovs_volume_source(v), id);
	char upper[PATH_MAX];
	int fsfd, mfd = -1, rc = 0;

	if (!source)
		return ovs_err(ENOMEM, "out of memory");
	fsfd = syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0) {
		rc = ovs_err(errno, "fsopen overlay: %m");
		goto out;
	}
	rc = fsconfig_str(fsfd, "source", source);
	for (size_t i = first; rc == 0 && i < ovs_snapshot_count(v); i++) {
		uint64_t lid = ovs_snapshot_at(v, i)->id;
		/* The layer as opened from the store's fd, no symlink followed
		 * (DESIGN.md rule 20); by its path only where overlayfs takes
		 * no fd (before 6.13), once the open proved the path sound. */
		int lfd = ovs_snapshot_open_upper(v, lid, O_RDONLY);

		if (lfd < 0) {
			rc = lfd;	/* its message says why */
			goto out;
		}
		rc = syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_FD, "lowerdir+", NULL, lfd) < 0 ?
		     -errno : 0;
		close(lfd);
		if (rc == -EINVAL) {
			rc = ovs_snapshot_upper(v, lid, upper, sizeof(upper));
			if (rc == 0)
				rc = fsconfig_str(fsfd, "lowerdir+", upper);
		}
	}
	if (rc == 0)
		rc = fsconfig_str(fsfd, "lowerdir+", ovs_volume_source(v));
	if (rc == 0 && syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		rc = -errno;
	if (rc < 0) {
		char msg[512];
		ssize_t n;

		/* the kernel says why in the fs context's log */
		n = read(fsfd, msg, sizeof(msg) - 1);
		if (n > 2) {
			msg[n] = 0;
			msg[strcspn(msg, "\n")] = 0;
			rc = ovs_err(-rc, "overlayfs: %s", msg + 2);
		} else {
			rc = ovs_err(-rc, "overlayfs: %s", strerror(-rc));
		}
		goto out;
	}
	mfd = syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, o->attr);
	if (mfd < 0) {
		rc = ovs_err(errno, "fsmount: %m");
		goto out;
	}
	/* on the directory check_target opened, not on the path again */
	if (syscall(SYS_move_mount, mfd, "", target_fd, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		rc = ovs_err(errno, "move_mount to %s: %m", target);
out:
	if (mfd >= 0)
		close(mfd);
	if (fsfd >= 0)
		close(fsfd);
	free(source);
	return rc;
}

int cmd_mount(int argc, const char **argv)
{
	struct view_mount_opts vo = { 0 };
	const struct ovs_snapshot *snap;
	struct ovs_volume *v = NULL;
	char *src = NULL, *target = NULL;
	const char **args;
	size_t first = 0;
	poptContext pc;
	long delegated = ovs_delegated_uid();
	int nargs, status, rc, target_fd = -1, own_fd = -1;

	pc = ovs_popt_parse("mount", argc, argv, mount_options, "SRC SNAP TARGET", &status);
	if (!pc)
		return status;
	args = ovs_popt_args(pc, "mount", 3, 3, &nargs, &status);
	if (!args)
		goto out;
	status = EXIT_FAIL;
	if (parse_view_options(opt_options, &vo) < 0) {
		status = EXIT_USAGE;
		goto out;
	}
	src = ovs_resolve_source("mount", args[0]);
	if (!src)
		goto out;
	rc = ovs_volume_open(src, &v);
	if (rc == 0)
		rc = ovs_registry_load(v);
	if (rc < 0) {
		ovs_error_lib(rc, "mount %s", src);
		goto out;
	}
	rc = ovs_snapshot_resolve(v, args[1], &snap);
	if (rc < 0) {
		ovs_error_lib(rc, "mount %s %s", src, args[1]);
		goto out;
	}
	target = check_target(args[2], v, &own_fd);
	if (!target)
		goto out;
	target_fd = own_fd;
	if (delegated >= 0) {
		/* ovsnap-delegate checked the directory it opened (the
		 * caller's, no symlink) and handed it over on fd 3; the view
		 * goes on it, wherever the path points now. */
		const char *e = getenv("OVSNAP_DELEGATED_TARGET_FD");
		struct stat a, b;

		target_fd = e && strcmp(e, "3") == 0 ? fcntl(3, F_DUPFD_CLOEXEC, 10) : -1;
		if (target_fd < 0 || fstat(target_fd, &a) < 0 || fstat(own_fd, &b) < 0 ||
		    a.st_dev != b.st_dev || a.st_ino != b.st_ino || a.st_uid != (uid_t)delegated) {
			ovs_error("mount: %s: permission denied (not the directory of yours that "
				  "was checked)", args[2]);
			goto out;
		}
		close(3);
		if (opt_kernel || !(vo.attr & MOUNT_ATTR_NOSUID) || !(vo.attr & MOUNT_ATTR_NODEV)) {
			ovs_error("mount: permission denied (users get daemon-served views, "
				  "nosuid,nodev)");
			goto out;
		}
	}
	if (opt_kernel) {
		if (ovs_volume_active(v) || ovs_daemon_running(v)) {
			ovs_error("mount --kernel: %s is active: overlayfs cannot follow layers "
				  "that change under it (run 'ovsnap deactivate %s' first, or "
				  "mount without --kernel)", src, src);
			goto out;
		}
		while (ovs_snapshot_at(v, first)->id != snap->id)
			first++;
		rc = mount_kernel_view(v, first, snap->id, target, target_fd, &vo);
	} else {
		rc = mount_daemon_view(v, snap->id, target, &vo, target_fd, delegated);
	}
	if (rc < 0) {
		ovs_error_lib(rc, "mount %s %s at %s", src, args[1], target);
		goto out;
	}
	status = EXIT_OK;
out:
	if (target_fd >= 0 && target_fd != own_fd)
		close(target_fd);
	if (own_fd >= 0)
		close(own_fd);
	free(vo.fuse);
	free(target);
	free(src);
	if (v)
		ovs_volume_unref(v);
	poptFreeContext(pc);
	return status;
}
