/*
 * The CLI side of a volume's snapshot-mount daemon: is it running, start
 * it, stop it, and ask it to take a snapshot.  Every command that needs
 * the daemon goes through here.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "conf.h"
#include "control.h"
#include "ovsnap-private.h"

/* How long a starting daemon may take to mount (it scans SRC once for
 * hard links, which on a large tree takes a while). */
#define DAEMON_START_TIMEOUT_MS (10 * 60 * 1000)
/* How long a stopped daemon may take to exit once it has unmounted SRC
 * (its workers finish the requests they hold, then it closes its fds). */
#define DAEMON_EXIT_TIMEOUT_MS (60 * 1000)

int ovs_daemon_status(struct ovs_volume *v, char *reply, size_t len)
{
	return ovs_ctl_call(ovs_volume_socket(v), "status", -1, reply, len, 5000);
}

bool ovs_daemon_running(struct ovs_volume *v)
{
	char reply[OVS_CTL_MSG_MAX];

	return ovs_daemon_status(v, reply, sizeof(reply)) == 0;
}

/* The daemon's log: next to its socket, NAME.sock -> NAME.log. */
static void daemon_log_path(struct ovs_volume *v, char *buf, size_t len)
{
	const char *sock = ovs_volume_socket(v);
	size_t n = strlen(sock);

	if (n > 5 && strcmp(sock + n - 5, ".sock") == 0)
		n -= 5;
	snprintf(buf, len, "%.*s.log", (int)n, sock);
}

/*
 * Where systemd runs, the daemon gets a unit of its own, ovsnapd@NAME
 * (NAME: systemd-escape --path SRC): forked from a oneshot service (the
 * rotation timer's take, ovsnap-activate.service) it would live in that
 * service's cgroup and be killed when the service ends.  Elsewhere, and
 * when the CLI points the daemon at other directories than the unit's
 * ($OVSNAP_STATE_DIR, $OVSNAP_RUN_DIR, $OVSNAPD), a plain fork.
 * $OVSNAP_DAEMON_START=fork|systemd decides instead.  A source whose
 * escape does not fit a unit name is forked either way.
 */
static int daemon_start_mode_systemd(bool *systemd)
{
	const char *mode = getenv("OVSNAP_DAEMON_START");
	static const char *const own_env[] = { "OVSNAP_STATE_DIR", "OVSNAP_RUN_DIR", "OVSNAPD" };

	if (mode && *mode) {
		if (strcmp(mode, "fork") != 0 && strcmp(mode, "systemd") != 0)
			return ovs_err(EINVAL, "OVSNAP_DAEMON_START=%s: fork or systemd", mode);
		*systemd = strcmp(mode, "systemd") == 0;
		return 0;
	}
	*systemd = access("/run/systemd/system", F_OK) == 0;
	for (size_t i = 0; i < sizeof(own_env) / sizeof(own_env[0]); i++)
		if (getenv(own_env[i]) && *getenv(own_env[i]))
			*systemd = false;
	return 0;
}

/* systemctl start ovsnapd@NAME.service: with Type=notify it returns once
 * the daemon has mounted over SRC, or failed. */
static int daemon_start_unit(struct ovs_volume *v)
{
	const char *systemctl = getenv("OVSNAP_SYSTEMCTL");
	char name[256], unit[320];
	int rc, status;
	pid_t pid;

	if (!systemctl || !*systemctl)
		systemctl = "systemctl";
	rc = ovs_unit_escape_path(ovs_volume_source(v), name, sizeof(name));
	if (rc < 0)
		return rc;
	snprintf(unit, sizeof(unit), "ovsnapd@%s.service", name);
	pid = fork();
	if (pid < 0)
		return ovs_err(errno, "fork: %m");
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		/* Our one line says what failed; systemctl's own
		 * messages would be a second. */
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp(systemctl, systemctl, "start", unit, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return ovs_err(errno, "wait for %s: %m", systemctl);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return ovs_err(EIO, "'%s start %s' failed (%s %d); see 'systemctl status %s' "
			       "and 'journalctl -u %s'", systemctl, unit,
			       WIFEXITED(status) ? "exit status" : "signal",
			       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
			       unit, unit);
	if (!ovs_daemon_running(v))
		return ovs_err(EIO, "%s started, but no daemon answers on %s (is the unit "
			       "still serving a detached mount? 'systemctl status %s')", unit,
			       ovs_volume_socket(v), unit);
	return 0;
}

int ovs_daemon_start(struct ovs_volume *v)
{
	char log[PATH_MAX];
	char *const argv[] = { "ovsnapd", "--ready-fd", "3", (char *)ovs_volume_source(v), NULL };
	bool systemd = false;
	pid_t pid;
	int rc;

	rc = ovs_mkdir_run_dir();
	if (rc == 0)
		rc = daemon_start_mode_systemd(&systemd);
	if (rc < 0)
		return rc;
	/* No unit name fits a source this long (rule 18): fork. */
	if (systemd && ovs_unit_name_fits(ovs_volume_source(v)))
		return daemon_start_unit(v);
	daemon_log_path(v, log, sizeof(log));
	pid = ovs_spawn_ready(ovs_helper_path("ovsnapd", "OVSNAPD"), argv, log,
			      DAEMON_START_TIMEOUT_MS);
	return pid < 0 ? (int)pid : 0;
}

/* "key=value" of a status reply: where the value starts, or NULL. */
static const char *state_field(const char *reply, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = reply; (p = strstr(p, key)); p++)
		if ((p == reply || p[-1] == ' ') && p[n] == '=')
			return p + n + 1;
	return NULL;
}

