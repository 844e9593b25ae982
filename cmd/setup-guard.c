/*
 * What activate and take refuse before the snapshot mount goes up or
 * switches layers: a volume nested in another (DESIGN.md rule 17), a
 * mount inside SRC (rule 15), a --kernel view of the volume
 * (ovsnap-mount(8)), and users of a snapshot mount that
 * `deactivate --lazy` detached but whose daemon still serves them.
 */
#include <errno.h>
#include <dirent.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cmd.h"
#include "control.h"
#include "ovsnap-private.h"
#include "views.h"

/* How long a take waits for a detached daemon without users to exit (it
 * exits as soon as the kernel lets go of its mount). */
#define DETACHED_EXIT_WAIT_MS 10000

struct detached {
	pid_t pid;
	dev_t dev;
};

/* The daemons of v whose snapshot mount was detached and still answer. */
static int detached_daemons(struct ovs_volume *v, struct detached **out, size_t *n)
{
	struct detached *list = NULL;
	size_t cnt = 0;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	*n = 0;
	d = opendir(ovs_run_dir());
	if (!d)
		return errno == ENOENT ? 0 : ovs_err(errno, "cannot read %s: %m", ovs_run_dir());
	while ((de = readdir(d))) {
		char reply[OVS_CTL_MSG_MAX], sock[PATH_MAX];
		struct ovs_daemon_state st;
		struct detached *nl;
		long p;

		if (strncmp(de->d_name, "detached-", 9) != 0 ||
		    sscanf(de->d_name + 9, "%ld.sock", &p) != 1 || p <= 0 ||
		    ovs_detached_socket((pid_t)p, sock, sizeof(sock)) < 0)
			continue;
		if (ovs_ctl_call(sock, "status", -1, reply, sizeof(reply), 5000) < 0) {
			/* a daemon that died detached; its name misleads */
			if (kill((pid_t)p, 0) < 0 && errno == ESRCH)
				unlink(sock);
			continue;
		}
		/* fusedev 0:0: the daemon could not tell its device */
		if (ovs_daemon_state_parse(reply, &st) < 0 || !st.src || !st.has_fusedev ||
		    strcmp(st.src, ovs_volume_source(v)) != 0)
			continue;
		nl = realloc(list, (cnt + 1) * sizeof(*nl));
		if (!nl) {
			free(list);
			closedir(d);
			return ovs_err(ENOMEM, "out of memory");
		}
		list = nl;
		list[cnt].pid = st.pid;
		list[cnt].dev = st.fusedev;
		cnt++;
	}
	closedir(d);
	*out = list;
	*n = cnt;
	return 0;
}

static void pid_list(const pid_t *pids, size_t n, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len - 16; i++)
		used += snprintf(buf + used, len - used, "%s%d", i ? " " : "", (int)pids[i]);
	if (used >= len - 16)
		snprintf(buf + used, len - used, " ...");
}

/* 1 once pid has exited, 0 when it is still there after ms. */
static int wait_exit(pid_t pid, int ms)
{
	struct pollfd pfd;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0), rc;

	if (fd < 0)
		return errno == ESRCH ? 1 : 0;
	pfd.fd = fd;
	pfd.events = POLLIN;
	do
		rc = poll(&pfd, 1, ms);
	while (rc < 0 && errno == EINTR);
	close(fd);
	return rc > 0;
}

/*
 * Users of detached snapshot mounts of v.  Their changes reach SRC
 * through a daemon that preserves into an old layer and knows nothing of
 * later takes.  Activation refuses them unless forced; a take always
 * does (it would switch layers behind them), after giving a daemon whose
 * users are gone time to exit.
 */
