/*
 * ovs-copy — the floor of bench/concurrency-bench.sh: copy a big file as
 * ovsnapd copies one up on a filesystem without clones, with no daemon and
 * no FUSE in the way: the library's own copy (copy_file_range in 8 MiB
 * chunks, each chunk's writeback started and the one before it waited for
 * and dropped from the page cache), then an fsync.
 *   ovs-copy SRC DST     prints the elapsed time in nanoseconds
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "preserve-int.h"

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct stat st;
	int in, out, rc;

	if (argc != 3) {
		fprintf(stderr, "usage: ovs-copy SRC DST\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	in = open(argv[1], O_RDONLY);
	if (in < 0 || fstat(in, &st) < 0) {
		fprintf(stderr, "ovs-copy: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	out = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (out < 0) {
		fprintf(stderr, "ovs-copy: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	/* A write-behind error fails the copy itself (rc < 0). */
	rc = ovs_copy_data_ranges(in, out, st.st_size, true, NULL);
	if (rc == 0 && fsync(out) < 0)
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, "ovs-copy: %s to %s: %s\n", argv[1], argv[2], strerror(-rc));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%lld\n", (t1.tv_sec - t0.tv_sec) * 1000000000LL + t1.tv_nsec - t0.tv_nsec);
	return 0;
}
