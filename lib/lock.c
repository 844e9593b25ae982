/*
 * The per-volume lock and the intent record of multi-step operations.
 *
 * The lock is flock() on <store>/lock: the kernel drops it when the last
 * holder of the open file dies, so a crashed command never leaves a stale
 * lock.  The holder writes "<pid> <what>" into the file so that a second
 * command can say who is in its way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ovsnap-private.h"

int ovs_lock_note(int lockfd, const char *what)
{
	char note[256];
	int n;

	n = snprintf(note, sizeof(note), "%d %s\n", (int)getpid(), what && *what ? what : "ovsnap");
	if (n >= (int)sizeof(note)) {
		note[sizeof(note) - 2] = '\n';
		n = sizeof(note) - 1;
	}
	/* not durable on purpose: a note only matters while its holder lives */
	if (ftruncate(lockfd, 0) < 0 || pwrite(lockfd, note, n, 0) != n)
		return ovs_err(errno, "cannot write the lock file: %m");
	return 0;
}

static void describe_holder(int fd, char *buf, size_t len)
{
	char note[256];
	ssize_t n = pread(fd, note, sizeof(note) - 1, 0);
	char *what, *nl;
	long pid;

	if (n <= 0)
		goto unknown;
	note[n] = '\0';
	nl = strchr(note, '\n');
	if (nl)
		*nl = '\0';
	pid = strtol(note, &what, 10);
	if (what == note || pid <= 0 || *what != ' ')
		goto unknown;
	snprintf(buf, len, "%s (pid %ld)", what + 1, pid);
	return;
unknown:
	/* the holder has not written its note yet */
	snprintf(buf, len, "another ovsnap command");
}

void (*ovs_lock_wait_hook)(const struct ovs_volume *v, const char *holder);

int ovs_volume_lock(struct ovs_volume *v, bool wait, const char *what)
{
	char holder[300];
	int fd, rc;

	if (v->lockfd >= 0)
		return 0;
	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	fd = openat(v->dirfd, OVS_LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return ovs_err(errno, "cannot open %s/%s: %m", v->store, OVS_LOCK_FILE);
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			rc = ovs_err(errno, "cannot lock %s/%s: %m", v->store, OVS_LOCK_FILE);
			goto fail;
		}
		if (!wait) {
			describe_holder(fd, holder, sizeof(holder));
			rc = ovs_err(EBUSY, "volume %s is busy: %s holds its lock", v->source,
				     holder);
			goto fail;
		}
		if (ovs_lock_wait_hook) {
			describe_holder(fd, holder, sizeof(holder));
			ovs_lock_wait_hook(v, holder);
		}
		while (flock(fd, LOCK_EX) < 0) {
			if (errno != EINTR) {
				rc = ovs_err(errno, "cannot lock %s/%s: %m", v->store,
					     OVS_LOCK_FILE);
				goto fail;
			}
		}
		break;
	}
	rc = ovs_lock_note(fd, what);
	if (rc < 0)
		goto fail;
	v->lockfd = fd;
	return 0;
fail:
	close(fd);
	return rc;
}

void ovs_volume_unlock(struct ovs_volume *v)
{
	if (v->lockfd < 0)
		return;
	/* closing releases the lock unless a copy of the fd was handed to the
	 * daemon, which then keeps it until it is done */
	close(v->lockfd);
	v->lockfd = -1;
}

int ovs_volume_lock_fd(const struct ovs_volume *v)
{
	return v->lockfd;
}

/* ---- intent records ------------------------------------------------------- */

int ovs_intent_write(struct ovs_volume *v, const char *text)
{
	size_t n = strlen(text);
	char *buf;
	int rc;

	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	if (n == 0 || memchr(text, '\n', n))
		return ovs_err(EINVAL, "an intent is one non-empty line");
	buf = malloc(n + 2);
	if (!buf)
		return ovs_err(ENOMEM, "out of memory");
	memcpy(buf, text, n);
	buf[n] = '\n';
	rc = ovs_write_file_atomic(v->dirfd, OVS_INTENT_FILE, buf, n + 1, 0600);
	free(buf);
	if (rc < 0)
		return ovs_err_keep(rc, "cannot record the intent in %s", v->store);
	return 0;
}

int ovs_intent_read(struct ovs_volume *v, char *buf, size_t len)
{
	char *text;
	size_t n;
	int rc;

	if (len)
		buf[0] = '\0';
	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	rc = ovs_read_file_at(v->dirfd, OVS_INTENT_FILE, &text, &n, 64 * 1024);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return ovs_err(rc, "cannot read %s/%s: %s", v->store, OVS_INTENT_FILE,
			       strerror(-rc));
	/* written atomically, so a record without its newline was not ours */
	if (n == 0 || text[n - 1] != '\n' || memchr(text, '\n', n - 1)) {
		free(text);
		return ovs_err(EUCLEAN, "%s/%s: not an intent record", v->store, OVS_INTENT_FILE);
	}
	text[n - 1] = '\0';
	if (n > len) {
		free(text);
		return ovs_err(ENOBUFS, "%s/%s: intent longer than the buffer", v->store,
			       OVS_INTENT_FILE);
	}
	memcpy(buf, text, n);
	free(text);
	return 0;
}

int ovs_intent_clear(struct ovs_volume *v)
{
	if (v->dirfd < 0)
		return ovs_err(ENOENT, "store %s of %s is missing", v->store, v->source);
	if (unlinkat(v->dirfd, OVS_INTENT_FILE, 0) < 0) {
		if (errno == ENOENT)
			return 0;
		return ovs_err(errno, "cannot remove %s/%s: %m", v->store, OVS_INTENT_FILE);
	}
	return ovs_fsync_dir(v->dirfd, ".");
}
