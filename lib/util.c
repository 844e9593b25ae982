/* Small helpers every part of libovsnap uses: durable writes, paths, time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ovsnap-private.h"
#include "walk.h"

const char *ovs_state_dir(void)
{
	const char *d = getenv("OVSNAP_STATE_DIR");

	return d && *d ? d : STATEDIR;
}

const char *ovs_run_dir(void)
{
	const char *d = getenv("OVSNAP_RUN_DIR");

	return d && *d ? d : RUNSTATEDIR;
}

int ovs_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int ovs_fsync_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return ovs_err(errno, "open %s: %m", name);
	if (fsync(fd) < 0)
		rc = ovs_err(errno, "fsync %s: %m", name);
	close(fd);
	return rc;
}

int ovs_write_file_atomic(int dirfd, const char *name, const void *buf, size_t len,
			  mode_t mode)
{
	char tmp[NAME_MAX + 1];
	int fd, rc;

	static unsigned counter;

	/* pid and counter keep two writers (processes or daemon threads) from
	 * sharing a temp name; a crashed writer's leftover is overwritten by
	 * O_TRUNC or removed by fsck. */
	if (snprintf(tmp, sizeof(tmp), ".%s.tmp.%d.%u", name, (int)getpid(),
		     __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp))
		return ovs_err(ENAMETOOLONG, "%s: name too long", name);
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return ovs_err(errno, "create %s: %m", tmp);
	rc = ovs_pwrite_all(fd, buf, len, -1);
	if (rc < 0) {
		ovs_err(-rc, "write %s: %s", tmp, strerror(-rc));
		goto fail;
	}
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		rc = ovs_err(errno, "write %s: %m", tmp);
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = ovs_err(errno, "write %s: %m", tmp);
		goto fail;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		rc = ovs_err(errno, "rename %s to %s: %m", tmp, name);
		goto fail;
	}
	return ovs_fsync_dir(dirfd, ".");
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	return rc;
}

int ovs_read_file_at(int dirfd, const char *name, char **buf, size_t *len, size_t max)
{
	size_t size = 0, alloc = 4096;
	char *p = NULL;
	int fd, rc;

	struct stat st;

	/* O_NONBLOCK: a FIFO planted in place of a registry must not hang
	 * the daemon; only a regular file is read. */
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fstat(fd, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		close(fd);
		return rc;
	}
	for (;;) {
		ssize_t n;

		if (!p || size + 1 >= alloc) {
			char *np;

			if (p)
				alloc *= 2;
			np = realloc(p, alloc);
			if (!np) {
				rc = -ENOMEM;
				goto fail;
			}
			p = np;
		}
		n = read(fd, p + size, alloc - size - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto fail;
		}
		if (n == 0)
			break;
		size += n;
		if (size > max) {
			rc = -EFBIG;
			goto fail;
		}
	}
	close(fd);
	p[size] = '\0';
	*buf = p;
	if (len)
		*len = size;
	return 0;
fail:
	close(fd);
	free(p);
	return rc;
}

struct remove_walk {
	dev_t dev;
	int rc;		/* the first error; the removal goes on past it */
};

static void remove_failed(struct remove_walk *w, int err)
{
	if (!w->rc)
		w->rc = -err;
}

static int remove_entry(void *arg, struct ovs_walk_dir *d, const char *name, const char *path,
			struct ovs_walk_dir *child)
{
	struct remove_walk *w = arg;
	struct stat st;

	if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			remove_failed(w, errno);
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(d->fd, name, 0) < 0 && errno != ENOENT)
			remove_failed(w, errno);
		return 0;
	}
	if (st.st_dev != w->dev) {
		remove_failed(w, EXDEV);
		return 0;
	}
	child->fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (child->fd < 0) {
		remove_failed(w, errno);
		return 0;
	}
	return OVS_WALK_DESCEND;
}

