/*
 * Starting ovsnap's long-running processes (the snapshot-mount daemon and
 * the view servers) from the CLI, and the directory they live in.
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
#include <unistd.h>

#include "cmd.h"
#include "ovsnap-private.h"

/*
 * Start a helper process the way the CLI starts ovsnapd: fork, setsid,
 * stdin/stdout to /dev/null, stderr to log, a pipe on fd 3 on which it
 * says "ok" once it is ready or "err MESSAGE".  Returns its pid.
 * ovs_spawn_pass_fd >= 0: that fd is the child's fd 4 as well.
 */
int ovs_spawn_pass_fd = -1;

pid_t ovs_spawn_ready(const char *prog, char *const argv[], const char *log, int timeout_ms)
{
	char buf[1024];
	struct pollfd pfd;
	size_t got = 0;
	int pipefd[2], rc, status;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return ovs_err(errno, "pipe: %m");
	pid = fork();
	if (pid < 0) {
		rc = errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return ovs_err(rc, "fork: %s", strerror(rc));
	}
	if (pid == 0) {
		/* out of the way of 0-4 before they are set up */
		int fd, pass = ovs_spawn_pass_fd >= 0 ? fcntl(ovs_spawn_pass_fd, F_DUPFD, 10) : -1;

		setsid();
		/* a forked daemon is no service's: READY=1 or STOPPING=1
		 * would go to whatever service ran us */
		unsetenv("NOTIFY_SOCKET");
		/* a daemon started for a delegated user is no one's but root's */
		unsetenv("OVSNAP_DELEGATED_UID");
		unsetenv("OVSNAP_DELEGATED_TARGET_FD");
		unsetenv("OVSNAP_DELEGATED_GROUPS");
		unsetenv("OVSNAP_DELEGATED_SRC_ID");
		if (chdir("/") < 0)
			_exit(127);
		fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		if (pipefd[1] != 3) {
			dup2(pipefd[1], 3);
			close(pipefd[1]);
		}
		fcntl(3, F_SETFD, 0);
		if (pass >= 0 && dup2(pass, 4) == 4) {
			close_range(5, ~0U, 0);
		} else {
			if (ovs_spawn_pass_fd >= 0) {
				dprintf(3, "err cannot pass fd %d: %s\n", ovs_spawn_pass_fd,
					strerror(errno));
				_exit(127);
			}
			close_range(4, ~0U, 0);
		}
		execv(prog, argv);
		dprintf(3, "err cannot run %s: %s\n", prog, strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pfd.fd = pipefd[0];
	pfd.events = POLLIN;
	while (got < sizeof(buf) - 1) {
		ssize_t n;

		rc = poll(&pfd, 1, timeout_ms);
		if (rc == 0) {
			kill(pid, SIGKILL);
			close(pipefd[0]);
			return ovs_err(ETIMEDOUT, "%s did not start in time", prog);
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
		return pid;
	waitpid(pid, &status, 0);
	if (strncmp(buf, "err ", 4) == 0)
		return ovs_err(EIO, "%s", buf + 4);
	if (WIFSIGNALED(status))
		return ovs_err(EIO, "%s died with signal %d (see %s)", prog, WTERMSIG(status), log);
	return ovs_err(EIO, "%s exited before it was ready (see %s)", prog, log);
}

/* The run directory of sockets, logs and pid files: its parents 0755,
 * itself 0700 (root); the parents checked before it is made in them, and
 * all of it after (DESIGN.md rule 20, ovs_run_dir_check). */
int ovs_mkdir_run_dir(void)
{
	char tmp[PATH_MAX], *slash;
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s", ovs_run_dir()) >= (int)sizeof(tmp))
		return ovs_err(ENAMETOOLONG, "%s: name too long", ovs_run_dir());
	if (tmp[0] != '/')
		return ovs_err(EINVAL, "run directory %s: not an absolute path", tmp);
	slash = strrchr(tmp, '/');
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return ovs_err(errno, "cannot create %s: %s", tmp, strerror(errno));
		*p = '/';
	}
	if (slash != tmp) {
		char *what;
		int fd;

		*slash = '\0';
		if (asprintf(&what, "run directory %s", ovs_run_dir()) < 0)
			return ovs_err(ENOMEM, "out of memory");
		fd = ovs_safe_dir_open(tmp, what, OVS_SAFE_PARENT);
		free(what);
		if (fd < 0)
			return fd;
		close(fd);
		*slash = '/';
	}
	if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
		return ovs_err(errno, "cannot create %s: %s", tmp, strerror(errno));
	rc = ovs_run_dir_check(0);
	return rc < 0 ? rc : 0;
}

const char *ovs_helper_path(const char *name, const char *envvar)
{
	static char path[PATH_MAX];
	const char *env = getenv(envvar);
	ssize_t n;
	char *slash;

	if (env && *env)
		return env;
	n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		slash = strrchr(path, '/');
		if (slash && (size_t)(slash + 1 - path) + strlen(name) < sizeof(path)) {
			strcpy(slash + 1, name);
			if (access(path, X_OK) == 0)
				return path;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", SBINDIR, name);
	return path;
}
