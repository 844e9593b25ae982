/*
 * ovs-fsop — file operations the shell has no command for, used by the
 * snapshot-mount tests:
 *   exchange A B                     renameat2(RENAME_EXCHANGE)
 *   noreplace A B                    renameat2(RENAME_NOREPLACE)
 *   mknod-chr PATH MAJOR MINOR       mknod a character device
 *   mmap-write FILE OFF TEXT         write TEXT through a shared mapping, msync
 *   mmap-dirty FILE OFF TEXT READY GO
 *                                    write TEXT through a shared mapping,
 *                                    create READY, wait for GO to exist, then
 *                                    unmap WITHOUT msync and exit
 *   write-hold FILE TEXT1 TEXT2 READY GO
 *                                    open for write, write TEXT1 at 0, create
 *                                    READY, wait for GO, write TEXT2 at 0
 *   exchange-loop SECONDS A B [A B]...
 *                                    exchange each pair over and over
 *                                    (renameat2) for SECONDS
 *   race-read A B xattr|readlink PATH NAME SECRET SECONDS
 *                                    a child exchanges A and B over and over
 *                                    (renameat2) while PATH's xattr NAME (or
 *                                    its link text: NAME is ignored) is read
 *                                    for SECONDS; exit 1 with "leaked after
 *                                    N reads" the first time SECRET is read
 * Exit 0 on success; on failure one line on stderr naming the errno, and
 * the exit status is the errno (so tests can tell EPERM from EXDEV).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what)
{
	int err = errno;

	fprintf(stderr, "ovs-fsop: %s: %s (%s)\n", what, strerror(err), strerrorname_np(err));
	return err ? err : 1;
}

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);

	if (fd < 0)
		return -1;
	return close(fd);
}

/* Wait up to a minute for a file to appear: the test's go-ahead. */
static int wait_for(const char *path)
{
	for (int i = 0; i < 6000; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	errno = ETIMEDOUT;
	return -1;
}

static int mmap_write(const char *file, off_t off, const char *text, const char *ready,
		      const char *go)
{
	size_t len = strlen(text);
	long page = sysconf(_SC_PAGESIZE);
	off_t base = off & ~(page - 1);
	size_t maplen = off - base + len;
	char *map;
	int fd;

	fd = open(file, O_RDWR);
	if (fd < 0)
		return fail(file);
	map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
	if (map == MAP_FAILED)
		return fail("mmap");
	memcpy(map + (off - base), text, len);
	if (!ready) {
		if (msync(map, maplen, MS_SYNC) < 0)
			return fail("msync");
	} else {
		if (touch(ready) < 0)
			return fail(ready);
		if (wait_for(go) < 0)
			return fail(go);
	}
	munmap(map, maplen);
	close(fd);
	return 0;
}

static int write_hold(const char *file, const char *t1, const char *t2, const char *ready,
		      const char *go)
{
	int fd = open(file, O_WRONLY);

	if (fd < 0)
		return fail(file);
	if (pwrite(fd, t1, strlen(t1), 0) < 0)
		return fail("write");
	if (touch(ready) < 0)
		return fail(ready);
	if (wait_for(go) < 0)
		return fail(go);
	if (pwrite(fd, t2, strlen(t2), 0) < 0)
		return fail("write after the wait");
	if (close(fd) < 0)
		return fail("close");
	return 0;
}

static int race_read(const char *a, const char *b, const char *kind, const char *path,
		     const char *name, const char *secret, int seconds)
{
	bool link = !strcmp(kind, "readlink");
	time_t end = time(NULL) + seconds;
	long reads = 0, answers = 0;
	char buf[4096];
	pid_t pid;
	int status;

	pid = fork();
	if (pid < 0)
		return fail("fork");
	if (pid == 0) {
		for (;;)
			if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) < 0)
				_exit(fail("renameat2(RENAME_EXCHANGE)"));
	}
	while (time(NULL) < end) {
		ssize_t n = link ? readlink(path, buf, sizeof(buf) - 1) :
				   lgetxattr(path, name, buf, sizeof(buf) - 1);

		reads++;
		if (n < 0)
			continue;
		answers++;
		buf[n] = 0;
		if (!strcmp(buf, secret)) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			printf("leaked after %ld reads\n", reads);
			return 1;
		}
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (WIFEXITED(status)) {
		fprintf(stderr, "ovs-fsop: the exchanges stopped\n");
		return 2;
	}
	printf("%ld reads, %ld answered\n", reads, answers);
	return 0;
}

int main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";

	if (!strcmp(op, "exchange") && argc == 4) {
		if (renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], RENAME_EXCHANGE) < 0)
			return fail("renameat2(RENAME_EXCHANGE)");
		return 0;
	}
	if (!strcmp(op, "noreplace") && argc == 4) {
		if (renameat2(AT_FDCWD, argv[2], AT_FDCWD, argv[3], RENAME_NOREPLACE) < 0)
			return fail("renameat2(RENAME_NOREPLACE)");
		return 0;
	}
	if (!strcmp(op, "mknod-chr") && argc == 5) {
		if (mknod(argv[2], S_IFCHR | 0600, makedev(atoi(argv[3]), atoi(argv[4]))) < 0)
			return fail("mknod");
		return 0;
	}
	if (!strcmp(op, "mmap-write") && argc == 5)
		return mmap_write(argv[2], atoll(argv[3]), argv[4], NULL, NULL);
	if (!strcmp(op, "mmap-dirty") && argc == 7)
		return mmap_write(argv[2], atoll(argv[3]), argv[4], argv[5], argv[6]);
	if (!strcmp(op, "write-hold") && argc == 7)
		return write_hold(argv[2], argv[3], argv[4], argv[5], argv[6]);
	if (!strcmp(op, "exchange-loop") && argc >= 5 && argc % 2 == 1) {
		time_t end = time(NULL) + atoi(argv[2]);

		while (time(NULL) < end)
			for (int i = 3; i + 1 < argc; i += 2)
				if (renameat2(AT_FDCWD, argv[i], AT_FDCWD, argv[i + 1],
					      RENAME_EXCHANGE) < 0)
					return fail("renameat2(RENAME_EXCHANGE)");
		return 0;
	}
	if (!strcmp(op, "race-read") && argc == 9)
		return race_read(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7],
				 atoi(argv[8]));
	fprintf(stderr, "usage: ovs-fsop exchange|noreplace|mknod-chr|mmap-write|mmap-dirty|"
		"write-hold|exchange-loop|race-read ...\n");
	return 2;
}
