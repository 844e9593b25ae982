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
 *   ovs-fileops save-append DIR N SAVEDIR [WORKDIR]
 *                                   a first change without ovsnap, the floor
 *                                   of bench/concurrency-bench.sh: copy each
 *                                   file into WORKDIR (default SAVEDIR) and
 *                                   fsync it, rename it into SAVEDIR and
 *                                   fsync that, as ovsnapd preserves a small
 *                                   file on ext4 (without its metadata
 *                                   calls), then append 2 bytes
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

/* Copy each of fN to SAVEDIR durably, as a preserve on ext4 does (a copy
 * made in WORKDIR, shared with the other processes as a layer's work
 * folder is, and fsynced; a rename into SAVEDIR; SAVEDIR's fsync), then
 * append to fN: N first changes as a program without ovsnap would make
 * them. */
static int save_append(int dfd, long long n, const char *savedir, const char *workdir)
{
	char name[64], tmp[96], buf[65536];
	int sfd = open(savedir, O_RDONLY | O_DIRECTORY);
	int wfd = open(workdir, O_RDONLY | O_DIRECTORY);

	if (sfd < 0 || wfd < 0) {
		fprintf(stderr, "ovs-fileops: %s: %s\n", sfd < 0 ? savedir : workdir, strerror(errno));
		return -1;
	}
	for (long long i = 0; i < n; i++) {
		int in = -1, out = -1, fd = -1;
		ssize_t got;

		snprintf(name, sizeof(name), "f%08lld", i);
		snprintf(tmp, sizeof(tmp), "%s.%d.tmp", name, (int)getpid());
		errno = EIO;	/* what a short write reports */
		in = openat(dfd, name, O_RDONLY);
		out = openat(wfd, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0)
			goto fail;
		while ((got = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, got) != got)
				goto fail;
		if (got < 0 || fsync(out) < 0 || renameat(wfd, tmp, sfd, name) < 0 || fsync(sfd) < 0)
			goto fail;
		close(in);
		close(out);
		fd = openat(dfd, name, O_WRONLY | O_APPEND);
		if (fd < 0 || write(fd, "x\n", 2) != 2)
			goto fail;
		close(fd);
		continue;
fail:
		fprintf(stderr, "ovs-fileops: %s: %s\n", name, strerror(errno));
		return -1;	/* the process exits: its descriptors go with it */
	}
	close(sfd);
	close(wfd);
	return 0;
}

int main(int argc, char **argv)
{
	char name[64], *buf;
	long long t0, n, size;
	int dfd;

	if (argc < 3) {
		fprintf(stderr, "usage: ovs-fileops create|delete|rename|unrename|append|chmod|stat DIR [N [SIZE]]\n"
				"       ovs-fileops save-append DIR N SAVEDIR [WORKDIR]\n");
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
	if (!strcmp(argv[1], "save-append")) {
		if (argc < 5) {
			fprintf(stderr, "ovs-fileops: save-append needs DIR N SAVEDIR\n");
			return 2;
		}
		if (save_append(dfd, n, argv[4], argc > 5 ? argv[5] : argv[4]) < 0)
			return 1;
		printf("%lld\n", now_ns() - t0);
		return 0;
	}
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
