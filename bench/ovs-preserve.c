/*
 * ovs-preserve — the floor of a first change in an old folder, with no
 * daemon and no FUSE in the way (bench/preserve-floor-bench.sh): N files
 * fNNNNNNNN of SRC/DIR (as ovs-fileops create makes them), each preserved
 * into the layer UPPER (with WORK) and then chmodded to 0600 in SRC.
 *   ovs-preserve SRC UPPER WORK DIR N engine
 *       the library's preserve, ovs_preserve_object, as ovsnapd calls it
 *       (a clone on XFS, ordered by the log: no fsync)
 *   ovs-preserve SRC UPPER WORK DIR N meta
 *       the least a metadata-only preserve (overlayfs' metacopy) would do:
 *       create the copy in WORK with its mode, set one xattr and the
 *       times, rename it into UPPER/DIR; no data, no ownership, no checks
 * UPPER and WORK are made (they must not exist), DIR's copy in UPPER
 * before the clock starts.  Prints the elapsed time in nanoseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "preserve.h"

static int fail(const char *what, int err)
{
	fprintf(stderr, "ovs-preserve: %s: %s\n", what, strerror(err));
	return 1;
}

static long long elapsed(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000000000LL + (t1.tv_nsec - t0->tv_nsec);
}

/* The engine's preserve of DIR/name, then the change. */
static int engine(int srcfd, int dfd, const char *upper, const char *work, const char *dir,
		  long long n)
{
	struct ovs_layer *l;
	struct ovs_hlmap *m;
	struct timespec t0;
	size_t outside;
	char name[32];
	const char *names[2] = { dir, name };
	struct ovs_relpath dpath = { .names = names, .n = 1, .srcdirfd = -1 };
	struct ovs_relpath path = { .names = names, .n = 2, .srcdirfd = -1 };
	int upfd, rc;

	upfd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (upfd < 0)
		return fail(upper, errno);
	rc = ovs_copy_root_metadata(srcfd, upfd);
	close(upfd);
	if (rc < 0)
		return fail("the root's copy", -rc);
	rc = ovs_layer_open(upper, work, srcfd, 0, &l);
	if (rc < 0)
		return fail("open the layer", -rc);
	rc = ovs_hlmap_build(srcfd, &m, &outside);
	if (rc < 0)
		return fail("hard link map", -rc);
	rc = ovs_preserve_object(l, m, &dpath);
	if (rc < 0)
		return fail(dir, -rc);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long long i = 0; i < n; i++) {
		struct stat st;

		/* As ovsnapd: its directory open, the name stat'ed by the caller. */
		snprintf(name, sizeof(name), "f%08lld", i);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(name, errno);
		path.srcdirfd = dfd;
		path.st = &st;
		rc = ovs_preserve_object(l, m, &path);
		if (rc < 0)
			return fail(name, -rc);
		if (fchmodat(dfd, name, 0600, 0) < 0)
			return fail(name, errno);
	}
	printf("%lld\n", elapsed(&t0));
	ovs_hlmap_free(m);
	ovs_layer_close(l);
	return 0;
}

/* The least a metadata-only preserve of DIR/name costs, then the change. */
static int meta(int dfd, const char *upper, const char *work, const char *dir, long long n)
{
	static const char origin[] = "ino=0 ctime=0.000000000 btime=-";
	struct timespec t0;
	char name[32];
	int workfd, upfd, updfd;

	workfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (workfd < 0)
		return fail(work, errno);
	upfd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (upfd < 0 || mkdirat(upfd, dir, 0755) < 0)
		return fail(upper, errno);
	updfd = openat(upfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (updfd < 0)
		return fail(dir, errno);
	close(upfd);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long long i = 0; i < n; i++) {
		struct timespec times[2];
		struct stat st;
		int out;

		snprintf(name, sizeof(name), "f%08lld", i);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return fail(name, errno);
		out = openat(workfd, "#copy", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			     st.st_mode & 0777);
		if (out < 0)
			return fail("create in work", errno);
		if (fsetxattr(out, "trusted.overlay.metacopy", "", 0, 0) < 0 ||
		    fsetxattr(out, "trusted.overlay.ovsnap.origin", origin, sizeof(origin) - 1, 0) < 0)
			return fail("set an xattr", errno);
		times[0] = st.st_atim;
		times[1] = st.st_mtim;
		if (futimens(out, times) < 0)
			return fail("set the times", errno);
		close(out);
		if (renameat2(workfd, "#copy", updfd, name, RENAME_NOREPLACE) < 0)
			return fail("rename into the upper", errno);
		if (fchmodat(dfd, name, 0600, 0) < 0)
			return fail(name, errno);
	}
	printf("%lld\n", elapsed(&t0));
	close(updfd);
	close(workfd);
	return 0;
}

int main(int argc, char **argv)
{
	long long n;
	int srcfd, dfd;

	if (argc != 7 || (strcmp(argv[6], "engine") && strcmp(argv[6], "meta"))) {
		fprintf(stderr, "usage: ovs-preserve SRC UPPER WORK DIR N engine|meta\n");
		return 2;
	}
	n = atoll(argv[5]);
	srcfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srcfd < 0)
		return fail(argv[1], errno);
	dfd = openat(srcfd, argv[4], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(argv[4], errno);
	if (mkdir(argv[2], 0755) < 0 || mkdir(argv[3], 0700) < 0)
		return fail("make the upper and work", errno);
	if (!strcmp(argv[6], "engine"))
		return engine(srcfd, dfd, argv[2], argv[3], argv[4], n);
	return meta(dfd, argv[2], argv[3], argv[4], n);
}
