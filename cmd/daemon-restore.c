/*
 * The control requests of ovsnap restore and rollback (ovsnap-restore(8)):
 *
 *   clone-into [owner=UID ]REL
 *                    (with an fd passed) the regular file at REL below SRC,
 *                    if it is root's or UID's (a user's file put there
 *                    meanwhile gets no data of root's: EAGAIN),
 *                    gets the data of the passed file: preserved first,
 *                    as any change of it through the snapshot mount would
 *                    be, then cloned (FICLONE; a copy of its data ranges
 *                    where the filesystem cannot clone).  FUSE cannot
 *                    carry a clone, so a restore through the mount alone
 *                    would copy every byte.  Answer "ok cloned" or
 *                    "ok copied".
 *   writers          how many files are open for writing through the
 *                    snapshot mount: "ok N".
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "daemon.h"
#include "clone.h"
#include "control.h"
#include "walk.h"

#define REAL_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV)

struct clone_into {
	const char *rel;
	int from;		/* the passed fd */
	uid_t owner;		/* besides root's, only a file of this owner */
	bool cloned;
	ino_t ino;
	dev_t dev;
};

static int clone_change(void *arg)
{
	struct clone_into *c = arg;
	struct stat st, wst;
	char proc[64];
	int pfd, fd, rc;

	/* The type first, on an O_PATH fd: opening a FIFO a user put there
	 * for writing would block this request, and with it every change
	 * and take, until a reader came. */
	pfd = ovs_open_beneath(D.srcfd, c->rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, REAL_RESOLVE);
	if (pfd < 0)
		return -pfd;
	if (fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(pfd);
		return EINVAL;
	}
	if (st.st_uid != 0 && st.st_uid != c->owner) {
		close(pfd);
		return EAGAIN;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	rc = fd < 0 ? errno : 0;
	close(pfd);
	if (rc)
		return rc;
	if (fstat(fd, &wst) < 0 || wst.st_dev != st.st_dev || wst.st_ino != st.st_ino) {
		close(fd);
		return EINVAL;
	}
	/* A clone or nothing: a copy of gigabytes here would hold up takes
	 * (rule 13); EXDEV tells the CLI to copy through the mount. */
	rc = ovs_clone_only(fd, c->from);
	close(fd);
	c->cloned = rc == 0;
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return rc < 0 ? -rc : 0;
}

static void clone_into(int conn, const char *rel, int passed)
{
	struct clone_into c = { .rel = rel, .from = passed, .owner = 0 };
	struct ovs_relpath path;
	fuse_ino_t nodeid;
	void *mem = NULL;
	int err;

	if (strncmp(rel, "owner=", 6) == 0) {
		char *end;
		unsigned long uid = strtoul(rel + 6, &end, 10);

		if (end == rel + 6 || *end != ' ' || uid > (uid_t)-2) {
			ovs_ctl_reply(conn, "err %d clone-into: bad owner", EINVAL);
			return;
		}
		c.owner = (uid_t)uid;
		c.rel = rel = end + 1;
	}
	if (passed < 0 || !*rel) {
		ovs_ctl_reply(conn, "err %d clone-into needs a path and a file", EINVAL);
		return;
	}
	err = ovs_relpath_split(rel, &path, &mem);
	if (err < 0) {
		ovs_ctl_reply(conn, "err %d bad path", -err);
		return;
	}
	path.srcdirfd = -1;
	err = change_object_by_request(&path, clone_change, &c);
	free(mem);
	if (err) {
		dlog(LOG_ERR, "clone-into %s: %s", rel, strerror(err));
		ovs_ctl_reply(conn, "err %d %s", err, strerror(err));
		return;
	}
	/* The kernel's pages and attributes of the file are out of date. */
	nodeid = node_find_ino(c.dev, c.ino);
	if (nodeid)
		fuse_lowlevel_notify_inval_inode(D.se, nodeid, 0, 0);
	ovs_ctl_reply(conn, "ok %s", c.cloned ? "cloned" : "copied");
}

bool restore_request(int conn, const char *req, int passed)
{
	if (strncmp(req, "clone-into ", 11) == 0) {
		clone_into(conn, req + 11, passed);
		return true;
	}
	if (strcmp(req, "writers") == 0) {
		fuse_ino_t *inos = NULL;
		size_t n = nodes_with_writers(&inos);

		free(inos);
		ovs_ctl_reply(conn, "ok %zu", n);
		return true;
	}
	return false;
}
