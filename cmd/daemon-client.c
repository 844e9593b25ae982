/*
 * The CLI side of a volume's snapshot-mount daemon: is it running, start
 * it, stop it, and ask it to take a snapshot.  Every command that needs
 * the daemon goes through here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "control.h"

#include <libmount.h>

/* How long a starting daemon may take to mount (it scans SRC once for
 * hard links, which on a large tree takes a while). */
#define DAEMON_START_TIMEOUT_MS (10 * 60 * 1000)

int ovs_daemon_status(struct ovs_volume *v, char *reply, size_t len)
{
	return ovs_ctl_call(ovs_volume_socket(v), "status", -1, reply, len, 5000);
}

bool ovs_daemon_running(struct ovs_volume *v)
{
	char reply[OVS_CTL_MSG_MAX];

	return ovs_daemon_status(v, reply, sizeof(reply)) == 0;
}

/* The daemon next to this binary (a build tree), else the installed one. */
static const char *daemon_path(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("OVSNAPD");
	ssize_t n;
	char *slash;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	if (n > 0) {
		path[n] = 0;
		slash = strrchr(path, '/');
		if (slash) {
			strcpy(slash + 1, "ovsnapd");
			if (access(path, X_OK) == 0)
				return path;
		}
	}
	return SBINDIR "/ovsnapd";
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

static void exec_daemon(struct ovs_volume *v, int ready_fd)
{
	const char *prog = daemon_path();
	char log[PATH_MAX];
	int fd;

	setsid();
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
	}
	daemon_log_path(v, log, sizeof(log));
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0)
		dup2(fd, 2);
	if (ready_fd != 3) {
		dup2(ready_fd, 3);
		close(ready_fd);
	}
	fcntl(3, F_SETFD, 0);
	/* Nothing of ours (the volume lock above all) may live on in the
	 * daemon. */
	close_range(4, ~0U, 0);
	execl(prog, "ovsnapd", "--ready-fd", "3", ovs_volume_source(v), (char *)NULL);
	dprintf(3, "err cannot run %s: %s\n", prog, strerror(errno));
	_exit(127);
}

int ovs_daemon_start(struct ovs_volume *v)
{
	char buf[1024], log[PATH_MAX];
	struct pollfd pfd;
	size_t got = 0;
	int pipefd[2], rc, status;
	pid_t pid;

	rc = mkdir_p(ovs_run_dir(), 0700);
	if (rc < 0)
		return ovs_err(rc, "cannot create %s: %s", ovs_run_dir(), strerror(-rc));
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return ovs_err(errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		rc = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return ovs_err(rc, "fork: %s", strerror(rc));
	}
	if (pid == 0) {
		close(pipefd[0]);
		exec_daemon(v, pipefd[1]);
	}
	close(pipefd[1]);

	/* The daemon answers "ok" once it is mounted and listening, or
	 * "err MESSAGE"; EOF means it died before it could say. */
	pfd.fd = pipefd[0];
	pfd.events = POLLIN;
	while (got < sizeof(buf) - 1) {
		ssize_t n;

		rc = poll(&pfd, 1, DAEMON_START_TIMEOUT_MS);
		if (rc == 0) {
			kill(pid, SIGKILL);
			close(pipefd[0]);
			return ovs_err(ETIMEDOUT, "the snapshot-mount daemon did not start in time");
		}
		if (rc < 0 && errno == EINTR)
			continue;
		n = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += n;
		if (memchr(buf, '\n', got))
			break;
	}
	close(pipefd[0]);
	buf[got] = 0;
	buf[strcspn(buf, "\n")] = 0;
	if (strcmp(buf, "ok") == 0)
		return 0;
	if (strncmp(buf, "err ", 4) == 0)
		return ovs_err(EIO, "%s", buf + 4);
	daemon_log_path(v, log, sizeof(log));
	if (waitpid(pid, &status, WNOHANG) == pid && WIFSIGNALED(status))
		return ovs_err(EIO, "the snapshot-mount daemon died with signal %d (see %s)",
			       WTERMSIG(status), log);
	return ovs_err(EIO, "the snapshot-mount daemon exited before it was ready (see %s)", log);
}

int ovs_daemon_stop(struct ovs_volume *v, bool lazy)
{
	char reply[OVS_CTL_MSG_MAX];

	return ovs_ctl_call(ovs_volume_socket(v), lazy ? "stop lazy" : "stop", -1,
			    reply, sizeof(reply), 60000);
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

int ovs_umount_dead(const char *src)
{
	struct libmnt_context *cxt;
	struct stat st;
	int rc;

	if (stat(src, &st) == 0 || errno != ENOTCONN)
		return 0;
	cxt = mnt_new_context();
	if (!cxt)
		return ovs_err(ENOMEM, "out of memory");
	mnt_context_set_target(cxt, src);
	mnt_context_enable_lazy(cxt, 1);
	rc = mnt_context_umount(cxt);
	if (rc != 0) {
		char msg[256] = "";

		mnt_context_get_excode(cxt, rc, msg, sizeof(msg));
		mnt_free_context(cxt);
		return ovs_err(EIO, "cannot unmount the dead snapshot mount: %s",
			       *msg ? msg : "unknown error");
	}
	mnt_free_context(cxt);
	return 0;
}