static bool state_u64(const char *reply, const char *key, uint64_t *val)
{
	const char *p = state_field(reply, key);
	char *end;

	if (!p || *p < '0' || *p > '9')
		return false;
	errno = 0;
	*val = strtoull(p, &end, 10);
	return !errno && end != p && (*end == ' ' || *end == '\0');
}

int ovs_daemon_state_parse(const char *reply, struct ovs_daemon_state *st)
{
	const char *dev;
	unsigned int maj, min;
	uint64_t pid;

	memset(st, 0, sizeof(*st));
	if (strncmp(reply, "ok ", 3) != 0 || !state_u64(reply, "pid", &pid) || pid == 0 ||
	    pid > INT32_MAX)
		return ovs_err(EPROTO, "unexpected answer from the daemon: %s", reply);
	st->pid = (pid_t)pid;
	st->has_layer = state_u64(reply, "layer", &st->layer);
	st->has_open = state_u64(reply, "open", &st->open);
	dev = state_field(reply, "fusedev");
	if (dev && sscanf(dev, "%u:%u", &maj, &min) == 2) {
		st->has_fusedev = true;
		st->fusedev = makedev(maj, min);
	}
	st->src = state_field(reply, "src");
	return 0;
}

pid_t ovs_daemon_pid(struct ovs_volume *v)
{
	char reply[OVS_CTL_MSG_MAX];
	struct ovs_daemon_state st;
	int rc;

	rc = ovs_daemon_status(v, reply, sizeof(reply));
	if (rc == 0)
		rc = ovs_daemon_state_parse(reply, &st);
	return rc < 0 ? rc : st.pid;
}

/*
 * The daemon's pidfd, opened while it still answers on its socket (so the
 * pid is its, not a reused one): -1 when it cannot be had.
 */
static int daemon_pidfd(struct ovs_volume *v, pid_t *pid)
{
	int fd;

	*pid = ovs_daemon_pid(v);
	if (*pid <= 0)
		return -1;
	fd = pidfd_open(*pid, 0);
	if (fd < 0)
		return -1;
	/* Still the daemon of v: it answered after the pidfd was opened. */
	if (ovs_daemon_pid(v) != *pid) {
		close(fd);
		return -1;
	}
	return fd;
}