/* A directory emptied: remove it from its parent (the root stays). */
static int remove_leave(void *arg, struct ovs_walk_dir *d, struct ovs_walk_dir *parent,
			const char *path)
{
	struct remove_walk *w = arg;

	if (parent && unlinkat(parent->fd, d->name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		remove_failed(w, errno);
	return 0;
}

static int remove_read_error(void *arg, struct ovs_walk_dir *d, const char *path, int err)
{
	remove_failed(arg, -err);
	return 0;
}

static const struct ovs_walk_ops remove_ops = {
	.entry = remove_entry,
	.leave = remove_leave,
	.read_error = remove_read_error,
};

/* Remove everything below the directory dirfd (taken over), in bounded
 * stack for any depth. */
static int remove_tree_fd(int dirfd, dev_t dev)
{
	struct remove_walk w = { .dev = dev };
	struct ovs_walk_dir root = { .fd = dirfd, .aux = -1 };
	int rc = ovs_walk(&root, "", &remove_ops, &w);

	return rc < 0 ? rc : w.rc;
}

int ovs_remove_tree_at(int dirfd, const char *name)
{
	struct stat st;
	int fd, rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : ovs_err(errno, "remove %s: %m", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0)
			return ovs_err(errno, "remove %s: %m", name);
		return 0;
	}
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ovs_err(errno, "remove %s: %m", name);
	rc = remove_tree_fd(fd, st.st_dev);
	if (rc < 0)
		return ovs_err(-rc, "remove %s: %s", name, strerror(-rc));
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		return ovs_err(errno, "remove %s: %m", name);
	return 0;
}

int ovs_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

static bool escape_keeps(unsigned char c, bool first)
{
	if (first && c == '.')
		return false;
	/* Not '\\', ':' or ',': overlayfs reads them as escapes and
	 * separators in lowerdir=, and layer paths must stay usable in a
	 * hand-written mount command. */
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.';
}

int ovs_path_escape(const char *path, char *buf, size_t len)
{
	size_t o = 0;
	const char *p = path;

	if (*p != '/')
		return ovs_err(EINVAL, "%s: not an absolute path", path);
	while (*p == '/')
		p++;
	if (!*p) {
		if (len < 2)
			goto toolong;
		strcpy(buf, "-");
		return 0;
	}
	for (; *p; p++) {
		unsigned char c = *p;

		if (c == '/') {
			/* a trailing or doubled slash adds nothing */
			if (p[1] == '/' || p[1] == '\0')
				continue;
			if (o + 1 >= len)
				goto toolong;
			buf[o++] = '-';
		} else if (escape_keeps(c, o == 0)) {
			if (o + 1 >= len)
				goto toolong;
			buf[o++] = c;
		} else {
			if (o + 3 >= len)
				goto toolong;
			snprintf(buf + o, 4, "%%%02x", c);
			o += 3;
		}
	}
	buf[o] = '\0';
	return 0;
toolong:
	return ovs_err(ENAMETOOLONG, "%s: path too long to name its store folder", path);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ovs_path_unescape(const char *name, char *buf, size_t len)
{
	size_t o = 0;

	if (len < 2)
		return -ENAMETOOLONG;
	buf[o++] = '/';
	if (strcmp(name, "-") == 0) {
		buf[o] = '\0';
		return 0;
	}
	for (const char *p = name; *p; p++) {
		char c = *p;

		if (c == '-') {
			c = '/';
		} else if (c == '%') {
			int hi, lo;

			if ((hi = hexval(p[1])) < 0 || (lo = hexval(p[2])) < 0)
				return -EINVAL;
			c = (char)(hi << 4 | lo);
			p += 2;
		}
		if (o + 1 >= len)
			return -ENAMETOOLONG;
		buf[o++] = c;
	}
	buf[o] = '\0';
	return 0;
}

int ovs_path_inside(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	if (strncmp(path, dir, n) != 0)
		return 0;
	return path[n] == '\0' || path[n] == '/';
}

void ovs_format_time_local(int64_t ns, char *buf, size_t len)
{
	time_t t = ns / 1000000000;
	struct tm tm;
	char zone[8];
	size_t n;

	if (!localtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	/* ISO 8601 wants +01:00, strftime gives +0100 */
	if (strftime(zone, sizeof(zone), "%z", &tm) == 5 && n + 7 <= len)
		snprintf(buf + n, len - n, "%.3s:%.2s", zone, zone + 3);
}

void ovs_format_time_utc(int64_t ns, char *buf, size_t len)
{
	time_t t = ns / 1000000000;
	struct tm tm;
	size_t n;

	if (!gmtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%09ldZ", (long)(ns % 1000000000));
}

int64_t ovs_now_ns(void)
{
	const char *fake = getenv("OVSNAP_TEST_NOW");
	struct timespec ts;

	if (fake && *fake) {
		char *end;
		long long s = strtoll(fake, &end, 10);

		if (end != fake && *end == '\0')
			return (int64_t)s * 1000000000;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ovs_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The mount id of what fd is on, from fdinfo: no call into the
 * filesystem, which a view whose daemon died would answer with
 * ENOTCONN.  -1 when it cannot be read. */
long ovs_fd_mnt_id(int fd)
{
	char path[64], line[256];
	long id = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "mnt_id:", 7) == 0)
			id = strtol(line + 7, NULL, 10);
	fclose(f);
	return id;
}

char *ovs_fd_path(int fd)
{
	char proc[64], *path = malloc(PATH_MAX);
	ssize_t n;

	if (!path)
		return NULL;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, path, PATH_MAX - 1);
	if (n <= 0 || path[0] != '/') {
		free(path);
		return NULL;
	}
	path[n] = 0;
	return path;
}

bool ovs_negative_number(const char *arg)
{
	if (arg[0] != '-' || !arg[1])
		return false;
	for (const char *p = arg + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int ovs_unlinked_tmpfile(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		FILE *f = tmpfile();	/* unlinked at once */

		if (!f)
			return -errno;
		fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
		fclose(f);
	}
	return fd < 0 ? -errno : fd;
}

size_t ovs_nofile_quarter(size_t max)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 4 >= max)
		return max;
	return (size_t)(rl.rlim_cur / 4);
}

int ovs_scratch_file(const char *name, bool *in_memory)
{
	int fd;

	if (!*in_memory) {
		fd = ovs_unlinked_tmpfile("/tmp");
		if (fd >= 0)
			return fd;
		/* not there, not writable, full: memory */
		*in_memory = true;
	}
	fd = memfd_create(name, MFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}
