/*
 * The control channel between the CLI and a volume's daemon (control.h).
 *
 * SOCK_SEQPACKET keeps message boundaries, so one send is one request and
 * one recv is one reply: no framing of our own.  The volume lock travels
 * with "take" as SCM_RIGHTS so that it stays held while the daemon works,
 * even if the CLI is killed meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "libovsnap.h"
#include "control.h"
#include "ovsnap-private.h"

static int fill_addr(const char *sockpath, struct sockaddr_un *addr)
{
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	if (strlen(sockpath) >= sizeof(addr->sun_path))
		return ovs_err(ENAMETOOLONG, "socket path too long: %s", sockpath);
	strcpy(addr->sun_path, sockpath);
	return 0;
}

/* Wait until fd is ready for events; timeout_ms < 0 waits forever. */
static int wait_fd(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int64_t start = ovs_mono_ms();
	int left = timeout_ms, rc;

	for (;;) {
		rc = poll(&pfd, 1, left);
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
		if (timeout_ms >= 0) {
			left = timeout_ms - (int)(ovs_mono_ms() - start);
			if (left < 0)
				left = 0;
		}
	}
}

static int send_msg(int fd, const char *msg, int fd_to_pass)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (iov.iov_len >= OVS_CTL_MSG_MAX)
		return -EMSGSIZE;
	if (fd_to_pass >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
	}
	while (sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/* Receive one message, NUL-terminated; a passed fd goes to *fd_out (or is
 * closed when the caller does not want one). */
static int recv_msg(int fd, char *buf, size_t len, int *fd_out)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len - 1 };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *c;
	ssize_t n;

	if (fd_out)
		*fd_out = -1;
	do {
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		int nfds, fds[4];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (nfds > 4)
			nfds = 4;
		memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
		for (int i = 0; i < nfds; i++) {
			if (fd_out && *fd_out < 0)
				*fd_out = fds[i];
			else
				close(fds[i]);
		}
	}
	if (n == 0)
		return -ECONNRESET;	/* peer closed without a word */
	if (mh.msg_flags & MSG_TRUNC)
		return -EMSGSIZE;
	buf[n] = 0;
	return (int)n;
}

int ovs_ctl_call(const char *sockpath, const char *req, int fd_to_pass,
		 char *reply, size_t len, int timeout_ms)
{
	struct sockaddr_un addr;
	char buf[OVS_CTL_MSG_MAX];
	int fd, rc;

	rc = fill_addr(sockpath, &addr);
	if (rc < 0)
		return rc;
	/* Whoever could write the run directory could answer for a
	 * daemon (rule 20); a missing one is the daemon not running. */
	rc = ovs_run_dir_check(0);
	if (rc == -EPERM)
		return rc;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ovs_err(errno, "socket: %m");
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		rc = errno;
		close(fd);
		if (rc == ENOENT || rc == ECONNREFUSED)
			return ovs_err(rc, "the snapshot-mount daemon is not running (%s)",
				       sockpath);
		return ovs_err(rc, "connect to %s: %s", sockpath, strerror(rc));
	}
	rc = send_msg(fd, req, fd_to_pass);
	if (rc < 0) {
		close(fd);
		return ovs_err(-rc, "send to the daemon: %s", strerror(-rc));
	}
	rc = wait_fd(fd, POLLIN, timeout_ms);
	if (rc < 0) {
		close(fd);
		if (rc == -ETIMEDOUT)
			return ovs_err(ETIMEDOUT, "the snapshot-mount daemon did not answer in time");
		return ovs_err(-rc, "wait for the daemon: %s", strerror(-rc));
	}
	rc = recv_msg(fd, buf, sizeof(buf), NULL);
	close(fd);
	if (rc < 0) {
		if (rc == -ECONNRESET)
			return ovs_err(EPIPE, "the snapshot-mount daemon hung up without answering");
		return ovs_err(-rc, "receive from the daemon: %s", strerror(-rc));
	}
	if (strncmp(buf, "err ", 4) == 0) {
		char *end;
		long err = strtol(buf + 4, &end, 10);

		if (end == buf + 4 || err <= 0 || err > 4095)
			err = EIO;
		while (*end == ' ')
			end++;
		if (reply && len)
			snprintf(reply, len, "%s", buf);
		return ovs_err((int)err, "%s", *end ? end : strerror((int)err));
	}
	if (reply && len)
		snprintf(reply, len, "%s", buf);
	return 0;
}

int ovs_ctl_listen(const char *sockpath)
{
	struct sockaddr_un addr;
	int fd, rc;

	rc = fill_addr(sockpath, &addr);
	if (rc < 0)
		return rc;
	/* Whoever could write the run directory could answer for a
	 * daemon (rule 20); a missing one is the daemon not running. */
	rc = ovs_run_dir_check(0);
	if (rc == -EPERM)
		return rc;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ovs_err(errno, "socket: %m");
	/* A stale socket of a dead daemon: whoever starts a daemon holds the
	 * volume lock, so no live daemon owns it. */
	if (unlink(sockpath) < 0 && errno != ENOENT) {
		rc = ovs_err(errno, "remove stale %s: %m", sockpath);
		close(fd);
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chmod(sockpath, 0600) < 0 || listen(fd, 16) < 0) {
		rc = ovs_err(errno, "listen on %s: %m", sockpath);
		close(fd);
		return rc;
	}
	return fd;
}

int ovs_ctl_recv(int fd, char *buf, size_t len, int *fd_out)
{
	int rc = recv_msg(fd, buf, len, fd_out);

	if (rc < 0)
		return ovs_err(-rc, "receive a control request: %s", strerror(-rc));
	return rc;
}

int ovs_ctl_reply(int fd, const char *fmt, ...)
{
	char buf[OVS_CTL_MSG_MAX];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rc = send_msg(fd, buf, -1);
	if (rc < 0)
		return ovs_err(-rc, "send a control reply: %s", strerror(-rc));
	return 0;
}

int ovs_ctl_quiesce(const struct ovs_volume *v)
{
	char reply[OVS_CTL_MSG_MAX];
	int rc;

	/* No timeout: a preserve takes as long as its copy takes. */
	rc = ovs_ctl_call(ovs_volume_socket(v), "quiesce", -1, reply, sizeof(reply), -1);
	/* No daemon, or one from before "quiesce" existed (it preserved
	 * under its take, never into an older layer): nothing to wait for. */
	if (rc == -ENOENT || rc == -ECONNREFUSED || rc == -EINVAL)
		return 0;
	return rc < 0 ? ovs_err_keep(rc, "wait for the snapshot mount's preserves") : 0;
}
