/*
 * ovs-fileops — the small-file workloads of the benchmarks, in C so that
 * the filesystem, not a shell loop, is what gets measured.
 *   ovs-fileops create DIR N SIZE   create N files of SIZE bytes in DIR
 *   ovs-fileops delete DIR N        unlink them again
 *   ovs-fileops rename DIR N        rename each of them (fN -> fN.r)
 *   ovs-fileops unrename DIR N      and back
 *   ovs-fileops append DIR N SIZE   append SIZE bytes to each (open, write, close)
 *   ovs-fileops chmod DIR N         chmod each of them to 0600
 *   ovs-fileops stat DIR            walk DIR recursively, stat every entry
 * Prints the elapsed time in nanoseconds.
 */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long walk(int dfd)
{
	long long n = 0;
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		n++;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY);

			if (sub >= 0)
				n += walk(sub);
		}
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	char name[64], *buf;
	long long t0, n, size;
	int dfd;

	if (argc < 3) {
		fprintf(stderr, "usage: ovs-fileops create|delete|rename|unrename|append|chmod|stat DIR [N [SIZE]]\n");
		return 2;
	}
	dfd = open(argv[2], O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		fprintf(stderr, "ovs-fileops: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	t0 = now_ns();
	if (!strcmp(argv[1], "stat")) {
		n = walk(dfd);
		printf("%lld\n", now_ns() - t0);
		fprintf(stderr, "%lld entries\n", n);
		return 0;
	}
	n = argc > 3 ? atoll(argv[3]) : 0;
	size = argc > 4 ? atoll(argv[4]) : 0;
	buf = calloc(1, size ? size : 1);
	for (long long i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "f%08lld", i);
		if (!strcmp(argv[1], "create") || !strcmp(argv[1], "append")) {
			int fd = !strcmp(argv[1], "create")
				 ? openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644)
				 : openat(dfd, name, O_WRONLY | O_APPEND);

			if (fd < 0 || (size && write(fd, buf, size) != size)) {
				fprintf(stderr, "ovs-fileops: %s: %s\n", name, strerror(errno));
				return 1;
			}
			close(fd);
		} else if (!strcmp(argv[1], "rename") || !strcmp(argv[1], "unrename")) {
			char to[80];
			bool back = !strcmp(argv[1], "unrename");

			snprintf(to, sizeof(to), "%s.r", name);
			if (renameat(dfd, back ? to : name, dfd, back ? name : to) < 0) {
				fprintf(stderr, "ovs-fileops: %s: %s\n", name, strerror(errno));
				return 1;
			}
		} else if (!strcmp(argv[1], "chmod")) {
			if (fchmodat(dfd, name, 0600, 0) < 0) {
				fprintf(stderr, "ovs-fileops: %s: %s\n", name, strerror(errno));
				return 1;
			}
		} else if (strcmp(argv[1], "delete")) {
			fprintf(stderr, "ovs-fileops: unknown operation %s\n", argv[1]);
			return 2;
		} else if (unlinkat(dfd, name, 0) < 0) {
			fprintf(stderr, "ovs-fileops: %s: %s\n", name, strerror(errno));
			return 1;
		}
	}
	printf("%lld\n", now_ns() - t0);
	return 0;
}
