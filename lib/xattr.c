/*
 * xattrs on any object without following symlinks, and the overlay layer
 * format's opaque flag.
 *
 * The *xattrat syscalls (Linux 6.13) reach a symlink's own xattrs from a
 * directory fd + name.  Older kernels get the classic trick instead: an
 * O_PATH|O_NOFOLLOW fd of the object reached again through its
 * /proc/self/fd magic link, which lands on the object itself (the symlink,
 * not its target).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "libovsnap.h"
#include "preserve.h"

/* The generic syscall table numbers, the same on x86_64 (checked on 6.18). */
#ifndef __NR_setxattrat
# define __NR_setxattrat	463
#endif
#ifndef __NR_getxattrat
# define __NR_getxattrat	464
#endif
#ifndef __NR_listxattrat
# define __NR_listxattrat	465
#endif
#ifndef __NR_removexattrat
# define __NR_removexattrat	466
#endif

struct ovs_xattr_args {
	uint64_t value;
	uint32_t size;
	uint32_t flags;
};

/* 0: untested, 1: the kernel has the *xattrat calls, -1: it has not. */
static int have_xattrat;

static bool xattrat_missing(long rc)
{
	if (rc >= 0 || errno != ENOSYS)
		return false;
	__atomic_store_n(&have_xattrat, -1, __ATOMIC_RELAXED);
	return true;
}

static bool use_xattrat(void)
{
	int have = __atomic_load_n(&have_xattrat, __ATOMIC_RELAXED);

	if (have == 0) {
		/* Tests exercise the fallback of older kernels with this. */
		have = getenv("OVSNAP_TEST_NO_XATTRAT") ? -1 : 1;
		__atomic_store_n(&have_xattrat, have, __ATOMIC_RELAXED);
	}
	return have > 0;
}

/* The fallback: an O_PATH fd of the object and its /proc/self/fd path.
 * name "" means dirfd itself. */
static int proc_path_open(int dirfd, const char *name, char *path, size_t len)
{
	int fd;

	if (!*name)
		fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	else
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

static int at_flags(const char *name)
{
	return AT_SYMLINK_NOFOLLOW | (*name ? 0 : AT_EMPTY_PATH);
}

/* These return -errno without setting a message: ENODATA, ENOTSUP and
 * ERANGE are ordinary answers to the callers, not failures. */
ssize_t ovs_lgetxattrat(int dirfd, const char *name, const char *attr, void *buf, size_t len)
{
	char path[64];
	ssize_t rc;
	int fd, saved;

	if (use_xattrat()) {
		struct ovs_xattr_args args = {
			.value = (uintptr_t)buf, .size = len,
		};

		rc = syscall(__NR_getxattrat, dirfd, name, at_flags(name), attr,
			     &args, sizeof(args));
		if (!xattrat_missing(rc))
			return rc < 0 ? -errno : rc;
	}
	fd = proc_path_open(dirfd, name, path, sizeof(path));
	if (fd < 0)
		return -errno;
	rc = getxattr(path, attr, buf, len);
	saved = errno;
	close(fd);
	return rc < 0 ? -saved : rc;
}

ssize_t ovs_llistxattrat(int dirfd, const char *name, char *buf, size_t len)
{
	char path[64];
	ssize_t rc;
	int fd, saved;

	if (use_xattrat()) {
		rc = syscall(__NR_listxattrat, dirfd, name, at_flags(name), buf, len);
		if (!xattrat_missing(rc))
			return rc < 0 ? -errno : rc;
	}
	fd = proc_path_open(dirfd, name, path, sizeof(path));
	if (fd < 0)
		return -errno;
	rc = listxattr(path, buf, len);
	saved = errno;
	close(fd);
	return rc < 0 ? -saved : rc;
}

int ovs_lsetxattrat(int dirfd, const char *name, const char *attr, const void *val,
		    size_t len, int flags)
{
	char path[64];
	int fd, rc, saved;

	if (use_xattrat()) {
		struct ovs_xattr_args args = {
			.value = (uintptr_t)val, .size = len, .flags = flags,
		};

		rc = syscall(__NR_setxattrat, dirfd, name, at_flags(name), attr,
			     &args, sizeof(args));
		if (!xattrat_missing(rc))
			return rc < 0 ? -errno : rc;
	}
	fd = proc_path_open(dirfd, name, path, sizeof(path));
	if (fd < 0)
		return -errno;
	rc = setxattr(path, attr, val, len, flags);
	saved = errno;
	close(fd);
	return rc < 0 ? -saved : rc;
}

int ovs_lremovexattrat(int dirfd, const char *name, const char *attr)
{
	char path[64];
	int fd, rc, saved;

	if (use_xattrat()) {
		rc = syscall(__NR_removexattrat, dirfd, name, at_flags(name), attr);
		if (!xattrat_missing(rc))
			return rc < 0 ? -errno : rc;
	}
	fd = proc_path_open(dirfd, name, path, sizeof(path));
	if (fd < 0)
		return -errno;
	rc = removexattr(path, attr);
	saved = errno;
	close(fd);
	return rc < 0 ? -saved : rc;
}

/* Only "y" makes a directory opaque.  "x" (kernel 6.7+) marks a directory of
 * a lower layer that holds xwhiteouts and merges with what is below it: the
 * kernel reads it as not opaque, and so must every reader of ovsnap's. */
int ovl_is_opaque_at(int dirfd, const char *name)
{
	char val[4];
	ssize_t n = ovs_lgetxattrat(dirfd, name, OVL_XATTR_OPAQUE, val, sizeof(val));

	if (n < 0) {
		if (n == -ENODATA || n == -ENOTSUP || n == -ERANGE)
			return 0;
		return ovs_err(-n, "read %s of %s: %s", OVL_XATTR_OPAQUE,
			       *name ? name : ".", strerror(-n));
	}
	return n == 1 && val[0] == 'y';
}

int ovl_set_opaque_at(int dirfd, const char *name)
{
	int rc = ovs_lsetxattrat(dirfd, name, OVL_XATTR_OPAQUE, "y", 1, 0);

	if (rc < 0)
		return ovs_err(-rc, "set %s on %s: %s", OVL_XATTR_OPAQUE,
			       *name ? name : ".", strerror(-rc));
	return 0;
}
