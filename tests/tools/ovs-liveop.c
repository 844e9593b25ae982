/*
 * ovs-liveop — operations for comparing the live path with the real
 * filesystem that the shell has no plain command for:
 *   mmap FILE OFF TEXT      open O_RDWR|O_APPEND, write TEXT at OFF through a
 *                           shared mapping, msync
 *   noappend FILE OFF TEXT  open O_WRONLY|O_APPEND, pwritev2(RWF_NOAPPEND)
 *                           TEXT at OFF
 *   alternate FILE N        two O_APPEND handles of FILE in one process,
 *                           N records each, written in turn: "a0000001\n",
 *                           "b0000001\n", "a0000002\n", ...
 *   listxattr PATH          the names listxattr(2) gives for PATH (not
 *                           followed if a symlink), sorted, one a line
 *   race FILE N             two processes, each with its own O_APPEND
 *                           handle, append N records each ("a..." and
 *                           "b...", 9 bytes) at the same time
 * Exit 0 on success; on failure one line on stderr naming the errno, and
 * the exit status is the errno.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/xattr.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define RECORD_LEN 9

static int fail(const char *what)
{
	int err = errno;

	fprintf(stderr, "ovs-liveop: %s: %s (%s)\n", what, strerror(err), strerrorname_np(err));
	return err ? err : 1;
}

static int mmap_write(const char *file, off_t off, const char *text)
{
	size_t len = strlen(text);
	long page = sysconf(_SC_PAGESIZE);
	off_t base = off & ~(page - 1);
	size_t maplen = off - base + len;
	char *map;
	int fd = open(file, O_RDWR | O_APPEND);

	if (fd < 0)
		return fail(file);
	map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
	if (map == MAP_FAILED)
		return fail("mmap");
	memcpy(map + (off - base), text, len);
	if (msync(map, maplen, MS_SYNC) < 0)
		return fail("msync");
	if (munmap(map, maplen) < 0 || close(fd) < 0)
		return fail("close");
	return 0;
}

static int noappend_write(const char *file, off_t off, const char *text)
{
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
	int fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);

	if (fd < 0)
		return fail(file);
	if (pwritev2(fd, &iov, 1, off, RWF_NOAPPEND) != (ssize_t)iov.iov_len)
		return fail("pwritev2(RWF_NOAPPEND)");
	if (close(fd) < 0)
		return fail("close");
	return 0;
}

static int append_record(int fd, char tag, long i)
{
	char rec[32];

	snprintf(rec, sizeof(rec), "%c%07d\n", tag, (int)(i % 10000000));
	if (write(fd, rec, RECORD_LEN) != RECORD_LEN)
		return fail("write");
	return 0;
}

static int alternate(const char *file, long n)
{
	int a = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
	int b = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644);
	int rc = 0;

	if (a < 0 || b < 0)
		return fail(file);
	for (long i = 1; i <= n && !rc; i++) {
		rc = append_record(a, 'a', i);
		if (!rc)
			rc = append_record(b, 'b', i);
	}
	if (!rc && (close(a) < 0 || close(b) < 0))
		rc = fail("close");
	return rc;
}

static int race(const char *file, long n)
{
	pid_t pid[2];
	int rc = 0;

	for (int k = 0; k < 2; k++) {
		pid[k] = fork();
		if (pid[k] < 0)
			return fail("fork");
		if (pid[k] == 0) {
			int fd = open(file, O_WRONLY | O_APPEND | O_CREAT, 0644), err = 0;

			if (fd < 0)
				_exit(fail(file));
			for (long i = 1; i <= n && !err; i++)
				err = append_record(fd, "ab"[k], i);
			_exit(err);
		}
	}
	for (int k = 0; k < 2; k++) {
		int status;

		if (waitpid(pid[k], &status, 0) < 0)
			return fail("waitpid");
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	return rc;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_xattrs(const char *path)
{
	ssize_t len = llistxattr(path, NULL, 0);
	char *buf, **names;
	size_t n = 0;

	if (len < 0)
		return fail(path);
	buf = malloc(len + 1);
	names = calloc(len + 1, sizeof(*names));
	if (!buf || !names)
		return fail("malloc");
	len = llistxattr(path, buf, len);
	if (len < 0)
		return fail(path);
	for (char *p = buf; p < buf + len; p += strlen(p) + 1)
		names[n++] = p;
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++)
		printf("%s\n", names[i]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";

	if (!strcmp(op, "mmap") && argc == 5)
		return mmap_write(argv[2], atoll(argv[3]), argv[4]);
	if (!strcmp(op, "noappend") && argc == 5)
		return noappend_write(argv[2], atoll(argv[3]), argv[4]);
	if (!strcmp(op, "alternate") && argc == 4)
		return alternate(argv[2], atol(argv[3]));
	if (!strcmp(op, "race") && argc == 4)
		return race(argv[2], atol(argv[3]));
	if (!strcmp(op, "listxattr") && argc == 3)
		return list_xattrs(argv[2]);
	fprintf(stderr, "usage: ovs-liveop mmap|noappend FILE OFF TEXT | alternate|race FILE N | "
		"listxattr PATH\n");
	return 2;
}