int ovs_daemon_stop(struct ovs_volume *v, bool lazy)
{
	char reply[OVS_CTL_MSG_MAX], log[PATH_MAX];
	struct pollfd pfd = { .events = POLLIN };
	pid_t pid;
	int rc, err;

	pfd.fd = daemon_pidfd(v, &pid);
	rc = ovs_ctl_call(ovs_volume_socket(v), lazy ? "stop lazy" : "stop", -1,
			  reply, sizeof(reply), 60000);
	/* A lazy stop leaves the daemon serving what is still open through
	 * the detached mount: it exits when the last of it is closed. */
	if (rc < 0 || lazy) {
		if (pfd.fd >= 0)
			close(pfd.fd);
		return rc;
	}
	/* Gone already, or a daemon that does not tell its pid: the stop
	 * itself succeeded, so do not fail the deactivation over it. */
	if (pfd.fd < 0)
		return 0;
	/* The unmount is done; the daemon still holds fds on the filesystem
	 * (SRC, its nodes, the layer) until it exits, and an umount of the
	 * filesystem fails "target is busy" until then. */
	do
		rc = poll(&pfd, 1, DAEMON_EXIT_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	err = errno;
	close(pfd.fd);
	if (rc < 0)
		return ovs_err(err, "wait for the daemon (pid %d) to exit: %s", (int)pid,
			       strerror(err));
	if (rc == 0) {
		daemon_log_path(v, log, sizeof(log));
		ovs_err(ETIMEDOUT, "the daemon (pid %d) unmounted %s but has not exited "
			"after %d s: it still holds files of the filesystem (see %s)",
			(int)pid, ovs_volume_source(v), DAEMON_EXIT_TIMEOUT_MS / 1000, log);
		return 1;
	}
	return 0;
}

int ovs_daemon_take(struct ovs_volume *v, const char *name, uint64_t *id)
{
	char req[OVS_CTL_MSG_MAX], reply[OVS_CTL_MSG_MAX], *end;
	int rc;

	snprintf(req, sizeof(req), "take %s", name && *name ? name : "-");
	/* No timeout: a take waits for dirty data to reach the disk, and
	 * that is as long as it is. */
	rc = ovs_ctl_call(ovs_volume_socket(v), req, ovs_volume_lock_fd(v),
			  reply, sizeof(reply), -1);
	if (rc < 0)
		return rc;
	if (strncmp(reply, "ok ", 3) != 0)
		return ovs_err(EPROTO, "unexpected answer from the daemon: %s", reply);
	errno = 0;
	*id = strtoull(reply + 3, &end, 10);
	if (errno || end == reply + 3)
		return ovs_err(EPROTO, "unexpected answer from the daemon: %s", reply);
	return 0;
}

/* Fold the active layer (the newest snapshot) while the volume stays
 * online: the daemon does it under its barrier, with the held lock. */
static int daemon_fold(struct ovs_volume *v, const char *req, uint64_t *now_active)
{
	char reply[OVS_CTL_MSG_MAX], *end;
	int rc;

	/* No timeout: a merge takes as long as its entries take to move. */
	rc = ovs_ctl_call(ovs_volume_socket(v), req, ovs_volume_lock_fd(v),
			  reply, sizeof(reply), -1);
	if (rc < 0)
		return rc;
	errno = 0;
	if (strncmp(reply, "ok ", 3) == 0)
		*now_active = strtoull(reply + 3, &end, 10);
	if (strncmp(reply, "ok ", 3) != 0 || errno || end == reply + 3)
		return ovs_err(EPROTO, "unexpected answer from the daemon: %s", reply);
	return 0;
}

int ovs_daemon_merge_active(struct ovs_volume *v, uint64_t older, uint64_t newer)
{
	char req[64];
	uint64_t now_active;

	snprintf(req, sizeof(req), "merge-active %" PRIu64 " %" PRIu64, older, newer);
	return daemon_fold(v, req, &now_active);
}

int ovs_daemon_drop_active(struct ovs_volume *v, uint64_t id)
{
	char req[64];
	uint64_t now_active;

	snprintf(req, sizeof(req), "drop-active %" PRIu64, id);
	return daemon_fold(v, req, &now_active);
}

/* Refuse while processes hold something under src: it would bypass the
 * snapshot mount that is about to cover it. */
int ovs_check_no_users(const char *cmd, const char *src)
{
	char list[256] = "";
	size_t n, len = 0;
	pid_t *pids;
	int rc;

	rc = ovs_path_users(src, &pids, &n);
	if (rc < 0) {
		ovs_error_lib(rc, "%s %s", cmd, src);
		return EXIT_FAIL;
	}
	if (n == 0)
		return EXIT_OK;
	for (size_t i = 0; i < n && len < sizeof(list) - 16; i++)
		len += snprintf(list + len, sizeof(list) - len, "%s%d", i ? " " : "", pids[i]);
	free(pids);
	ovs_error("%s %s: in use by process%s %s%s (their open files would bypass "
		  "the snapshot mount; stop them or use --force)", cmd, src,
		  n > 1 ? "es" : "", list, len >= sizeof(list) - 16 ? " ..." : "");
	return EXIT_FAIL;
}

bool ovs_mount_dead(const char *src)
{
	struct statx stx;

	/* FORCE_SYNC: the kernel answers a plain stat from its attribute
	 * cache, which ovsnapd lets it keep for a day, even after the
	 * daemon died. */
	return statx(AT_FDCWD, src, AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &stx) < 0 &&
	       errno == ENOTCONN;
}

int ovs_umount_dead(const char *src)
{
	int rc;

	if (!ovs_mount_dead(src))
		return 0;
	rc = ovs_umount_lazy(src);
	return rc < 0 ? rc : 1;
}