int ovs_check_detached(const char *cmd, struct ovs_volume *v, bool take, bool force)
{
	const char *src = ovs_volume_source(v);
	struct detached *dd;
	size_t ndd;
	int rc, status = EXIT_OK;

	rc = detached_daemons(v, &dd, &ndd);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < ndd && status == EXIT_OK; i++) {
		char users[256];
		pid_t *pids;
		size_t n;

		if (dd[i].dev == makedev(0, 0)) {
			/* users unknown: only the daemon's exit proves them gone */
			if (wait_exit(dd[i].pid, take ? DETACHED_EXIT_WAIT_MS : 0) || (!take && force))
				continue;
			ovs_error("%s %s: the snapshot mount that 'deactivate --lazy' (or umount -l) detached is "
				  "still served by ovsnapd (pid %d)%s", cmd, src, (int)dd[i].pid,
				  take ? "" : "; stop its users, or use --force");
			status = EXIT_FAIL;
			break;
		}
		rc = ovs_dev_users(dd[i].dev, &pids, &n);
		if (rc < 0) {
			ovs_error_lib(rc, "%s %s", cmd, src);
			status = EXIT_FAIL;
			break;
		}
		pid_list(pids, n, users, sizeof(users));
		free(pids);
		if (n == 0) {
			if (!take || wait_exit(dd[i].pid, DETACHED_EXIT_WAIT_MS))
				continue;
			ovs_error("%s %s: the snapshot mount that 'deactivate --lazy' (or umount -l) detached is "
				  "still served by ovsnapd (pid %d), though no process shows as its "
				  "user; a take would switch layers behind it", cmd, src,
				  (int)dd[i].pid);
			status = EXIT_FAIL;
		} else if (take) {
			ovs_error("%s %s: process%s %s still use%s the snapshot mount that "
				  "'deactivate --lazy' (or umount -l) detached (ovsnapd pid %d): their changes "
				  "would bypass this snapshot; stop them, then take", cmd, src,
				  n > 1 ? "es" : "", users, n > 1 ? "" : "s", (int)dd[i].pid);
			status = EXIT_FAIL;
		} else if (!force) {
			ovs_error("%s %s: process%s %s still use%s the snapshot mount that "
				  "'deactivate --lazy' (or umount -l) detached (ovsnapd pid %d): they would write "
				  "behind the new one; stop them, or use --force (no snapshot can "
				  "be taken until they are gone)", cmd, src, n > 1 ? "es" : "",
				  users, n > 1 ? "" : "s", (int)dd[i].pid);
			status = EXIT_FAIL;
		}
	}
	free(dd);
	return status;
}

/* ovsnap-mount(8): a --kernel view cannot follow layers that change. */
int ovs_check_kernel_views(const char *cmd, struct ovs_volume *v)
{
	const char *src = ovs_volume_source(v);
	struct ovs_view_mount *views;
	size_t n;
	int rc, status = EXIT_OK;

	rc = ovs_volume_views(v, &views, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!views[i].kernel)
			continue;
		ovs_error("%s %s: snapshot %" PRIu64 " is mounted with --kernel at %s: overlayfs "
			  "cannot follow layers that change; run 'ovsnap umount %s' first", cmd,
			  src, views[i].id, views[i].target, views[i].target);
		status = EXIT_FAIL;
		break;
	}
	ovs_views_free(views, n);
	return status;
}

/* Everything an activation must refuse before the daemon starts. */
int ovs_check_activation(const char *cmd, struct ovs_volume *v, bool force)
{
	const char *src = ovs_volume_source(v);
	char **below = NULL;
	size_t nbelow = 0;
	int rc;

	rc = ovs_check_nesting(src, ovs_volume_store(v), ovs_volume_store(v));
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	/* As at setup: the snapshot mount would hide a mount made inside
	 * SRC while the volume was inactive. */
	rc = ovs_mounts_below(src, &below, &nbelow);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	if (nbelow) {
		ovs_error("%s %s: SRC holds the mount point %s%s: snapshots do not cross "
			  "filesystems; unmount it first", cmd, src, below[0],
			  nbelow > 1 ? " and others" : "");
		ovs_strv_free(below, nbelow);
		return EXIT_FAIL;
	}
	if (ovs_check_kernel_views(cmd, v) != EXIT_OK)
		return EXIT_FAIL;
	return ovs_check_detached(cmd, v, false, force);
}
